//! The model of a session's history, below both the runtime and the store: the user's content
//! blocks ([`input`]), the conversation the model sees ([`conversation`]), the records a transcript
//! holds ([`record`]), and the fold of those records back into a conversation and what the
//! session showed ([`replay`]). No I/O: the store writes records, the runtime makes them.

pub mod conversation;
pub mod input;
pub mod record;
pub mod replay;

/// Why a turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

/// Where changes to the history are written as they happen (a session's transcript).
pub trait Journal: Send + Sync + std::fmt::Debug {
    fn record(&self, record: &record::Record);
}
