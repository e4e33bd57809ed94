//! One actor per session: a tokio task that owns the session, takes [`Op`]s from a channel and
//! runs one turn at a time, each under its own cancellation token. A prompt that arrives while a
//! turn runs is queued and runs next (FIFO); `Op::Cancel` cancels the running turn and everything
//! queued. Every turn ends with exactly one `TurnEnded` event, in the order the prompts arrived —
//! except slash commands that answer at once: `/help` and `/stop` always, the reports (`/status`,
//! `/usage`, `/context`) when nothing runs or waits. A prompt is read as a command once, when it
//! arrives; what commands do is `commands.rs`, what a model turn does is `turn.rs`.
//!
//! Persistence (all of it through the session's [`SessionLog`], `persist.rs`): a new session is
//! stored before the surface hears of it, so it can be loaded or resumed at once, here or in
//! another process; it is listed once the model has answered in it. Each turn's end is written
//! before its `TurnEnded`, so a client that got its answer can reload the session and find it all.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::commands::{self, Command, Parsed, Ran};
use super::compaction::Accounting;
use super::event::{Emitter, EventKind, SessionId, StopReason, TurnError, TurnOutcome};
use super::mcp::{McpSet, SessionCommand};
use super::op::{Op, TurnId, TurnOptions};
use super::persist::SessionLog;
use super::turn::{self, TurnContext, TurnResult, new_message_id};
use super::{LiveState, SessionSettings, Shared};
use crate::history::conversation::Conversation;
use crate::history::input::{self, UserBlock};
use crate::providers::{Message, Usage};
use crate::store::transcript::Transcript;

/// The surface's handle to a session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    id: SessionId,
    ops: mpsc::UnboundedSender<Op>,
    closed: CancellationToken,
    commands: tokio::sync::watch::Receiver<Vec<SessionCommand>>,
}

impl SessionHandle {
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
        let (tx, rx) = tokio::sync::oneshot::channel();
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
        let (done, ended) = tokio::sync::oneshot::channel();
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
        let (done, posted) = tokio::sync::oneshot::channel();
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

/// What a session reopened from the store starts with.
pub(crate) struct Restored {
    pub conversation: Conversation,
    pub transcript: Arc<Transcript>,
    pub usage: Usage,
    pub context_tokens: Option<u64>,
    pub turns: u64,
    pub title: Option<String>,
    pub prompted: bool,
}

/// Where a session's history lives.
pub(crate) enum Stored {
    /// In memory only: the store cannot be used.
    Memory,
    /// Just stored, empty.
    New(Arc<Transcript>),
    /// Just begun, empty: its index row is stored later (see `persist`).
    Unindexed(Arc<Transcript>, crate::store::SessionRow),
    Restored(Restored),
}

/// Where a session's events go and what its tools reach the outside through: the surface's, or
/// for a subagent its parent's, relabelled (`subagents.rs`).
#[derive(Clone)]
pub(crate) struct Outlet {
    pub(crate) sink: Arc<dyn crate::runtime::EventSink>,
    pub(crate) host: Arc<dyn crate::tools::host::AnyHost>,
    /// A subagent: it gets no session tools (it cannot spawn in turn).
    pub(crate) child: bool,
}

impl Outlet {
    pub(crate) fn of(shared: &Shared) -> Self {
        Self { sink: shared.sink.clone(), host: shared.host().clone(), child: false }
    }
}

pub(crate) fn spawn(
    id: SessionId,
    settings: SessionSettings,
    shared: Arc<Shared>,
    stored: Stored,
    outlet: Outlet,
    system_ahead: Option<turn::SystemAhead>,
) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let rules = crate::config::rules::saved_rules(&shared.config().home, &settings.cwd);
    let network = shared.config().sandbox.network;
    let live = Arc::new(LiveState::new(settings.mode, rules, network));
    let (log, restored) = match stored {
        Stored::Memory => (Arc::new(SessionLog::new(id.clone(), None, shared.clone())), None),
        Stored::New(t) => (Arc::new(SessionLog::new(id.clone(), Some(t), shared.clone())), None),
        Stored::Unindexed(t, row) => (Arc::new(SessionLog::unindexed(id.clone(), t, shared.clone(), row)), None),
        Stored::Restored(r) => {
            (Arc::new(SessionLog::new(id.clone(), Some(r.transcript.clone()), shared.clone())), Some(r))
        }
    };
    let mcp = McpSet::start(&shared, &settings);
    let commands = mcp.commands();
    let mut session = Session {
        id: id.clone(),
        mcp,
        settings,
        live,
        shared,
        conversation: Conversation::default(),
        accounting: Accounting::default(),
        log: log.clone(),
        prompted: false,
        title: None,
        unsaved: Unsaved::default(),
        usage: Usage::default(),
        context_tokens: None,
        turns: 0,
        outlet,
        system_ahead,
    };
    if let Some(r) = restored {
        session.conversation = r.conversation;
        session.usage = r.usage;
        session.context_tokens = r.context_tokens;
        session.turns = r.turns;
        session.title = r.title;
        session.prompted = r.prompted;
    }
    if log.is_saved() {
        session.conversation.set_journal(Some(log));
    }
    let actor = Actor {
        session,
        queue: VecDeque::new(),
        waiting: HashMap::new(),
        cancelled: Vec::new(),
        stops: Vec::new(),
        injects: VecDeque::new(),
        steers: Arc::default(),
    };
    let closed = CancellationToken::new();
    let guard = closed.clone().drop_guard();
    let handle = SessionHandle { id: id.clone(), ops: tx, closed, commands };
    let registry = actor.session.shared.clone();
    crate::sync::lock(&registry.sessions).insert(id.to_string(), handle.clone());
    tokio::spawn(async move {
        actor.run(rx).await;
        crate::sync::lock(&registry.sessions).remove(&*id);
        drop(guard);
    });
    handle
}

/// What a session's index row still lacks.
#[derive(Default)]
struct Unsaved {
    title: Option<String>,
    prompted: bool,
}

/// A session's state: what its turns and commands read and change.
pub(super) struct Session {
    pub(super) id: SessionId,
    pub(super) settings: SessionSettings,
    pub(super) live: Arc<LiveState>,
    pub(super) shared: Arc<Shared>,
    pub(super) conversation: Conversation,
    pub(super) accounting: Accounting,
    /// Its MCP servers.
    pub(super) mcp: Arc<McpSet>,
    /// Where everything the session saves goes.
    pub(super) log: Arc<SessionLog>,
    /// Whether the model ever answered in this session (then it is listed).
    prompted: bool,
    title: Option<String>,
    /// What the index does not hold yet, written with the end of the running turn (one write
    /// instead of three on the way to the model and back).
    unsaved: Unsaved,
    /// Summed over the session's turns.
    pub(super) usage: Usage,
    pub(super) context_tokens: Option<u64>,
    /// The session's turns so far (model turns and the commands that change it), the number the
    /// transcript gives each.
    pub(super) turns: u64,
    /// Where its events go; what its tools reach.
    pub(super) outlet: Outlet,
    /// Its first turn's system prompt, built ahead (`acp run`'s session).
    system_ahead: Option<turn::SystemAhead>,
}

impl Session {
    /// An emitter for `turn`; `recorded`: what it shows is saved for a reloaded session.
    pub(super) fn emitter(&self, turn: TurnId, recorded: bool) -> Emitter {
        Emitter {
            sink: self.outlet.sink.clone(),
            session: self.id.clone(),
            turn,
            log: recorded.then(|| self.log.clone() as Arc<dyn super::event::Recorder>),
        }
    }

    /// Starts the session's next turn with `input`; returns its number.
    pub(super) fn begin_turn(&mut self, input: &[UserBlock]) -> u64 {
        self.conversation.begin_turn();
        self.turns = self.turns.saturating_add(1);
        self.log.prompt(self.turns, input);
        self.turns
    }

    /// The model answered for the first time: the session is listed from now on (one whose turns
    /// all failed before any answer — no key, a provider down — is not).
    fn mark_prompted(&mut self) {
        if !self.prompted {
            self.prompted = true;
            self.log.prompted();
        }
    }

    /// [`Self::mark_prompted`] by a turn: saved with the turn's end.
    fn mark_prompted_by_turn(&mut self) {
        if !self.prompted {
            self.prompted = true;
            self.unsaved.prompted = true;
        }
    }

    /// A message posted from outside a turn: shown as the assistant's, and in the model's context
    /// as a note of what the user was shown (the model did not write it, and a conversation may
    /// not start with an assistant message on every API).
    fn inject(&mut self, text: &str) -> String {
        let id = new_message_id().to_string();
        self.log.posted(&id, text);
        self.conversation.push(Message::User(vec![crate::providers::UserPart::Text(format!(
            "[Posted to this conversation from outside it, and shown to the user as your message:]\n\n{text}"
        ))]));
        self.mark_prompted();
        id
    }

    fn set_title(&mut self, turn: TurnId, title: String) {
        self.log.title(&title);
        self.unsaved.title = None;
        self.title = Some(title.clone());
        self.emitter(turn, false).emit(EventKind::Title(title));
    }

    /// The title a turn's prompt gives a session that has none: shown now, saved with the turn's
    /// end (an unlisted session until then; reopened before that, it is worked out again).
    fn set_title_by_turn(&mut self, turn: TurnId, title: String) {
        self.unsaved.title = Some(title.clone());
        self.title = Some(title.clone());
        self.emitter(turn, false).emit(EventKind::Title(title));
    }

    /// The context window of the session's model, if it is known.
    pub(super) fn context_window(&self) -> Option<u64> {
        let config = self.shared.config();
        let (model, provider) = config.resolve_model(&self.settings.model.to_string()).ok()?;
        Some(provider.model(&model.model).context_window)
    }
}

/// A prompt waiting for its turn, read as a command (or not) when it arrived.
struct Queued {
    turn: TurnId,
    input: Vec<UserBlock>,
    command: Option<Command>,
    options: TurnOptions,
}

struct Running {
    turn: TurnId,
    /// The session's own number for the turn.
    seq: u64,
    cancel: CancellationToken,
    task: JoinHandle<TurnResult>,
    /// A model turn (messages can be steered into it), not a command's job.
    model: bool,
}

struct Actor {
    session: Session,
    queue: VecDeque<Queued>,
    /// Where each prompt's outcome goes, by turn.
    waiting: HashMap<TurnId, oneshot::Sender<TurnOutcome>>,
    /// Queued turns cancelled while another ran; they end right after it, keeping the order.
    cancelled: Vec<TurnId>,
    /// `/stop`s waiting for the turn they stopped to end.
    stops: Vec<TurnId>,
    /// Messages to post once no turn runs.
    injects: VecDeque<(String, oneshot::Sender<String>)>,
    /// Messages steered into the running model turn.
    steers: Arc<super::tool_calls::Steers>,
}

enum Wake {
    Op(Option<Op>),
    Done(Box<Result<TurnResult, JoinError>>),
}

impl Actor {
    async fn run(mut self, mut ops: mpsc::UnboundedReceiver<Op>) {
        let mut running: Option<Running> = None;
        loop {
            while running.is_none() {
                if let Some((text, done)) = self.injects.pop_front() {
                    let _ = done.send(self.session.inject(&text));
                } else if let Some(queued) = self.queue.pop_front() {
                    running = self.start(queued);
                } else {
                    break;
                }
            }
            let wake = match running.as_mut() {
                Some(r) => tokio::select! {
                    op = ops.recv() => Wake::Op(op),
                    done = &mut r.task => Wake::Done(Box::new(done)),
                },
                None => Wake::Op(ops.recv().await),
            };
            let op = match wake {
                Wake::Done(done) => {
                    if let Some(r) = running.take() {
                        self.session.log.indexed().await;
                        self.finish(r, *done);
                    }
                    continue;
                }
                Wake::Op(op) => op,
            };
            // A new session's index row may wait still (see `persist`): only a prompt for the
            // model (it answers later) and a cancellation go ahead of it.
            let ahead = |op: &Option<Op>| match op {
                Some(Op::Prompt { input, .. }) => matches!(commands::parse(input), Parsed::NotACommand),
                Some(Op::CancelTurn(_) | Op::Cancel) => true,
                _ => false,
            };
            if self.session.log.row_waits() && !ahead(&op) {
                self.session.log.indexed().await;
            }
            match op {
                Some(Op::Prompt { turn, input, options, done }) => {
                    self.waiting.insert(turn, done);
                    self.arrived(turn, input, options, running.as_ref());
                }
                Some(Op::CancelTurn(turn)) => match running.as_ref() {
                    Some(r) if r.turn == turn => r.cancel.cancel(),
                    _ => {
                        if let Some(pos) = self.queue.iter().position(|q| q.turn == turn) {
                            self.queue.remove(pos);
                            self.end_cancelled(turn);
                        }
                    }
                },
                Some(Op::Cancel) => self.cancel_all(running.as_ref()),
                Some(Op::SetMode(mode)) => {
                    self.session.settings.mode = mode;
                    self.session.live.set_mode(mode);
                    self.session.log.settings(&self.session.settings);
                }
                Some(Op::SetModel(model)) => {
                    self.session.settings.model = model;
                    self.session.log.settings(&self.session.settings);
                }
                Some(Op::SetReasoning(level)) => {
                    self.session.settings.reasoning = level;
                    self.session.log.settings(&self.session.settings);
                }
                Some(Op::Inject { text, done }) => self.injects.push_back((text, done)),
                Some(Op::Steer { text, done }) => match running.as_ref() {
                    Some(r) if r.model && !r.cancel.is_cancelled() => self.steers.add(text, done),
                    _ => {
                        let _ = done.send(false);
                    }
                },
                Some(Op::SetTitle(title)) => self.session.set_title(0, title),
                Some(Op::Settled(done)) => {
                    let _ = done.send(());
                }
                Some(Op::Shutdown) | None => {
                    self.cancel_all(running.as_ref());
                    if let Some(mut r) = running.take() {
                        let done = (&mut r.task).await;
                        self.finish(r, done);
                    }
                    for turn in std::mem::take(&mut self.cancelled) {
                        self.end_cancelled(turn);
                    }
                    self.session.log.flush();
                    tracing::debug!(session = %self.session.id, "session closed");
                    return;
                }
            }
        }
    }

    /// A prompt arrived: read it as a command once; answer it now or queue it.
    fn arrived(&mut self, turn: TurnId, input: Vec<UserBlock>, options: TurnOptions, running: Option<&Running>) {
        let command = match commands::parse(&input) {
            Parsed::NotACommand => None,
            Parsed::BadArgs(text) => return self.answer(turn, text),
            Parsed::Command(Command::Stop) => {
                return match running {
                    Some(r) => {
                        self.cancel_all(Some(r));
                        self.stops.push(turn);
                    }
                    None => self.answer(turn, "Nothing is running.".into()),
                };
            }
            Parsed::Command(c) => Some(c),
        };
        // Reports answer at once when the session is idle; behind running or queued prompts they
        // wait for them, so their figures include those turns. `/help` and `/mcp` (the servers'
        // state now, e.g. while a turn waits for one) never wait.
        let idle = running.is_none() && self.queue.is_empty();
        match command {
            Some(c)
                if c.is_immediate() && (matches!(c, Command::Help | Command::Mcp { .. } | Command::Skills) || idle) =>
            {
                let text = commands::report(&self.session, &c);
                self.answer(turn, text);
            }
            command => self.queue.push_back(Queued { turn, input, command, options }),
        }
    }

    /// Starts a queued prompt: a model turn, or a command (most finish at once; `/compact` runs).
    fn start(&mut self, Queued { turn, input, command, options }: Queued) -> Option<Running> {
        if let Some(command) = command {
            return match commands::run(&mut self.session, turn, &input, command) {
                Ran::Answer(text) => {
                    self.answer(turn, text);
                    None
                }
                Ran::Done { seq } => {
                    let outcome = TurnOutcome::Stopped { reason: StopReason::EndTurn, usage: Usage::default() };
                    self.end_turn(turn, seq, outcome, None);
                    None
                }
                Ran::Job { seq, cancel, task } => Some(Running { turn, seq, cancel, task, model: false }),
            };
        }
        // Directives among the words hold for this turn only, and the model never reads them.
        let read = if options.from_agent {
            Ok((input, self.session.settings.clone()))
        } else {
            commands::inline(input, &self.session.shared.config(), &self.session.settings)
        };
        let (input, settings) = match read {
            Ok(taken) => taken,
            Err(answer) => {
                self.answer(turn, answer);
                return None;
            }
        };
        let session = &mut self.session;
        let seq = session.begin_turn(&input);
        if session.title.is_none()
            && let Some(title) = input::title_of(&input)
        {
            session.set_title_by_turn(turn, title);
        }
        session.conversation.push(Message::User(input::to_model(&input)));
        let cancel = CancellationToken::new();
        let ctx = TurnContext {
            shared: session.shared.clone(),
            system: session.system_ahead.take().and_then(|ahead| ahead.take_for(&settings)),
            events: session.emitter(turn, true),
            settings,
            live: session.live.clone(),
            conversation: session.conversation.clone(),
            accounting: session.accounting,
            mcp: session.mcp.clone(),
            steers: self.steers.clone(),
            outlet: session.outlet.clone(),
            options,
        };
        let task = tokio::spawn(turn::run(ctx, cancel.clone()));
        Some(Running { turn, seq, cancel, task, model: true })
    }

    fn finish(&mut self, r: Running, done: Result<TurnResult, JoinError>) {
        self.steers.refuse_all();
        let session = &mut self.session;
        let (outcome, context) = match done {
            Ok(result) => {
                session.conversation = result.conversation;
                session.accounting = result.accounting;
                if session.conversation.turn_messages().iter().any(|m| matches!(m, Message::Assistant(_))) {
                    session.mark_prompted_by_turn();
                }
                (result.outcome, result.context)
            }
            Err(e) => {
                tracing::error!(session = %session.id, turn = r.turn, error = %e, "turn task failed");
                session.conversation.discard_turn();
                let error = TurnError::internal("the turn stopped unexpectedly (an internal error); please try again");
                (TurnOutcome::Failed { error, usage: Usage::default() }, None)
            }
        };
        self.end_turn(r.turn, r.seq, outcome, context);
        for turn in std::mem::take(&mut self.cancelled) {
            self.end_cancelled(turn);
        }
        for turn in std::mem::take(&mut self.stops) {
            self.answer(turn, "Stopped.".into());
        }
    }

    /// Records the end of a turn (before telling the surface, so an answered prompt is on disk).
    fn end_turn(&mut self, turn: TurnId, seq: u64, outcome: TurnOutcome, context: Option<u64>) {
        let usage = match &outcome {
            TurnOutcome::Stopped { usage, .. } | TurnOutcome::Failed { usage, .. } => *usage,
        };
        self.session.usage = self.session.usage.plus(usage);
        if context.is_some() {
            self.session.context_tokens = context;
        }
        let Unsaved { title, prompted } = std::mem::take(&mut self.session.unsaved);
        self.session.log.turn_ended(seq, &outcome, context, title.as_deref(), prompted);
        self.ended(turn, outcome);
    }

    /// The end of a turn: the last event of it, then the outcome to whoever sent the prompt.
    fn ended(&mut self, turn: TurnId, outcome: TurnOutcome) {
        let events = self.session.emitter(turn, false);
        events.emit(EventKind::TurnEnded(outcome.clone()));
        events.flush();
        if let Some(done) = self.waiting.remove(&turn) {
            let _ = done.send(outcome);
        }
    }

    fn cancel_all(&mut self, running: Option<&Running>) {
        let queued: Vec<TurnId> = self.queue.drain(..).map(|q| q.turn).collect();
        match running {
            Some(r) => {
                r.cancel.cancel();
                self.cancelled.extend(queued);
            }
            None => queued.into_iter().for_each(|t| self.end_cancelled(t)),
        }
    }

    fn end_cancelled(&mut self, turn: TurnId) {
        let outcome = TurnOutcome::Stopped { reason: StopReason::Cancelled, usage: Usage::default() };
        self.ended(turn, outcome);
    }

    /// Answers a prompt with text at once, without touching the conversation or the transcript.
    fn answer(&mut self, turn: TurnId, text: String) {
        self.session.emitter(turn, false).emit(EventKind::TextDelta { message_id: new_message_id(), text });
        self.ended(turn, TurnOutcome::Stopped { reason: StopReason::EndTurn, usage: Usage::default() });
    }
}
