//! One turn of the agent loop: send the conversation to the model, stream the reply out as it is
//! assembled, run the tool calls it asks for (`tool_calls.rs`), feed the results back, and repeat
//! until the model stops — or the turn is cancelled, fails, or hits its request limit. Every
//! message goes through the [`Conversation`] (and so into the transcript) as it is added, every tool
//! call paired with its result, so the history stays valid for every wire API. Before each request
//! the context is checked against the window (compacting if needed, and again if the provider
//! still finds it too long), and old large tool results are pruned from the request.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::compaction::{self, Accounting, CompactEnv};
use super::context;
use super::event::{Emitter, EventKind, StopReason, TurnError, TurnOutcome};
use super::tool_calls::{self, Call, CallEnv};
use super::{LiveState, SessionSettings, Shared};
use crate::history::conversation::Conversation;
use crate::providers::retry::{self, Failure};
use crate::providers::{AssistantPart, ErrorKind, FinishReason, Message, ModelRequest, ResponseEvent, Usage};
use crate::tools::Registry;
use crate::tools::ToolSpec;
use crate::tools::policy::ToolPolicy;

pub(crate) struct TurnContext {
    pub shared: Arc<Shared>,
    pub events: Emitter,
    pub settings: SessionSettings,
    pub live: Arc<LiveState>,
    /// The conversation, the prompt already pushed.
    pub conversation: Conversation,
    pub accounting: Accounting,
}

pub(crate) struct TurnResult {
    pub conversation: Conversation,
    pub accounting: Accounting,
    pub outcome: TurnOutcome,
    /// Tokens in the context after the turn's last model request.
    pub context: Option<u64>,
}

/// Characters the system prompt and the tool schemas add to every request.
/// The tools a session under `config` is offered.
pub(crate) fn registry(config: &crate::config::Config) -> Registry {
    Registry::new(&ToolPolicy { allow: config.tools.allow.clone(), deny: config.tools.deny.clone() })
}

/// The system prompt for a session with these settings.
pub(crate) fn system_prompt(config: &crate::config::Config, settings: &SessionSettings) -> context::SystemPrompt {
    context::build(&context::Inputs {
        cwd: &settings.cwd,
        additional_dirs: &settings.additional_dirs,
        model: &settings.model,
        home: &config.home,
        max_file_chars: config.bootstrap_max_chars,
    })
}

pub(crate) fn fixed_chars(system: &str, tools: &[ToolSpec]) -> usize {
    system.len()
        + tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum::<usize>()
}

pub(crate) async fn run(ctx: TurnContext, cancel: CancellationToken) -> TurnResult {
    let TurnContext { shared, events, settings, live, mut conversation, mut accounting } = ctx;
    let config = shared.config();
    let (client, model) = match shared.client_for(&settings.model).await {
        Ok(found) => found,
        Err(error) => {
            conversation.discard_turn();
            return TurnResult {
                conversation,
                accounting,
                outcome: TurnOutcome::Failed { error, usage: Usage::default() },
                context: None,
            };
        }
    };
    let registry = registry(&config);
    let env = CallEnv {
        shared: shared.clone(),
        events: events.clone(),
        settings: settings.clone(),
        live,
        registry: &registry,
        cancel: cancel.clone(),
        config: config.clone(),
    };
    let system = system_prompt(&config, &settings).text;
    let tool_specs = registry.specs();
    let fixed = fixed_chars(&system, &tool_specs);
    let compact_env = CompactEnv {
        client: &client,
        model: &model,
        retry: &config.retry,
        config: &config.compaction,
        cancel: &cancel,
        events: &events,
        fixed_chars: fixed,
    };
    let mut usage = Usage::default();
    let mut context = None;
    let mut requests = 0;
    let mut overflow_compacted = false;
    // The conversation's length right after the last compaction: no point compacting it again
    // before something new is added.
    let mut compacted_at = None;

    macro_rules! finish {
        ($outcome:expr) => {
            return TurnResult { conversation, accounting, outcome: $outcome, context }
        };
    }

    loop {
        requests += 1;
        let estimate = accounting.estimate(fixed, conversation.messages());
        if config.compaction.auto
            && compacted_at != Some(conversation.len())
            && compaction::over_threshold(&config.compaction, &model, estimate)
        {
            tracing::info!(estimate, window = model.context_window, "context nearly full; compacting");
            match compaction::compact(&compact_env, &mut conversation, &mut accounting, None).await {
                Ok(_) => compacted_at = Some(conversation.len()),
                Err(_) if cancel.is_cancelled() => {
                    finish!(TurnOutcome::Stopped { reason: StopReason::Cancelled, usage });
                }
                Err(e) => {
                    compacted_at = Some(conversation.len());
                    tracing::warn!(error = %e.message, "automatic compaction failed; sending the request anyway");
                }
            }
        }
        let estimate = accounting.estimate(fixed, conversation.messages());
        let pruned = compaction::prune(conversation.messages(), estimate, model.context_window);
        let request = ModelRequest {
            model: &model.id,
            system: &system,
            messages: conversation.messages().iter().enumerate().map(|(i, m)| pruned.get(&i).unwrap_or(m)).collect(),
            max_output_tokens: model.max_output_tokens,
            reasoning: settings.reasoning,
            tools: &tool_specs,
            cache_key: Some(&events.session),
        };
        let mut reply = Reply::new(events.clone(), &conversation, config.max_reply_bytes);
        let result = retry::stream_with_retry(&client, &request, &config.retry, &cancel, &mut reply).await;
        drop(request);
        events.flush();
        let reply_usage = reply.usage;
        if reply_usage != Usage::default() {
            events.emit(EventKind::Usage { used: reply_usage.total(), size: model.context_window });
            usage = usage.plus(reply_usage);
            context = Some(reply_usage.total());
        }
        let ids = (reply.text_id.clone(), reply.thought_id.clone());
        let full = reply.full;
        let text_overflow = reply.bytes >= reply.limit;
        let (parts, calls, finish) = reply.finish();
        // Adds the reply to the conversation (its text was recorded as it streamed).
        let push_assistant = |conversation: &mut Conversation, parts: Vec<AssistantPart>| {
            if !parts.is_empty() {
                conversation.push_reply(parts, &ids.0, &ids.1);
            }
        };
        match result {
            Ok(()) if full => {
                // An endless (or absurdly long) reply: what was shown stays, the turn ends.
                let limit = config.max_reply_bytes;
                tracing::warn!(limit, "the model's reply passed its limits; stopped it");
                push_assistant(
                    &mut conversation,
                    parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect(),
                );
                let message = if text_overflow {
                    format!(
                        "the model's reply passed {} of text and was stopped (`max_reply_bytes` in config.toml)",
                        human_bytes(limit)
                    )
                } else {
                    format!(
                        "the model's reply carried more than {} of tool arguments, signatures and reasoning, or more \
                         than {} tool calls, and was stopped",
                        human_bytes(crate::providers::MAX_ARGUMENTS_BYTES),
                        crate::providers::MAX_CALLS_PER_REPLY
                    )
                };
                let error = TurnError::internal(message);
                finish!(TurnOutcome::Failed { error, usage });
            }
            Ok(()) => {}
            Err(Failure::Cancelled) => {
                // Keep what the user saw; calls that never ran are not kept.
                push_assistant(
                    &mut conversation,
                    parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect(),
                );
                finish!(TurnOutcome::Stopped { reason: StopReason::Cancelled, usage });
            }
            Err(Failure::Provider(e)) => {
                let shown_anything =
                    parts.iter().any(|p| matches!(p, AssistantPart::Text(_) | AssistantPart::Thinking { .. }));
                if e.kind == ErrorKind::ContextLength
                    && !shown_anything
                    && !overflow_compacted
                    && config.compaction.auto
                {
                    // The request did not fit: compact, then send it again.
                    overflow_compacted = true;
                    tracing::info!("the provider says the prompt is too long; compacting and retrying");
                    match compaction::compact(&compact_env, &mut conversation, &mut accounting, None).await {
                        Ok(_) => {
                            requests -= 1;
                            continue;
                        }
                        Err(ce) => tracing::warn!(error = %ce.message, "compaction after an overflow failed"),
                    }
                }
                tracing::warn!(error = %e, "turn failed");
                // Keep what the user already saw; otherwise leave no trace of a first request, so the
                // prompt can be sent again.
                if shown_anything || requests > 1 {
                    push_assistant(
                        &mut conversation,
                        parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect(),
                    );
                } else {
                    conversation.discard_turn();
                }
                finish!(TurnOutcome::Failed { error: TurnError::from_provider(e), usage });
            }
        }

        if calls.is_empty() {
            let reason = match finish.unwrap_or(FinishReason::EndTurn) {
                FinishReason::EndTurn | FinishReason::ToolUse => StopReason::EndTurn,
                FinishReason::MaxTokens | FinishReason::ContextWindow => StopReason::MaxTokens,
                FinishReason::Refusal => StopReason::Refusal,
            };
            if reason == StopReason::Refusal {
                // After a refusal the prompt and everything after it leave the context (ACP `refusal`).
                conversation.discard_turn();
                accounting.forget_report();
                finish!(TurnOutcome::Stopped { reason, usage });
            }
            push_assistant(&mut conversation, parts);
            observe(&mut accounting, reply_usage, fixed, &conversation, pruned.is_empty());
            finish!(TurnOutcome::Stopped { reason, usage });
        }

        push_assistant(&mut conversation, parts);
        observe(&mut accounting, reply_usage, fixed, &conversation, pruned.is_empty());
        if requests >= config.max_turn_requests {
            let limit = config.max_turn_requests;
            let results = calls
                .iter()
                .map(|c| c.not_run(&format!("the turn reached its limit of {limit} model requests")))
                .collect();
            conversation.push(Message::User(results));
            let notice = format!(
                "\n\nI stopped here: this turn reached its limit of {limit} model requests (`max_turn_requests` in config.toml). \
                 Send another message to let me continue."
            );
            events.emit(EventKind::TextDelta { message_id: new_message_id(), text: notice });
            finish!(TurnOutcome::Stopped { reason: StopReason::MaxTurnRequests, usage });
        }
        let results = tool_calls::run_all(&env, calls).await;
        conversation.push(Message::User(results));
        if cancel.is_cancelled() {
            finish!(TurnOutcome::Stopped { reason: StopReason::Cancelled, usage });
        }
    }
}

/// The provider's count of the context after a reply calibrates the estimate (unless the request
/// was pruned, and so smaller than the conversation).
fn observe(accounting: &mut Accounting, usage: Usage, fixed: usize, conversation: &Conversation, calibrate: bool) {
    if usage.total() == 0 {
        return;
    }
    if calibrate {
        accounting.observe(usage.total(), fixed, conversation.messages());
    } else {
        accounting.reported = Some((usage.total(), conversation.len()));
    }
}

/// Assembles one assistant message from the stream and forwards its deltas as events.
struct Reply<'a> {
    events: Emitter,
    /// The session's conversation, for the tool-call ids it has used.
    conversation: &'a Conversation,
    parts: Vec<AssistantPart>,
    calls: Vec<Call>,
    text_id: Arc<str>,
    thought_id: Arc<str>,
    usage: Usage,
    finish: Option<FinishReason>,
    /// Bytes of text and thoughts a reply may have (`max_reply_bytes`), and how many it has.
    limit: usize,
    bytes: usize,
    /// Bytes of everything else it carries (signatures, redacted thinking, reasoning items, tool
    /// arguments), capped at `MAX_ARGUMENTS_BYTES`.
    other_bytes: usize,
    /// The next suffix to try for a reused tool-call id, by id.
    suffixes: std::collections::HashMap<String, u64>,
    /// The limit was reached: the rest of the stream is dropped.
    full: bool,
}

impl<'a> Reply<'a> {
    fn new(events: Emitter, conversation: &'a Conversation, limit: usize) -> Self {
        Self {
            events,
            conversation,
            parts: Vec::new(),
            calls: Vec::new(),
            text_id: new_message_id(),
            thought_id: new_message_id(),
            usage: Usage::default(),
            finish: None,
            limit,
            bytes: 0,
            other_bytes: 0,
            suffixes: std::collections::HashMap::new(),
            full: false,
        }
    }

    /// Counts bytes of a part that is not text; false (and the reply is full) past the cap.
    fn admit_other(&mut self, bytes: usize) -> bool {
        self.other_bytes = self.other_bytes.saturating_add(bytes);
        if self.other_bytes > crate::providers::MAX_ARGUMENTS_BYTES
            || self.calls.len() >= crate::providers::MAX_CALLS_PER_REPLY
        {
            self.full = true;
        }
        !self.full
    }

    /// What of a delta still fits under the limit (all of it, or its head at a char boundary).
    fn admit(&mut self, mut text: String) -> Option<String> {
        if self.full {
            return None;
        }
        let room = self.limit.saturating_sub(self.bytes);
        if text.len() > room {
            let mut end = room;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            self.full = true;
        }
        self.bytes += text.len();
        (!text.is_empty()).then_some(text)
    }

    fn finish(self) -> (Vec<AssistantPart>, Vec<Call>, Option<FinishReason>) {
        (self.parts, self.calls, self.finish)
    }
}

impl Reply<'_> {
    /// A tool-call id unique in the session: the provider's, unless the session (or this reply)
    /// used it already or it is empty; then it gets a suffix. The model sees the same id back.
    fn unique_call_id(&mut self, id: String) -> String {
        let (conversation, calls) = (self.conversation, &self.calls);
        let taken = |c: &str| conversation.call_id_taken(c) || calls.iter().any(|call| call.id == c);
        if !id.is_empty() && !taken(&id) {
            return id;
        }
        let base = if id.is_empty() { "call".to_owned() } else { id };
        // Suffixes count up per id, so a provider repeating one id costs one try each time.
        let next = self.suffixes.entry(base.clone()).or_insert(2);
        for _ in 0..64 {
            let candidate = format!("{base}_{next}");
            *next += 1;
            if !taken(&candidate) {
                return candidate;
            }
        }
        format!("call_{}", uuid::Uuid::new_v4().simple())
    }
}

impl retry::StreamSink for Reply<'_> {
    fn idle(&mut self) {
        self.events.flush();
    }

    fn full(&self) -> bool {
        self.full
    }

    fn event(&mut self, event: ResponseEvent) {
        match event {
            ResponseEvent::TextDelta(text) => {
                let Some(text) = self.admit(text) else { return };
                match self.parts.last_mut() {
                    Some(AssistantPart::Text(t)) => t.push_str(&text),
                    _ => self.parts.push(AssistantPart::Text(text.clone())),
                }
                self.events.emit(EventKind::TextDelta { message_id: self.text_id.clone(), text });
            }
            ResponseEvent::ThoughtDelta(text) => {
                let Some(text) = self.admit(text) else { return };
                match self.parts.last_mut() {
                    Some(AssistantPart::Thinking { text: t, signature: None }) => t.push_str(&text),
                    _ => self.parts.push(AssistantPart::Thinking { text: text.clone(), signature: None }),
                }
                self.events.emit(EventKind::ThoughtDelta { message_id: self.thought_id.clone(), text });
            }
            ResponseEvent::ThinkingSignature(sig) if !self.admit_other(sig.len()) => {}
            ResponseEvent::RedactedThinking(data) if !self.admit_other(data.len()) => {}
            ResponseEvent::ReasoningItem { ref encrypted_content, ref summary, .. }
                if !self.admit_other(
                    encrypted_content.as_ref().map_or(0, String::len) + summary.iter().map(String::len).sum::<usize>(),
                ) => {}
            ResponseEvent::ToolCall { ref arguments, .. } if !self.admit_other(arguments.len()) => {}
            ResponseEvent::ThinkingSignature(sig) => match self.parts.last_mut() {
                Some(AssistantPart::Thinking { signature: s @ None, .. }) => *s = Some(sig),
                // A signature for an empty thinking block.
                _ => self.parts.push(AssistantPart::Thinking { text: String::new(), signature: Some(sig) }),
            },
            ResponseEvent::RedactedThinking(data) => self.parts.push(AssistantPart::RedactedThinking { data }),
            ResponseEvent::ReasoningItem { id, encrypted_content, summary } => {
                self.parts.push(AssistantPart::Reasoning { id, encrypted_content, summary });
            }
            ResponseEvent::ToolCall { id, name, arguments } => {
                let id = self.unique_call_id(id);
                self.parts.push(AssistantPart::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: tool_calls::arguments_for_history(&arguments),
                });
                self.calls.push(Call { id, name, arguments });
            }
            ResponseEvent::Usage(usage) => self.usage = usage,
            ResponseEvent::Completed(reason) => self.finish = Some(reason),
            ResponseEvent::Restarted => {
                // Only unseen parts can be here (a request is never retried after output was shown).
                self.parts.clear();
                self.calls.clear();
                self.usage = Usage::default();
                self.finish = None;
            }
        }
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

pub(crate) fn new_message_id() -> Arc<str> {
    Arc::from(format!("msg_{}", uuid::Uuid::new_v4().simple()))
}
