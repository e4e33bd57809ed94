//! A session's MCP servers: started (or shared) when the session opens, waited for when a turn
//! first needs their tools, reported to the user when one is not available, and listed by `/mcp`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::event::{Emitter, EventKind};
use super::handle::SessionCommand;
use super::settings::SessionSettings;
use super::shared::Shared;
use crate::mcp::prompt;
use crate::mcp::tool::{McpTool, names};
use crate::mcp::{HttpSource, Server, State, describe_transport};
use crate::providers::UserPart;
use crate::sync::lock;
use crate::tools::{AnyTool, Registry};

/// The servers one session uses.
pub(crate) struct McpSet {
    servers: Vec<Arc<Server>>,
    /// The start of each server whose failure the user was told about.
    reported: Mutex<HashMap<String, u64>>,
    /// The servers' prompts, as commands; kept current while the session lives.
    commands: watch::Sender<Vec<SessionCommand>>,
    _follow: Option<DropGuard>,
}

/// What a prompt that names an MCP prompt comes to.
pub(crate) enum Expanded {
    /// Not `/server:prompt` for a server of this session.
    No,
    /// The prompt's messages, to send instead.
    Prompt(Vec<UserPart>),
    /// Why it could not be fetched, to say instead of sending anything.
    Failed(String),
}

impl McpSet {
    /// The servers of a session with these settings (the configured ones, and the editor's, which
    /// win by name), starting in the background. Never waits.
    pub(crate) fn start(shared: &Arc<Shared>, settings: &SessionSettings) -> Arc<Self> {
        let config = shared.config();
        let all = crate::config::mcp::merge(&config.mcp_servers, settings.mcp_servers.clone());
        let servers =
            if all.is_empty() { Vec::new() } else { shared.mcp.acquire(&all, &settings.roots(), &http(shared)) };
        let commands = watch::channel(Vec::new()).0;
        let follow = (!servers.is_empty()).then(|| {
            let stop = CancellationToken::new();
            tokio::spawn(follow_prompts(servers.clone(), commands.clone(), stop.clone()));
            stop.drop_guard()
        });
        Arc::new(Self { servers, reported: Mutex::default(), commands, _follow: follow })
    }

    /// The servers' prompts as commands, as they change.
    pub(crate) fn commands(&self) -> watch::Receiver<Vec<SessionCommand>> {
        self.commands.subscribe()
    }

    /// Reads `/server:prompt args` (the whole text of a prompt) as one of its servers' prompts,
    /// and fetches it.
    pub(crate) async fn expand(&self, text: &str, cancel: &CancellationToken) -> Expanded {
        let Some((name, prompt, typed)) = prompt::split(text) else { return Expanded::No };
        let Some(server) = self.get(name) else { return Expanded::No };
        server.revive();
        let lists = match server.settled(cancel).await {
            State::Ready(lists) => lists,
            State::Failed { error, .. } => {
                return Expanded::Failed(format!("MCP server `{name}` is not available: {error}."));
            }
            State::Connecting => return Expanded::Failed(format!("MCP server `{name}` is still starting.")),
        };
        let Some(found) = lists.prompts.iter().find(|p| p.name == prompt) else {
            let known: Vec<String> = lists.prompts.iter().map(|p| format!("`/{name}:{}`", p.name)).collect();
            return Expanded::Failed(format!(
                "`{name}` has no prompt `{prompt}`; its prompts: {}.",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            ));
        };
        let arguments = match prompt::arguments(name, found, typed) {
            Ok(a) => a,
            Err(e) => return Expanded::Failed(format!("`/{name}:{prompt}`: {e}.")),
        };
        let fetched = tokio::select! {
            r = server.prompt(prompt, arguments) => r,
            () = cancel.cancelled() => return Expanded::Failed("Cancelled.".into()),
        };
        match fetched {
            Ok(result) => {
                let parts = prompt::to_user_parts(result);
                if parts.is_empty() {
                    Expanded::Failed(format!("`/{name}:{prompt}` came back empty."))
                } else {
                    Expanded::Prompt(parts)
                }
            }
            Err(e) => Expanded::Failed(format!("`/{name}:{prompt}` failed: {e}.")),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// Adds the tools of every server to `registry`, waiting for servers still starting (each at
    /// most its startup timeout) and restarting ones that stopped. A server that is not available
    /// is said once per start, in the reply.
    pub(crate) async fn add_tools(&self, registry: &mut Registry, events: &Emitter, cancel: &CancellationToken) {
        if self.servers.is_empty() {
            return;
        }
        for server in &self.servers {
            server.revive();
        }
        let states = futures_util::future::join_all(self.servers.iter().map(|s| s.settled(cancel))).await;
        for (server, state) in self.servers.iter().zip(&states) {
            if let State::Failed { error, .. } = state {
                self.tell_once(server, error, events);
            }
        }
        self.register(registry, &states);
    }

    /// Adds the tools of the servers that are ready now (for reports: nothing waits).
    pub(crate) fn add_ready_tools(&self, registry: &mut Registry) {
        let states: Vec<State> = self.servers.iter().map(|s| s.state()).collect();
        self.register(registry, &states);
    }

    fn register(&self, registry: &mut Registry, states: &[State]) {
        let taken: HashSet<String> = registry.specs().into_iter().map(|s| s.name).collect();
        let mut offered = Vec::new();
        for (server, state) in self.servers.iter().zip(states) {
            if let State::Ready(lists) = state {
                for tool in &lists.tools {
                    offered.push((server.clone(), tool.clone()));
                }
            }
        }
        let named = names(offered.iter().map(|(s, t)| (s.name(), t.name.as_ref())), &taken);
        for (name, (server, tool)) in named.into_iter().zip(offered) {
            let tool: Arc<dyn AnyTool> = Arc::new(McpTool::new(name, server.name().to_owned(), server, tool));
            registry.add(tool);
        }
    }

    fn tell_once(&self, server: &Arc<Server>, error: &str, events: &Emitter) {
        let generation = server.generation();
        if lock(&self.reported).insert(server.name().to_owned(), generation) == Some(generation) {
            return;
        }
        let text = format!(
            "MCP server `{}` is not available: {error}. Its tools are left out; `/mcp` (in a session) or `acp mcp test {}` shows why.",
            server.name(),
            server.name()
        );
        events.emit(EventKind::Notice(text));
    }

    /// What `/mcp` shows: each server, its state, tools, prompts and resources.
    pub(crate) fn report(&self) -> String {
        if self.servers.is_empty() {
            return "No MCP servers. Add them in config.toml (`[mcp_servers.NAME]`) or in the editor.".into();
        }
        let mut out = String::from("MCP servers:\n");
        for server in &self.servers {
            let transport = describe_transport(&server.config.transport);
            match server.state() {
                State::Connecting => {
                    let _ = writeln!(out, "\n- `{}` — starting ({transport})", server.name());
                }
                State::Failed { error, stopped } => {
                    let what = if stopped { "stopped" } else { "failed" };
                    let _ = writeln!(out, "\n- `{}` — {what} ({transport})\n  last error: {error}", server.name());
                }
                State::Ready(lists) => {
                    let _ = writeln!(out, "\n- `{}` — ready, {} ({transport})", server.name(), lists.server_info);
                    let tools: Vec<String> = lists.tools.iter().map(|t| format!("`{}`", t.name)).collect();
                    let _ = writeln!(out, "  tools ({}): {}", tools.len(), list_or_none(&tools));
                    let prompts: Vec<String> =
                        lists.prompts.iter().map(|p| format!("`/{}:{}`", server.name(), p.name)).collect();
                    let _ = writeln!(out, "  prompts ({}): {}", prompts.len(), list_or_none(&prompts));
                    let resources: Vec<String> = lists.resources.iter().map(|r| format!("`{}`", r.uri)).collect();
                    let _ = writeln!(out, "  resources ({}): {}", resources.len(), list_or_none(&resources));
                }
            }
        }
        out.push_str("\n`/mcp restart NAME` starts a server again.");
        out
    }
}

/// Keeps `commands` equal to the prompts of the servers that are ready, until `stop`.
async fn follow_prompts(
    servers: Vec<Arc<Server>>,
    commands: watch::Sender<Vec<SessionCommand>>,
    stop: CancellationToken,
) {
    let mut states: Vec<watch::Receiver<State>> = servers.iter().map(|s| s.subscribe()).collect();
    let names: Vec<String> = servers.iter().map(|s| s.name().to_owned()).collect();
    drop(servers);
    loop {
        let mut now = Vec::new();
        for (name, state) in names.iter().zip(states.iter_mut()) {
            if let State::Ready(lists) = &*state.borrow_and_update() {
                for p in &lists.prompts {
                    let usage = prompt::usage(name, p);
                    let hint = usage.split_once(' ').map(|(_, args)| args.to_owned());
                    let description = p.description.clone().or_else(|| p.title.clone()).unwrap_or_default();
                    now.push(SessionCommand {
                        name: format!("{name}:{}", p.name),
                        description: format!("{description} (MCP prompt of `{name}`)").trim_start().to_owned(),
                        hint,
                    });
                }
            }
        }
        commands.send_if_modified(|old| {
            let changed = *old != now;
            *old = now;
            changed
        });
        let changes = futures_util::future::select_all(states.iter_mut().map(|s| Box::pin(s.changed())));
        tokio::select! {
            () = stop.cancelled() => return,
            (r, _, _) = changes => if r.is_err() { return },
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".into() } else { items.join(", ") }
}

/// The agent's HTTP client, for HTTP servers.
fn http(shared: &Arc<Shared>) -> HttpSource {
    let weak = Arc::downgrade(shared);
    Arc::new(move || {
        let weak = weak.clone();
        Box::pin(async move {
            match weak.upgrade() {
                Some(shared) => shared.http().await.map_err(|e| e.message),
                None => Err("the agent is stopping".into()),
            }
        })
    })
}
