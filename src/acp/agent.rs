//! The ACP dispatch table: one line per method, each handler named after its method. Handlers run
//! inline on the dispatcher (they only touch in-memory state and send ops), so requests take
//! effect in the order they arrived; prompt turns run in their session's actor and are answered
//! from the event stream (see `updates.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::agent_methods as m;
use acp_protocol::acp::client_methods::SESSION_UPDATE;
use acp_protocol::acp::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse, AvailableCommand,
    AvailableCommandInput, AvailableCommandsUpdate, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    ConfigOptionUpdate, CurrentModeUpdate, DeleteSessionRequest, DeleteSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    ResumeSessionRequest, ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionConfigOptionValue, SessionDeleteCapabilities, SessionInfo,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
    UnstructuredCommandInput, UsageUpdate,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::client_bridge::ClientCaps;
use super::{meta, options, prompt, updates};
use crate::config::{Config, ModelRef};
use crate::providers::ReasoningEffort;
use crate::rpc::{Connection, Incoming, IncomingRequest, Responder};
use crate::runtime::commands::COMMANDS;
use crate::runtime::{
    CreateError, ListError, LoadError, LoadedSession, Mode, Op, Runtime, SessionHandle, SessionSettings, TurnId,
};
use crate::store::SessionRow;

/// How long `session/close` waits for the session to stop (its turn is cancelled first, which
/// ends within a few seconds whatever the tools or the editor do).
const CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sessions listed per `session/list` page.
const LIST_PAGE: usize = 50;

/// One ACP connection's agent.
pub struct Agent {
    conn: Connection,
    runtime: Runtime,
    sessions: Arc<Sessions>,
    prompts: Arc<Prompts>,
    caps: Arc<ClientCaps>,
    tracker: TaskTracker,
    /// A handler's asynchronous part, which must finish before the next message is handled.
    pending: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Prompts waiting for their turn to end, by turn.
pub(super) type Prompts = Mutex<HashMap<TurnId, PendingPrompt>>;

/// The sessions open on this connection, by id.
pub(super) type Sessions = Mutex<HashMap<String, AcpSession>>;

/// An open session, with the settings the client was last told.
pub(super) struct AcpSession {
    pub handle: SessionHandle,
    pub model: ModelRef,
    /// Every model the session has had on this connection (they stay among the choices).
    pub models_used: Vec<ModelRef>,
    pub mode: Mode,
    pub reasoning: Option<ReasoningEffort>,
}

impl AcpSession {
    fn new(handle: SessionHandle, settings: &SessionSettings) -> Self {
        Self {
            handle,
            model: settings.model.clone(),
            models_used: vec![settings.model.clone()],
            mode: settings.mode,
            reasoning: settings.reasoning,
        }
    }

    /// Switches the model the client is shown, remembering the one before.
    pub fn set_model(&mut self, model: ModelRef) {
        if !self.models_used.contains(&model) {
            self.models_used.push(model.clone());
        }
        self.model = model;
    }

    /// The config options as the client should now see them.
    pub fn options(&self, config: &Config) -> Vec<acp_protocol::acp::schema::SessionConfigOption> {
        options::config_options(config, &self.model, &self.models_used, self.mode, self.reasoning)
    }
}

/// Whether reopening a stored session replays it (`session/load`) or not (`session/resume`, and
/// `session/new` naming a stored `_meta.sessionKey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reopen {
    Load,
    Resume,
    New,
}

/// A `session/prompt` waiting for its turn to end.
pub(super) struct PendingPrompt {
    pub responder: Responder,
    /// The session it was sent to.
    pub session: String,
    /// Keeps `wait_idle` waiting until the prompt is answered.
    _work: TaskTrackerToken,
    /// Stops the `$/cancel_request` watcher once answered.
    _watch: DropGuard,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

type Reply<T> = Result<T, ErrorObject>;

impl Agent {
    pub(super) fn new(
        conn: Connection,
        runtime: Runtime,
        sessions: Arc<Sessions>,
        prompts: Arc<Prompts>,
        caps: Arc<ClientCaps>,
    ) -> Self {
        Self { conn, runtime, sessions, prompts, caps, tracker: TaskTracker::new(), pending: Mutex::new(None) }
    }

    /// Runs the asynchronous part of a handler (store access, a replay) so that it takes effect
    /// before the next message: `serve` awaits it (see [`Self::take_pending`]) before dispatching
    /// more, so a `session/prompt` piped right after a `session/load` finds its session.
    fn in_order(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = self.tracker.spawn(work);
        *lock(&self.pending) = Some(handle);
    }

    /// The asynchronous work the last dispatched message started, if any.
    pub fn take_pending(&self) -> Option<tokio::task::JoinHandle<()>> {
        lock(&self.pending).take()
    }

    /// The dispatch table.
    pub fn dispatch(&self, incoming: Incoming) {
        match incoming {
            Incoming::Request(IncomingRequest { method, params, responder }) => match method.as_str() {
                m::INITIALIZE => {
                    responder.respond(self.handle_initialize(params));
                    // Sessions come next: have the store ready for them.
                    self.runtime.open_store();
                }
                m::AUTHENTICATE => responder.respond(self.handle_authenticate(params)),
                m::SESSION_NEW => self.handle_new_session(params, responder),
                m::SESSION_PROMPT => self.handle_prompt(params, responder),
                m::SESSION_SET_MODE => self.handle_set_mode(params, responder),
                m::SESSION_SET_CONFIG_OPTION => self.handle_set_config_option(params, responder),
                m::SESSION_CLOSE => self.handle_close_session(params, responder),
                m::SESSION_LOAD => self.handle_load_session(params, responder),
                m::SESSION_RESUME => self.handle_resume_session(params, responder),
                m::SESSION_LIST => self.handle_list_sessions(params, responder),
                m::SESSION_DELETE => self.handle_delete_session(params, responder),
                // A notification, sent by some clients as a request: cancel, and answer null.
                m::SESSION_CANCEL => match parse::<CancelNotification>(params.clone()) {
                    Ok(_) => {
                        self.handle_cancel(params);
                        responder.respond(Ok(Value::Null));
                    }
                    Err(e) => responder.respond_error(e),
                },
                _ => responder.respond_error(ErrorObject::method_not_found(&method)),
            },
            Incoming::Notification { method, params } => match method.as_str() {
                m::SESSION_CANCEL => self.handle_cancel(params),
                _ => tracing::debug!(%method, "ignoring unknown notification"),
            },
        }
    }

    fn handle_initialize(&self, params: Option<Value>) -> Reply<InitializeResponse> {
        let mut params = params.unwrap_or_else(|| json!({}));
        // Whatever version is asked, we answer the one we speak (the spec's negotiation rule).
        match params.get("protocolVersion") {
            None => {
                return Err(ErrorObject::invalid_params("missing field `protocolVersion`"));
            }
            Some(Value::Number(_) | Value::String(_)) => params["protocolVersion"] = json!(1),
            Some(_) => {
                return Err(ErrorObject::invalid_params("`protocolVersion`: expected an integer"));
            }
        }
        let req: InitializeRequest = parse(Some(params))?;
        if let Some(info) = &req.client_info {
            tracing::info!(client = %info.name, version = %info.version, "initialize");
        }
        self.caps.set(&req.client_capabilities);

        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new())
                    .delete(SessionDeleteCapabilities::new())
                    .additional_directories(SessionAdditionalDirectoriesCapabilities::new()),
            );
        Ok(InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .auth_methods(auth_methods(&self.runtime.config()))
            .agent_info(Implementation::new("acp", env!("CARGO_PKG_VERSION")).title("acp")))
    }

    /// Re-reads the configuration (the user may have edited config.toml) and reports whether the
    /// chosen method now yields a usable provider.
    fn handle_authenticate(&self, params: Option<Value>) -> Reply<AuthenticateResponse> {
        let req: AuthenticateRequest = parse(params)?;
        let old = self.runtime.config();
        let mut config = Config::load();
        config.max_line_bytes = old.max_line_bytes;
        let provider = match req.method_id.0.as_ref() {
            AUTH_ANTHROPIC => Some("anthropic"),
            AUTH_OPENAI => Some("openai"),
            AUTH_CONFIG => None,
            other => {
                return Err(ErrorObject::invalid_params(format!("`methodId`: unknown auth method `{other}`")));
            }
        };
        let problem = match provider {
            Some(id) => config.provider(id).and_then(|p| p.unusable_reason()),
            None => config.load_error.clone().or_else(|| (!config.any_usable()).then(|| config.setup_help())),
        };
        self.runtime.set_config(config);
        match problem {
            None => Ok(AuthenticateResponse::new()),
            Some(reason) => Err(ErrorObject::new(code::AUTH_REQUIRED, format!("{reason} (then restart the agent)"))),
        }
    }

    fn handle_new_session(&self, params: Option<Value>, responder: Responder) {
        let req: NewSessionRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        if let Err(e) = check_workspace(&req.cwd, &req.additional_directories) {
            return responder.respond_error(e);
        }
        let config = self.runtime.config();
        let meta = req.meta.as_ref();
        let model = match meta::read_string(meta, meta::MODEL) {
            Some(reference) => config.resolve_model(reference).map(|(r, _)| r),
            None => config.default_model_ref(),
        };
        let model = match model {
            Ok(model) => model,
            Err(e) => {
                // A broken file is said as such (still -32000: once it is fixed, the `config-file`
                // method reloads it).
                let message =
                    if config.load_error.is_some() { e.to_string() } else { format!("authentication required: {e}") };
                let error = ErrorObject::new(code::AUTH_REQUIRED, message)
                    .with_data(json!({ "configPath": config.config_path(), "authMethods": [AUTH_ANTHROPIC, AUTH_OPENAI, AUTH_CONFIG] }));
                return responder.respond_error(error);
            }
        };
        let mode = match meta::read_string(meta, meta::MODE) {
            Some(id) => match Mode::parse(id) {
                Some(mode) => mode,
                None => {
                    return responder
                        .respond_error(ErrorObject::invalid_params(format!("`_meta.mode`: unknown mode `{id}`")));
                }
            },
            None => Mode::default(),
        };
        let reasoning = match meta::read_string(meta, meta::THINKING) {
            Some(level) => match options::parse_thought_level(level) {
                Some(reasoning) => reasoning,
                None => {
                    let msg = format!("`_meta.thinking`: unknown level `{level}` (known: default, low, medium, high)");
                    return responder.respond_error(ErrorObject::invalid_params(msg));
                }
            },
            None => config.reasoning,
        };
        if !req.mcp_servers.is_empty() {
            tracing::warn!(count = req.mcp_servers.len(), "MCP servers are not supported yet; ignoring them");
        }

        let settings = SessionSettings {
            cwd: req.cwd.clone(),
            additional_dirs: req.additional_directories.clone(),
            model: model.clone(),
            mode,
            reasoning,
        };
        let key = match meta::read_string(meta, meta::SESSION_KEY) {
            Some(key) if !crate::store::valid_id(key) => {
                let msg = format!(
                    "`_meta.sessionKey`: `{}` is not a valid session key (1 to {} bytes of printable text)",
                    key.escape_debug(),
                    crate::store::MAX_ID_BYTES
                );
                return responder.respond_error(ErrorObject::invalid_params(msg));
            }
            Some(key) if lock(&self.sessions).contains_key(key) => {
                let msg = format!("`_meta.sessionKey`: session `{key}` is already open on this connection");
                return responder.respond_error(ErrorObject::invalid_params(msg));
            }
            Some(key) => Some(key.to_owned()),
            None => None,
        };
        let this = self.handle();
        self.in_order(async move { this.open_new(key, settings, responder).await });
    }

    /// What async handlers need of the agent.
    fn handle(&self) -> AgentHandle {
        AgentHandle {
            conn: self.conn.clone(),
            runtime: self.runtime.clone(),
            sessions: self.sessions.clone(),
            prompts: self.prompts.clone(),
            caps: self.caps.clone(),
        }
    }

    fn handle_load_session(&self, params: Option<Value>, responder: Responder) {
        let req: LoadSessionRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        if let Err(e) = check_workspace(&req.cwd, &req.additional_directories) {
            return responder.respond_error(e);
        }
        if !req.mcp_servers.is_empty() {
            tracing::warn!(count = req.mcp_servers.len(), "MCP servers are not supported yet; ignoring them");
        }
        let this = self.handle();
        let id = req.session_id.0.to_string();
        self.in_order(async move {
            this.reopen(Reopen::Load, id, req.cwd, req.additional_directories, responder).await;
        });
    }

    fn handle_resume_session(&self, params: Option<Value>, responder: Responder) {
        let req: ResumeSessionRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        if let Err(e) = check_workspace(&req.cwd, &req.additional_directories) {
            return responder.respond_error(e);
        }
        let this = self.handle();
        let id = req.session_id.0.to_string();
        self.in_order(async move {
            this.reopen(Reopen::Resume, id, req.cwd, req.additional_directories, responder).await;
        });
    }

    fn handle_list_sessions(&self, params: Option<Value>, responder: Responder) {
        let req: ListSessionsRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        if let Some(cwd) = req.cwd.as_ref().filter(|c| !c.is_absolute()) {
            let msg = format!("`cwd` must be an absolute path, got `{}`", cwd.display());
            return responder.respond_error(ErrorObject::invalid_params(msg));
        }
        let runtime = self.runtime.clone();
        self.in_order(async move {
            match runtime.list_sessions(req.cwd, req.cursor.as_deref(), LIST_PAGE).await {
                Ok(page) => {
                    let sessions = page.sessions.into_iter().map(session_info).collect();
                    responder.respond(Ok(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor)));
                }
                Err(ListError::BadCursor) => {
                    responder.respond_error(ErrorObject::invalid_params(format!("`cursor`: {}", ListError::BadCursor)))
                }
                Err(ListError::Store(e)) => {
                    responder.respond_error(ErrorObject::internal(format!("could not list sessions: {e}")))
                }
            }
        });
    }

    fn handle_delete_session(&self, params: Option<Value>, responder: Responder) {
        let req: DeleteSessionRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        let id = req.session_id.0.to_string();
        let open = lock(&self.sessions).remove(&id);
        let runtime = self.runtime.clone();
        self.in_order(async move {
            if let Some(session) = open {
                session.handle.send(Op::Shutdown);
                session.handle.closed().await;
            }
            match runtime.delete_session(&id).await {
                Ok(()) => responder.respond(Ok(DeleteSessionResponse::new())),
                Err(e) => responder.respond_error(ErrorObject::internal(format!("could not delete session {id}: {e}"))),
            }
        });
    }

    fn handle_prompt(&self, params: Option<Value>, responder: Responder) {
        let req: PromptRequest = match parse(params) {
            Ok(req) => req,
            Err(e) => return responder.respond_error(e),
        };
        let id = req.session_id.0.to_string();
        let handle = match self.session(&id, |s| s.handle.clone()) {
            Ok(handle) => handle,
            Err(e) => return responder.respond_error(e),
        };
        let input = match prompt::to_user_blocks(&req.prompt) {
            Ok(input) if input.is_empty() => {
                return responder.respond_error(ErrorObject::invalid_params("`prompt`: the prompt is empty"));
            }
            Ok(input) => input,
            Err(e) => return responder.respond_error(ErrorObject::invalid_params(e)),
        };
        let turn = self.runtime.next_turn_id();
        // `$/cancel_request` for this prompt cancels just this turn; the answer is then `cancelled`.
        let requested = responder.cancel_token().clone();
        let answered = CancellationToken::new();
        let watcher_handle = handle.clone();
        let watch = answered.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = requested.cancelled() => { watcher_handle.send(Op::CancelTurn(turn)); }
                () = watch.cancelled() => {}
            }
        });
        let pending = PendingPrompt {
            responder,
            session: id.clone(),
            _work: self.tracker.token(),
            _watch: answered.drop_guard(),
        };
        lock(&self.prompts).insert(turn, pending);
        if !handle.send(Op::Prompt { turn, input })
            && let Some(p) = lock(&self.prompts).remove(&turn)
        {
            p.responder.respond_error(ErrorObject::internal("the session has stopped"));
        }
    }

    fn handle_set_mode(&self, params: Option<Value>, responder: Responder) {
        let result = (|| {
            let req: SetSessionModeRequest = parse(params)?;
            let id = req.session_id.0.to_string();
            let mode = parse_mode(&req.mode_id.0, "modeId")?;
            self.session_mut(&id, |s| {
                s.mode = mode;
                s.handle.send(Op::SetMode(mode));
            })?;
            Ok(id)
        })();
        let (id, session, list) = match result.and_then(|id| {
            let session = self.session(&id, |s| s.handle.clone())?;
            Ok((id.clone(), session, self.config_options_of(&id)?))
        }) {
            Ok(done) => done,
            Err(e) => return responder.respond_error(e),
        };
        // Answered once the change is on disk.
        let this = self.handle();
        self.in_order(async move {
            session.settled().await;
            responder.respond(Ok(SetSessionModeResponse::new()));
            // Keep the config-option view of the mode in sync.
            this.send_update(&id, SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(list)));
        });
    }

    fn handle_set_config_option(&self, params: Option<Value>, responder: Responder) {
        let result = (|| {
            let req: SetSessionConfigOptionRequest = parse(params)?;
            let id = req.session_id.0.to_string();
            let SessionConfigOptionValue::ValueId { value } = &req.value else {
                return Err(ErrorObject::invalid_params("`value`: expected a value id (string)"));
            };
            let value = value.0.as_ref();
            let mode_changed = match req.config_id.0.as_ref() {
                options::MODEL_OPTION => {
                    let config = self.runtime.config();
                    let (model, _) = config
                        .resolve_model(value)
                        .map_err(|e| ErrorObject::invalid_params(format!("`value`: {e}")))?;
                    self.session_mut(&id, |s| {
                        s.set_model(model.clone());
                        s.handle.send(Op::SetModel(model));
                    })?;
                    None
                }
                options::MODE_OPTION => {
                    let mode = parse_mode(value, "value")?;
                    self.session_mut(&id, |s| {
                        s.mode = mode;
                        s.handle.send(Op::SetMode(mode));
                    })?;
                    Some(mode)
                }
                options::THOUGHT_OPTION => {
                    let reasoning = options::parse_thought_level(value).ok_or_else(|| {
                        ErrorObject::invalid_params(format!(
                            "`value`: unknown thought level `{value}` (known: default, low, medium, high)"
                        ))
                    })?;
                    self.session_mut(&id, |s| {
                        s.reasoning = reasoning;
                        s.handle.send(Op::SetReasoning(reasoning));
                    })?;
                    None
                }
                other => {
                    return Err(ErrorObject::invalid_params(format!(
                        "`configId`: unknown config option `{other}` (known: model, mode, thought_level)"
                    )));
                }
            };
            Ok((id, mode_changed))
        })();
        let (list, id, mode, session) = match result.and_then(|(id, mode)| {
            Ok((self.config_options_of(&id)?, id.clone(), mode, self.session(&id, |s| s.handle.clone())?))
        }) {
            Ok(done) => done,
            Err(e) => return responder.respond_error(e),
        };
        // Answered once the change is on disk.
        let this = self.handle();
        self.in_order(async move {
            session.settled().await;
            responder.respond(Ok(SetSessionConfigOptionResponse::new(list)));
            if let Some(mode) = mode {
                // Keep the legacy `modes` view in sync.
                this.send_update(&id, SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id())));
            }
        });
    }

    fn handle_close_session(&self, params: Option<Value>, responder: Responder) {
        let id = match parse::<CloseSessionRequest>(params) {
            Ok(req) => req.session_id.0.to_string(),
            Err(e) => return responder.respond_error(e),
        };
        let Some(session) = lock(&self.sessions).remove(&id) else {
            return responder.respond_error(session_not_found(&id));
        };
        // Cancels like `session/cancel` (pending prompts end `cancelled`), then frees the session:
        // answered once it is released, so it can be loaded at once (here or elsewhere).
        session.handle.send(Op::Shutdown);
        self.in_order(async move {
            if tokio::time::timeout(CLOSE_LIMIT, session.handle.closed()).await.is_err() {
                tracing::warn!(session = %id, "the session did not close in time");
            }
            responder.respond(Ok(CloseSessionResponse::new()));
        });
    }

    fn handle_cancel(&self, params: Option<Value>) {
        match parse::<CancelNotification>(params) {
            Ok(req) => {
                let id = req.session_id.0.to_string();
                if self.session(&id, |s| s.handle.send(Op::Cancel)).is_err() {
                    tracing::debug!(session = %id, "session/cancel for an unknown session");
                }
            }
            Err(e) => tracing::warn!(error = %e, "ignoring malformed session/cancel"),
        }
    }

    fn session<T>(&self, id: &str, f: impl FnOnce(&AcpSession) -> T) -> Reply<T> {
        lock(&self.sessions).get(id).map(f).ok_or_else(|| session_not_found(id))
    }

    fn session_mut<T>(&self, id: &str, f: impl FnOnce(&mut AcpSession) -> T) -> Reply<T> {
        lock(&self.sessions).get_mut(id).map(f).ok_or_else(|| session_not_found(id))
    }

    fn config_options_of(&self, id: &str) -> Reply<Vec<acp_protocol::acp::schema::SessionConfigOption>> {
        let config = self.runtime.config();
        self.session(id, |s| s.options(&config))
    }

    /// Cancels every running and queued turn (SIGINT/SIGTERM).
    pub fn cancel_everything(&self) {
        for session in lock(&self.sessions).values() {
            session.handle.send(Op::Cancel);
        }
    }

    /// Stops every session actor and waits (up to `limit`) until they have written their last
    /// records: a setting changed just before exit is not lost.
    pub async fn close_all_sessions(&self, limit: std::time::Duration) {
        let handles: Vec<SessionHandle> = lock(&self.sessions).drain().map(|(_, s)| s.handle).collect();
        for handle in &handles {
            handle.send(Op::Shutdown);
        }
        let all = futures_util::future::join_all(handles.iter().map(SessionHandle::closed));
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!("some sessions did not close in time");
        }
    }

    /// Resolves once every prompt received so far has been answered.
    pub async fn wait_idle(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// The parts of the agent that async handlers (load, resume, list, delete) carry with them.
#[derive(Clone)]
struct AgentHandle {
    conn: Connection,
    runtime: Runtime,
    sessions: Arc<Sessions>,
    prompts: Arc<Prompts>,
    caps: Arc<ClientCaps>,
}

impl AgentHandle {
    /// Registers an open session, and watches it: should its actor ever stop while it is still
    /// open (an internal error), its prompts are answered with an error instead of never.
    fn register(&self, id: &str, handle: SessionHandle, settings: &SessionSettings) {
        let stopped = handle.stopped();
        lock(&self.sessions).insert(id.to_owned(), AcpSession::new(handle, settings));
        let (sessions, prompts, id) = (self.sessions.clone(), self.prompts.clone(), id.to_owned());
        tokio::spawn(async move {
            stopped.await;
            let mut open = lock(&sessions);
            // Closed on purpose (removed first), or replaced: nothing to do. Still registered: its
            // actor died.
            if !open.get(&id).is_some_and(|s| s.handle.is_stopped()) {
                return;
            }
            open.remove(&id);
            drop(open);
            tracing::error!(session = %id, "the session stopped unexpectedly (an internal error)");
            let stranded: Vec<PendingPrompt> = {
                let mut pending = lock(&prompts);
                let turns: Vec<TurnId> = pending.iter().filter(|(_, p)| p.session == id).map(|(t, _)| *t).collect();
                turns.into_iter().filter_map(|t| pending.remove(&t)).collect()
            };
            for p in stranded {
                p.responder.respond_error(ErrorObject::internal(format!(
                    "session {id} stopped unexpectedly (an internal error); load it again to go on"
                )));
            }
        });
    }

    fn send_update(&self, session_id: &str, update: SessionUpdate) {
        self.conn.notify(SESSION_UPDATE, &SessionNotification::new(session_id.to_owned(), update));
    }

    /// Opens a new session (stored before the answer, so it can be loaded or resumed at once) and
    /// answers `session/new`. A chosen key that names a stored session continues it (like
    /// `session/resume`).
    async fn open_new(&self, key: Option<String>, settings: SessionSettings, responder: Responder) {
        let keyed = key.is_some();
        let id = key.unwrap_or_else(|| format!("sess_{}", uuid::Uuid::new_v4().simple()));
        let handle = match self.runtime.create_session(Arc::from(id.as_str()), settings.clone()).await {
            Ok(handle) => handle,
            Err(CreateError::Exists) if keyed => {
                return self.reopen(Reopen::New, id, settings.cwd, settings.additional_dirs, responder).await;
            }
            Err(e) => {
                return responder.respond_error(ErrorObject::internal(format!("could not open session {id}: {e}")));
            }
        };
        let config = self.runtime.config();
        self.register(&id, handle, &settings);
        tracing::info!(session = %id, cwd = %settings.cwd.display(), model = %settings.model, "session/new");
        responder.respond(Ok(NewSessionResponse::new(id.clone()).modes(options::modes(settings.mode)).config_options(
            options::config_options(&config, &settings.model, &[], settings.mode, settings.reasoning),
        )));
        // Setup updates go out after the response: clients drop updates for sessions they do not know yet.
        let window = config.provider(&settings.model.provider).map(|p| p.model(&settings.model.model).context_window);
        self.announce(&id, Some(0), window);
        self.runtime.prewarm();
    }

    /// Reopens a stored session: `session/load` (replaying it first), `session/resume`, or
    /// `session/new` with a stored key.
    async fn reopen(&self, how: Reopen, id: String, cwd: PathBuf, dirs: Vec<PathBuf>, responder: Responder) {
        // Reopening a session open on this connection: close it first (it is saved as it goes).
        let open = lock(&self.sessions).remove(&id);
        if let Some(session) = open {
            session.handle.send(Op::Shutdown);
            session.handle.closed().await;
        }
        let loaded = match self.runtime.load_session(&id, cwd, dirs).await {
            Ok(loaded) => loaded,
            Err(LoadError::NotFound) => return responder.respond_error(session_not_found(&id)),
            Err(e) => {
                return responder.respond_error(ErrorObject::internal(format!("could not open session {id}: {e}")));
            }
        };
        let LoadedSession { handle, settings, shown, title, context_tokens, context_window, .. } = loaded;
        let replayed = shown.len();
        if how == Reopen::Load {
            // The whole history, before the answer (the client registered the session already).
            for update in updates::replay_updates(shown, self.caps.compaction()) {
                self.conn.notify_batched(SESSION_UPDATE, &SessionNotification::new(id.clone(), update));
            }
        }
        self.register(&id, handle, &settings);
        tracing::info!(session = %id, ?how, replayed, cwd = %settings.cwd.display(), "session reopened");
        let config = self.runtime.config();
        let modes = options::modes(settings.mode);
        let list = options::config_options(&config, &settings.model, &[], settings.mode, settings.reasoning);
        match how {
            Reopen::Load => responder.respond(Ok(LoadSessionResponse::new().modes(modes).config_options(list))),
            Reopen::Resume => responder.respond(Ok(ResumeSessionResponse::new().modes(modes).config_options(list))),
            Reopen::New => {
                responder.respond(Ok(NewSessionResponse::new(id.clone()).modes(modes).config_options(list)));
            }
        }
        self.announce(&id, context_tokens, context_window);
        if let Some(title) = title {
            let info = acp_protocol::acp::schema::SessionInfoUpdate::new().title(title);
            self.send_update(&id, SessionUpdate::SessionInfoUpdate(info));
        }
        self.runtime.prewarm();
    }

    /// What a client learns after opening a session: the slash commands and the context's fill.
    fn announce(&self, id: &str, used: Option<u64>, window: Option<u64>) {
        self.send_update(
            id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available_commands())),
        );
        if let Some(size) = window {
            self.send_update(id, SessionUpdate::UsageUpdate(UsageUpdate::new(used.unwrap_or(0), size)));
        }
    }
}

fn available_commands() -> Vec<AvailableCommand> {
    COMMANDS
        .iter()
        .map(|c| {
            let command = AvailableCommand::new(c.name, c.description);
            match c.hint {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint))),
                None => command,
            }
        })
        .collect()
}

fn check_workspace(cwd: &std::path::Path, dirs: &[PathBuf]) -> Reply<()> {
    if !cwd.is_absolute() {
        let msg = format!("`cwd` must be an absolute path, got `{}`", cwd.display());
        return Err(ErrorObject::invalid_params(msg));
    }
    if let Some(dir) = dirs.iter().find(|d| !d.is_absolute()) {
        let msg = format!("`additionalDirectories`: `{}` is not an absolute path", dir.display());
        return Err(ErrorObject::invalid_params(msg));
    }
    Ok(())
}

fn session_info(row: SessionRow) -> SessionInfo {
    let meta = json!({
        "createdAt": updates::iso(row.created_at),
        "model": row.model,
        "mode": row.mode,
        "origin": row.origin,
        "inputTokens": row.input_tokens,
        "outputTokens": row.output_tokens,
        "contextTokens": row.context_tokens,
    });
    let mut info = SessionInfo::new(row.id, row.cwd)
        .additional_directories(row.additional_dirs)
        .title(row.title)
        .updated_at(updates::iso(row.updated_at));
    if let Value::Object(map) = meta {
        info = info.meta(map);
    }
    info
}

const AUTH_ANTHROPIC: &str = "anthropic-api-key";
const AUTH_OPENAI: &str = "openai-api-key";
const AUTH_CONFIG: &str = "config-file";

fn auth_methods(config: &Config) -> Vec<AuthMethod> {
    let path = config.config_path();
    vec![
        AuthMethod::Agent(AuthMethodAgent::new(AUTH_ANTHROPIC, "Anthropic API key").description(
            "Set ANTHROPIC_API_KEY in the environment the editor starts acp with, then restart the agent.".to_owned(),
        )),
        AuthMethod::Agent(AuthMethodAgent::new(AUTH_OPENAI, "OpenAI API key").description(
            "Set OPENAI_API_KEY in the environment the editor starts acp with, then restart the agent.".to_owned(),
        )),
        AuthMethod::Agent(AuthMethodAgent::new(AUTH_CONFIG, "Provider in config.toml").description(format!(
            "Add a [providers.NAME] section (Ollama, vLLM, OpenRouter, …) to {}, then choose this to reload it.",
            path.display()
        ))),
    ]
}

fn parse_mode(id: &str, field: &str) -> Reply<Mode> {
    Mode::parse(id).ok_or_else(|| {
        let known: Vec<&str> = Mode::ALL.iter().map(|m| m.id()).collect();
        ErrorObject::invalid_params(format!("`{field}`: unknown mode `{id}` (known: {})", known.join(", ")))
    })
}

fn session_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(code::RESOURCE_NOT_FOUND, format!("session not found: {id}")).with_data(json!({ "sessionId": id }))
}

/// Deserializes params; the error names the offending field (`prompt[0].text: invalid type …`).
pub(super) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Reply<T> {
    let value = params.unwrap_or_else(|| json!({}));
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ErrorObject::invalid_params(inner)
        } else {
            ErrorObject::invalid_params(format!("`{path}`: {inner}"))
        }
    })
}
