//! The ACP dispatch table — one line per method, each handler named after its method — and the
//! connection's state, held in one place (`State`) and shared with the event sink. Handlers
//! decide how they are scheduled by what they return (see `dispatch.rs`): answered at once,
//! finished before the next message (anything that opens, closes or stores a session), or run
//! alongside later messages (a prompt, answered when its turn ends).

use std::sync::Arc;

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    CloseSessionRequest, CloseSessionResponse, ConfigOptionUpdate, CurrentModeUpdate, DeleteSessionRequest,
    DeleteSessionResponse, Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionCloseCapabilities, SessionConfigOptionValue,
    SessionDeleteCapabilities, SessionListCapabilities, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::dispatch::{self, Answer, Handled, Method, Reply, Requests, Work};
pub(super) use super::state::session_not_found;
use super::state::{AcpSession, Reopen, State};
use super::{meta, options, prompt, updates};
use crate::config::Config;
use crate::rpc::Incoming;
use crate::runtime::{ListError, Mode, Op, Runtime, SessionHandle, SessionSettings};
use crate::settings::ReasoningEffort;

/// How long `session/close` waits for the session to stop (its turn is cancelled first, which
/// ends within a few seconds whatever the tools or the editor do).
const CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sessions listed per `session/list` page.
const LIST_PAGE: usize = 50;

/// One ACP connection's agent; cheap to clone (asynchronous handlers take a clone along).
#[derive(Clone)]
pub struct Agent {
    pub(super) state: Arc<State>,
    pub(super) runtime: Runtime,
}

impl Agent {
    pub(super) fn new(state: Arc<State>, runtime: Runtime) -> Self {
        Self { state, runtime }
    }

    /// The dispatch table.
    pub fn dispatch(&self, incoming: Incoming) -> Work {
        match incoming {
            Incoming::Request(request) => Requests::new(self, &self.state.conn, request)
                .on::<dispatch::Initialize>(Self::handle_initialize)
                .on::<dispatch::Authenticate>(Self::handle_authenticate)
                .on::<dispatch::NewSession>(Self::handle_new_session)
                .on::<dispatch::LoadSession>(Self::handle_load_session)
                .on::<dispatch::ResumeSession>(Self::handle_resume_session)
                .on::<dispatch::ListSessions>(Self::handle_list_sessions)
                .on::<dispatch::DeleteSession>(Self::handle_delete_session)
                .on_cancellable::<dispatch::Prompt>(Self::handle_prompt)
                .on::<dispatch::SetSessionMode>(Self::handle_set_mode)
                .on::<dispatch::SetSessionConfigOption>(Self::handle_set_config_option)
                .on::<dispatch::CloseSession>(Self::handle_close_session)
                .on::<dispatch::Cancel>(|this, params| {
                    this.handle_cancel(params);
                    Ok(Handled::Now(()))
                })
                .finish(),
            Incoming::Notification { method, params } => {
                match method.as_str() {
                    dispatch::Cancel::NAME => match dispatch::Cancel::decode(params) {
                        Ok(params) => self.handle_cancel(params),
                        Err(e) => tracing::warn!(error = %e, "ignoring malformed session/cancel"),
                    },
                    _ => tracing::debug!(%method, "ignoring unknown notification"),
                }
                Work::Done
            }
        }
    }

    fn handle_initialize(&self, req: InitializeRequest) -> Reply<Handled<InitializeResponse>> {
        if let Some(info) = &req.client_info {
            tracing::info!(client = %info.name, version = %info.version, "initialize");
        }
        self.state.caps.set(&req.client_capabilities);
        // Sessions come next: have the store ready for them (and, with no provider to use, the
        // model servers of this machine looked for).
        self.runtime.open_store();
        self.runtime.start_discovery();
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new())
                    .delete(SessionDeleteCapabilities::new())
                    .additional_directories(SessionAdditionalDirectoriesCapabilities::new()),
            );
        Ok(Handled::Now(
            InitializeResponse::new(ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .auth_methods(auth_methods(&self.runtime.config()))
                .agent_info(Implementation::new("acp", env!("CARGO_PKG_VERSION")).title("acp")),
        ))
    }

    /// Re-reads the configuration (the user may have edited config.toml) and reports whether the
    /// chosen method now yields a usable provider.
    fn handle_authenticate(&self, req: AuthenticateRequest) -> Reply<Handled<AuthenticateResponse>> {
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
            None => Ok(Handled::Now(AuthenticateResponse::new())),
            Some(reason) => Err(ErrorObject::new(code::AUTH_REQUIRED, format!("{reason} (then restart the agent)"))),
        }
    }

    fn handle_new_session(&self, req: NewSessionRequest) -> Reply<Handled<NewSessionResponse>> {
        check_workspace(&req.cwd, &req.additional_directories)?;
        // No provider to use: the servers found here last time, if the search has not offered
        // them yet (a file read; no network).
        self.runtime.offer_found_before();
        let config = self.runtime.config();
        let meta = req.meta.as_ref();
        let model = match meta::read_string(meta, meta::MODEL) {
            Some(reference) => config.resolve_model(reference).map(|(r, _)| r),
            None => config.default_model_ref(),
        };
        let model = model.map_err(|e| {
            // A model named wrongly is said as such; a broken file too (still -32000: once it is
            // fixed, the `config-file` method reloads it).
            if !e.setup {
                return ErrorObject::invalid_params(e.message);
            }
            // A model server started since the last search is found for the next try.
            self.runtime.search_again();
            let message =
                if config.load_error.is_some() { e.message } else { format!("authentication required: {}", e.message) };
            ErrorObject::new(code::AUTH_REQUIRED, message)
                .with_data(json!({ "configPath": config.config_path(), "authMethods": [AUTH_ANTHROPIC, AUTH_OPENAI, AUTH_CONFIG] }))
        })?;
        let mode = match meta::read_string(meta, meta::MODE) {
            Some(id) => Mode::parse(id)
                .ok_or_else(|| ErrorObject::invalid_params(format!("`_meta.mode`: unknown mode `{id}`")))?,
            None => config.default_mode,
        };
        let reasoning = match meta::read_string(meta, meta::THINKING) {
            Some(level) => options::parse_thought_level(level).ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "`_meta.thinking`: unknown level `{level}` (known: default, {})",
                    ReasoningEffort::CHOICES
                ))
            })?,
            None => config.reasoning,
        };
        let mcp_servers = super::mcp::servers(req.mcp_servers);
        let key = match meta::read_string(meta, meta::SESSION_KEY) {
            Some(key) if !crate::runtime::valid_session_id(key) => {
                return Err(ErrorObject::invalid_params(format!(
                    "`_meta.sessionKey`: `{}` is not a valid session key (1 to {} bytes of printable text)",
                    key.escape_debug(),
                    crate::runtime::MAX_SESSION_ID_BYTES
                )));
            }
            Some(key) if self.state.sessions().contains_key(key) => {
                return Err(ErrorObject::invalid_params(format!(
                    "`_meta.sessionKey`: session `{key}` is already open on this connection"
                )));
            }
            Some(key) => Some(key.to_owned()),
            None => None,
        };
        let settings = SessionSettings {
            cwd: req.cwd,
            additional_dirs: req.additional_directories,
            model,
            mode,
            reasoning,
            mcp_servers,
        };
        let this = self.clone();
        Ok(Handled::InOrder(Box::pin(async move { this.open_new(key, settings).await })))
    }

    fn handle_load_session(&self, req: LoadSessionRequest) -> Reply<Handled<LoadSessionResponse>> {
        check_workspace(&req.cwd, &req.additional_directories)?;
        let mcp_servers = super::mcp::servers(req.mcp_servers);
        let this = self.clone();
        let id = req.session_id.0.to_string();
        Ok(Handled::InOrder(Box::pin(async move {
            this.reopen(Reopen::Load, id, req.cwd, req.additional_directories, mcp_servers)
                .await
                .map(|(modes, list)| LoadSessionResponse::new().modes(modes).config_options(list))
        })))
    }

    fn handle_resume_session(&self, req: ResumeSessionRequest) -> Reply<Handled<ResumeSessionResponse>> {
        check_workspace(&req.cwd, &req.additional_directories)?;
        let mcp_servers = super::mcp::servers(req.mcp_servers);
        let this = self.clone();
        let id = req.session_id.0.to_string();
        Ok(Handled::InOrder(Box::pin(async move {
            this.reopen(Reopen::Resume, id, req.cwd, req.additional_directories, mcp_servers)
                .await
                .map(|(modes, list)| ResumeSessionResponse::new().modes(modes).config_options(list))
        })))
    }

    fn handle_list_sessions(&self, req: ListSessionsRequest) -> Reply<Handled<ListSessionsResponse>> {
        if let Some(cwd) = req.cwd.as_ref().filter(|c| !c.is_absolute()) {
            let msg = format!("`cwd` must be an absolute path, got `{}`", cwd.display());
            return Err(ErrorObject::invalid_params(msg));
        }
        let runtime = self.runtime.clone();
        Ok(Handled::InOrder(Box::pin(async move {
            let page = runtime.list_sessions(req.cwd, req.cursor.as_deref(), LIST_PAGE).await;
            Answer::from(match page {
                Ok(page) => {
                    let sessions = page.sessions.into_iter().map(updates::session_info).collect();
                    Ok(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
                }
                Err(ListError::BadCursor) => {
                    Err(ErrorObject::invalid_params(format!("`cursor`: {}", ListError::BadCursor)))
                }
                Err(ListError::Store(e)) => Err(ErrorObject::internal(format!("could not list sessions: {e}"))),
            })
        })))
    }

    fn handle_delete_session(&self, req: DeleteSessionRequest) -> Reply<Handled<DeleteSessionResponse>> {
        let id = req.session_id.0.to_string();
        let open = self.state.sessions().remove(&id);
        let runtime = self.runtime.clone();
        Ok(Handled::InOrder(Box::pin(async move {
            if let Some(session) = open {
                session.handle.send(Op::Shutdown);
                session.handle.closed().await;
            }
            Answer::from(
                runtime
                    .delete_session(&id)
                    .await
                    .map(|()| DeleteSessionResponse::new())
                    .map_err(|e| ErrorObject::internal(format!("could not delete session {id}: {e}"))),
            )
        })))
    }

    /// Queues the prompt in its session and answers when its turn ends. `$/cancel_request` for
    /// it cancels just this turn (the answer is then `cancelled`).
    fn handle_prompt(&self, req: PromptRequest, cancel: CancellationToken) -> Reply<Handled<PromptResponse>> {
        let id = req.session_id.0.to_string();
        let handle = self.session(&id, |s| s.handle.clone())?;
        let input = prompt::to_user_blocks(&req.prompt).map_err(ErrorObject::invalid_params)?;
        if input.is_empty() {
            return Err(ErrorObject::invalid_params("`prompt`: the prompt is empty"));
        }
        let turn = self.runtime.next_turn_id();
        let ended = handle.prompt(turn, input);
        let this = self.clone();
        Ok(Handled::Alongside(Box::pin(async move {
            tokio::pin!(ended);
            let outcome = tokio::select! {
                outcome = &mut ended => outcome,
                () = cancel.cancelled() => {
                    handle.send(Op::CancelTurn(turn));
                    ended.await
                }
            };
            Answer::from(this.prompt_answer(&id, &handle, outcome))
        })))
    }

    fn handle_set_mode(&self, req: SetSessionModeRequest) -> Reply<Handled<SetSessionModeResponse>> {
        let id = req.session_id.0.to_string();
        let mode = parse_mode(&req.mode_id.0, "modeId")?;
        let config = self.runtime.config();
        let (session, list) = self.session_mut(&id, |s| {
            s.mode = mode;
            s.handle.send(Op::SetMode(mode));
            (s.handle.clone(), s.options(&config))
        })?;
        // Answered once the change is on disk; then the config-option view of the mode follows.
        Ok(Handled::InOrder(Box::pin(async move {
            session.settled().await;
            let update = SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(list));
            Answer { reply: Ok(SetSessionModeResponse::new()), then: vec![updates::notification(&id, update)] }
        })))
    }

    fn handle_set_config_option(
        &self,
        req: SetSessionConfigOptionRequest,
    ) -> Reply<Handled<SetSessionConfigOptionResponse>> {
        let id = req.session_id.0.to_string();
        let SessionConfigOptionValue::ValueId { value } = &req.value else {
            return Err(ErrorObject::invalid_params("`value`: expected a value id (string)"));
        };
        let value = value.0.as_ref();
        let config = self.runtime.config();
        let op = match req.config_id.0.as_ref() {
            options::MODEL_OPTION => {
                let (model, _) = config.resolve_model(value).map_err(|e| match e.setup {
                    // The provider is there but has no key: setting up is what helps.
                    true => ErrorObject::new(code::AUTH_REQUIRED, e.message),
                    false => ErrorObject::invalid_params(format!("`value`: {e}")),
                })?;
                Op::SetModel(model)
            }
            options::MODE_OPTION => Op::SetMode(parse_mode(value, "value")?),
            options::THOUGHT_OPTION => Op::SetReasoning(options::parse_thought_level(value).ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "`value`: unknown thought level `{value}` (known: default, {})",
                    ReasoningEffort::CHOICES
                ))
            })?),
            other => {
                return Err(ErrorObject::invalid_params(format!(
                    "`configId`: unknown config option `{other}` (known: model, mode, thought_level)"
                )));
            }
        };
        let mode_changed = if let Op::SetMode(mode) = op { Some(mode) } else { None };
        let (session, list) = self.session_mut(&id, |s| {
            match &op {
                Op::SetModel(model) => s.set_model(model.clone()),
                Op::SetMode(mode) => s.mode = *mode,
                Op::SetReasoning(reasoning) => s.reasoning = *reasoning,
                _ => {}
            }
            s.handle.send(op);
            (s.handle.clone(), s.options(&config))
        })?;
        // Answered once the change is on disk; then the legacy `modes` view follows.
        Ok(Handled::InOrder(Box::pin(async move {
            session.settled().await;
            let then = mode_changed
                .map(|mode| {
                    updates::notification(&id, SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id())))
                })
                .into_iter()
                .collect();
            Answer { reply: Ok(SetSessionConfigOptionResponse::new(list)), then }
        })))
    }

    /// Cancels like `session/cancel` (pending prompts end `cancelled`), then frees the session:
    /// answered once it is released, so it can be loaded at once (here or elsewhere).
    fn handle_close_session(&self, req: CloseSessionRequest) -> Reply<Handled<CloseSessionResponse>> {
        let id = req.session_id.0.to_string();
        let session = self.state.sessions().remove(&id).ok_or_else(|| session_not_found(&id))?;
        session.handle.send(Op::Shutdown);
        Ok(Handled::InOrder(Box::pin(async move {
            if tokio::time::timeout(CLOSE_LIMIT, session.handle.closed()).await.is_err() {
                tracing::warn!(session = %id, "the session did not close in time");
            }
            Answer::from(Ok(CloseSessionResponse::new()))
        })))
    }

    fn handle_cancel(&self, req: CancelNotification) {
        let id = req.session_id.0.to_string();
        if self.session(&id, |s| s.handle.send(Op::Cancel)).is_err()
            && !self.runtime.cancel_subagent(&id, |parent| self.state.sessions().contains_key(parent))
        {
            tracing::debug!(session = %id, "session/cancel for an unknown session");
        }
    }

    pub(super) fn session<T>(&self, id: &str, f: impl FnOnce(&AcpSession) -> T) -> Reply<T> {
        self.state.sessions().get(id).map(f).ok_or_else(|| session_not_found(id))
    }

    fn session_mut<T>(&self, id: &str, f: impl FnOnce(&mut AcpSession) -> T) -> Reply<T> {
        self.state.sessions().get_mut(id).map(f).ok_or_else(|| session_not_found(id))
    }

    /// Cancels every running and queued turn (SIGINT/SIGTERM).
    pub fn cancel_everything(&self) {
        for session in self.state.sessions().values() {
            session.handle.send(Op::Cancel);
        }
    }

    /// Stops every session actor and waits (up to `limit`) until they have written their last
    /// records: a setting changed just before exit is not lost.
    pub async fn close_all_sessions(&self, limit: std::time::Duration) {
        let handles: Vec<SessionHandle> = self.state.sessions().drain().map(|(_, s)| s.handle).collect();
        for handle in &handles {
            handle.send(Op::Shutdown);
        }
        let all = futures_util::future::join_all(handles.iter().map(SessionHandle::closed));
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!("some sessions did not close in time");
        }
    }
}

pub(super) fn check_workspace(cwd: &std::path::Path, dirs: &[std::path::PathBuf]) -> Reply<()> {
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
