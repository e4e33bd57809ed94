//! The bridge's dispatch table: `initialize` (answered at once, without waiting for the gateway),
//! sessions by gateway key (`new`, `load` replaying `chat.history`, `resume`, `list` from
//! `sessions.list`, `close`), `prompt` (one `chat.send` per prompt, one at a time per session)
//! and `cancel` (`chat.abort` of its own run only).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification, CloseSessionRequest,
    CloseSessionResponse, ContentBlock, EmbeddedResourceResource, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionInfo,
    SessionListCapabilities, SessionResumeCapabilities, StopReason,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::super::dispatch::{self, Answer, Handled, Method as _, Reply, Requests, Work};
use super::super::{agent, meta, updates};
use super::{Bridge, CONNECT_WAIT, Run, RunEnd, Session, canonical};
use crate::rpc::Incoming;
use crate::sync::lock;

/// Sessions per `session/list` page.
const LIST_PAGE: u64 = 50;
/// How long a cancelled run may take to confirm it stopped before the prompt answers anyway.
const ABORT_WAIT: Duration = Duration::from_secs(10);

pub(super) fn dispatch(bridge: &Arc<Bridge>, incoming: Incoming) -> Work {
    match incoming {
        Incoming::Request(request) => Requests::new(bridge, &bridge.conn, request)
            .on::<dispatch::Initialize>(initialize)
            .on::<dispatch::Authenticate>(authenticate)
            .on::<dispatch::NewSession>(new_session)
            .on::<dispatch::LoadSession>(load_session)
            .on::<dispatch::ResumeSession>(resume_session)
            .on::<dispatch::ListSessions>(list_sessions)
            .on_cancellable::<dispatch::Prompt>(prompt)
            .on::<dispatch::CloseSession>(close_session)
            .on::<dispatch::Cancel>(|this, params| {
                cancel(this, params);
                Ok(Handled::Now(()))
            })
            .finish(),
        Incoming::Notification { method, params } => {
            if method == dispatch::Cancel::NAME {
                match dispatch::Cancel::decode(params) {
                    Ok(params) => cancel(bridge, params),
                    Err(e) => tracing::warn!(error = %e, "ignoring malformed session/cancel"),
                }
            }
            Work::Done
        }
    }
}

fn initialize(_: &Arc<Bridge>, req: InitializeRequest) -> Reply<Handled<InitializeResponse>> {
    if let Some(info) = &req.client_info {
        tracing::info!(client = %info.name, version = %info.version, "initialize (gateway bridge)");
    }
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .mcp_capabilities(McpCapabilities::new())
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .close(SessionCloseCapabilities::new()),
        );
    Ok(Handled::Now(
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("acp", env!("CARGO_PKG_VERSION")).title("acp (gateway bridge)")),
    ))
}

fn authenticate(_: &Arc<Bridge>, _: AuthenticateRequest) -> Reply<Handled<AuthenticateResponse>> {
    Ok(Handled::Now(AuthenticateResponse::new()))
}

fn gateway_error(what: &str, e: &crate::remote::RemoteError) -> ErrorObject {
    let code = if e.code.as_deref() == Some("NOT_FOUND") { code::RESOURCE_NOT_FOUND } else { code::INTERNAL_ERROR };
    ErrorObject::new(code, format!("{what}: {e}"))
}

/// Which gateway session an ACP session is: `_meta` first, then the flags, else `fallback`.
async fn resolve_key(bridge: &Bridge, meta: Option<&meta::Meta>, fallback: String) -> Reply<String> {
    let options = &bridge.options;
    let require = meta::read_bool(meta, meta::REQUIRE_EXISTING).unwrap_or(options.require_existing);
    let label = meta::read_string(meta, meta::SESSION_LABEL).map(str::to_owned);
    let key = meta::read_string(meta, meta::SESSION_KEY).map(str::to_owned);
    let (label, key) = match (label, key) {
        (None, None) => (options.session_label.clone(), options.session.clone()),
        // A key in `_meta` beats a label from the flags.
        (label, key) => (label, key),
    };
    if let Some(label) = label.filter(|_| key.is_none() || meta::read_string(meta, meta::SESSION_LABEL).is_some()) {
        let found = bridge.gateway.request("sessions.resolve", json!({"label": label}), CONNECT_WAIT).await;
        return match found {
            Ok(r) => r["key"].as_str().map(canonical).ok_or_else(|| {
                ErrorObject::new(code::RESOURCE_NOT_FOUND, format!("no gateway session has the label `{label}`"))
            }),
            Err(e) => Err(gateway_error(&format!("could not resolve the session label `{label}`"), &e)),
        };
    }
    let Some(key) = key else { return Ok(canonical(&fallback)) };
    if !crate::runtime::valid_session_id(&key) {
        return Err(ErrorObject::invalid_params(format!(
            "`_meta.sessionKey`: `{}` is not a valid key",
            key.escape_debug()
        )));
    }
    if require {
        return match bridge.gateway.request("sessions.resolve", json!({"key": key}), CONNECT_WAIT).await {
            Ok(r) => Ok(r["key"].as_str().map_or_else(|| canonical(&key), canonical)),
            Err(e) => Err(gateway_error(&format!("the gateway session `{key}` does not exist"), &e)),
        };
    }
    Ok(canonical(&key))
}

/// Registers ACP session `id` (a gateway key, as the editor spells it), resetting it first if
/// asked.
async fn open(bridge: &Bridge, id: &str, cwd: PathBuf, meta: Option<&meta::Meta>) -> Reply<()> {
    let key = canonical(id);
    if meta::read_bool(meta, meta::RESET).unwrap_or(bridge.options.reset_session) {
        bridge
            .gateway
            .request("sessions.reset", json!({"key": key}), CONNECT_WAIT)
            .await
            .map_err(|e| gateway_error(&format!("could not reset `{key}`"), &e))?;
    }
    let prefix_cwd = meta::read_bool(meta, meta::PREFIX_CWD).unwrap_or(bridge.options.prefix_cwd);
    let session = Session {
        key: key.clone(),
        acp_id: id.to_owned(),
        cwd,
        prefix_cwd,
        turns: Arc::default(),
        cancel: CancellationToken::new(),
    };
    lock(&bridge.sessions).insert(key, session);
    Ok(())
}

fn new_session(bridge: &Arc<Bridge>, req: NewSessionRequest) -> Reply<Handled<NewSessionResponse>> {
    agent::check_workspace(&req.cwd, &[])?;
    if !req.mcp_servers.is_empty() {
        tracing::warn!(count = req.mcp_servers.len(), "MCP servers from the editor are not used through a gateway");
    }
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let meta = req.meta.as_ref();
        let fallback = format!("acp-bridge:{}", uuid::Uuid::new_v4());
        let opened = async {
            let id = resolve_key(&this, meta, fallback).await?;
            if lock(&this.sessions).contains_key(&id) {
                return Err(ErrorObject::invalid_params(format!("session `{id}` is already open on this connection")));
            }
            open(&this, &id, req.cwd, meta).await?;
            Ok(NewSessionResponse::new(id))
        };
        Answer::from(opened.await)
    })))
}

fn load_session(bridge: &Arc<Bridge>, req: LoadSessionRequest) -> Reply<Handled<LoadSessionResponse>> {
    agent::check_workspace(&req.cwd, &[])?;
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let loaded = async {
            let id = canonical(&req.session_id.0);
            let history = this
                .gateway
                .request("chat.history", json!({"sessionKey": id, "limit": 1000}), CONNECT_WAIT)
                .await
                .map_err(|e| {
                    if e.code.as_deref() == Some("NOT_FOUND") {
                        agent::session_not_found(&req.session_id.0)
                    } else {
                        gateway_error("could not read the session's history", &e)
                    }
                })?;
            open(&this, &req.session_id.0, req.cwd.clone(), req.meta.as_ref()).await?;
            let messages = history["messages"].as_array().cloned().unwrap_or_default();
            for (n, message) in messages.iter().enumerate() {
                for update in super::events::replay(message, &format!("{id}#{n}"), &req.cwd) {
                    this.send(&req.session_id.0, update);
                }
            }
            Ok(LoadSessionResponse::new())
        };
        Answer::from(loaded.await)
    })))
}

fn resume_session(bridge: &Arc<Bridge>, req: ResumeSessionRequest) -> Reply<Handled<ResumeSessionResponse>> {
    agent::check_workspace(&req.cwd, &[])?;
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let resumed = async {
            let key = canonical(&req.session_id.0);
            this.gateway
                .request("sessions.resolve", json!({"key": key}), CONNECT_WAIT)
                .await
                .map_err(|e| gateway_error(&format!("the gateway session `{key}` does not exist"), &e))?;
            open(&this, &req.session_id.0, req.cwd, req.meta.as_ref()).await?;
            Ok(ResumeSessionResponse::new())
        };
        Answer::from(resumed.await)
    })))
}

fn list_sessions(bridge: &Arc<Bridge>, req: ListSessionsRequest) -> Reply<Handled<ListSessionsResponse>> {
    let offset = match req.cursor.as_deref() {
        None => 0,
        Some(c) => {
            c.parse::<u64>().map_err(|_| ErrorObject::invalid_params("`cursor`: not a cursor this agent gave"))?
        }
    };
    if let Some(cwd) = req.cwd.as_ref().filter(|c| !c.is_absolute()) {
        return Err(ErrorObject::invalid_params(format!("`cwd` must be an absolute path, got `{}`", cwd.display())));
    }
    let filter = req.cwd;
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let params = json!({"limit": LIST_PAGE, "offset": offset, "includeDerivedTitles": true});
        let listed = this.gateway.request("sessions.list", params, CONNECT_WAIT).await;
        Answer::from(match listed {
            Ok(page) => {
                let rows = page["sessions"].as_array().cloned().unwrap_or_default();
                let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
                let sessions = rows.iter().filter_map(|row| session_info(row, filter.as_deref(), &here)).collect();
                let next = page["nextOffset"].as_u64().filter(|_| page["hasMore"] == true).map(|n| n.to_string());
                Ok(ListSessionsResponse::new(sessions).next_cursor(next))
            }
            Err(e) => Err(gateway_error("could not list the gateway's sessions", &e)),
        })
    })))
}

/// A `sessions.list` row as ACP session info. Its directory is the one the gateway gives (`acp
/// gateway` does); a gateway that gives none is taken to serve the directory asked about (or
/// this process's). Asked about a directory, rows from another are left out.
fn session_info(row: &Value, filter: Option<&std::path::Path>, here: &std::path::Path) -> Option<SessionInfo> {
    let key = row["key"].as_str()?;
    let cwd = match (row["cwd"].as_str().map(PathBuf::from), filter) {
        (Some(cwd), Some(wanted)) if cwd != wanted => return None,
        (Some(cwd), _) => cwd,
        (None, Some(wanted)) => wanted.to_path_buf(),
        (None, None) => here.to_path_buf(),
    };
    let cwd = cwd.as_path();
    let title = ["label", "displayName", "derivedTitle"].iter().find_map(|k| row[*k].as_str()).map(str::to_owned);
    let mut info = SessionInfo::new(key.to_owned(), cwd.to_path_buf()).title(title);
    if let Some(at) = row["updatedAt"].as_i64() {
        info = info.updated_at(updates::iso(at));
    }
    Some(info.meta(updates::meta(json!({"sessionKey": key, "origin": row["origin"], "kind": row["kind"]}))))
}

fn close_session(bridge: &Arc<Bridge>, req: CloseSessionRequest) -> Reply<Handled<CloseSessionResponse>> {
    let id = req.session_id.0.to_string();
    if !lock(&bridge.sessions).contains_key(&canonical(&id)) {
        return Err(agent::session_not_found(&id));
    }
    bridge.cancel_session(&id);
    lock(&bridge.sessions).remove(&canonical(&id));
    Ok(Handled::Now(CloseSessionResponse::new()))
}

fn cancel(bridge: &Arc<Bridge>, req: CancelNotification) {
    bridge.cancel_session(&req.session_id.0);
}

/// The prompt as one message: its text, embedded resources as fenced context; images and audio
/// cannot go through a gateway.
fn message_of(blocks: &[ContentBlock]) -> Reply<String> {
    let mut parts = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(format!("[{}]({})", link.name, link.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    parts.push(format!("<context uri=\"{}\">\n{}\n</context>", t.uri, t.text));
                }
                _ => {
                    return Err(ErrorObject::invalid_params(format!(
                        "`prompt[{i}]`: binary resources cannot be sent through the gateway"
                    )));
                }
            },
            _ => {
                return Err(ErrorObject::invalid_params(format!(
                    "`prompt[{i}]`: only text and text resources can be sent through the gateway"
                )));
            }
        }
    }
    let message = parts.join("\n\n");
    if message.trim().is_empty() {
        return Err(ErrorObject::invalid_params("`prompt`: the prompt is empty"));
    }
    Ok(message)
}

/// `~/x` for a directory under the home directory.
fn shown_dir(dir: &std::path::Path) -> String {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(home) if !home.as_os_str().is_empty() && dir.starts_with(&home) => {
            format!("~/{}", dir.strip_prefix(&home).map(|p| p.display().to_string()).unwrap_or_default())
                .trim_end_matches('/')
                .to_owned()
        }
        _ => dir.display().to_string(),
    }
}

fn prompt(bridge: &Arc<Bridge>, req: PromptRequest, cancel: CancellationToken) -> Reply<Handled<PromptResponse>> {
    let asked = req.session_id.0.to_string();
    let (id, key, cwd, prefix, turns, cancelled) = lock(&bridge.sessions)
        .get(&canonical(&asked))
        .map(|s| (s.acp_id.clone(), s.key.clone(), s.cwd.clone(), s.prefix_cwd, s.turns.clone(), s.cancel.clone()))
        .ok_or_else(|| agent::session_not_found(&asked))?;
    let text = message_of(&req.prompt)?;
    let meta = req.meta.as_ref();
    // A slash command goes as typed, so the gateway reads it as one.
    let prefix = meta::read_bool(meta, meta::PREFIX_CWD).unwrap_or(prefix) && !text.starts_with('/');
    let message = if prefix { format!("[Working directory: {}]\n\n{text}", shown_dir(&cwd)) } else { text };
    let mut params = json!({"sessionKey": key, "message": message});
    if let Some(thinking) = meta::read_string(meta, meta::THINKING) {
        params["thinking"] = json!(thinking);
    }
    if let Some(ms) = super::millis(meta::read_number(meta, meta::TIMEOUT_MS)) {
        params["timeoutMs"] = ms;
    }
    let this = bridge.clone();
    Ok(Handled::Alongside(Box::pin(async move {
        let stop = async {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = cancelled.cancelled() => {}
            }
        };
        tokio::pin!(stop);
        // One at a time per session, in the order they came.
        let _turn = tokio::select! {
            turn = turns.lock_owned() => turn,
            () = &mut stop => return Answer::from(Ok(PromptResponse::new(StopReason::Cancelled))),
        };
        Answer::from(run(&this, id, key, cwd, params, stop).await)
    })))
}

/// Sends the prompt as run `runId` and waits for its end (or cancels it).
async fn run(
    bridge: &Bridge,
    session_id: String,
    key: String,
    cwd: PathBuf,
    mut params: Value,
    mut stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Reply<PromptResponse> {
    let run_id = uuid::Uuid::new_v4().to_string();
    params["idempotencyKey"] = json!(run_id);
    let (end, ended) = oneshot::channel();
    let run = Run {
        session_id,
        key: key.clone(),
        cwd,
        sent: String::new(),
        thought: String::new(),
        tools: Default::default(),
        started: false,
        end: Some(end),
    };
    lock(&bridge.runs).insert(run_id.clone(), run);
    let forget = Forget { bridge, run_id: &run_id };
    let sent = tokio::select! {
        sent = bridge.gateway.request("chat.send", params, super::CONNECT_WAIT) => sent,
        () = &mut stop => return Ok(PromptResponse::new(StopReason::Cancelled)),
    };
    if let Err(e) = sent {
        return Err(ErrorObject::new(code::INTERNAL_ERROR, format!("the gateway did not take the prompt: {e}")));
    }
    if let Some(run) = lock(&bridge.runs).get_mut(&run_id) {
        run.started = true;
    }
    tokio::pin!(ended);
    let end = tokio::select! {
        end = &mut ended => end,
        () = &mut stop => {
            let abort = json!({"sessionKey": key, "runId": run_id});
            if let Err(e) = bridge.gateway.request("chat.abort", abort, super::CONNECT_WAIT).await {
                tracing::warn!(error = %e, "could not abort the run on the gateway");
            }
            // Its `aborted` event ends it; the prompt answers `cancelled` in any case.
            let _ = tokio::time::timeout(ABORT_WAIT, &mut ended).await;
            Ok(RunEnd::Stopped(StopReason::Cancelled))
        }
    };
    drop(forget);
    match end {
        Ok(RunEnd::Stopped(reason)) => Ok(PromptResponse::new(reason)),
        Ok(RunEnd::Failed(message)) => Err(ErrorObject::new(code::INTERNAL_ERROR, message)),
        Err(_) => Err(ErrorObject::internal("the run ended without an answer")),
    }
}

/// Forgets a run however its prompt ends.
struct Forget<'a> {
    bridge: &'a Bridge,
    run_id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.bridge.runs).remove(self.run_id);
    }
}
