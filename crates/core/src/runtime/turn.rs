//! One turn of the agent loop: send the conversation to the model, stream the reply out as it is
//! assembled, run the tool calls it asks for (`tool_calls.rs`), feed the results back, and repeat
//! until the model stops — or the turn is cancelled, fails, or hits its request limit. Every
//! message goes through the [`Conversation`] (and so into the transcript) as it is added, every tool
//! call paired with its result, so the history stays valid for every wire API. The context is kept
//! inside the window by `compaction.rs` (before each request, and once after an overflow), and old
//! large tool results are pruned from the request.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::compaction::{self, Accounting, AutoCompact, CompactEnv};
use super::context::{self, MemoryUse};
use super::event::{Emitter, EventKind, StopReason, TurnError, TurnOutcome, new_message_id};
use super::mcp::{Expanded, McpSet};
use super::reply::{Received, Reply};
use super::settings::{LiveState, SessionSettings};
use super::shared::Shared;
use super::tool_calls::{self, Call, CallEnv};
use crate::config::{Config, ModelInfo};
use crate::history::conversation::Conversation;
use crate::providers::retry::Failure;
use crate::providers::{AssistantPart, ErrorKind, FinishReason, Message, ModelRequest, ProviderError, Usage};
use crate::tools::Registry;
use crate::tools::ToolSpec;
use crate::tools::policy::ToolPolicy;

pub(crate) struct TurnContext {
    pub shared: Arc<Shared>,
    /// The system prompt, if it is being built already ([`SystemAhead`]).
    pub system: Option<tokio::task::JoinHandle<String>>,
    pub events: Emitter,
    pub settings: SessionSettings,
    pub live: Arc<LiveState>,
    /// The conversation, the prompt already pushed.
    pub conversation: Conversation,
    pub accounting: Accounting,
    pub mcp: Arc<McpSet>,
    pub lsp: Arc<crate::lsp::Servers>,
    pub steers: Arc<tool_calls::Steers>,
    pub outlet: super::shared::Outlet,
    pub options: super::op::TurnOptions,
    /// What the `SessionStart` hooks say (for the session's first model turn).
    pub start: Option<super::hooks::StartSaid>,
}

pub(crate) struct TurnResult {
    pub conversation: Conversation,
    pub accounting: Accounting,
    pub outcome: TurnOutcome,
    /// Tokens in the context after the turn's last model request.
    pub context: Option<u64>,
    /// `provider/model` of the model that answered the turn's last request.
    pub model: Option<String>,
}

/// The tools a session under `config` is offered; `messaging`: the host delivers to chats.
pub(crate) fn registry(config: &Config, host: &dyn crate::tools::host::AnyHost, memory: MemoryUse) -> Registry {
    let policy = ToolPolicy::new(&config.tools.allow, &config.tools.deny);
    let mut registry = Registry::new(&policy);
    if host.can_message() {
        registry = registry.with_messaging(&policy);
    }
    if host.can_schedule() {
        registry = registry.with_scheduling(&policy);
    }
    if memory == MemoryUse::Private {
        registry = registry.with_memory(&policy);
    }
    registry
}

/// What of the memory files session `id` reads: the private ones, unless memory is off or the
/// session is a group chat's or a subagent's ([`crate::memory::private_session`]).
pub(crate) fn memory_use(config: &Config, id: &str) -> MemoryUse {
    if config.memory.enabled && crate::memory::private_session(id) { MemoryUse::Private } else { MemoryUse::None }
}

/// The text parts of the turn's prompt, joined.
fn prompt_text(conversation: &Conversation) -> String {
    match conversation.turn_messages() {
        [prompt @ Message::User(_)] => prompt.text(),
        _ => String::new(),
    }
}

/// Adds `text` to the turn's prompt, as a part of its own.
fn add_to_prompt(conversation: &mut Conversation, text: String) {
    if let [Message::User(parts)] = conversation.turn_messages() {
        let mut parts = parts.clone();
        parts.push(crate::providers::UserPart::Text(text));
        conversation.discard_turn();
        conversation.push(Message::User(parts));
    }
}

/// The text of the turn's prompt when it is text alone and starts with `/`.
fn slash_text(conversation: &Conversation) -> Option<String> {
    match conversation.turn_messages() {
        [Message::User(parts)] => match parts.as_slice() {
            [crate::providers::UserPart::Text(text)] if text.trim_start().starts_with('/') => Some(text.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The system prompt for a session with these settings.
pub(crate) fn system_prompt(config: &Config, settings: &SessionSettings, memory: MemoryUse) -> context::SystemPrompt {
    let agent_dir = config.agent_dir();
    context::build(&context::Inputs {
        cwd: &settings.cwd,
        additional_dirs: &settings.additional_dirs,
        model: &settings.model,
        home: &config.home,
        max_file_chars: config.bootstrap_max_chars,
        skills: Some(&config.skills),
        memory,
        agent_workspace: Some(&agent_dir),
        identity: config.agent_scope.as_ref().and_then(|a| config.agent(&a.id)).and_then(|a| {
            let named = a.identity.name.as_deref().or(a.name.as_deref())?;
            let emoji = a.identity.emoji.as_deref().map(|e| format!(" {e}")).unwrap_or_default();
            Some(format!("You are {named}{emoji}, an AI assistant (agent `{}` of this acp gateway).", a.id))
        }),
    })
}

/// A session's system prompt built ahead of its first turn, on the blocking pool, for the settings
/// the session begins with: for a session whose first prompt follows at once (`acp run`'s), so the
/// files it reads are read while the session is set up rather than on the way to the model.
pub(crate) struct SystemAhead {
    settings: SessionSettings,
    task: tokio::task::JoinHandle<String>,
}

impl SystemAhead {
    pub(crate) fn start(config: &Arc<Config>, settings: &SessionSettings, session: &str) -> Self {
        let (config, for_task) = (config.clone(), settings.clone());
        let memory = memory_use(&config, session);
        let task = tokio::task::spawn_blocking(move || system_prompt(&config, &for_task, memory).text);
        Self { settings: settings.clone(), task }
    }

    /// The prompt being built, if it was begun for `settings` (else it is dropped).
    pub(crate) fn take_for(self, settings: &SessionSettings) -> Option<tokio::task::JoinHandle<String>> {
        if self.settings == *settings {
            Some(self.task)
        } else {
            self.task.abort();
            None
        }
    }
}

/// Characters the system prompt and the tool schemas add to every request.
pub(crate) fn fixed_chars(system: &str, tools: &[ToolSpec]) -> usize {
    system.len()
        + tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum::<usize>()
}

pub(crate) async fn run(ctx: TurnContext, cancel: CancellationToken) -> TurnResult {
    let TurnContext {
        shared,
        system,
        events,
        settings,
        live,
        mut conversation,
        accounting,
        mcp,
        lsp,
        steers,
        outlet,
        options,
        start,
    } = ctx;
    // Its place in the lane first (held until the turn ends); cancelled while it waits, it ends
    // without having reached the model.
    let _permit = match &options.lane {
        Some(lane) => tokio::select! {
            permit = lane.enter() => permit,
            () = cancel.cancelled() => {
                conversation.discard_turn();
                let outcome = TurnOutcome::Stopped { reason: StopReason::Cancelled, usage: Usage::default() };
                return TurnResult { conversation, accounting, outcome, context: None, model: None };
            }
        },
        None => None,
    };
    // `/server:prompt args`: an MCP server's prompt is sent in its place.
    if let Some(text) = slash_text(&conversation) {
        match mcp.expand(&text, &cancel).await {
            Expanded::No => {}
            Expanded::Prompt(parts) => {
                conversation.discard_turn();
                conversation.push(Message::User(parts));
            }
            Expanded::Failed(why) => {
                conversation.discard_turn();
                let reason = if cancel.is_cancelled() {
                    StopReason::Cancelled
                } else {
                    events.emit(EventKind::Notice(why));
                    StopReason::EndTurn
                };
                let outcome = TurnOutcome::Stopped { reason, usage: Usage::default() };
                return TurnResult { conversation, accounting, outcome, context: None, model: None };
            }
        }
    }
    let config = shared.config_for(&events.session);
    let hooks = super::hooks::Place::new(config.clone(), &live, settings.cwd.clone());
    // The prompt's own words, for the `UserPromptSubmit` hooks (not what hooks add to it).
    let words = prompt_text(&conversation);
    // What the `SessionStart` hooks said, with the session's first prompt.
    if let Some(task) = start {
        let said = tokio::select! {
            said = task => said,
            () = cancel.cancelled() => super::hooks::Started::default(),
        };
        for notice in said.notices {
            events.emit(EventKind::Notice(notice));
        }
        if let Some(context) = said.context {
            add_to_prompt(&mut conversation, context);
        }
    }
    // The user's `UserPromptSubmit` hooks (not for another agent's words): a block ends the turn
    // with its reason shown, the prompt never sent; the context they add goes with the prompt.
    if !options.from_agent
        && let Some(verdict) = super::hooks::prompt_submit(&hooks, &events, &cancel, &words).await
    {
        match verdict {
            crate::hooks::Verdict::Block(reason) => {
                conversation.discard_turn();
                events.emit(EventKind::Notice(format!("A hook blocked this prompt: {reason}")));
                // As a refusal is (the prompt leaves the context): a script can tell it from a reply.
                let outcome = TurnOutcome::Stopped { reason: StopReason::Refusal, usage: Usage::default() };
                return TurnResult { conversation, accounting, outcome, context: None, model: None };
            }
            crate::hooks::Verdict::Go(Some(context)) => add_to_prompt(&mut conversation, context),
            _ => {}
        }
    }
    let memory = memory_use(&config, &events.session);
    // The system prompt reads files (instructions, skills): on the blocking pool, meanwhile.
    let system = system.unwrap_or_else(|| {
        let (config, settings) = (config.clone(), settings.clone());
        tokio::task::spawn_blocking(move || system_prompt(&config, &settings, memory).text)
    });
    shared.discovered().await;
    let config = shared.config_for(&events.session);
    let holder = live.clone();
    let router = match super::failover::Router::new(&shared, &config, &settings.model, &holder.held, &events) {
        Ok(router) => router,
        Err(error) => {
            conversation.discard_turn();
            let outcome = TurnOutcome::Failed { error, usage: Usage::default() };
            return TurnResult { conversation, accounting, outcome, context: None, model: None };
        }
    };
    let model = router.primary().clone();
    let mut registry = registry(&config, outlet.host.as_ref(), memory);
    if !outlet.child {
        super::subagents::add_tools(&mut registry, &shared, &events, &settings, &live, options.mode_cap);
    }
    mcp.add_tools(&mut registry, &events, &cancel).await;
    if crate::tools::policy::ToolPolicy::new(&config.tools.allow, &config.tools.deny).allows("lsp") && lsp.available() {
        registry.add(Arc::new(crate::lsp::tool::Lsp(lsp.clone())));
    }
    let system = match system.await {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(error = %e, "building the system prompt failed; building it again");
            system_prompt(&config, &settings, memory).text
        }
    };
    let tools = registry.specs();
    let fixed_chars = fixed_chars(&system, &tools);
    let compact = CompactEnv {
        router: &router,
        model: &model,
        retry: &config.retry,
        config: &config.compaction,
        cancel: &cancel,
        events: &events,
        fixed_chars,
        hooks: &hooks,
        manual: false,
    };
    let calls = CallEnv {
        events: events.clone(),
        settings: settings.clone(),
        live,
        registry: &registry,
        cancel: cancel.clone(),
        config: config.clone(),
        steers,
        host: outlet.host.clone(),
        mode_cap: options.mode_cap,
        memory_only: false,
        hooks: hooks.clone(),
        lsp: Some(lsp),
    };
    let may_flush = memory == MemoryUse::Private && config.memory.flush && config.compaction.auto;
    let mut turn = Turn {
        config: &config,
        router: &router,
        model: &model,
        settings: &settings,
        system: &system,
        tools: &tools,
        events: &events,
        cancel: &cancel,
        compact,
        calls,
        conversation,
        accounting,
        usage: Usage::default(),
        context: None,
        budget: options.request_budget.clone(),
        may_flush,
        stop_hooks: !options.from_agent && !outlet.child,
    };
    let outcome = turn.drive().await;
    let model = router.answered().map(|m| m.to_string());
    TurnResult { conversation: turn.conversation, accounting: turn.accounting, outcome, context: turn.context, model }
}

/// A turn under way: what it uses, and the conversation it grows.
struct Turn<'a> {
    config: &'a Config,
    router: &'a super::failover::Router<'a>,
    model: &'a ModelInfo,
    settings: &'a SessionSettings,
    system: &'a str,
    tools: &'a [ToolSpec],
    events: &'a Emitter,
    cancel: &'a CancellationToken,
    compact: CompactEnv<'a>,
    calls: CallEnv<'a>,
    conversation: Conversation,
    accounting: Accounting,
    /// Summed over the turn's requests.
    usage: Usage,
    /// Tokens in the context after the last request.
    context: Option<u64>,
    /// Model requests left to the turns sharing this budget ([`super::op::TurnOptions`]).
    budget: Option<Arc<std::sync::atomic::AtomicU32>>,
    /// Whether the session saves its memory before a compaction ([`Turn::flush_memory`]).
    may_flush: bool,
    /// Whether the user's `Stop` hooks run when it ends (not for another agent's words).
    stop_hooks: bool,
}

/// The most requests a memory flush makes.
const FLUSH_MAX_REQUESTS: usize = 4;

/// What to do after a reply.
enum Next {
    Stop(TurnOutcome),
    /// The context was compacted after an overflow: send the request again.
    Resend,
    RunTools(Vec<Call>),
}

impl Turn<'_> {
    async fn drive(&mut self) -> TurnOutcome {
        let mut auto = AutoCompact::default();
        // Requests whose tool calls ran.
        let mut answered: u32 = 0;
        // Whether a `Stop` hook made the turn go on already (it may once).
        let mut stop_active = false;
        loop {
            if self.flush_due() && self.flush_memory().await.is_err() {
                return self.stopped(StopReason::Cancelled);
            }
            if auto.before_request(&self.compact, &mut self.conversation, &mut self.accounting).await.is_err() {
                return self.stopped(StopReason::Cancelled);
            }
            if !self.take_budget() {
                return self.budget_spent();
            }
            let (result, reply) = self.request().await;
            let calls = match self.settle(result, reply, answered > 0, &mut auto).await {
                Next::Stop(outcome) => match self.stop_hooks(&outcome, stop_active).await {
                    Some(more) => {
                        stop_active = true;
                        self.conversation.push(Message::User(vec![crate::providers::UserPart::Text(more)]));
                        continue;
                    }
                    None => return outcome,
                },
                Next::Resend => continue,
                Next::RunTools(calls) => calls,
            };
            answered = answered.saturating_add(1);
            if answered >= self.config.max_turn_requests {
                return self.request_limit(calls);
            }
            let mut results = tool_calls::run_all(&self.calls, calls).await;
            // Messages steered in meanwhile: the model reads them with the results.
            for text in self.calls.steers.take() {
                results.push(crate::providers::UserPart::Text(text));
            }
            self.conversation.push(Message::User(results));
            if self.cancel.is_cancelled() {
                return self.stopped(StopReason::Cancelled);
            }
        }
    }

    /// The user's `Stop` hooks, when the model ended the turn itself: what the model is asked
    /// to do before it ends, when a hook blocks the stop (once a turn; see [`super::hooks::stop`]).
    async fn stop_hooks(&self, outcome: &TurnOutcome, active: bool) -> Option<String> {
        if !self.stop_hooks
            || self.cancel.is_cancelled()
            || !matches!(outcome, TurnOutcome::Stopped { reason: StopReason::EndTurn, .. })
        {
            return None;
        }
        let last = match self.conversation.messages().last() {
            Some(reply @ Message::Assistant(_)) => reply.text(),
            _ => String::new(),
        };
        let reason = super::hooks::stop(&self.calls.hooks, self.events, self.cancel, active, &last).await?;
        self.events.emit(EventKind::Notice(format!("A Stop hook asks for more: {reason}")));
        Some(format!("[Stop hook] Before you finish: {reason}"))
    }

    fn stopped(&self, reason: StopReason) -> TurnOutcome {
        TurnOutcome::Stopped { reason, usage: self.usage }
    }

    /// Sends the conversation (old large tool results pruned) and streams the reply out.
    async fn request(&mut self) -> (Result<(), Failure>, Received) {
        let (result, received) = self.send(&self.conversation, false).await;
        if received.usage != Usage::default() {
            let used = received.usage.total();
            self.events.emit(EventKind::Usage { used, size: self.model.context_window });
            self.usage = self.usage.plus(received.usage);
            self.context = Some(used);
        }
        (result, received)
    }

    /// Sends `conversation` (old large tool results pruned) and streams the reply, out too unless
    /// `quiet` (then only its tool calls will show, when they run).
    async fn send(&self, conversation: &Conversation, quiet: bool) -> (Result<(), Failure>, Received) {
        let estimate = self.accounting.estimate(self.compact.fixed_chars, conversation.messages());
        let pruned = compaction::prune(conversation.messages(), estimate, self.model.context_window);
        let idle = compaction::quiet_heartbeats(conversation.messages(), conversation.turn_start());
        let messages = conversation
            .messages()
            .iter()
            .enumerate()
            .filter(|(i, _)| !idle.contains(i))
            .map(|(i, m)| pruned.get(&i).unwrap_or(m));
        let request = ModelRequest {
            model: &self.model.id,
            system: self.system,
            messages: messages.collect(),
            max_output_tokens: self.model.max_output_tokens,
            reasoning: self.settings.reasoning,
            tools: self.tools,
            cache_key: Some(&self.events.session),
        };
        let mut reply = Reply::new(self.events.clone(), conversation, self.config.max_reply_bytes, quiet);
        let result = self.router.stream(&request, None, &self.config.retry, self.cancel, &mut reply).await;
        drop(request);
        self.events.flush();
        (result, reply.received(pruned.is_empty()))
    }

    /// Whether the next request comes within the flush margin of compacting, in a session that
    /// saves its memory first and has not since the last compaction. Not in `ask` mode: the flush
    /// would put a question to the user that they never prompted.
    fn flush_due(&self) -> bool {
        if !self.may_flush || self.conversation.flushed() || self.calls.mode() == crate::settings::Mode::Ask {
            return false;
        }
        let estimate = self.accounting.estimate(self.compact.fixed_chars, self.conversation.messages());
        compaction::near_threshold(&self.config.compaction, self.model, estimate, self.config.memory.flush_margin)
    }

    /// The silent turn before a compaction (the seed's memory flush): the model is asked to write
    /// what should outlast the compaction to the memory files. It reads the conversation so far —
    /// without the prompt that is waiting, at the turn's start — under the same system prompt and
    /// tools, so the provider's prompt cache serves it. Only memory writes (and reads) run; they
    /// show as ordinary tool calls, and its text (`NO_REPLY`, or anything else) is never shown. Its
    /// messages leave no trace in the conversation; the transcript records that it happened, so it
    /// comes once per compaction cycle, restarts included. A failure is logged and the turn goes on.
    async fn flush_memory(&mut self) -> Result<(), compaction::Cancelled> {
        let mut side = self.conversation.clone();
        side.set_journal(None);
        if side.len() == side.turn_start() + 1 {
            side.discard_turn();
        }
        if side.is_empty() {
            return Ok(());
        }
        tracing::info!("the context nears compaction; asking the model to save what should outlast it");
        side.push(Message::User(vec![crate::providers::UserPart::Text(context::flush_prompt(
            crate::memory::Memory::of(self.config).workspace(),
        ))]));
        let calls = self.calls.memory_only();
        for _ in 0..FLUSH_MAX_REQUESTS {
            let (result, got) = self.send(&side, true).await;
            self.usage = self.usage.plus(got.usage);
            match result {
                Ok(()) if !got.full => {}
                Ok(()) => break,
                Err(Failure::Cancelled) => return Err(compaction::Cancelled),
                Err(Failure::Provider(e)) => {
                    tracing::warn!(error = %e, "the memory flush failed; the turn goes on without it");
                    break;
                }
            }
            if got.calls.is_empty() {
                break;
            }
            // Shown to the editor once they run: no later call of the session may take their ids.
            self.conversation.note_call_ids(got.calls.iter().map(|c| c.id.clone()));
            let pending = got.calls.clone();
            side.push_reply(got.parts, &got.text_id, &got.thought_id);
            let results = tool_calls::run_all(&calls, pending).await;
            side.push(Message::User(results));
            if self.cancel.is_cancelled() {
                return Err(compaction::Cancelled);
            }
        }
        self.conversation.mark_flushed(crate::store::now_ms());
        Ok(())
    }

    /// Takes a reply into the conversation and decides what comes next.
    async fn settle(
        &mut self,
        result: Result<(), Failure>,
        got: Received,
        earlier: bool,
        auto: &mut AutoCompact,
    ) -> Next {
        match result {
            Ok(()) if got.full => {
                // An endless (or absurdly long) reply: what was shown stays, the turn ends.
                tracing::warn!(limit = self.config.max_reply_bytes, "the model's reply passed its limits; stopped it");
                let error = TurnError::internal(self.limit_message(got.text_overflow));
                self.keep_shown(got);
                return Next::Stop(TurnOutcome::Failed { error, usage: self.usage });
            }
            Ok(()) => {}
            Err(Failure::Cancelled) => {
                // Keep what the user saw; calls that never ran are not kept.
                self.keep_shown(got);
                return Next::Stop(self.stopped(StopReason::Cancelled));
            }
            Err(Failure::Provider(e)) => return self.failed(e, got, earlier, auto).await,
        }
        if got.calls.is_empty() {
            let reason = match got.finish.unwrap_or(FinishReason::EndTurn) {
                FinishReason::EndTurn | FinishReason::ToolUse => StopReason::EndTurn,
                FinishReason::MaxTokens | FinishReason::ContextWindow => StopReason::MaxTokens,
                FinishReason::Refusal => StopReason::Refusal,
            };
            if reason == StopReason::Refusal {
                // After a refusal the prompt and everything after it leave the context (ACP `refusal`).
                self.conversation.discard_turn();
                self.accounting.forget_report();
            } else {
                self.keep(got);
            }
            return Next::Stop(self.stopped(reason));
        }
        let calls = self.keep(got);
        Next::RunTools(calls)
    }

    /// The request failed. After an overflow with nothing shown, compacts once and sends it again;
    /// otherwise keeps what the user already saw — or, for the turn's first request with nothing
    /// shown, leaves no trace, so the prompt can be sent again.
    async fn failed(&mut self, e: ProviderError, got: Received, earlier: bool, auto: &mut AutoCompact) -> Next {
        let shown = got.parts.iter().any(|p| matches!(p, AssistantPart::Text(_) | AssistantPart::Thinking { .. }));
        if e.kind == ErrorKind::ContextLength
            && !shown
            && auto.after_overflow(&self.compact, &mut self.conversation, &mut self.accounting).await
        {
            return Next::Resend;
        }
        tracing::warn!(error = %e, "turn failed");
        if shown || earlier {
            self.keep_shown(got);
        } else {
            self.conversation.discard_turn();
        }
        let mut error = TurnError::from_provider(e);
        if let Some(tried) = self.router.tried() {
            error.message.push_str(&tried);
        }
        Next::Stop(TurnOutcome::Failed { error, usage: self.usage })
    }

    /// Adds the whole reply to the conversation (its text was recorded as it streamed); returns
    /// its tool calls.
    fn keep(&mut self, got: Received) -> Vec<Call> {
        if !got.parts.is_empty() {
            self.conversation.push_reply(got.parts, &got.text_id, &got.thought_id);
        }
        let usage = got.usage.total();
        if usage != 0 {
            // The provider's count of the context calibrates the estimate (unless the request was
            // pruned, and so smaller than the conversation).
            if got.calibrate {
                self.accounting.observe(usage, self.compact.fixed_chars, self.conversation.messages());
            } else {
                self.accounting.reported = Some((usage, self.conversation.len()));
            }
        }
        got.calls
    }

    /// Adds what the user saw of a reply that ends the turn early: not its tool calls, which never ran.
    fn keep_shown(&mut self, got: Received) {
        let parts: Vec<AssistantPart> =
            got.parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect();
        if !parts.is_empty() {
            self.conversation.push_reply(parts, &got.text_id, &got.thought_id);
        }
    }

    fn limit_message(&self, text_overflow: bool) -> String {
        if text_overflow {
            format!(
                "the model's reply passed {} of text and was stopped (`max_reply_bytes` in config.toml)",
                human_bytes(self.config.max_reply_bytes)
            )
        } else {
            format!(
                "the model's reply carried more than {} of tool arguments, signatures and reasoning, or more than {} \
                 tool calls, and was stopped",
                human_bytes(crate::providers::MAX_ARGUMENTS_BYTES),
                crate::providers::MAX_CALLS_PER_REPLY
            )
        }
    }

    /// One model request out of the budget the turn shares, if it has one; false if it is spent.
    fn take_budget(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.budget
            .as_ref()
            .is_none_or(|left| left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok())
    }

    /// The budget the turn shares with its siblings (the subagents of one turn) is spent.
    fn budget_spent(&mut self) -> TurnOutcome {
        let notice = "\n\nI stopped here: the subagents started by one turn used up the model requests they may make \
             together (`[subagents] max_requests_per_turn` in config.toml).";
        self.events.emit(EventKind::TextDelta { message_id: new_message_id(), text: notice.into() });
        self.stopped(StopReason::MaxTurnRequests)
    }

    /// The turn made as many requests as it may: its last calls are answered "not run", and the
    /// user is told how to go on.
    fn request_limit(&mut self, calls: Vec<Call>) -> TurnOutcome {
        let limit = self.config.max_turn_requests;
        let why = format!("the turn reached its limit of {limit} model requests");
        self.conversation.push(Message::User(calls.iter().map(|c| c.not_run(&why)).collect()));
        let notice = format!(
            "\n\nI stopped here: this turn reached its limit of {limit} model requests (`max_turn_requests` in \
             config.toml). Send another message to let me continue."
        );
        self.events.emit(EventKind::TextDelta { message_id: new_message_id(), text: notice });
        self.stopped(StopReason::MaxTurnRequests)
    }
}

fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_system_prompt_built_ahead_serves_only_the_settings_it_was_built_for() {
        let home = tempfile::tempdir().unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("AGENTS.md"), "Use tabs.\n").unwrap();
        let config = Arc::new(Config::load_with(&|name| {
            (name == "ACP_HOME").then(|| home.path().to_string_lossy().into_owned())
        }));
        let settings = SessionSettings {
            cwd: a.path().to_path_buf(),
            additional_dirs: Vec::new(),
            model: crate::config::ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap(),
            mode: crate::settings::Mode::default(),
            reasoning: None,
            mcp_servers: Vec::new(),
        };

        let ahead = SystemAhead::start(&config, &settings, "s1").take_for(&settings).expect("the same settings");
        let text = ahead.await.unwrap();
        assert!(text.contains("Use tabs.") && text.contains(&format!("Working directory: {}", a.path().display())));

        // Settings changed before the first turn: that turn builds its own.
        let moved = SessionSettings { cwd: b.path().to_path_buf(), ..settings.clone() };
        assert!(SystemAhead::start(&config, &settings, "s1").take_for(&moved).is_none());
        let other_model =
            SessionSettings { model: crate::config::ModelRef::parse("openai/gpt-5").unwrap(), ..settings.clone() };
        assert!(SystemAhead::start(&config, &settings, "s1").take_for(&other_model).is_none());
    }
}
