//! What surfaces ask of a session actor (`Op`), and the session settings those ops change.

use crate::config::ModelRef;
use crate::providers::{ReasoningEffort, UserPart};

/// Identifies one prompt turn within the process.
pub type TurnId = u64;

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Run a turn; queued behind the running one, if any.
    Prompt {
        turn: TurnId,
        input: Vec<UserPart>,
    },
    /// Cancel one turn, running or queued.
    CancelTurn(TurnId),
    /// Cancel the running turn and every queued one (`session/cancel`).
    Cancel,
    SetMode(Mode),
    /// Takes effect from the next turn.
    SetModel(ModelRef),
    /// Takes effect from the next turn; `None` is the provider's default.
    SetReasoning(Option<ReasoningEffort>),
    /// Cancel everything and stop the actor.
    Shutdown,
}

/// How much the agent may do without asking. Modes govern tool approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every mutating or executing action asks.
    Ask,
    /// Reads inside the workspace are free; writes and commands ask.
    #[default]
    Code,
    /// Nothing inside the workspace asks.
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Ask, Mode::Code, Mode::Auto];

    pub fn id(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Code => "code",
            Self::Auto => "auto",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "Ask",
            Self::Code => "Code",
            Self::Auto => "Auto",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::Ask => "Ask before every edit and every command",
            Self::Code => "Read freely inside the workspace; ask before edits and commands",
            Self::Auto => "Act inside the workspace without asking",
        }
    }

    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }
}
