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

pub(super) mod state;

use super::commands::{self, Command, Parsed, Ran};
use super::compaction::Accounting;
use super::event::new_message_id;
use super::event::{EventKind, SessionId, StopReason, TurnError, TurnOutcome};
use super::handle::SessionHandle;
use super::mcp::McpSet;
use super::op::{Op, TurnId, TurnOptions};
use super::persist::SessionLog;
use super::settings::{LiveState, SessionSettings};
use super::shared::{Outlet, Shared};
use super::turn::{self, TurnContext, TurnResult};
use crate::history::conversation::Conversation;
use crate::history::input::{self, UserBlock};
use crate::providers::{Message, Usage};
use crate::store::transcript::Transcript;
use state::Session;
use state::Unsaved;

/// How long a closing session waits for its `SessionEnd` hooks before it is gone (they go on).
const END_HOOKS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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

pub(crate) fn spawn(
    id: SessionId,
    settings: SessionSettings,
    shared: Arc<Shared>,
    stored: Stored,
    outlet: Outlet,
    system_ahead: Option<turn::SystemAhead>,
    start: Option<&'static str>,
) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = shared.config_for(&id);
    let rules = crate::config::rules::saved_rules(&config.home, &settings.cwd);
    let network = config.sandbox.network;
    let workspace_hooks = crate::hooks::workspace::load(&config.home, &settings.cwd);
    let notices: Vec<String> = workspace_hooks.notice().into_iter().collect();
    let live = Arc::new(LiveState::new(settings.mode, rules, network, workspace_hooks));
    // The user's `SessionStart` hooks, meanwhile (not a subagent's session); the first model turn
    // waits for what they say.
    let ends = start.is_some() && !outlet.child;
    let started = start.filter(|_| !outlet.child).and_then(|source| {
        let place = super::hooks::Place::new(config.clone(), &live, settings.cwd.clone());
        super::hooks::start_later(place, &id, source, false)
    });
    let (log, restored) = match stored {
        Stored::Memory => (Arc::new(SessionLog::new(id.clone(), None, shared.clone())), None),
        Stored::New(t) => (Arc::new(SessionLog::new(id.clone(), Some(t), shared.clone())), None),
        Stored::Unindexed(t, row) => (Arc::new(SessionLog::unindexed(id.clone(), t, shared.clone(), row)), None),
        Stored::Restored(r) => {
            (Arc::new(SessionLog::new(id.clone(), Some(r.transcript.clone()), shared.clone())), Some(r))
        }
    };
    let mcp = McpSet::start(&shared, &settings);
    let lsp = Arc::new(crate::lsp::Servers::new(shared.lsp.clone(), config.clone(), settings.roots()));
    let commands = mcp.commands();
    // The memory index kept current while the session is open (not for `acp run`'s one prompt).
    let memory_watch = {
        let config = shared.config_for(&id);
        let reads = super::turn::memory_use(&config, &id) == super::context::MemoryUse::Private;
        (reads && !shared.head.one_shot()).then(|| crate::memory::Memory::of(&config).watch())
    };
    let mut session = Session {
        id: id.clone(),
        mcp,
        lsp,
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
        _memory_watch: memory_watch,
        started,
        notices,
        ends,
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
    let handle = SessionHandle::new(id.clone(), tx, closed, commands);
    let registry = actor.session.shared.clone();
    crate::sync::lock(&registry.sessions).insert(id.to_string(), handle.clone());
    tokio::spawn(async move {
        actor.run(rx).await;
        crate::sync::lock(&registry.sessions).remove(&*id);
        drop(guard);
    });
    handle
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
                        self.finish(r, *done).await;
                    }
                    continue;
                }
                Wake::Op(op) => op,
            };
            // A new session's index row may wait still (see `persist`): only a prompt for the
            // model (it answers later) and a cancellation go ahead of it.
            if let Some(Op::Prompt { turn, input, options, done }) = op {
                // Another agent's words are never a command (`/network on`, `/hooks allow`).
                let parsed = if options.from_agent { Parsed::NotACommand } else { commands::parse(&input) };
                if !matches!(parsed, Parsed::NotACommand) {
                    self.session.log.indexed().await;
                }
                self.waiting.insert(turn, done);
                self.arrived(turn, input, parsed, options, running.as_ref());
                continue;
            }
            if !matches!(op, Some(Op::CancelTurn(_) | Op::Cancel)) {
                self.session.log.indexed().await;
            }
            match op {
                Some(Op::Prompt { .. }) => {} // taken above
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
                        self.finish(r, done).await;
                    }
                    for turn in std::mem::take(&mut self.cancelled) {
                        self.end_cancelled(turn);
                    }
                    self.session.log.flush();
                    // The user's `SessionEnd` hooks, once everything is saved: waited for a little
                    // (an exiting process gives them that long), then left to finish on their own.
                    if self.session.ends {
                        let session = &self.session;
                        let place = super::hooks::Place::new(
                            session.shared.config_for(&session.id),
                            &session.live,
                            session.settings.cwd.clone(),
                        );
                        let id = session.id.clone();
                        let end = tokio::spawn(async move { super::hooks::session_end(&place, &id, "close").await });
                        let _ = tokio::time::timeout(END_HOOKS_WAIT, end).await;
                    }
                    tracing::debug!(session = %self.session.id, "session closed");
                    return;
                }
            }
        }
    }

    /// A prompt arrived, read as a command (or not) as it did: answer it now or queue it.
    fn arrived(
        &mut self,
        turn: TurnId,
        input: Vec<UserBlock>,
        parsed: Parsed,
        options: TurnOptions,
        running: Option<&Running>,
    ) {
        let command = match parsed {
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
            // Hooks are the user's own commands: only the user sees them or allows a workspace's
            // (not a guest in a chat, whose runs are held to a mode).
            Parsed::Command(Command::Hooks { .. }) if options.mode_cap.is_some() => {
                return self.answer(turn, "Only the owner may see hooks or allow a workspace's.".into());
            }
            Parsed::Command(c) => Some(c),
        };
        // Reports answer at once when the session is idle; behind running or queued prompts they
        // wait for them, so their figures include those turns. `/help` and `/mcp` (the servers'
        // state now, e.g. while a turn waits for one) never wait.
        let idle = running.is_none() && self.queue.is_empty();
        match command {
            Some(c)
                if c.is_immediate()
                    && (matches!(
                        c,
                        Command::Help | Command::Mcp { .. } | Command::Skills | Command::Memory | Command::Hooks { .. }
                    ) || idle) =>
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
                    self.end_turn(turn, seq, outcome, None, None);
                    None
                }
                Ran::Job { seq, cancel, task } => Some(Running { turn, seq, cancel, task, model: false }),
            };
        }
        // Directives among the words hold for this turn only, and the model never reads them.
        let read = if options.from_agent {
            Ok((input, self.session.settings.clone()))
        } else {
            commands::inline(input, &self.session.shared.config_for(&self.session.id), &self.session.settings)
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
            lsp: session.lsp.clone(),
            steers: self.steers.clone(),
            outlet: session.outlet.clone(),
            options,
            start: session.started.clone(),
        };
        for notice in std::mem::take(&mut session.notices) {
            session.emitter(turn, false).emit(EventKind::Notice(notice));
        }
        let task = tokio::spawn(turn::run(ctx, cancel.clone()));
        Some(Running { turn, seq, cancel, task, model: true })
    }

    async fn finish(&mut self, r: Running, done: Result<TurnResult, JoinError>) {
        self.steers.refuse_all();
        let session = &mut self.session;
        let (outcome, context, model) = match done {
            Ok(result) => {
                session.conversation = result.conversation;
                session.accounting = result.accounting;
                // A model turn that kept its prompt took what the `SessionStart` hooks said.
                if r.model && !session.conversation.turn_messages().is_empty() {
                    session.started = None;
                }
                if session.conversation.turn_messages().iter().any(|m| matches!(m, Message::Assistant(_))) {
                    session.mark_prompted_by_turn();
                }
                (result.outcome, result.context, result.model)
            }
            Err(e) => {
                tracing::error!(session = %session.id, turn = r.turn, error = %e, "turn task failed");
                session.conversation.discard_turn();
                let error = TurnError::internal("the turn stopped unexpectedly (an internal error); please try again");
                (TurnOutcome::Failed { error, usage: Usage::default() }, None, None)
            }
        };
        self.record_end(r.seq, outcome.clone(), context, model);
        // A client told the turn ended finds all of it stored, on any gateway.
        self.session.log.synced().await;
        self.ended(r.turn, outcome);
        for turn in std::mem::take(&mut self.cancelled) {
            self.end_cancelled(turn);
        }
        for turn in std::mem::take(&mut self.stops) {
            self.answer(turn, "Stopped.".into());
        }
    }

    /// Records the end of a turn (before telling the surface, so an answered prompt is on disk).
    /// `model`: the model that answered, when the turn asked one.
    fn end_turn(&mut self, turn: TurnId, seq: u64, outcome: TurnOutcome, context: Option<u64>, model: Option<String>) {
        self.record_end(seq, outcome.clone(), context, model);
        self.ended(turn, outcome);
    }

    /// Records the end of turn `seq`: its usage, and its end in the transcript and the index.
    fn record_end(&mut self, seq: u64, outcome: TurnOutcome, context: Option<u64>, model: Option<String>) {
        let usage = match &outcome {
            TurnOutcome::Stopped { usage, .. } | TurnOutcome::Failed { usage, .. } => *usage,
        };
        self.session.usage = self.session.usage.plus(usage);
        if context.is_some() {
            self.session.context_tokens = context;
        }
        let Unsaved { title, prompted } = std::mem::take(&mut self.session.unsaved);
        self.session.log.turn_ended(seq, &outcome, context, model, title.as_deref(), prompted);
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
