//! What one ACP connection holds, shared by its handlers and its event sink: the connection, what
//! the client can do (`ClientCaps`), the config, and its open sessions (`AcpSession`); and the
//! session ids and errors they name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use acp_protocol::acp::schema::{ClientCapabilities, SessionConfigOption};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::{Value, json};

use super::options;
use crate::config::{Config, ConfigCell, ModelRef};
use crate::rpc::Connection;
use crate::runtime::{Mode, ReasoningEffort, SessionHandle, SessionSettings};
use crate::sync::lock;

/// What one ACP connection holds: the handlers and the event sink share it.
pub(super) struct State {
    pub conn: Connection,
    pub caps: ClientCaps,
    pub config: ConfigCell,
    /// The sessions open on this connection, by id, with the settings the client was last told.
    pub sessions: Mutex<HashMap<String, AcpSession>>,
}

impl State {
    pub fn new(conn: Connection, config: ConfigCell) -> Self {
        Self { conn, caps: ClientCaps::default(), config, sessions: Mutex::default() }
    }

    pub fn sessions(&self) -> MutexGuard<'_, HashMap<String, AcpSession>> {
        lock(&self.sessions)
    }
}

/// What the client said it can do, from `initialize`.
#[derive(Debug, Default)]
pub struct ClientCaps {
    pub(super) read_text_file: AtomicBool,
    pub(super) write_text_file: AtomicBool,
    pub(super) terminal: AtomicBool,
    /// Zed's extension: display-only terminals fed by `_meta.terminal_output` increments.
    pub(super) terminal_output_meta: AtomicBool,
    /// `session.compaction`: the client shows `compaction_update`s.
    pub(super) compaction: AtomicBool,
    /// `elicitation.form`: the client fills forms (`elicitation/create`).
    pub(super) elicitation_form: AtomicBool,
    /// `subagents` (unstable): the client shows child sessions (`subagent_update`,
    /// `session_message`, the child's own updates under its id).
    pub(super) subagents: AtomicBool,
}

impl ClientCaps {
    pub fn set(&self, caps: &ClientCapabilities) {
        self.read_text_file.store(caps.fs.read_text_file, Ordering::Relaxed);
        self.write_text_file.store(caps.fs.write_text_file, Ordering::Relaxed);
        self.terminal.store(caps.terminal, Ordering::Relaxed);
        let meta = caps.meta.as_ref().and_then(|m| m.get("terminal_output")).and_then(Value::as_bool);
        self.terminal_output_meta.store(meta.unwrap_or(false), Ordering::Relaxed);
        let compaction = caps.session.as_ref().is_some_and(|s| s.compaction.is_some());
        self.compaction.store(compaction, Ordering::Relaxed);
        let form = caps.elicitation.as_ref().is_some_and(|e| e.form.is_some());
        self.elicitation_form.store(form, Ordering::Relaxed);
        self.subagents.store(caps.subagents.is_some(), Ordering::Relaxed);
    }

    pub fn subagents(&self) -> bool {
        self.subagents.load(Ordering::Relaxed)
    }

    pub fn compaction(&self) -> bool {
        self.compaction.load(Ordering::Relaxed)
    }

    pub fn terminal(&self) -> bool {
        self.terminal.load(Ordering::Relaxed)
    }

    pub fn terminal_output_meta(&self) -> bool {
        self.terminal_output_meta.load(Ordering::Relaxed)
    }
}

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
    pub(super) fn new(handle: SessionHandle, settings: &SessionSettings) -> Self {
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
    pub fn options(&self, config: &Config) -> Vec<SessionConfigOption> {
        options::config_options(config, &self.model, &self.models_used, self.mode, self.reasoning)
    }
}

/// Whether reopening a stored session replays it (`session/load`) or not (`session/resume`, and
/// `session/new` naming a stored `_meta.sessionKey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reopen {
    Load,
    Resume,
    New,
}

/// A new session's id, as `session/new` picks one (`sess_` and 32 hex digits: `store::made_up`).
pub fn new_session_id() -> String {
    format!("sess_{}", uuid::Uuid::new_v4().simple())
}

pub(super) fn session_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(code::RESOURCE_NOT_FOUND, format!("session not found: {id}")).with_data(json!({ "sessionId": id }))
}
