//! What surfaces ask of a session actor (`Op`).

use crate::config::ModelRef;
use crate::history::input::UserBlock;
use crate::runtime::event::TurnOutcome;
pub use crate::settings::Mode;
use crate::settings::ReasoningEffort;

/// Identifies one prompt turn within the process.
pub type TurnId = u64;

#[derive(Debug)]
pub enum Op {
    /// Run a turn; queued behind the running one, if any. `done` gets how it ended, after every
    /// event of the turn was emitted (dropped unsent only if the actor itself failed).
    Prompt { turn: TurnId, input: Vec<UserBlock>, done: tokio::sync::oneshot::Sender<TurnOutcome> },
    /// Cancel one turn, running or queued.
    CancelTurn(TurnId),
    /// Cancel the running turn and every queued one (`session/cancel`).
    Cancel,
    /// Takes effect at once, also for the running turn's next tool call.
    SetMode(Mode),
    /// Takes effect from the next turn.
    SetModel(ModelRef),
    /// Takes effect from the next turn; `None` is the provider's default.
    SetReasoning(Option<ReasoningEffort>),
    /// Posts `text` into the conversation from outside a turn (the gateway's `chat.inject`): shown
    /// as an assistant message, seen by the model as a note of what was shown. Applied when no
    /// turn runs (after the running one, before the queued ones); `done` gets the message's id.
    Inject { text: String, done: tokio::sync::oneshot::Sender<String> },
    /// Adds `text` to the running model turn at its next tool boundary (calls of the reply not
    /// yet started are skipped, so the model reads the new message before going on). `done` gets
    /// `true` once the model will read it, `false` if no turn took it (none was running, or it
    /// ended first): the sender then queues it as a follow-up.
    Steer { text: String, done: tokio::sync::oneshot::Sender<bool> },
    /// Names the session: its title (and label) from now on.
    SetTitle(String),
    /// Answered once every op sent before it has taken effect and is on disk (a surface answers
    /// a settings change only then, so a `kill -9` right after cannot lose it).
    Settled(tokio::sync::oneshot::Sender<()>),
    /// Cancel everything and stop the actor.
    Shutdown,
}
