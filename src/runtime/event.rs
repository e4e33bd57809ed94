//! What the runtime reports (`Event`), correlated by session and turn, and the sink surfaces
//! implement to receive it. Surfaces (ACP, `acp run`, the gateway) only translate these into
//! their own medium. Events are delivered in order, by the task that produced them, so a surface
//! can rely on "everything of a turn before its `TurnEnded`" and on tool-call order.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::op::TurnId;
use crate::providers::{ProviderError, Usage};
use crate::tools::ToolCallState;

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
    /// Reasoning text.
    ThoughtDelta { message_id: Arc<str>, text: String },
    /// A tool call is announced (status pending, with its preview).
    ToolCall(ToolCallState),
    /// The tool call's new full state; surfaces send only what changed.
    ToolCallUpdate(ToolCallState),
    /// More output of a running command, in order, never repeated.
    ToolOutput { call_id: String, text: String },
    /// Context window fill after a model request.
    Usage { used: u64, size: u64 },
    /// The last event of every turn, exactly once.
    TurnEnded(TurnOutcome),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    Stopped { reason: StopReason, usage: Usage },
    Failed { error: TurnError, usage: Usage },
}

/// Why a turn failed, ready to show.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnError {
    /// What failed and what to do about it.
    pub message: String,
    /// A stable, machine-readable kind (`auth`, `rate_limited`, `config`, …).
    pub kind: &'static str,
    /// Whether fixing credentials or configuration is what helps.
    pub needs_setup: bool,
    pub provider: Option<ProviderError>,
}

impl TurnError {
    pub fn config(message: impl Into<String>) -> Self {
        Self { message: message.into(), kind: "config", needs_setup: true, provider: None }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self { message: message.into(), kind: "internal", needs_setup: false, provider: None }
    }

    pub fn from_provider(e: ProviderError) -> Self {
        use crate::providers::ErrorKind;
        Self {
            message: e.user_message(),
            kind: e.kind.as_str(),
            needs_setup: matches!(e.kind, ErrorKind::Auth),
            provider: Some(e),
        }
    }
}

/// Where events go. Implemented by each surface.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);

    /// A burst of events has ended (e.g. everything decoded from one network read): a good moment
    /// to push buffered output out.
    fn flush(&self) {}
}

/// A sink that forwards events into a channel, for surfaces that consume them as a stream.
#[derive(Debug, Clone)]
pub struct ChannelSink(pub mpsc::UnboundedSender<Event>);

impl EventSink for ChannelSink {
    fn emit(&self, event: Event) {
        // If the receiver is gone, nobody is listening anyway.
        let _ = self.0.send(event);
    }
}

/// Stamps events with their session and turn.
#[derive(Clone)]
pub(crate) struct Emitter {
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) session: SessionId,
    pub(crate) turn: TurnId,
}

impl Emitter {
    pub(crate) fn emit(&self, kind: EventKind) {
        self.sink.emit(Event { session: self.session.clone(), turn: self.turn, kind });
    }

    pub(crate) fn flush(&self) {
        self.sink.flush();
    }
}
