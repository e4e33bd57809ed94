//! One turn of the agent loop: the user's input goes to the model with the conversation so far, the
//! reply streams out as events while it is assembled, and the turn ends with one outcome and the
//! messages to keep in the history.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::context::system_prompt;
use super::event::{EventKind, EventSink, StopReason, TurnError, TurnOutcome};
use super::{SessionSettings, Shared};
use crate::providers::retry::{self, Failure};
use crate::providers::{AssistantPart, FinishReason, Message, ModelRequest, ResponseEvent, Usage, UserPart};

pub(crate) struct TurnContext {
    pub shared: Arc<Shared>,
    pub events: EventSink,
    pub settings: SessionSettings,
    pub history: Vec<Message>,
    pub input: Vec<UserPart>,
}

pub(crate) struct TurnResult {
    /// Messages to append to the session's history.
    pub append: Vec<Message>,
    pub outcome: TurnOutcome,
}

pub(crate) async fn run(ctx: TurnContext, cancel: CancellationToken) -> TurnResult {
    let TurnContext { shared, events, settings, mut history, input } = ctx;
    let user = Message::User(input);
    let (client, model) = match shared.client_for(&settings.model).await {
        Ok(found) => found,
        Err(error) => {
            return TurnResult { append: Vec::new(), outcome: failed(error, Usage::default()) };
        }
    };
    history.push(user.clone());
    let request = ModelRequest {
        model: model.id.clone(),
        system: system_prompt(&settings.cwd, &settings.model),
        messages: history,
        max_output_tokens: model.max_output_tokens,
        reasoning: settings.reasoning,
    };

    let mut reply = Reply::new(events.clone());
    let policy = shared.config().retry;
    let result = retry::stream_with_retry(&client, &request, &policy, &cancel, |ev| reply.apply(ev)).await;
    if reply.usage != Usage::default() {
        events.emit(EventKind::Usage { used: reply.usage.total(), size: model.context_window });
    }

    let usage = reply.usage;
    let has_output = !reply.parts.is_empty();
    let finish = reply.finish;
    let with_reply = |parts: Vec<AssistantPart>| {
        let mut append = vec![user.clone()];
        if !parts.is_empty() {
            append.push(Message::Assistant(parts));
        }
        append
    };
    match result {
        Ok(()) => {
            let reason = match finish.unwrap_or(FinishReason::EndTurn) {
                FinishReason::EndTurn | FinishReason::ToolUse => StopReason::EndTurn,
                FinishReason::MaxTokens | FinishReason::ContextWindow => StopReason::MaxTokens,
                FinishReason::Refusal => StopReason::Refusal,
            };
            // After a refusal the prompt and the reply leave the context (ACP `refusal`).
            let append = if reason == StopReason::Refusal { Vec::new() } else { with_reply(reply.parts) };
            TurnResult { append, outcome: TurnOutcome::Stopped { reason, usage } }
        }
        Err(Failure::Cancelled) => TurnResult {
            append: with_reply(reply.parts),
            outcome: TurnOutcome::Stopped { reason: StopReason::Cancelled, usage },
        },
        Err(Failure::Provider(e)) => {
            tracing::warn!(error = %e, "turn failed");
            // Keep what the user already saw; otherwise leave no trace, so the prompt can be resent.
            let append = if has_output { with_reply(reply.parts) } else { Vec::new() };
            TurnResult { append, outcome: failed(TurnError::from_provider(e), usage) }
        }
    }
}

fn failed(error: TurnError, usage: Usage) -> TurnOutcome {
    TurnOutcome::Failed { error, usage }
}

/// Assembles the assistant message from the stream and forwards its deltas as events.
struct Reply {
    events: EventSink,
    parts: Vec<AssistantPart>,
    text_id: Arc<str>,
    thought_id: Arc<str>,
    usage: Usage,
    finish: Option<FinishReason>,
}

impl Reply {
    fn new(events: EventSink) -> Self {
        Self {
            events,
            parts: Vec::new(),
            text_id: new_message_id(),
            thought_id: new_message_id(),
            usage: Usage::default(),
            finish: None,
        }
    }

    fn apply(&mut self, event: ResponseEvent) {
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
            ResponseEvent::Usage(usage) => self.usage = usage,
            ResponseEvent::Completed(reason) => self.finish = Some(reason),
        }
    }
}

fn new_message_id() -> Arc<str> {
    Arc::from(format!("msg_{}", uuid::Uuid::new_v4().simple()))
}
