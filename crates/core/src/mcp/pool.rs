//! One MCP server as the agent keeps it: its state (connecting, ready with its lists, failed with
//! the reason), the connection behind it, restarts after it stops, and calls. Servers are shared:
//! the [`Pool`] hands sessions with the same server (and workspace) the same one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientRequest,
    GetPromptRequestParams, GetPromptResult, Prompt, Resource, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use tokio::sync::{Notify, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::client::Handler;
use super::connect::{self, Connection};
use super::hooks::Hooks;
pub use super::hooks::{Asker, Report};
use crate::config::mcp::{McpServer, McpTransport};
use crate::sync::lock;

/// Where HTTP servers get the agent's HTTP client (built once, on first use).
pub type HttpSource = Arc<dyn Fn() -> BoxFuture<'static, Result<reqwest::Client, String>> + Send + Sync>;

/// A server as the pool keys it: its description and the workspace it serves.
type Key = (McpServer, Vec<PathBuf>);

/// What a ready server offers.
#[derive(Clone)]
pub struct Lists {
    pub(crate) peer: Peer<RoleClient>,
    /// `name version`, as the server gave it.
    pub server_info: String,
    pub instructions: Option<String>,
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
}

impl std::fmt::Debug for Lists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lists").field("server_info", &self.server_info).field("tools", &self.tools.len()).finish()
    }
}

#[derive(Debug, Clone)]
pub enum State {
    Connecting,
    Ready(Arc<Lists>),
    /// It could not start, or it stopped (`stopped`: it was ready before; it is restarted when a
    /// session next needs it).
    Failed {
        error: String,
        stopped: bool,
    },
}

/// One server, shared by the sessions that use it; dropping the last handle stops it.
pub struct Server {
    pub config: McpServer,
    cwd: PathBuf,
    hooks: Arc<Hooks>,
    state: watch::Sender<State>,
    /// Bumped on every start; a failure is reported once per start.
    generation: AtomicU64,
    connection: Mutex<Option<Connection>>,
    http: HttpSource,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.config.name).field("state", &*self.state.borrow()).finish()
    }
}

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

impl Server {
    fn new(config: McpServer, roots: &[PathBuf], http: HttpSource) -> Arc<Self> {
        let stop = CancellationToken::new();
        let cwd = roots.first().cloned().unwrap_or_else(|| PathBuf::from("/"));
        Arc::new(Self {
            config,
            cwd,
            hooks: Arc::new(Hooks {
                roots: roots.iter().map(|r| file_uri(r)).collect(),
                lists_changed: Notify::new(),
                progress: Mutex::default(),
                askers: Mutex::default(),
                next: AtomicU64::new(0),
            }),
            state: watch::channel(State::Connecting).0,
            generation: AtomicU64::new(0),
            connection: Mutex::new(None),
            http,
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Its state as it changes.
    pub fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// Which start the current state belongs to.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Starts connecting in the background; the state says how it went.
    fn start(self: &Arc<Self>) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.state.send_replace(State::Connecting);
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        let started = Instant::now();
        let (unavailable, name, transport, cwd, hooks, http, timeout) = (
            self.config.unavailable.clone(),
            self.config.name.clone(),
            self.config.transport.clone(),
            self.cwd.clone(),
            self.hooks.clone(),
            self.http.clone(),
            self.config.startup_timeout,
        );
        tokio::spawn(async move {
            let handler = Handler { name: name.clone(), hooks };
            let connecting = async {
                if let Some(why) = unavailable {
                    return Err(why);
                }
                let connection = connect::connect(&name, &transport, &cwd, handler, http()).await?;
                let lists = list(&connection.service.peer().clone(), &connection).await?;
                Ok::<_, String>((connection, lists))
            };
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                r = tokio::time::timeout(timeout, connecting) => r,
            };
            let Some(server) = weak.upgrade() else { return };
            if server.generation() != generation {
                return;
            }
            match outcome {
                Ok(Ok((mut connection, lists))) => {
                    tracing::info!(target: "mcp", server = %name, tools = lists.tools.len(), elapsed = ?started.elapsed(), "ready");
                    let child = connection.process.as_mut().and_then(|p| p.take_child());
                    *lock(&server.connection) = Some(connection);
                    server.state.send_replace(State::Ready(Arc::new(lists)));
                    drop(server);
                    watch_server(weak, generation, child).await;
                }
                Ok(Err(error)) => server.fail(generation, error, false),
                Err(_) => server.fail(
                    generation,
                    format!("it did not finish starting within {} s", timeout.as_secs_f64()),
                    false,
                ),
            }
        });
    }

    fn fail(&self, generation: u64, error: String, stopped: bool) {
        if self.generation() != generation {
            return;
        }
        tracing::warn!(target: "mcp", server = %self.config.name, %error, "unavailable");
        *lock(&self.connection) = None;
        self.state.send_replace(State::Failed { error, stopped });
    }

    /// Restarts a server that stopped after it was ready (not one that could not start: that is
    /// retried with `/mcp restart`).
    pub fn revive(self: &Arc<Self>) {
        if matches!(&*self.state.borrow(), State::Failed { stopped: true, .. }) {
            self.start();
        }
    }

    /// Starts it again, whatever its state.
    pub fn restart(self: &Arc<Self>) {
        *lock(&self.connection) = None;
        self.start();
    }

    /// Waits until it is ready or has failed (bounded by its startup timeout), or `cancel` fires.
    pub async fn settled(&self, cancel: &CancellationToken) -> State {
        let mut rx = self.state.subscribe();
        let waited = rx.wait_for(|s| !matches!(s, State::Connecting));
        tokio::select! {
            r = waited => r.map(|s| s.clone()).unwrap_or(State::Connecting),
            () = cancel.cancelled() => self.state(),
        }
    }

    fn peer(&self) -> Result<(Peer<RoleClient>, u64), String> {
        match &*self.state.borrow() {
            State::Ready(lists) => Ok((lists.peer.clone(), self.generation())),
            State::Connecting => Err("the server is still starting".into()),
            State::Failed { error, .. } => Err(format!("the server is not available: {error}")),
        }
    }

    /// A call failed because the connection is gone: the server is marked stopped, with why
    /// (its exit status and last words, when its process is seen to end meanwhile).
    async fn lost(&self, generation: u64) -> String {
        let mut rx = self.state.subscribe();
        let exited = rx.wait_for(|s| matches!(s, State::Failed { .. }));
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), exited).await;
        if let State::Failed { error, .. } = self.state()
            && self.generation() == generation
        {
            return error;
        }
        let tail = lock(&self.connection)
            .as_ref()
            .and_then(|c| c.process.as_ref())
            .map(|p| connect::Process::stderr_tail(&p.stderr))
            .unwrap_or_default();
        let error = format!("the server stopped{tail}");
        self.fail(generation, error.clone(), true);
        error
    }

    /// Calls a tool: bounded by the tool timeout (which the server's progress resets), stopped
    /// when `cancel` fires (the server is told, with `notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
        progress: Report,
        asker: Arc<dyn Asker>,
    ) -> Result<CallToolResult, String> {
        let (peer, generation) = self.peer()?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let options = PeerRequestOptions::with_timeout(self.config.tool_timeout).reset_timeout_on_progress();
        let handle = match peer
            .send_request_with_option(ClientRequest::CallToolRequest(CallToolRequest::new(params)), options)
            .await
        {
            Ok(handle) => handle,
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                return Err(self.lost(generation).await);
            }
            Err(e) => return Err(connect::describe(&e)),
        };
        let token = handle.progress_token.0.to_string();
        let id = handle.id.clone();
        let asker_id = self.hooks.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.hooks.progress).insert(token.clone(), progress);
        lock(&self.hooks.askers).push((asker_id, asker));
        let _registered = scopeguard(|| {
            lock(&self.hooks.progress).remove(&token);
            lock(&self.hooks.askers).retain(|(i, _)| *i != asker_id);
        });
        let reply = tokio::select! {
            r = handle.await_response() => r,
            () = cancel.cancelled() => {
                let notice = CancelledNotificationParam::new(Some(id), Some("cancelled by the user".into()));
                let _ = peer.notify_cancelled(notice).await;
                return Err("cancelled".into());
            }
        };
        match reply {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err("the server answered with something other than a tool result".into()),
            Err(ServiceError::Timeout { timeout }) => {
                Err(format!("the server did not answer within {} s (the call was cancelled)", timeout.as_secs()))
            }
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => Err(self.lost(generation).await),
            Err(ServiceError::McpError(e)) => Err(format!("the server refused the call: {}", e.message)),
            Err(e) => Err(connect::describe(&e)),
        }
    }

    /// Fetches one of its prompts with these arguments.
    pub async fn prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<GetPromptResult, String> {
        let (peer, generation) = self.peer()?;
        let params = GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(self.config.tool_timeout, peer.get_prompt(params)).await {
            Err(_) => Err("the server did not answer".into()),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::TransportClosed)) => Err(self.lost(generation).await),
            Ok(Err(ServiceError::McpError(e))) => Err(e.message.to_string()),
            Ok(Err(e)) => Err(connect::describe(&e)),
        }
    }
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Lists what the server offers (what it does not offer is an empty list).
async fn list(peer: &Peer<RoleClient>, connection: &Connection) -> Result<Lists, String> {
    // A failed listing must fail, not hand back the previous list.
    peer.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    let info = connection.service.peer_info();
    let capabilities = info.as_ref().map(|i| i.capabilities.clone()).unwrap_or_default();
    let server_info = info
        .as_ref()
        .and_then(|i| i.server_info.as_ref().map(|s| format!("{} {}", s.name, s.version)))
        .unwrap_or_default();
    let instructions = info.as_ref().and_then(|i| i.instructions.clone());
    let tools = match capabilities.tools {
        Some(_) => {
            peer.list_all_tools().await.map_err(|e| format!("listing its tools failed: {}", connect::describe(&e)))?
        }
        None => Vec::new(),
    };
    // Prompts and resources are extras: a server that fails to list them still serves its tools.
    let prompts = match capabilities.prompts {
        Some(_) => peer.list_all_prompts().await.unwrap_or_default(),
        None => Vec::new(),
    };
    let resources = match capabilities.resources {
        Some(_) => peer.list_all_resources().await.unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(Lists { peer: peer.clone(), server_info, instructions, tools, prompts, resources })
}

/// While the server is ready: re-lists on `list_changed`, and notices when its process exits.
async fn watch_server(server: Weak<Server>, generation: u64, mut child: Option<tokio::process::Child>) {
    let Some((stop, hooks)) = server.upgrade().map(|s| (s.stop.clone(), s.hooks.clone())) else { return };
    loop {
        let exited = async {
            match child.as_mut() {
                Some(c) => c.wait().await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            status = exited => {
                // Let the reader of its stderr take in its last words.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let Some(server) = server.upgrade() else { return };
                let how = status.map(|s| format!(" ({s})")).unwrap_or_default();
                let tail = lock(&server.connection).as_ref().and_then(|c| c.process.as_ref())
                    .map(|p| connect::Process::stderr_tail(&p.stderr)).unwrap_or_default();
                server.fail(generation, format!("the server exited{how}{tail}"), true);
                return;
            }
            () = hooks.lists_changed.notified() => {
                let Some(server) = server.upgrade() else { return };
                if server.generation() != generation {
                    return;
                }
                let State::Ready(old) = server.state() else { return };
                let relisted = {
                    let connection = lock(&server.connection);
                    connection.as_ref().map(|c| (c.service.peer().clone(), c.service.peer_info()))
                };
                let Some((peer, _)) = relisted else { return };
                let refreshed = async {
                    let tools = peer.list_all_tools().await.ok()?;
                    let prompts = peer.list_all_prompts().await.unwrap_or_else(|_| old.prompts.clone());
                    let resources = peer.list_all_resources().await.unwrap_or_else(|_| old.resources.clone());
                    Some((tools, prompts, resources))
                };
                if let Some((tools, prompts, resources)) = refreshed.await
                    && server.generation() == generation
                {
                    tracing::debug!(target: "mcp", server = %server.config.name, tools = tools.len(), "lists changed");
                    let lists = Lists { tools, prompts, resources, ..(*old).clone() };
                    server.state.send_replace(State::Ready(Arc::new(lists)));
                }
            }
        }
    }
}

/// Shares servers between sessions: one per server description and workspace.
#[derive(Default)]
pub struct Pool {
    servers: Mutex<HashMap<Key, Weak<Server>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    /// The servers for a session with this workspace, started (in the background) if they are
    /// not running already. Never waits.
    pub fn acquire(&self, configs: &[McpServer], roots: &[PathBuf], http: &HttpSource) -> Vec<Arc<Server>> {
        let mut servers = lock(&self.servers);
        servers.retain(|_, s| s.strong_count() > 0);
        configs
            .iter()
            .map(|config| {
                let key = (config.clone(), roots.to_vec());
                if let Some(server) = servers.get(&key).and_then(Weak::upgrade) {
                    server.revive();
                    return server;
                }
                let server = Server::new(config.clone(), roots, http.clone());
                server.start();
                servers.insert(key, Arc::downgrade(&server));
                server
            })
            .collect()
    }
}

/// How a server is reached, in a few words.
pub fn describe_transport(transport: &McpTransport) -> String {
    match transport {
        McpTransport::Stdio { command, args, .. } => {
            let mut words = vec![command.clone()];
            words.extend(args.iter().cloned());
            format!("stdio: {}", words.join(" "))
        }
        McpTransport::Http { url, .. } => format!("http: {url}"),
        McpTransport::Sse { url, .. } => format!("sse: {url}"),
    }
}
