//! What a session actor reports (`Event`), correlated by session and turn. Surfaces (ACP, `acp
//! run`, the gateway) only translate these into their own medium.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::op::TurnId;
use crate::providers::{ProviderError, Usage};

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

/// Stamps events with their session and turn.
#[derive(Debug, Clone)]
pub struct EventSink {
    pub(crate) tx: mpsc::UnboundedSender<Event>,
    pub(crate) session: SessionId,
    pub(crate) turn: TurnId,
}

impl EventSink {
    pub fn emit(&self, kind: EventKind) {
        // The receiver lives as long as the surface; if it is gone nobody is listening anyway.
        let _ = self.tx.send(Event { session: self.session.clone(), turn: self.turn, kind });
    }
}
