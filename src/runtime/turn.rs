//! One turn of the agent loop: send the conversation to the model, stream the reply out as it is
//! assembled, run the tool calls it asks for (`tool_calls.rs`), feed the results back, and repeat
//! until the model stops — or the turn is cancelled, fails, or hits its request limit. The turn
//! ends with one outcome and the messages to keep in the history (every tool call paired with a
//! result, so the history stays valid for every wire API).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::context::system_prompt;
use super::event::{Emitter, EventKind, StopReason, TurnError, TurnOutcome};
use super::tool_calls::{self, Call, CallEnv};
use super::{LiveState, SessionSettings, Shared};
use crate::providers::retry::{self, Failure};
use crate::providers::{AssistantPart, FinishReason, Message, ModelRequest, ResponseEvent, Usage, UserPart};
use crate::tools::Registry;
use crate::tools::policy::ToolPolicy;

pub(crate) struct TurnContext {
    pub shared: Arc<Shared>,
    pub events: Emitter,
    pub settings: SessionSettings,
    pub live: Arc<LiveState>,
    pub history: Vec<Message>,
    pub input: Vec<UserPart>,
}

pub(crate) struct TurnResult {
    /// Messages to append to the session's history.
    pub append: Vec<Message>,
    pub outcome: TurnOutcome,
}

pub(crate) async fn run(ctx: TurnContext, cancel: CancellationToken) -> TurnResult {
    let TurnContext { shared, events, settings, live, history, input } = ctx;
    let config = shared.config();
    let (client, model) = match shared.client_for(&settings.model).await {
        Ok(found) => found,
        Err(error) => {
            return TurnResult { append: Vec::new(), outcome: TurnOutcome::Failed { error, usage: Usage::default() } };
        }
    };
    let registry = Registry::new(&ToolPolicy { allow: config.tools.allow.clone(), deny: config.tools.deny.clone() });
    let env = CallEnv {
        shared: shared.clone(),
        events: events.clone(),
        settings: settings.clone(),
        live,
        registry: &registry,
        cancel: cancel.clone(),
        config: config.clone(),
    };
    let system = system_prompt(&settings.cwd, &settings.model);
    let tool_specs = registry.specs();
    let mut turn = vec![Message::User(input)];
    let mut usage = Usage::default();
    let mut requests = 0;

    loop {
        requests += 1;
        let request = ModelRequest {
            model: &model.id,
            system: &system,
            messages: history.iter().chain(turn.iter()).collect(),
            max_output_tokens: model.max_output_tokens,
            reasoning: settings.reasoning,
            tools: &tool_specs,
        };
        let mut reply = Reply::new(events.clone());
        let result = retry::stream_with_retry(&client, &request, &config.retry, &cancel, &mut reply).await;
        drop(request);
        events.flush();
        if reply.usage != Usage::default() {
            events.emit(EventKind::Usage { used: reply.usage.total(), size: model.context_window });
            usage = add(usage, reply.usage);
        }
        let (parts, calls, finish) = reply.finish();
        match result {
            Ok(()) => {}
            Err(Failure::Cancelled) => {
                // Keep what the user saw; calls that never ran are not kept.
                push_assistant(
                    &mut turn,
                    parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect(),
                );
                return TurnResult {
                    append: turn,
                    outcome: TurnOutcome::Stopped { reason: StopReason::Cancelled, usage },
                };
            }
            Err(Failure::Provider(e)) => {
                tracing::warn!(error = %e, "turn failed");
                let shown_anything =
                    parts.iter().any(|p| matches!(p, AssistantPart::Text(_) | AssistantPart::Thinking { .. }));
                // Keep what the user already saw; otherwise leave no trace of a first request, so the
                // prompt can be sent again.
                if shown_anything || requests > 1 {
                    push_assistant(
                        &mut turn,
                        parts.into_iter().filter(|p| !matches!(p, AssistantPart::ToolCall { .. })).collect(),
                    );
                } else {
                    turn.clear();
                }
                return TurnResult {
                    append: turn,
                    outcome: TurnOutcome::Failed { error: TurnError::from_provider(e), usage },
                };
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
                return TurnResult { append: Vec::new(), outcome: TurnOutcome::Stopped { reason, usage } };
            }
            push_assistant(&mut turn, parts);
            return TurnResult { append: turn, outcome: TurnOutcome::Stopped { reason, usage } };
        }

        push_assistant(&mut turn, parts);
        if requests >= config.max_turn_requests {
            let limit = config.max_turn_requests;
            let results = calls
                .iter()
                .map(|c| c.not_run(&format!("the turn reached its limit of {limit} model requests")))
                .collect();
            turn.push(Message::User(results));
            let notice = format!(
                "\n\nI stopped here: this turn reached its limit of {limit} model requests (`max_turn_requests` in config.toml). \
                 Send another message to let me continue."
            );
            events.emit(EventKind::TextDelta { message_id: new_message_id(), text: notice });
            return TurnResult {
                append: turn,
                outcome: TurnOutcome::Stopped { reason: StopReason::MaxTurnRequests, usage },
            };
        }
        let results = tool_calls::run_all(&env, calls).await;
        turn.push(Message::User(results));
        if cancel.is_cancelled() {
            return TurnResult { append: turn, outcome: TurnOutcome::Stopped { reason: StopReason::Cancelled, usage } };
        }
    }
}

fn push_assistant(turn: &mut Vec<Message>, parts: Vec<AssistantPart>) {
    if !parts.is_empty() {
        turn.push(Message::Assistant(parts));
    }
}

fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        input: a.input + b.input,
        output: a.output + b.output,
        cache_read: a.cache_read + b.cache_read,
        cache_write: a.cache_write + b.cache_write,
        reasoning: match (a.reasoning, b.reasoning) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
        },
    }
}

/// Assembles one assistant message from the stream and forwards its deltas as events.
struct Reply {
    events: Emitter,
    parts: Vec<AssistantPart>,
    calls: Vec<Call>,
    text_id: Arc<str>,
    thought_id: Arc<str>,
    usage: Usage,
    finish: Option<FinishReason>,
}

impl Reply {
    fn new(events: Emitter) -> Self {
        Self {
            events,
            parts: Vec::new(),
            calls: Vec::new(),
            text_id: new_message_id(),
            thought_id: new_message_id(),
            usage: Usage::default(),
            finish: None,
        }
    }

    fn finish(self) -> (Vec<AssistantPart>, Vec<Call>, Option<FinishReason>) {
        (self.parts, self.calls, self.finish)
    }
}

impl retry::StreamSink for Reply {
    fn idle(&mut self) {
        self.events.flush();
    }

    fn event(&mut self, event: ResponseEvent) {
        match event {
            ResponseEvent::TextDelta(text) => {
                match self.parts.last_mut() {
                    Some(AssistantPart::Text(t)) => t.push_str(&text),
                    _ => self.parts.push(AssistantPart::Text(text.clone())),
                }
                self.events.emit(EventKind::TextDelta { message_id: self.text_id.clone(), text });
            }
            ResponseEvent::ThoughtDelta(text) => {
                match self.parts.last_mut() {
                    Some(AssistantPart::Thinking { text: t, signature: None }) => t.push_str(&text),
                    _ => self.parts.push(AssistantPart::Thinking { text: text.clone(), signature: None }),
                }
                self.events.emit(EventKind::ThoughtDelta { message_id: self.thought_id.clone(), text });
            }
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
                self.parts.push(AssistantPart::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
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

pub(crate) fn new_message_id() -> Arc<str> {
    Arc::from(format!("msg_{}", uuid::Uuid::new_v4().simple()))
}
