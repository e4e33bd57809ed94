//! One actor per session: a tokio task that owns the conversation, takes [`Op`]s from a channel and
//! runs one turn at a time, each under its own cancellation token. A prompt that arrives while a
//! turn runs is queued and runs next (FIFO); `Op::Cancel` cancels the running turn and everything
//! queued. Every turn ends with exactly one `TurnEnded` event, in the order the prompts arrived.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::event::{Emitter, EventKind, SessionId, StopReason, TurnError, TurnOutcome};
use super::op::{Op, TurnId};
use super::turn::{self, TurnContext, TurnResult};
use super::{LiveState, SessionSettings, Shared};
use crate::providers::{Message, Usage, UserPart};

/// The surface's handle to a session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    id: SessionId,
    ops: mpsc::UnboundedSender<Op>,
}

impl SessionHandle {
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Sends an op; false if the actor has stopped.
    pub fn send(&self, op: Op) -> bool {
        self.ops.send(op).is_ok()
    }
}

pub(crate) fn spawn(id: SessionId, settings: SessionSettings, shared: Arc<Shared>) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let rules = crate::config::saved_rules(&shared.config().home, &settings.cwd);
    let live = Arc::new(LiveState::new(settings.mode, rules));
    let actor = Actor {
        id: id.clone(),
        settings,
        live,
        shared,
        history: Vec::new(),
        queue: VecDeque::new(),
        cancelled: Vec::new(),
    };
    tokio::spawn(actor.run(rx));
    SessionHandle { id, ops: tx }
}

struct Running {
    turn: TurnId,
    cancel: CancellationToken,
    task: JoinHandle<TurnResult>,
}

struct Actor {
    id: SessionId,
    settings: SessionSettings,
    live: Arc<LiveState>,
    shared: Arc<Shared>,
    history: Vec<Message>,
    queue: VecDeque<(TurnId, Vec<UserPart>)>,
    /// Queued turns cancelled while another ran; they end right after it, keeping the order.
    cancelled: Vec<TurnId>,
}

enum Wake {
    Op(Option<Op>),
    Done(Result<TurnResult, JoinError>),
}

impl Actor {
    async fn run(mut self, mut ops: mpsc::UnboundedReceiver<Op>) {
        let mut running: Option<Running> = None;
        loop {
            if running.is_none()
                && let Some((turn, input)) = self.queue.pop_front()
            {
                running = Some(self.start(turn, input));
            }
            let wake = match running.as_mut() {
                Some(r) => tokio::select! {
                    op = ops.recv() => Wake::Op(op),
                    done = &mut r.task => Wake::Done(done),
                },
                None => Wake::Op(ops.recv().await),
            };
            match wake {
                Wake::Done(done) => {
                    if let Some(r) = running.take() {
                        self.finish(r.turn, done);
                    }
                }
                Wake::Op(Some(Op::Prompt { turn, input })) => self.queue.push_back((turn, input)),
                Wake::Op(Some(Op::CancelTurn(turn))) => match running.as_ref() {
                    Some(r) if r.turn == turn => r.cancel.cancel(),
                    _ => {
                        if let Some(pos) = self.queue.iter().position(|(t, _)| *t == turn) {
                            self.queue.remove(pos);
                            self.end_cancelled(turn);
                        }
                    }
                },
                Wake::Op(Some(Op::Cancel)) => self.cancel_all(running.as_ref()),
                Wake::Op(Some(Op::SetMode(mode))) => {
                    self.settings.mode = mode;
                    self.live.set_mode(mode);
                }
                Wake::Op(Some(Op::SetModel(model))) => self.settings.model = model,
                Wake::Op(Some(Op::SetReasoning(level))) => self.settings.reasoning = level,
                Wake::Op(Some(Op::Shutdown) | None) => {
                    self.cancel_all(running.as_ref());
                    if let Some(mut r) = running.take() {
                        let done = (&mut r.task).await;
                        self.finish(r.turn, done);
                    }
                    for turn in std::mem::take(&mut self.cancelled) {
                        self.end_cancelled(turn);
                    }
                    tracing::debug!(session = %self.id, "session closed");
                    return;
                }
            }
        }
    }

    fn start(&mut self, turn: TurnId, input: Vec<UserPart>) -> Running {
        let cancel = CancellationToken::new();
        let ctx = TurnContext {
            shared: self.shared.clone(),
            events: self.sink(turn),
            settings: self.settings.clone(),
            live: self.live.clone(),
            history: self.history.clone(),
            input,
        };
        let task = tokio::spawn(turn::run(ctx, cancel.clone()));
        Running { turn, cancel, task }
    }

    fn cancel_all(&mut self, running: Option<&Running>) {
        let queued: Vec<TurnId> = self.queue.drain(..).map(|(t, _)| t).collect();
        match running {
            Some(r) => {
                r.cancel.cancel();
                self.cancelled.extend(queued);
            }
            None => queued.into_iter().for_each(|t| self.end_cancelled(t)),
        }
    }

    fn finish(&mut self, turn: TurnId, done: Result<TurnResult, JoinError>) {
        let outcome = match done {
            Ok(result) => {
                self.history.extend(result.append);
                result.outcome
            }
            Err(e) => {
                tracing::error!(session = %self.id, turn, error = %e, "turn task failed");
                TurnOutcome::Failed {
                    error: TurnError::internal("the turn stopped unexpectedly (an internal error); please try again"),
                    usage: Usage::default(),
                }
            }
        };
        self.sink(turn).emit(EventKind::TurnEnded(outcome));
        for turn in std::mem::take(&mut self.cancelled) {
            self.end_cancelled(turn);
        }
    }

    fn end_cancelled(&self, turn: TurnId) {
        let outcome = TurnOutcome::Stopped { reason: StopReason::Cancelled, usage: Usage::default() };
        self.sink(turn).emit(EventKind::TurnEnded(outcome));
    }

    fn sink(&self, turn: TurnId) -> Emitter {
        Emitter { sink: self.shared.sink.clone(), session: self.id.clone(), turn }
    }
}
