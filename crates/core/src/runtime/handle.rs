//! The surface's handle to a session actor: the ops it sends, and what it reads back.

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::event::{SessionId, TurnOutcome};
use super::op::{Op, TurnId, TurnOptions};
use crate::history::input::UserBlock;

/// The surface's handle to a session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    id: SessionId,
    ops: mpsc::UnboundedSender<Op>,
    closed: CancellationToken,
    commands: tokio::sync::watch::Receiver<Vec<SessionCommand>>,
}

impl SessionHandle {
    pub(super) fn new(
        id: SessionId,
        ops: mpsc::UnboundedSender<Op>,
        closed: CancellationToken,
        commands: tokio::sync::watch::Receiver<Vec<SessionCommand>>,
    ) -> Self {
        Self { id, ops, closed, commands }
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The commands it offers beyond the built-in ones (its MCP servers' prompts), as they change.
    pub fn commands(&self) -> tokio::sync::watch::Receiver<Vec<SessionCommand>> {
        self.commands.clone()
    }

    /// Sends an op; false if the actor has stopped.
    pub fn send(&self, op: Op) -> bool {
        self.ops.send(op).is_ok()
    }

    /// Resolves once every op sent so far has taken effect and is on disk (at once if the actor
    /// has stopped).
    pub async fn settled(&self) {
        let (tx, rx) = oneshot::channel();
        if self.send(Op::Settled(tx)) {
            let _ = rx.await;
        }
    }

    /// Queues a prompt as turn `turn`. Resolves to how the turn ended — once every event of the
    /// turn has gone to the sink — or to `None` if the session stopped without ending it (an
    /// internal error).
    pub fn prompt(
        &self,
        turn: TurnId,
        input: Vec<UserBlock>,
    ) -> impl std::future::Future<Output = Option<TurnOutcome>> + Send + 'static {
        self.prompt_with(turn, input, TurnOptions::default())
    }

    /// [`Self::prompt`], the turn run as `options` say.
    pub fn prompt_with(
        &self,
        turn: TurnId,
        input: Vec<UserBlock>,
        options: TurnOptions,
    ) -> impl std::future::Future<Output = Option<TurnOutcome>> + Send + 'static {
        let (done, ended) = oneshot::channel();
        let sent = self.send(Op::Prompt { turn, input, options, done });
        async move {
            if !sent {
                return None;
            }
            ended.await.ok()
        }
    }

    /// Steers `text` into the running turn (see [`Op::Steer`]); resolves to whether it was taken.
    pub fn steer(&self, text: String) -> impl std::future::Future<Output = bool> + Send + use<> {
        let (done, taken) = oneshot::channel();
        let sent = self.send(Op::Steer { text, done });
        async move { sent && taken.await.unwrap_or(false) }
    }

    /// Posts `text` into the conversation (see [`Op::Inject`]); resolves to the message's id once
    /// it is on disk, or `None` if the session stopped first.
    pub fn inject(&self, text: String) -> impl std::future::Future<Output = Option<String>> + Send + 'static {
        let (done, posted) = oneshot::channel();
        let sent = self.send(Op::Inject { text, done });
        async move {
            if !sent {
                return None;
            }
            posted.await.ok()
        }
    }

    /// Whether the actor has stopped.
    pub fn is_stopped(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the actor has stopped, without keeping it alive meanwhile (unlike a clone of
    /// the handle, which it serves until dropped).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.closed.clone().cancelled_owned()
    }

    /// Resolves once the actor has stopped (after `Op::Shutdown`): its transcript is closed.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }
}

/// A command a session offers beyond the built-in ones: an MCP server's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCommand {
    /// Without the slash: `server:prompt`.
    pub name: String,
    pub description: String,
    /// Its arguments, e.g. `city [state]`.
    pub hint: Option<String>,
}
