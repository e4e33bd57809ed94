//! What the runtime reports (`Event`), correlated by session and turn, and the sink surfaces
//! implement to receive it. Surfaces (ACP, `acp run`, the gateway) only translate these into
//! their own medium. Events are delivered in order, by the task that produced them, so a surface
//! can rely on "everything of a turn before its `TurnEnded`" and on tool-call order.

use std::sync::Arc;

/// Identifies one prompt turn within the process.
pub type TurnId = u64;

/// Where an emitter hands what a reloaded session must show: the session's log.
pub(crate) trait Recorder: Send + Sync {
    /// A turn's event, as the transcript keeps what it shows.
    fn shown(self: Arc<Self>, kind: &EventKind);
    /// Writes the merged text that is due.
    fn flush_due(&self);
}
use crate::config::ModelRef;
pub use crate::history::StopReason;
use crate::providers::{ProviderError, Usage};
use crate::settings::Mode;
use crate::settings::ReasoningEffort;
use crate::tools::ToolCallState;
use crate::tools::plan::PlanEntry;

pub type SessionId = Arc<str>;

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub session: SessionId,
    pub turn: TurnId,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// Reply text; chunks of one message share `message_id`.
    TextDelta { message_id: Arc<str>, text: String },
    /// acp's own words to the user about the turn, not the model's (an MCP server is not
    /// available): shown apart from the reply, never saved, never sent to the model.
    Notice(String),
    /// Reasoning text.
    ThoughtDelta { message_id: Arc<str>, text: String },
    /// A tool call is announced (status pending, with its preview).
    ToolCall(ToolCallState),
    /// The tool call's new full state; surfaces send only what changed.
    ToolCallUpdate(ToolCallState),
    /// More output of a running command, in order, never repeated.
    ToolOutput { call_id: String, text: String },
    /// The agent's plan: the complete list of entries, replacing the previous one.
    Plan(Vec<PlanEntry>),
    /// Context window fill after a model request.
    Usage { used: u64, size: u64 },
    /// The conversation was (or is being) summarised to fit the context window.
    Compaction(CompactionEvent),
    /// Another model than the session's answers this turn (said once a turn; never saved, never
    /// sent to the model).
    Failover(Failover),
    /// The session's model, mode or reasoning changed from inside (a slash command).
    Settings(SettingsChange),
    /// The session has a title now.
    Title(String),
    /// A subagent of this session started, changed state, exchanged a message with it, or ended —
    /// for surfaces that show child sessions themselves ([`EventSink::shows_subagents`]); the
    /// child's own events then follow under its id. Other surfaces see a tool call instead.
    Subagent(SubagentEvent),
    /// The last event of every turn, exactly once.
    TurnEnded(TurnOutcome),
}

/// A turn moved from the session's model to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Failover {
    /// `provider/model` of the session's model, and of the one that answers instead.
    pub from: String,
    pub to: String,
    /// Why: the failure's kind (`overloaded`, `rate_limited`, …).
    pub reason: String,
    /// The sentence for the user.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubagentEvent {
    pub child: SessionId,
    pub change: SubagentChange,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SubagentChange {
    /// The child exists and is at work.
    Started { title: String, description: String, cwd: std::path::PathBuf },
    /// A message between the two sessions, `from` → `to`, shown in both transcripts.
    Message { id: String, from: SessionId, to: SessionId, text: String },
    /// The child waits for the user (a permission question).
    Waiting,
    /// The child is at work again.
    Running,
    /// The child's work ended: how, and why if it failed (`reason` is `None` then).
    Ended { reason: Option<StopReason>, error: Option<String> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompactionEvent {
    /// Unique within the session.
    pub id: String,
    pub phase: CompactionPhase,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CompactionPhase {
    Started,
    Completed { summary: String, tokens_before: u64, tokens_after: u64 },
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SettingsChange {
    pub model: ModelRef,
    pub mode: Mode,
    pub reasoning: Option<ReasoningEffort>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    Stopped { reason: StopReason, usage: Usage },
    Failed { error: TurnError, usage: Usage },
}

/// Why a turn failed, ready to show.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnError {
    /// What failed and what to do about it.
    pub message: String,
    /// A stable, machine-readable kind (`auth`, `rate_limited`, `config`, …).
    pub kind: &'static str,
    /// Whether fixing credentials or configuration is what helps.
    pub needs_setup: bool,
    /// When the model provider failed: which one, its HTTP status and request id, and whether
    /// trying again later may help.
    pub provider: Option<String>,
    pub status: Option<u16>,
    pub request_id: Option<String>,
    pub retryable: bool,
}

impl TurnError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self { message: message.into(), kind, ..Self::default() }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self { needs_setup: true, ..Self::new("config", message) }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("internal", message)
    }

    pub fn from_provider(e: ProviderError) -> Self {
        use crate::providers::ErrorKind;
        Self {
            message: e.user_message(),
            kind: e.kind.as_str(),
            needs_setup: matches!(e.kind, ErrorKind::Auth),
            retryable: e.is_retryable(),
            provider: Some(e.provider),
            status: e.status,
            request_id: e.request_id,
        }
    }
}

/// Where events go. Implemented by each surface.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);

    /// Whether this surface shows a subagent as a session of its own (its events under its id,
    /// [`EventKind::Subagent`] on the parent) rather than as a tool call of its parent.
    fn shows_subagents(&self) -> bool {
        false
    }

    /// Runs `text` as a new turn of idle session `session` that no client asked for (a
    /// subagent's announcement), the surface's own way, so that its clients see it; `false`:
    /// the surface has no way of its own, and the runtime runs it plainly.
    fn wake(&self, session: &SessionId, text: &str) -> bool {
        let _ = (session, text);
        false
    }

    /// A burst of events has ended (e.g. everything decoded from one network read): a good moment
    /// to push buffered output out.
    fn flush(&self) {}
}

/// Stamps events with their session and turn, and hands what a reloaded session must show to the
/// session's log (when the turn is recorded).
#[derive(Clone)]
pub(crate) struct Emitter {
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) session: SessionId,
    pub(crate) turn: TurnId,
    pub(crate) log: Option<Arc<dyn Recorder>>,
}

impl Emitter {
    pub(crate) fn emit(&self, kind: EventKind) {
        if let Some(log) = &self.log {
            log.clone().shown(&kind);
        }
        self.sink.emit(Event { session: self.session.clone(), turn: self.turn, kind });
    }

    /// Pushes buffered output out: to the surface (the user is waiting for it), and to the
    /// transcript when its merged text is due.
    pub(crate) fn flush(&self) {
        self.sink.flush();
        if let Some(log) = &self.log {
            log.flush_due();
        }
    }
}
/// A fresh id for a message the clients are shown (`msg_` and a UUID).
pub(crate) fn new_message_id() -> Arc<str> {
    Arc::from(format!("msg_{}", uuid::Uuid::new_v4().simple()))
}
