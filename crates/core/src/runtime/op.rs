//! What surfaces ask of a session actor (`Op`).

use crate::config::ModelRef;
use crate::history::input::UserBlock;
use crate::runtime::event::TurnOutcome;
pub use crate::settings::Mode;
use crate::settings::ReasoningEffort;

pub use super::event::TurnId;

/// How one prompt's turn runs beyond the session's settings: what the surface that sent it asks.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// The turn waits for a permit of this lane before it starts (the gateway's
    /// `max_concurrent_runs`), holding it until it ends; cancelled while waiting, it ends
    /// `cancelled` without reaching the model.
    pub lane: Option<std::sync::Arc<Lane>>,
    /// The most its tool calls (and the subagents it spawns) get, whatever the session's mode: a
    /// channel run started by someone who is not an owner runs as `ask`.
    pub mode_cap: Option<Mode>,
    /// Model requests left to the turns that share this budget (the subagents one turn started);
    /// at none, a turn stops as at `max_turn_requests`.
    pub request_budget: Option<std::sync::Arc<std::sync::atomic::AtomicU32>>,
    /// The prompt is another agent's words (a subagent's task, result or message): no directive in
    /// it (`/think`, `/model` among other words) is read; only the user's own prompts set those.
    pub from_agent: bool,
}

/// Turns running at once, at most: a turn takes a place before it starts and gives it back when
/// it ends; the others wait, in order.
#[derive(Debug)]
pub struct Lane {
    places: std::sync::Arc<tokio::sync::Semaphore>,
    size: usize,
    waiting: std::sync::atomic::AtomicUsize,
}

impl Lane {
    pub fn new(size: usize) -> Self {
        Self { places: std::sync::Arc::new(tokio::sync::Semaphore::new(size)), size, waiting: 0.into() }
    }

    /// A place, once one is free.
    pub async fn enter(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        /// Counts a waiting turn while it waits, also one whose wait is given up (dropped).
        struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.waiting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _waiting = Waiting(&self.waiting);
        self.places.clone().acquire_owned().await.ok()
    }

    /// Turns running in it now.
    pub fn running(&self) -> usize {
        self.size - self.places.available_permits()
    }

    /// Turns waiting for a place.
    pub fn waiting(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[derive(Debug)]
pub enum Op {
    /// Run a turn; queued behind the running one, if any. `done` gets how it ended, after every
    /// event of the turn was emitted (dropped unsent only if the actor itself failed).
    Prompt {
        turn: TurnId,
        input: Vec<UserBlock>,
        options: TurnOptions,
        done: tokio::sync::oneshot::Sender<TurnOutcome>,
    },
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
