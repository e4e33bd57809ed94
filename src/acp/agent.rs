//! The ACP dispatch table: one line per method, each handler named after its method. Handlers run
//! inline on the dispatcher (they only touch in-memory state and send ops), so requests take
//! effect in the order they arrived; prompt turns run in their session's actor and are answered
//! from the event stream (see `updates.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::agent_methods as m;
use acp_protocol::acp::client_methods::SESSION_UPDATE;
use acp_protocol::acp::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    CloseSessionRequest, CloseSessionResponse, ConfigOptionUpdate, CurrentModeUpdate, Implementation,
    InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionCloseCapabilities, SessionConfigOptionValue,
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, UsageUpdate,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::client_bridge::ClientCaps;
use super::{meta, options, prompt};
use crate::config::{Config, ModelRef};
use crate::providers::ReasoningEffort;
use crate::rpc::{Connection, Incoming, IncomingRequest, Responder};
use crate::runtime::{Mode, Op, Runtime, SessionHandle, SessionSettings, TurnId};

/// One ACP connection's agent.
pub struct Agent {
    conn: Connection,
    runtime: Runtime,
    state: Mutex<State>,
    prompts: Arc<Prompts>,
    caps: Arc<ClientCaps>,
    tracker: TaskTracker,
}

/// Prompts waiting for their turn to end, by turn.
pub(super) type Prompts = Mutex<HashMap<TurnId, PendingPrompt>>;

#[derive(Default)]
struct State {
    sessions: HashMap<String, AcpSession>,
}

struct AcpSession {
    handle: SessionHandle,
    model: ModelRef,
    mode: Mode,
    reasoning: Option<ReasoningEffort>,
}

/// A `session/prompt` waiting for its turn to end.
pub(super) struct PendingPrompt {
    pub responder: Responder,
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
    pub(super) fn new(conn: Connection, runtime: Runtime, prompts: Arc<Prompts>, caps: Arc<ClientCaps>) -> Self {
        Self { conn, runtime, state: Mutex::default(), prompts, caps, tracker: TaskTracker::new() }
    }

    /// The dispatch table.
    pub fn dispatch(&self, incoming: Incoming) {
        match incoming {
            Incoming::Request(IncomingRequest { method, params, responder }) => match method.as_str() {
                m::INITIALIZE => responder.respond(self.handle_initialize(params)),
                m::AUTHENTICATE => responder.respond(self.handle_authenticate(params)),
                m::SESSION_NEW => self.handle_new_session(params, responder),
                m::SESSION_PROMPT => self.handle_prompt(params, responder),
                m::SESSION_SET_MODE => self.handle_set_mode(params, responder),
                m::SESSION_SET_CONFIG_OPTION => self.handle_set_config_option(params, responder),
                m::SESSION_CLOSE => responder.respond(self.handle_close_session(params)),
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
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .close(SessionCloseCapabilities::new())
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
        if !req.cwd.is_absolute() {
            let msg = format!("`cwd` must be an absolute path, got `{}`", req.cwd.display());
            return responder.respond_error(ErrorObject::invalid_params(msg));
        }
        if let Some(dir) = req.additional_directories.iter().find(|d| !d.is_absolute()) {
            let msg = format!("`additionalDirectories`: `{}` is not an absolute path", dir.display());
            return responder.respond_error(ErrorObject::invalid_params(msg));
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
                let error = ErrorObject::new(code::AUTH_REQUIRED, format!("authentication required: {e}"))
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

        let mut state = lock(&self.state);
        let id = match meta::read_string(meta, meta::SESSION_KEY) {
            Some(key) if state.sessions.contains_key(key) => {
                drop(state);
                let msg = format!("`_meta.sessionKey`: session `{key}` already exists in this process");
                return responder.respond_error(ErrorObject::invalid_params(msg));
            }
            Some(key) => key.to_owned(),
            None => format!("sess_{}", uuid::Uuid::new_v4().simple()),
        };
        let settings = SessionSettings {
            cwd: req.cwd.clone(),
            additional_dirs: req.additional_directories.clone(),
            model: model.clone(),
            mode,
            reasoning,
        };
        let handle = self.runtime.open_session(Arc::from(id.as_str()), settings);
        state.sessions.insert(id.clone(), AcpSession { handle, model: model.clone(), mode, reasoning });
        drop(state);
        tracing::info!(session = %id, cwd = %req.cwd.display(), %model, "session/new");

        let context_window = config.provider(&model.provider).map(|p| p.model(&model.model).context_window);
        responder.respond(Ok(NewSessionResponse::new(id.clone())
            .modes(options::modes(mode))
            .config_options(options::config_options(&config, &model, mode, reasoning))));
        // Setup updates go out after the response: clients drop updates for sessions they do not know yet.
        if let Some(size) = context_window {
            self.send_update(&id, SessionUpdate::UsageUpdate(UsageUpdate::new(0, size)));
        }
        self.runtime.prewarm();
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
        let input = match prompt::to_user_parts(&req.prompt) {
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
        let pending = PendingPrompt { responder, _work: self.tracker.token(), _watch: answered.drop_guard() };
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
        match result {
            Ok(id) => {
                responder.respond(Ok(SetSessionModeResponse::new()));
                // Keep the config-option view of the mode in sync.
                if let Ok(list) = self.config_options_of(&id) {
                    self.send_update(&id, SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(list)));
                }
            }
            Err(e) => responder.respond_error(e),
        }
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
                        s.model = model.clone();
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
        match result.and_then(|(id, mode)| Ok((self.config_options_of(&id)?, id, mode))) {
            Ok((list, id, mode)) => {
                responder.respond(Ok(SetSessionConfigOptionResponse::new(list)));
                if let Some(mode) = mode {
                    // Keep the legacy `modes` view in sync.
                    self.send_update(&id, SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id())));
                }
            }
            Err(e) => responder.respond_error(e),
        }
    }

    fn handle_close_session(&self, params: Option<Value>) -> Reply<CloseSessionResponse> {
        let req: CloseSessionRequest = parse(params)?;
        let id = req.session_id.0.to_string();
        let session = lock(&self.state).sessions.remove(&id).ok_or_else(|| session_not_found(&id))?;
        // Cancels like `session/cancel` (pending prompts end `cancelled`), then frees the session.
        session.handle.send(Op::Shutdown);
        Ok(CloseSessionResponse::new())
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

    fn send_update(&self, session_id: &str, update: SessionUpdate) {
        self.conn.notify(SESSION_UPDATE, &SessionNotification::new(session_id.to_owned(), update));
    }

    fn session<T>(&self, id: &str, f: impl FnOnce(&AcpSession) -> T) -> Reply<T> {
        lock(&self.state).sessions.get(id).map(f).ok_or_else(|| session_not_found(id))
    }

    fn session_mut<T>(&self, id: &str, f: impl FnOnce(&mut AcpSession) -> T) -> Reply<T> {
        lock(&self.state).sessions.get_mut(id).map(f).ok_or_else(|| session_not_found(id))
    }

    fn config_options_of(&self, id: &str) -> Reply<Vec<acp_protocol::acp::schema::SessionConfigOption>> {
        let config = self.runtime.config();
        self.session(id, |s| options::config_options(&config, &s.model, s.mode, s.reasoning))
    }

    /// Cancels every running and queued turn (SIGINT/SIGTERM).
    pub fn cancel_everything(&self) {
        for session in lock(&self.state).sessions.values() {
            session.handle.send(Op::Cancel);
        }
    }

    /// Stops every session actor.
    pub fn close_all_sessions(&self) {
        for (_, session) in lock(&self.state).sessions.drain() {
            session.handle.send(Op::Shutdown);
        }
    }

    /// Resolves once every prompt received so far has been answered.
    pub async fn wait_idle(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
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
