//! One actor per session: a tokio task that owns the conversation, takes [`Op`]s from a channel and
//! runs one turn at a time, each under its own cancellation token. A prompt that arrives while a
//! turn runs is queued and runs next (FIFO); `Op::Cancel` cancels the running turn and everything
//! queued. Every turn ends with exactly one `TurnEnded` event, in the order the prompts arrived —
//! except slash commands that answer at once: `/help` and `/stop` always, the reports (`/status`,
//! `/usage`, `/context`) when nothing runs or waits (see `commands.rs`).
//!
//! Persistence: a new session is stored (index row and transcript) before the surface hears of it,
//! so it can be loaded or resumed at once, here or in another process; it is listed once the model
//! has answered in it. The transcript records every prompt, everything shown, every message of the context,
//! settings changes, and the end of each turn — written before the turn's `TurnEnded`, so a client
//! that got its answer can reload the session and find it all.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::commands::{self, Command, Parsed, thousands};
use super::compaction::{self, Accounting, CompactEnv};
use super::context;
use super::event::{Emitter, EventKind, SessionId, SettingsChange, StopReason, TurnError, TurnOutcome};
use super::op::{Op, TurnId};
use super::turn::{self, TurnContext, TurnResult, new_message_id};
use super::{LiveState, SessionSettings, Shared};
use crate::history::conversation::Conversation;
use crate::history::input::{self, UserBlock};
use crate::history::record::Record;
use crate::providers::{Message, Usage};
use crate::store::now_ms;
use crate::store::transcript::Transcript;

/// The surface's handle to a session actor.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    id: SessionId,
    ops: mpsc::UnboundedSender<Op>,
    closed: CancellationToken,
}

impl SessionHandle {
    pub fn id(&self) -> &SessionId {
        &self.id
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
        let (done, ended) = tokio::sync::oneshot::channel();
        let sent = self.send(Op::Prompt { turn, input, done });
        async move {
            if !sent {
                return None;
            }
            ended.await.ok()
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
    Restored(Restored),
}

pub(crate) fn spawn(id: SessionId, settings: SessionSettings, shared: Arc<Shared>, stored: Stored) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let rules = crate::config::rules::saved_rules(&shared.config().home, &settings.cwd);
    let network = shared.config().sandbox.network;
    let live = Arc::new(LiveState::new(settings.mode, rules, network));
    let closed = CancellationToken::new();
    let mut actor = Actor {
        id: id.clone(),
        settings,
        live,
        shared,
        conversation: Conversation::default(),
        accounting: Accounting::default(),
        transcript: None,
        prompted: false,
        title: None,
        usage: Usage::default(),
        context_tokens: None,
        turns: 0,
        queue: VecDeque::new(),
        waiting: HashMap::new(),
        cancelled: Vec::new(),
        stops: Vec::new(),
    };
    match stored {
        Stored::Memory => {}
        Stored::New(t) => {
            actor.conversation.set_journal(Some(t.clone()));
            actor.transcript = Some(t);
        }
        Stored::Restored(r) => {
            actor.conversation = r.conversation;
            actor.conversation.set_journal(Some(r.transcript.clone()));
            actor.transcript = Some(r.transcript);
            actor.usage = r.usage;
            actor.context_tokens = r.context_tokens;
            actor.turns = r.turns;
            actor.title = r.title;
            actor.prompted = r.prompted;
        }
    }
    let guard = closed.clone().drop_guard();
    tokio::spawn(async move {
        actor.run(rx).await;
        drop(guard);
    });
    SessionHandle { id, ops: tx, closed }
}

struct Running {
    turn: TurnId,
    /// The session's own turn number (in the transcript), if recorded.
    seq: Option<u64>,
    cancel: CancellationToken,
    task: JoinHandle<TurnResult>,
}

struct Actor {
    id: SessionId,
    settings: SessionSettings,
    live: Arc<LiveState>,
    shared: Arc<Shared>,
    conversation: Conversation,
    accounting: Accounting,
    /// `None`: the store could not be used; the session lives in memory only.
    transcript: Option<Arc<Transcript>>,
    /// Whether the model ever answered in this session (then it is listed).
    prompted: bool,
    title: Option<String>,
    /// Summed over the session's turns.
    usage: Usage,
    context_tokens: Option<u64>,
    turns: u64,
    queue: VecDeque<(TurnId, Vec<UserBlock>)>,
    /// Where each prompt's outcome goes, by turn.
    waiting: HashMap<TurnId, oneshot::Sender<TurnOutcome>>,
    /// Queued turns cancelled while another ran; they end right after it, keeping the order.
    cancelled: Vec<TurnId>,
    /// `/stop`s waiting for the turn they stopped to end.
    stops: Vec<TurnId>,
}

enum Wake {
    Op(Option<Op>),
    Done(Box<Result<TurnResult, JoinError>>),
}

impl Actor {
    async fn run(mut self, mut ops: mpsc::UnboundedReceiver<Op>) {
        let mut running: Option<Running> = None;
        loop {
            while running.is_none()
                && let Some((turn, input)) = self.queue.pop_front()
            {
                running = self.start(turn, input).await;
            }
            let wake = match running.as_mut() {
                Some(r) => tokio::select! {
                    op = ops.recv() => Wake::Op(op),
                    done = &mut r.task => Wake::Done(Box::new(done)),
                },
                None => Wake::Op(ops.recv().await),
            };
            match wake {
                Wake::Done(done) => {
                    if let Some(r) = running.take() {
                        self.finish(r, *done);
                    }
                }
                Wake::Op(Some(Op::Prompt { turn, input, done })) => {
                    self.waiting.insert(turn, done);
                    match commands::parse(&input) {
                        Parsed::BadArgs(text) => self.answer(turn, text),
                        Parsed::Command(Command::Stop) => match running.as_ref() {
                            Some(r) => {
                                self.cancel_all(Some(r));
                                self.stops.push(turn);
                            }
                            None => self.answer(turn, "Nothing is running.".into()),
                        },
                        // Reports answer at once when the session is idle; behind running or queued
                        // prompts they wait for them, so their figures include those turns.
                        Parsed::Command(c)
                            if c.is_immediate()
                                && (c == Command::Help || (running.is_none() && self.queue.is_empty())) =>
                        {
                            let text = self.report(&c);
                            self.answer(turn, text);
                        }
                        _ => self.queue.push_back((turn, input)),
                    }
                }
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
                    self.settings_changed();
                }
                Wake::Op(Some(Op::SetModel(model))) => {
                    self.settings.model = model;
                    self.settings_changed();
                }
                Wake::Op(Some(Op::SetReasoning(level))) => {
                    self.settings.reasoning = level;
                    self.settings_changed();
                }
                Wake::Op(Some(Op::Settled(done))) => {
                    let _ = done.send(());
                }
                Wake::Op(Some(Op::Shutdown) | None) => {
                    self.cancel_all(running.as_ref());
                    if let Some(mut r) = running.take() {
                        let done = (&mut r.task).await;
                        self.finish(r, done);
                    }
                    for turn in std::mem::take(&mut self.cancelled) {
                        self.end_cancelled(turn);
                    }
                    if let Some(t) = &self.transcript {
                        t.flush();
                    }
                    tracing::debug!(session = %self.id, "session closed");
                    return;
                }
            }
        }
    }

    /// Starts a queued prompt: a model turn, or a command (most finish at once; `/compact` runs).
    async fn start(&mut self, turn: TurnId, input: Vec<UserBlock>) -> Option<Running> {
        let command = match commands::parse(&input) {
            Parsed::Command(c) => Some(c),
            Parsed::BadArgs(text) => {
                self.answer(turn, text);
                return None;
            }
            Parsed::NotACommand => None,
        };
        if let Some(command) = command {
            return self.run_command(turn, input, command).await;
        }

        let seq = self.begin_recorded(&input);
        if self.title.is_none()
            && let Some(title) = input::title_of(&input)
        {
            self.set_title(turn, title);
        }
        self.conversation.push(Message::User(input::to_model(&input)));
        let cancel = CancellationToken::new();
        let ctx = TurnContext {
            shared: self.shared.clone(),
            events: self.emitter(turn, true),
            settings: self.settings.clone(),
            live: self.live.clone(),
            conversation: self.conversation.clone(),
            accounting: self.accounting,
        };
        let task = tokio::spawn(turn::run(ctx, cancel.clone()));
        Some(Running { turn, seq, cancel, task })
    }

    /// Records the start of a turn (when the session is stored); returns its number.
    fn begin_recorded(&mut self, input: &[UserBlock]) -> Option<u64> {
        self.conversation.begin_turn();
        let t = self.transcript.as_ref()?;
        self.turns = self.turns.saturating_add(1);
        t.record(&Record::User {
            turn: self.turns,
            id: new_message_id().to_string(),
            blocks: input.to_vec(),
            at: now_ms(),
        });
        Some(self.turns)
    }

    async fn run_command(&mut self, turn: TurnId, input: Vec<UserBlock>, command: Command) -> Option<Running> {
        if command.is_immediate() {
            let text = self.report(&command);
            self.answer(turn, text);
            return None;
        }
        let seq = self.begin_recorded(&input);
        let events = self.emitter(turn, true);
        let say = |text: String| {
            events.emit(EventKind::TextDelta { message_id: new_message_id(), text });
            events.flush();
        };
        match command {
            Command::Compact { instructions } => {
                let cancel = CancellationToken::new();
                let job = CompactJob {
                    shared: self.shared.clone(),
                    settings: self.settings.clone(),
                    events,
                    cancel: cancel.clone(),
                    conversation: self.conversation.clone(),
                    accounting: self.accounting,
                    instructions,
                };
                let task = tokio::spawn(job.run());
                return Some(Running { turn, seq, cancel, task });
            }
            Command::Model(None) => say(self.model_list()),
            Command::Model(Some(reference)) => match self.shared.config().resolve_model(&reference) {
                Ok((model, _)) => {
                    self.settings.model = model.clone();
                    self.settings_changed_from_inside(turn);
                    say(format!("Model: `{model}`, from the next prompt on."));
                }
                Err(e) => say(format!("{e}\n\n{}", self.model_list())),
            },
            Command::Think(level) => {
                self.settings.reasoning = level;
                self.settings_changed_from_inside(turn);
                say(format!("Thinking: {}.", level.map_or("off (the provider's default)", |l| l.as_str())));
            }
            Command::New { model } => {
                let switched = match model.map(|m| self.shared.config().resolve_model(&m).map(|(r, _)| r)) {
                    None => Ok(None),
                    Some(Ok(model)) => Ok(Some(model)),
                    Some(Err(e)) => Err(e),
                };
                match switched {
                    Err(e) => say(format!("{e}\n\nNothing was changed.")),
                    Ok(model) => {
                        self.clear_context(turn);
                        let mut text = String::from("Started over: the model sees an empty conversation from here on.");
                        if let Some(model) = model {
                            self.settings.model = model.clone();
                            self.settings_changed_from_inside(turn);
                            text.push_str(&format!(" Model: `{model}`."));
                        }
                        say(text);
                    }
                }
            }
            Command::Reset => {
                self.clear_context(turn);
                say("The context is cleared: the model sees an empty conversation from here on.".into());
            }
            Command::Network(on) => {
                if let Some(on) = on {
                    self.live.set_network(on);
                }
                let config = self.shared.config();
                say(format!("Sandbox: {}", crate::sandbox::status(&config, self.live.network())));
            }
            Command::Help | Command::Status | Command::Usage | Command::Context { .. } | Command::Stop => {}
        }
        self.end_turn(turn, seq, TurnOutcome::Stopped { reason: StopReason::EndTurn, usage: Usage::default() }, None);
        None
    }

    fn clear_context(&mut self, turn: TurnId) {
        self.conversation.reset();
        self.accounting.forget_report();
        self.context_tokens = Some(0);
        if let Some(size) = self.context_window() {
            self.emitter(turn, false).emit(EventKind::Usage { used: 0, size });
        }
    }

    fn finish(&mut self, r: Running, done: Result<TurnResult, JoinError>) {
        let (outcome, context) = match done {
            Ok(result) => {
                self.conversation = result.conversation;
                self.accounting = result.accounting;
                if self.conversation.turn_messages().iter().any(|m| matches!(m, Message::Assistant(_))) {
                    self.mark_prompted();
                }
                (result.outcome, result.context)
            }
            Err(e) => {
                tracing::error!(session = %self.id, turn = r.turn, error = %e, "turn task failed");
                self.conversation.discard_turn();
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
    fn end_turn(&mut self, turn: TurnId, seq: Option<u64>, outcome: TurnOutcome, context: Option<u64>) {
        let (stop, error, usage) = match &outcome {
            TurnOutcome::Stopped { reason, usage } => (Some(*reason), None, *usage),
            TurnOutcome::Failed { error, usage } => (None, Some(error.message.clone()), *usage),
        };
        self.usage = self.usage.plus(usage);
        if context.is_some() {
            self.context_tokens = context;
        }
        if let (Some(t), Some(seq)) = (&self.transcript, seq) {
            t.record(&Record::End { turn: seq, stop, error, usage, context, interrupted: false, at: now_ms() });
            // Inline: one small write (WAL, no fsync), in order with the others, done before the
            // surface hears the turn ended.
            if let Some(store) = self.shared.store_if_open()
                && let Err(e) = store.finish_turn(&self.id, usage.input, usage.output, context, None)
            {
                tracing::warn!(session = %self.id, error = %e, "could not update the session index");
            }
        }
        self.ended(turn, outcome);
    }

    /// The end of a turn: the last event of it, then the outcome to whoever sent the prompt.
    fn ended(&mut self, turn: TurnId, outcome: TurnOutcome) {
        let events = self.emitter(turn, false);
        events.emit(EventKind::TurnEnded(outcome.clone()));
        events.flush();
        if let Some(done) = self.waiting.remove(&turn) {
            let _ = done.send(outcome);
        }
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

    fn end_cancelled(&mut self, turn: TurnId) {
        let outcome = TurnOutcome::Stopped { reason: StopReason::Cancelled, usage: Usage::default() };
        self.ended(turn, outcome);
    }

    /// Answers a prompt with text at once, without touching the conversation or the transcript.
    fn answer(&mut self, turn: TurnId, text: String) {
        self.emitter(turn, false).emit(EventKind::TextDelta { message_id: new_message_id(), text });
        self.ended(turn, TurnOutcome::Stopped { reason: StopReason::EndTurn, usage: Usage::default() });
    }

    fn emitter(&self, turn: TurnId, recorded: bool) -> Emitter {
        Emitter {
            sink: self.shared.sink.clone(),
            session: self.id.clone(),
            turn,
            transcript: if recorded { self.transcript.clone() } else { None },
        }
    }

    // ---- persistence ----

    /// The model answered for the first time: the session is listed from now on (one whose turns
    /// all failed before any answer — no key, a provider down — is not).
    fn mark_prompted(&mut self) {
        if self.prompted {
            return;
        }
        self.prompted = true;
        if self.transcript.is_some()
            && let Some(store) = self.shared.store_if_open()
            && let Err(e) = store.mark_prompted(&self.id)
        {
            tracing::warn!(session = %self.id, error = %e, "could not update the session index");
        }
    }

    fn settings_record(&self) -> Record {
        Record::Settings {
            model: self.settings.model.to_string(),
            mode: self.settings.mode,
            reasoning: self.settings.reasoning,
        }
    }

    /// A surface changed a setting: keep it in the transcript and the index.
    fn settings_changed(&self) {
        let Some(t) = &self.transcript else { return };
        t.record(&self.settings_record());
        if let Some(store) = self.shared.store_if_open() {
            let s = &self.settings;
            let reasoning = s.reasoning.map(|r| r.as_str());
            if let Err(e) = store.update_settings(&self.id, &s.model.to_string(), s.mode.id(), reasoning) {
                tracing::warn!(session = %self.id, error = %e, "could not update the session index");
            }
        }
    }

    /// A command changed a setting: also tell the surface.
    fn settings_changed_from_inside(&self, turn: TurnId) {
        self.settings_changed();
        let s = &self.settings;
        self.emitter(turn, false).emit(EventKind::Settings(SettingsChange {
            model: s.model.clone(),
            mode: s.mode,
            reasoning: s.reasoning,
        }));
    }

    fn set_title(&mut self, turn: TurnId, title: String) {
        self.title = Some(title.clone());
        if self.transcript.is_some()
            && let Some(store) = self.shared.store_if_open()
            && let Err(e) = store.set_title(&self.id, &title)
        {
            tracing::warn!(session = %self.id, error = %e, "could not save the session title");
        }
        self.emitter(turn, false).emit(EventKind::Title(title));
    }

    // ---- reports ----

    fn context_window(&self) -> Option<u64> {
        let config = self.shared.config();
        let (model, provider) = config.resolve_model(&self.settings.model.to_string()).ok()?;
        Some(provider.model(&model.model).context_window)
    }

    fn model_list(&self) -> String {
        let config = self.shared.config();
        let current = self.settings.model.to_string();
        let mut out = format!("Current model: `{current}`.\n\nAvailable (switch with `/model provider/model`):\n");
        for (model, name) in config.model_choices() {
            let model = model.to_string();
            let name = if name == model { String::new() } else { format!(" — {name}") };
            let mark = if model == current { " ← current" } else { "" };
            out.push_str(&format!("- `{model}`{name}{mark}\n"));
        }
        out
    }

    /// The system prompt and tool schemas the next request would carry.
    fn request_parts(&self) -> (context::SystemPrompt, Vec<crate::tools::ToolSpec>) {
        let config = self.shared.config();
        (turn::system_prompt(&config, &self.settings), turn::registry(&config).specs())
    }

    fn report(&self, command: &Command) -> String {
        match command {
            Command::Help => commands::help_text(),
            Command::Status => self.status(),
            Command::Usage => self.usage_report(),
            Command::Context { detail } => self.context_report(*detail),
            _ => String::new(),
        }
    }

    fn fill(&self) -> String {
        let (system, tools) = self.request_parts();
        let fixed = turn::fixed_chars(&system.text, &tools);
        let used = self.accounting.estimate(fixed, self.conversation.messages());
        match self.context_window() {
            Some(size) if size > 0 => {
                format!("~{} of {} tokens ({}%)", thousands(used), thousands(size), (used * 100).div_ceil(size))
            }
            _ => format!("~{} tokens", thousands(used)),
        }
    }

    fn status(&self) -> String {
        let s = &self.settings;
        let transcript = match &self.transcript {
            Some(t) => format!("`{}`", t.path().display()),
            None => "not saved (the session store is unavailable; see the log)".into(),
        };
        format!(
            "**Session** `{id}`\n\n\
             - Model: `{model}`\n\
             - Mode: {mode} · Thinking: {thinking}\n\
             - Context: {fill}\n\
             - Tokens: {input} in · {output} out\n\
             - Turns: {turns} · Messages in context: {messages}\n\
             - Working directory: `{cwd}`\n\
             - Sandbox: {sandbox}\n\
             - Transcript: {transcript}\n",
            id = self.id,
            model = s.model,
            mode = s.mode.name(),
            thinking = s.reasoning.map_or("default", |r| r.as_str()),
            fill = self.fill(),
            input = thousands(self.usage.input),
            output = thousands(self.usage.output),
            turns = self.turns,
            messages = self.conversation.len(),
            cwd = s.cwd.display(),
            sandbox = crate::sandbox::status(&self.shared.config(), self.live.network()),
        )
    }

    fn usage_report(&self) -> String {
        let u = &self.usage;
        let mut out = format!(
            "**Usage** (this session)\n\n- Input: {} tokens (cache read {}, cache write {})\n- Output: {} tokens",
            thousands(u.input),
            thousands(u.cache_read),
            thousands(u.cache_write),
            thousands(u.output),
        );
        if let Some(r) = u.reasoning {
            out.push_str(&format!(" (reasoning {})", thousands(r)));
        }
        if u.input > 0 {
            // What prompt caching saved, as the provider reported it.
            let share = (u128::from(u.cache_read) * 100 / u128::from(u.input)).min(100);
            out.push_str(&format!("\n- Read from the prompt cache: {share}% of input"));
        }
        out.push_str(&format!("\n- Total: {} tokens\n- Context now: {}\n", thousands(u.total()), self.fill()));
        out
    }

    fn context_report(&self, detail: bool) -> String {
        let (system, tools) = self.request_parts();
        let per = self.accounting.chars_per_token;
        let tok = |chars: usize| thousands((chars as f64 / per).ceil() as u64);
        let tool_chars: usize =
            tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum();
        let history_chars: usize =
            self.conversation.messages().iter().map(|m| serde_json::to_string(m).map_or(0, |s| s.len())).sum();
        let mut out = format!(
            "**Context**: {fill}\n\n\
             | Part | Characters | ≈ Tokens |\n|---|---:|---:|\n\
             | System prompt | {sys} | {sys_t} |\n\
             | Tool schemas ({n} tools) | {tools} | {tools_t} |\n\
             | Conversation ({m} messages) | {hist} | {hist_t} |\n",
            fill = self.fill(),
            sys = thousands(system.text.len() as u64),
            sys_t = tok(system.text.len()),
            n = tools.len(),
            tools = thousands(tool_chars as u64),
            tools_t = tok(tool_chars),
            m = self.conversation.len(),
            hist = thousands(history_chars as u64),
            hist_t = tok(history_chars),
        );
        out.push_str("\n**Injected files**\n\n");
        if system.files.is_empty() {
            out.push_str("None (no AGENTS.md or CLAUDE.md from the repository root to the working directory).\n");
        }
        for f in &system.files {
            let source = match f.source {
                context::Source::Project => "project",
                context::Source::AgentWorkspace => "agent workspace",
            };
            let size = match f.chars {
                None => "missing".to_owned(),
                Some(c) if f.truncated => {
                    format!("{} of {} chars (truncated)", thousands(f.injected as u64), thousands(c as u64))
                }
                Some(c) => format!("{} chars", thousands(c as u64)),
            };
            out.push_str(&format!("- `{}` ({source}): {size}\n", f.path.display()));
        }
        if detail {
            out.push_str("\n**Tools**\n\n");
            for t in &tools {
                let chars = t.name.len() + t.description.len() + t.parameters.to_string().len();
                out.push_str(&format!("- `{}`: {} chars\n", t.name, thousands(chars as u64)));
            }
            out.push_str("\n**System prompt**\n\n````text\n");
            out.push_str(&system.text);
            out.push_str("\n````\n");
        }
        out
    }
}

/// `/compact`, run like a turn (cancellable, in order with prompts).
struct CompactJob {
    shared: Arc<Shared>,
    settings: SessionSettings,
    events: Emitter,
    cancel: CancellationToken,
    conversation: Conversation,
    accounting: Accounting,
    instructions: Option<String>,
}

impl CompactJob {
    async fn run(mut self) -> TurnResult {
        let (text, context) = match self.compact().await {
            Ok(done) => done,
            Err(e) => (format!("Could not compact the conversation: {}", e.message), None),
        };
        let cancelled = self.cancel.is_cancelled();
        if !cancelled {
            self.events.emit(EventKind::TextDelta { message_id: new_message_id(), text });
        }
        self.events.flush();
        let reason = if cancelled { StopReason::Cancelled } else { StopReason::EndTurn };
        TurnResult {
            conversation: self.conversation,
            accounting: self.accounting,
            outcome: TurnOutcome::Stopped { reason, usage: Usage::default() },
            context,
        }
    }

    /// The text to answer with, and the context's size after.
    async fn compact(&mut self) -> Result<(String, Option<u64>), TurnError> {
        if self.conversation.len() < 2 {
            return Ok(("Nothing to compact yet.".into(), None));
        }
        let config = self.shared.config();
        let (client, model) = self.shared.client_for(&self.settings.model).await?;
        let system = turn::system_prompt(&config, &self.settings);
        let tools = turn::registry(&config).specs();
        let env = CompactEnv {
            client: &client,
            model: &model,
            retry: &config.retry,
            config: &config.compaction,
            cancel: &self.cancel,
            events: &self.events,
            fixed_chars: turn::fixed_chars(&system.text, &tools),
        };
        let done =
            compaction::compact(&env, &mut self.conversation, &mut self.accounting, self.instructions.as_deref())
                .await?;
        self.events.emit(EventKind::Usage { used: done.tokens_after, size: model.context_window });
        let text = format!(
            "Compacted the conversation: ~{} → ~{} tokens ({} messages summarised, {} kept as they were).",
            thousands(done.tokens_before),
            thousands(done.tokens_after),
            done.summarised,
            done.kept
        );
        Ok((text, Some(done.tokens_after)))
    }
}
