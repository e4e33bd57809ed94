//! The sessions open on a connection: opening one (`session/new`), reopening a stored one
//! (`session/load`, `session/resume`, `session/new` naming a stored key), what a client is told
//! about a session once it knows it, and how a prompt's turn is answered.

use std::path::PathBuf;
use std::sync::Arc;

use acp_protocol::acp::client_methods::SESSION_UPDATE;
use acp_protocol::acp::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, NewSessionResponse, PromptResponse,
    SessionConfigOption, SessionInfoUpdate, SessionModeState, SessionNotification, SessionUpdate,
    UnstructuredCommandInput, UsageUpdate,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::json;

use super::agent::Agent;
use super::dispatch::{Answer, Reply};
use super::state::{AcpSession, Reopen, session_not_found};
use super::{options, updates};
use crate::config::mcp::McpServer;
use crate::runtime::{
    self, CreateError, LoadError, LoadedSession, SessionCommand, SessionHandle, SessionSettings, TurnOutcome,
    commands::COMMANDS,
};

/// What answers every way of opening a session: its modes and config options.
pub(super) type Opened = (SessionModeState, Vec<SessionConfigOption>);

impl Agent {
    /// Opens a new session (stored before the answer, so it can be loaded or resumed at once). A
    /// chosen key that names a stored session continues it (like `session/resume`).
    pub(super) async fn open_new(&self, key: Option<String>, settings: SessionSettings) -> Answer<NewSessionResponse> {
        let keyed = key.is_some();
        let id = key.unwrap_or_else(super::state::new_session_id);
        let handle = match self.runtime.create_session(Arc::from(id.as_str()), settings.clone()).await {
            Ok(handle) => handle,
            Err(CreateError::Exists) if keyed => {
                let reopened = self
                    .reopen(Reopen::New, id.clone(), settings.cwd, settings.additional_dirs, settings.mcp_servers)
                    .await;
                return reopened.map(|(modes, list)| NewSessionResponse::new(id).modes(modes).config_options(list));
            }
            Err(e) => return Answer::from(Err(ErrorObject::internal(format!("could not open session {id}: {e}")))),
        };
        let config = self.runtime.config();
        let extra = self.follow_commands(&id, &handle);
        self.state.sessions().insert(id.clone(), AcpSession::new(handle, &settings));
        tracing::info!(session = %id, cwd = %settings.cwd.display(), model = %settings.model, "session/new");
        self.runtime.prewarm();
        let list = options::config_options(&config, &settings.model, &[], settings.mode, settings.reasoning);
        let window = config.provider(&settings.model.provider).map(|p| p.model(&settings.model.model).context_window);
        Answer {
            reply: Ok(NewSessionResponse::new(id.clone()).modes(options::modes(settings.mode)).config_options(list)),
            then: announcement(&id, Some(0), window, None, &extra),
        }
    }

    /// Reopens a stored session: `session/load` (replaying it first), `session/resume`, or
    /// `session/new` with a stored key.
    pub(super) async fn reopen(
        &self,
        how: Reopen,
        id: String,
        cwd: PathBuf,
        dirs: Vec<PathBuf>,
        mcp_servers: Vec<McpServer>,
    ) -> Answer<Opened> {
        // Reopening a session open on this connection: close it first (it is saved as it goes).
        let open = self.state.sessions().remove(&id);
        if let Some(session) = open {
            session.handle.send(runtime::Op::Shutdown);
            session.handle.closed().await;
        }
        let loaded = match self
            .runtime
            .load_session(&id, cwd, dirs, mcp_servers, if how == Reopen::Load { "load" } else { "resume" })
            .await
        {
            Ok(loaded) => loaded,
            Err(LoadError::NotFound) => return Answer::from(Err(session_not_found(&id))),
            Err(e) => return Answer::from(Err(ErrorObject::internal(format!("could not open session {id}: {e}")))),
        };
        let LoadedSession { handle, settings, shown, title, context_tokens, context_window, .. } = loaded;
        let replayed = shown.len();
        if how == Reopen::Load {
            // The whole history, before the answer (the client registered the session already).
            for update in updates::replay_updates(shown, self.state.caps.compaction()) {
                self.state.conn.notify_batched(SESSION_UPDATE, &updates::notification(&id, update));
            }
        }
        let extra = self.follow_commands(&id, &handle);
        self.state.sessions().insert(id.clone(), AcpSession::new(handle, &settings));
        tracing::info!(session = %id, ?how, replayed, cwd = %settings.cwd.display(), "session reopened");
        self.runtime.prewarm();
        let config = self.runtime.config();
        let list = options::config_options(&config, &settings.model, &[], settings.mode, settings.reasoning);
        Answer {
            reply: Ok((options::modes(settings.mode), list)),
            then: announcement(&id, context_tokens, context_window, title, &extra),
        }
    }

    /// The session's extra commands now (for its announcement); from then on, until it closes,
    /// each change is sent as an `available_commands_update` (its MCP servers' prompts appear as
    /// the servers come up).
    fn follow_commands(&self, id: &str, handle: &SessionHandle) -> Vec<SessionCommand> {
        let mut commands = handle.commands();
        let now = commands.borrow_and_update().clone();
        let (handle, state, id) = (handle.clone(), self.state.clone(), id.to_owned());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = handle.closed() => return,
                    changed = commands.changed() => if changed.is_err() { return },
                }
                let extra = commands.borrow_and_update().clone();
                let update =
                    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available_commands(&extra)));
                state.conn.notify(SESSION_UPDATE, &updates::notification(&id, update));
            }
        });
        now
    }

    /// How a prompt is answered once its turn ended: a stop reason; or, for a failed turn, the
    /// error said in the conversation itself, then as the request's error.
    pub(super) fn prompt_answer(
        &self,
        id: &str,
        handle: &SessionHandle,
        outcome: Option<TurnOutcome>,
    ) -> Reply<PromptResponse> {
        match outcome {
            Some(TurnOutcome::Stopped { reason, usage }) => {
                let mut response = PromptResponse::new(updates::stop_reason(reason));
                if usage != runtime::Usage::default() {
                    response = response.usage(updates::acp_usage(&usage));
                }
                Ok(response)
            }
            Some(TurnOutcome::Failed { error, .. }) => {
                let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                let text = format!("\n\n**Error:** {}", error.message);
                // Marked, so clients that report the error themselves (`acp run`) can leave it out
                // of the reply.
                let notice = updates::chunk(text, &message_id).meta(updates::meta(json!({ "error": true })));
                self.state.send_update(id, SessionUpdate::AgentMessageChunk(notice));
                let code = if error.needs_setup { code::AUTH_REQUIRED } else { code::INTERNAL_ERROR };
                let data = json!({
                    "kind": error.kind,
                    "provider": error.provider,
                    "status": error.status,
                    "retryable": error.retryable,
                    "requestId": error.request_id,
                });
                Err(ErrorObject::new(code, error.message).with_data(data))
            }
            None => {
                // The session's actor stopped without ending the turn (an internal error): it is
                // no longer open.
                let mut open = self.state.sessions();
                if open.get(id).is_some_and(|s| s.handle.is_stopped() && s.handle.id() == handle.id()) {
                    open.remove(id);
                }
                drop(open);
                tracing::error!(session = %id, "the session stopped unexpectedly (an internal error)");
                Err(ErrorObject::internal(format!(
                    "session {id} stopped unexpectedly (an internal error); load it again to go on"
                )))
            }
        }
    }
}

/// What a client learns after opening a session: the slash commands, the context's fill and
/// the title.
fn announcement(
    id: &str,
    used: Option<u64>,
    window: Option<u64>,
    title: Option<String>,
    extra: &[SessionCommand],
) -> Vec<SessionNotification> {
    let mut updates =
        vec![SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available_commands(extra)))];
    if let Some(size) = window {
        updates.push(SessionUpdate::UsageUpdate(UsageUpdate::new(used.unwrap_or(0), size)));
    }
    if let Some(title) = title {
        updates.push(SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title)));
    }
    updates.into_iter().map(|u| updates::notification(id, u)).collect()
}

/// The built-in commands, then the session's own (its MCP servers' prompts).
pub(super) fn available_commands(extra: &[SessionCommand]) -> Vec<AvailableCommand> {
    let builtin = COMMANDS.iter().map(|c| (c.name, c.description, c.hint));
    let own = extra.iter().map(|c| (c.name.as_str(), c.description.as_str(), c.hint.as_deref()));
    builtin
        .chain(own)
        .map(|(name, description, hint)| {
            let command = AvailableCommand::new(name, description);
            match hint {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint))),
                None => command,
            }
        })
        .collect()
}
