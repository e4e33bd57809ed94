//! The bridge's dispatch table: `initialize` (answered at once, without waiting for the gateway),
//! sessions by gateway key (`new`, `load` replaying `chat.history`, `resume`, `list` from
//! `sessions.list`, `close`) with the gateway's models, modes and thinking levels as config options
//! (`set_config_option` and `set_mode` are `sessions.patch`) and its slash commands, `prompt` (one
//! `chat.send` per prompt, images as attachments, one at a time per session) and `cancel`
//! (`chat.abort` of its own run only).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification, CloseSessionRequest,
    CloseSessionResponse, ContentBlock, EmbeddedResourceResource, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionConfigOption,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionInfo, SessionListCapabilities,
    SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use acp_protocol::acp::schema::{AvailableCommandsUpdate, ConfigOptionUpdate, CurrentModeUpdate};
use acp_protocol::gateway::Method as GatewayMethod;
use acp_protocol::gateway::methods::{
    Attachment, ChatAbort, ChatAbortParams, ChatHistory, ChatHistoryParams, ChatSend, ChatSendParams, ModelsList,
    NoParams, SessionKeyParams, SessionRow, SessionsList, SessionsListParams, SessionsPatch, SessionsPatchParams,
    SessionsReset, SessionsResolve, SessionsResolveParams,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::super::dispatch::{self, Answer, Handled, Method as _, Reply, Requests, Work};
use super::super::{agent, meta, options, updates};
use super::{Bridge, CONNECT_WAIT, PromptEnd, Run, Session};
use crate::rpc::Incoming;
use crate::runtime::Mode;
use crate::settings::ReasoningEffort;
use crate::sync::lock;

/// Sessions per `session/list` page.
const LIST_PAGE: u64 = 50;
/// How long opening a session waits for the gateway's models and the session's settings.
const SETTINGS_WAIT: Duration = Duration::from_secs(3);
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
            .on::<dispatch::SetSessionConfigOption>(set_config_option)
            .on::<dispatch::SetSessionMode>(set_mode)
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
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
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

/// `sessions.resolve` of `key`.
fn resolve(key: &str) -> SessionsResolveParams {
    SessionsResolveParams { key: Some(key.to_owned()), ..Default::default() }
}

/// Which gateway session an ACP session is: `_meta` first, then the flags, else `fallback`.
async fn resolve_key(bridge: &Bridge, meta: Option<&meta::Meta>, fallback: String) -> Reply<String> {
    bridge.knows_default_agent().await;
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
        let asked = SessionsResolveParams { label: Some(label.clone()), ..Default::default() };
        let found = bridge.gateway.call::<SessionsResolve>(&asked, CONNECT_WAIT).await;
        return match found {
            Ok(r) => Some(r.key).filter(|k| !k.is_empty()).map(|k| bridge.key(&k)).ok_or_else(|| {
                ErrorObject::new(code::RESOURCE_NOT_FOUND, format!("no gateway session has the label `{label}`"))
            }),
            Err(e) => Err(gateway_error(&format!("could not resolve the session label `{label}`"), &e)),
        };
    }
    let Some(key) = key else { return Ok(bridge.key(&fallback)) };
    if !crate::runtime::valid_session_id(&key) {
        return Err(ErrorObject::invalid_params(format!(
            "`_meta.sessionKey`: `{}` is not a valid key",
            key.escape_debug()
        )));
    }
    if require {
        return match bridge.gateway.call::<SessionsResolve>(&resolve(&key), CONNECT_WAIT).await {
            Ok(r) => Ok(bridge.key(if r.key.is_empty() { &key } else { &r.key })),
            Err(e) => Err(gateway_error(&format!("the gateway session `{key}` does not exist"), &e)),
        };
    }
    Ok(bridge.key(&key))
}

/// A session's settings on the gateway, and the models it offers.
#[derive(Debug, Clone, Default)]
pub(super) struct Settings {
    /// `provider/model` and a name to show.
    models: Vec<(String, String)>,
    model: Option<String>,
    /// `None` on a gateway without modes (OpenClaw's).
    mode: Option<Mode>,
    thinking: Option<ReasoningEffort>,
}

impl Settings {
    /// Asks the gateway: its models and defaults (`models.list`), and the session's row.
    async fn of(bridge: &Bridge, key: &str) -> Self {
        // Both at once, and not for long: a gateway that does not answer them leaves the
        // session without options, not the editor waiting.
        async fn ask<M: GatewayMethod>(bridge: &Bridge, params: M::Params) -> M::Result {
            let asked = bridge.gateway.call::<M>(&params, SETTINGS_WAIT);
            tokio::time::timeout(SETTINGS_WAIT, asked).await.ok().and_then(Result::ok).unwrap_or_default()
        }
        let search = SessionsListParams { search: Some(key.to_owned()), limit: Some(50), ..Default::default() };
        let (listed, rows) = tokio::join!(ask::<ModelsList>(bridge, NoParams {}), ask::<SessionsList>(bridge, search));
        let models: Vec<(String, String)> = listed
            .models
            .into_iter()
            .filter(|m| !m.id.is_empty())
            .map(|m| (m.id.clone(), m.name.unwrap_or(m.id)))
            .collect();
        let row = rows.sessions.into_iter().find(|r| r.key == key).unwrap_or_default();
        let defaults = listed.defaults;
        let model = row.model.or(defaults.model).or_else(|| models.first().map(|(id, _)| id.clone()));
        let mode = row.mode.or(defaults.mode).and_then(|m| Mode::parse(&m));
        let thinking = row.thinking_level.or(defaults.thinking_level).and_then(|t| ReasoningEffort::parse(&t));
        Self { models, model, mode, thinking }
    }

    fn options(&self) -> Vec<SessionConfigOption> {
        let mut choices: Vec<SessionConfigSelectOption> =
            self.models.iter().map(|(id, name)| SessionConfigSelectOption::new(id.clone(), name.clone())).collect();
        let current = self.model.clone().unwrap_or_default();
        if !current.is_empty() && !self.models.iter().any(|(id, _)| *id == current) {
            choices.insert(0, SessionConfigSelectOption::new(current.clone(), current.clone()));
        }
        options::options_of(choices, current, self.mode, self.thinking)
    }
}

/// What an editor learns once a session is open (after the answer): the slash commands.
fn announcement(id: &str) -> Vec<acp_protocol::acp::schema::SessionNotification> {
    let commands = super::super::sessions::available_commands(&[]);
    vec![updates::notification(id, SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)))]
}

/// An answer to opening session `id`, the announcement after it.
fn opened<T>(id: &str, reply: Reply<T>) -> Answer<T> {
    let then = if reply.is_ok() { announcement(id) } else { Vec::new() };
    Answer { reply, then }
}

/// Registers ACP session `id` (a gateway key, as the editor spells it), resetting it first if
/// asked; its settings on the gateway.
async fn open(bridge: &Bridge, id: &str, cwd: PathBuf, meta: Option<&meta::Meta>) -> Reply<Settings> {
    let key = bridge.key(id);
    if meta::read_bool(meta, meta::RESET).unwrap_or(bridge.options.reset_session) {
        bridge
            .gateway
            .call::<SessionsReset>(&SessionKeyParams::of(&key), CONNECT_WAIT)
            .await
            .map_err(|e| gateway_error(&format!("could not reset `{key}`"), &e))?;
    }
    let prefix_cwd = meta::read_bool(meta, meta::PREFIX_CWD).unwrap_or(bridge.options.prefix_cwd);
    let settings = Settings::of(bridge, &key).await;
    let session = Session {
        key: key.clone(),
        acp_id: id.to_owned(),
        cwd,
        prefix_cwd,
        turns: Arc::default(),
        cancel: CancellationToken::new(),
        settings: settings.clone(),
    };
    lock(&bridge.sessions).insert(key, session);
    Ok(settings)
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
            let settings = open(&this, &id, req.cwd, meta).await?;
            let response = NewSessionResponse::new(id).config_options(settings.options());
            Ok(match settings.mode {
                Some(mode) => response.modes(options::modes(mode)),
                None => response,
            })
        };
        let reply = opened.await;
        let id = reply.as_ref().map(|r| r.session_id.0.to_string()).unwrap_or_default();
        self::opened(&id, reply)
    })))
}

fn load_session(bridge: &Arc<Bridge>, req: LoadSessionRequest) -> Reply<Handled<LoadSessionResponse>> {
    agent::check_workspace(&req.cwd, &[])?;
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let loaded = async {
            let id = this.key(&req.session_id.0);
            let asked = ChatHistoryParams { session_key: id.clone(), limit: Some(1000) };
            let history = this.gateway.call::<ChatHistory>(&asked, CONNECT_WAIT).await.map_err(|e| {
                if e.code.as_deref() == Some("NOT_FOUND") {
                    agent::session_not_found(&req.session_id.0)
                } else {
                    gateway_error("could not read the session's history", &e)
                }
            })?;
            let settings = open(&this, &req.session_id.0, req.cwd.clone(), req.meta.as_ref()).await?;
            for (n, message) in history.messages.iter().enumerate() {
                for update in super::events::replay(message, &format!("{id}#{n}"), &req.cwd) {
                    this.send(&req.session_id.0, update);
                }
            }
            let response = LoadSessionResponse::new().config_options(settings.options());
            Ok(match settings.mode {
                Some(mode) => response.modes(options::modes(mode)),
                None => response,
            })
        };
        opened(&req.session_id.0, loaded.await)
    })))
}

fn resume_session(bridge: &Arc<Bridge>, req: ResumeSessionRequest) -> Reply<Handled<ResumeSessionResponse>> {
    agent::check_workspace(&req.cwd, &[])?;
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let resumed = async {
            let key = this.key(&req.session_id.0);
            this.gateway
                .call::<SessionsResolve>(&resolve(&key), CONNECT_WAIT)
                .await
                .map_err(|e| gateway_error(&format!("the gateway session `{key}` does not exist"), &e))?;
            let settings = open(&this, &req.session_id.0, req.cwd, req.meta.as_ref()).await?;
            let response = ResumeSessionResponse::new().config_options(settings.options());
            Ok(match settings.mode {
                Some(mode) => response.modes(options::modes(mode)),
                None => response,
            })
        };
        opened(&req.session_id.0, resumed.await)
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
        let params = SessionsListParams {
            limit: Some(LIST_PAGE),
            offset: Some(offset),
            include_derived_titles: Some(true),
            ..Default::default()
        };
        let listed = this.gateway.call::<SessionsList>(&params, CONNECT_WAIT).await;
        Answer::from(match listed {
            Ok(page) => {
                let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
                let sessions =
                    page.sessions.iter().filter_map(|row| session_info(row, filter.as_deref(), &here)).collect();
                let next = page.next_offset.filter(|_| page.has_more).map(|n| n.to_string());
                Ok(ListSessionsResponse::new(sessions).next_cursor(next))
            }
            Err(e) => Err(gateway_error("could not list the gateway's sessions", &e)),
        })
    })))
}

/// A `sessions.list` row as ACP session info. Its directory is the one the gateway gives (`acp
/// gateway` does); a gateway that gives none is taken to serve the directory asked about (or
/// this process's). Asked about a directory, rows from another are left out.
fn session_info(row: &SessionRow, filter: Option<&std::path::Path>, here: &std::path::Path) -> Option<SessionInfo> {
    let key = Some(row.key.as_str()).filter(|k| !k.is_empty())?;
    let cwd = match (row.cwd.as_deref().map(PathBuf::from), filter) {
        (Some(cwd), Some(wanted)) if cwd != wanted => return None,
        (Some(cwd), _) => cwd,
        (None, Some(wanted)) => wanted.to_path_buf(),
        (None, None) => here.to_path_buf(),
    };
    let cwd = cwd.as_path();
    let title = [&row.label, &row.display_name, &row.derived_title].into_iter().find_map(Clone::clone);
    let mut info = SessionInfo::new(key.to_owned(), cwd.to_path_buf()).title(title);
    if let Some(at) = row.updated_at {
        info = info.updated_at(updates::iso(at));
    }
    Some(info.meta(updates::meta(json!({"sessionKey": key, "origin": row.origin, "kind": row.kind}))))
}

/// `session/set_config_option`: the model, mode or thinking level, as `sessions.patch` on the
/// gateway; the answer carries every option as it now is.
fn set_config_option(
    bridge: &Arc<Bridge>,
    req: SetSessionConfigOptionRequest,
) -> Reply<Handled<SetSessionConfigOptionResponse>> {
    let SessionConfigOptionValue::ValueId { value } = &req.value else {
        return Err(ErrorObject::invalid_params("`value`: expected a value id (string)"));
    };
    let value = value.0.to_string();
    let (field, patched) = match req.config_id.0.as_ref() {
        options::MODEL_OPTION => (Setting::Model, value),
        options::MODE_OPTION => {
            Mode::parse(&value)
                .ok_or_else(|| ErrorObject::invalid_params(format!("`value`: unknown mode `{value}`")))?;
            (Setting::Mode, value)
        }
        options::THOUGHT_OPTION => {
            let level = options::parse_thought_level(&value)
                .ok_or_else(|| ErrorObject::invalid_params(format!("`value`: unknown thought level `{value}`")))?;
            (Setting::Thinking, level.map_or("off", ReasoningEffort::as_str).to_owned())
        }
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "`configId`: unknown config option `{other}` (known: model, mode, thought_level)"
            )));
        }
    };
    let id = req.session_id.0.to_string();
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        let patched = patch(&this, &id, field, patched).await;
        Answer::from(patched.map(|s| SetSessionConfigOptionResponse::new(s.options())))
    })))
}

/// `session/set_mode`, as `sessions.patch` on the gateway.
fn set_mode(bridge: &Arc<Bridge>, req: SetSessionModeRequest) -> Reply<Handled<SetSessionModeResponse>> {
    let mode = req.mode_id.0.to_string();
    Mode::parse(&mode).ok_or_else(|| ErrorObject::invalid_params(format!("`modeId`: unknown mode `{mode}`")))?;
    let id = req.session_id.0.to_string();
    let this = bridge.clone();
    Ok(Handled::InOrder(Box::pin(async move {
        match patch(&this, &id, Setting::Mode, mode.clone()).await {
            Ok(settings) => {
                let update = SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(settings.options()));
                let current = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode));
                Answer {
                    reply: Ok(SetSessionModeResponse::new()),
                    then: vec![updates::notification(&id, current), updates::notification(&id, update)],
                }
            }
            Err(e) => Answer::from(Err(e)),
        }
    })))
}

/// A session setting the editor changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    Model,
    Mode,
    Thinking,
}

/// Changes one setting of session `id` on the gateway; its settings after.
async fn patch(bridge: &Bridge, id: &str, setting: Setting, value: String) -> Reply<Settings> {
    let key = bridge.key(id);
    let mut settings =
        lock(&bridge.sessions).get(&key).map(|s| s.settings.clone()).ok_or_else(|| agent::session_not_found(id))?;
    if setting == Setting::Mode && settings.mode.is_none() {
        return Err(ErrorObject::invalid_params("this gateway has no modes"));
    }
    let mut asked = SessionsPatchParams { key: key.clone(), ..Default::default() };
    let field = match setting {
        Setting::Model => (asked.model = Some(value.clone()), "model").1,
        Setting::Mode => (asked.mode = Some(value.clone()), "mode").1,
        Setting::Thinking => (asked.thinking = Some(value.clone()), "thinking").1,
    };
    bridge.gateway.call::<SessionsPatch>(&asked, CONNECT_WAIT).await.map_err(|e| {
        let message = e.to_string();
        if message.contains("invalid") {
            ErrorObject::invalid_params(message)
        } else {
            gateway_error(&format!("could not change the session's {field}"), &e)
        }
    })?;
    match setting {
        Setting::Model => settings.model = Some(value),
        Setting::Mode => settings.mode = Mode::parse(&value),
        Setting::Thinking => settings.thinking = ReasoningEffort::parse(&value),
    }
    if let Some(session) = lock(&bridge.sessions).get_mut(&key) {
        session.settings = settings.clone();
    }
    Ok(settings)
}

fn close_session(bridge: &Arc<Bridge>, req: CloseSessionRequest) -> Reply<Handled<CloseSessionResponse>> {
    let id = req.session_id.0.to_string();
    if !lock(&bridge.sessions).contains_key(&bridge.key(&id)) {
        return Err(agent::session_not_found(&id));
    }
    bridge.cancel_session(&id);
    lock(&bridge.sessions).remove(&bridge.key(&id));
    Ok(Handled::Now(CloseSessionResponse::new()))
}

fn cancel(bridge: &Arc<Bridge>, req: CancelNotification) {
    bridge.cancel_session(&req.session_id.0);
}

/// The prompt as one message — its text, embedded resources as fenced context — and its images
/// as `chat.send` attachments; audio cannot go through a gateway.
fn message_of(blocks: &[ContentBlock]) -> Reply<(String, Vec<Attachment>)> {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(image) => {
                images.push(Attachment {
                    kind: "image".into(),
                    mime_type: image.mime_type.clone(),
                    content: image.data.clone(),
                });
            }
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
                    "`prompt[{i}]`: only text, images and text resources can be sent through the gateway"
                )));
            }
        }
    }
    let message = parts.join("\n\n");
    if message.trim().is_empty() && images.is_empty() {
        return Err(ErrorObject::invalid_params("`prompt`: the prompt is empty"));
    }
    Ok((message, images))
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
        .get(&bridge.key(&asked))
        .map(|s| (s.acp_id.clone(), s.key.clone(), s.cwd.clone(), s.prefix_cwd, s.turns.clone(), s.cancel.clone()))
        .ok_or_else(|| agent::session_not_found(&asked))?;
    let (text, images) = message_of(&req.prompt)?;
    let meta = req.meta.as_ref();
    // A slash command goes as typed, so the gateway reads it as one.
    let prefix = meta::read_bool(meta, meta::PREFIX_CWD).unwrap_or(prefix) && !text.starts_with('/');
    let message = if prefix { format!("[Working directory: {}]\n\n{text}", shown_dir(&cwd)) } else { text };
    let params = ChatSendParams {
        session_key: key.clone(),
        message,
        idempotency_key: String::new(),
        thinking: meta::read_string(meta, meta::THINKING).map(str::to_owned),
        timeout_ms: super::millis(meta::read_number(meta, meta::TIMEOUT_MS)),
        attachments: (!images.is_empty()).then(|| serde_json::to_value(&images).unwrap_or_default()),
    };
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
    mut params: ChatSendParams,
    mut stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Reply<PromptResponse> {
    let run_id = uuid::Uuid::new_v4().to_string();
    params.idempotency_key = run_id.clone();
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
    // Cancelled while the gateway is taking the prompt: its answer is still waited for (bounded),
    // since the run may have started there, and then it is aborted like any other.
    let sending = bridge.gateway.call::<ChatSend>(&params, super::CONNECT_WAIT);
    tokio::pin!(sending);
    let mut stopped = false;
    let sent = tokio::select! {
        sent = &mut sending => sent,
        () = &mut stop => {
            stopped = true;
            sending.await
        }
    };
    if let Err(e) = sent {
        if stopped {
            return Ok(PromptResponse::new(StopReason::Cancelled));
        }
        return Err(ErrorObject::new(code::INTERNAL_ERROR, format!("the gateway did not take the prompt: {e}")));
    }
    if let Some(run) = lock(&bridge.runs).get_mut(&run_id) {
        run.started = true;
    }
    tokio::pin!(ended);
    let end = if stopped {
        abort(bridge, key, &run_id, &mut ended).await
    } else {
        tokio::select! {
            end = &mut ended => end,
            () = &mut stop => abort(bridge, key, &run_id, &mut ended).await,
        }
    };
    drop(forget);
    match end {
        Ok(PromptEnd::Stopped(reason)) => Ok(PromptResponse::new(reason)),
        Ok(PromptEnd::Failed(message)) => Err(ErrorObject::new(code::INTERNAL_ERROR, message)),
        Err(_) => Err(ErrorObject::internal("the run ended without an answer")),
    }
}

/// Aborts run `run_id` on the gateway; its `aborted` event ends it, and the prompt answers
/// `cancelled` in any case.
async fn abort(
    bridge: &Bridge,
    key: String,
    run_id: &str,
    ended: &mut std::pin::Pin<&mut oneshot::Receiver<PromptEnd>>,
) -> Result<PromptEnd, oneshot::error::RecvError> {
    let abort = ChatAbortParams { session_key: key, run_id: Some(run_id.to_owned()) };
    if let Err(e) = bridge.gateway.call::<ChatAbort>(&abort, super::CONNECT_WAIT).await {
        tracing::warn!(error = %e, "could not abort the run on the gateway");
    }
    let _ = tokio::time::timeout(ABORT_WAIT, ended.as_mut()).await;
    Ok(PromptEnd::Stopped(StopReason::Cancelled))
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
