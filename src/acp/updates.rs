//! Runtime events → ACP: deltas become `session/update` notifications, and the end of a turn
//! answers its `session/prompt` (after every update of that turn, since both leave in order).

use acp_protocol::acp::schema::{
    ContentBlock, ContentChunk, MessageId, PromptResponse, SessionUpdate, StopReason, Usage, UsageUpdate,
};
use acp_protocol::jsonrpc::{ErrorObject, code};
use serde_json::json;
use tokio::sync::mpsc;

use super::agent::Agent;
use crate::providers;
use crate::runtime::{self, Event, EventKind, TurnOutcome};

/// Forwards events until the runtime goes away. Events that are already waiting are written as one
/// batch with a single flush, so a burst of deltas costs one write, not one per delta.
pub async fn forward(agent: std::sync::Arc<Agent>, mut events: mpsc::UnboundedReceiver<Event>) {
    while let Some(event) = events.recv().await {
        agent.on_event(event);
        while let Ok(event) = events.try_recv() {
            agent.on_event(event);
        }
        agent.conn.flush();
    }
}

impl Agent {
    fn on_event(&self, event: Event) {
        let Event { session, turn, kind } = event;
        match kind {
            EventKind::TextDelta { message_id, text } => {
                self.send_update_batched(&session, SessionUpdate::AgentMessageChunk(chunk(text, &message_id)));
            }
            EventKind::ThoughtDelta { message_id, text } => {
                self.send_update_batched(&session, SessionUpdate::AgentThoughtChunk(chunk(text, &message_id)));
            }
            EventKind::Usage { used, size } => {
                self.send_update_batched(&session, SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)));
            }
            EventKind::TurnEnded(outcome) => {
                let Some(pending) =
                    self.prompts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&turn)
                else {
                    tracing::warn!(%session, turn, "a turn ended that no prompt is waiting for");
                    return;
                };
                match outcome {
                    TurnOutcome::Stopped { reason, usage } => {
                        let mut response = PromptResponse::new(stop_reason(reason));
                        if usage != providers::Usage::default() {
                            response = response.usage(acp_usage(&usage));
                        }
                        pending.responder.respond(Ok(response));
                    }
                    TurnOutcome::Failed { error, .. } => {
                        // Tell the user in the conversation itself, then fail the request.
                        let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                        let text = format!("\n\n**Error:** {}", error.message);
                        self.send_update(&session, SessionUpdate::AgentMessageChunk(chunk(text, &id)));
                        let code = if error.needs_setup { code::AUTH_REQUIRED } else { code::INTERNAL_ERROR };
                        let provider = error.provider.as_ref();
                        let data = json!({
                            "kind": error.kind,
                            "provider": provider.map(|p| p.provider.clone()),
                            "status": provider.and_then(|p| p.status),
                            "retryable": provider.is_some_and(providers::ProviderError::is_retryable),
                            "requestId": provider.and_then(|p| p.request_id.clone()),
                        });
                        pending.responder.respond_error(ErrorObject::new(code, error.message).with_data(data));
                    }
                }
            }
        }
    }
}

fn chunk(text: String, message_id: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text)).message_id(MessageId::new(message_id))
}

fn stop_reason(reason: runtime::StopReason) -> StopReason {
    match reason {
        runtime::StopReason::EndTurn => StopReason::EndTurn,
        runtime::StopReason::MaxTokens => StopReason::MaxTokens,
        runtime::StopReason::MaxTurnRequests => StopReason::MaxTurnRequests,
        runtime::StopReason::Refusal => StopReason::Refusal,
        runtime::StopReason::Cancelled => StopReason::Cancelled,
    }
}

fn acp_usage(u: &providers::Usage) -> Usage {
    let mut usage = Usage::new(u.total(), u.input, u.output);
    if let Some(r) = u.reasoning {
        usage = usage.thought_tokens(r);
    }
    if u.cache_read > 0 {
        usage = usage.cached_read_tokens(u.cache_read);
    }
    if u.cache_write > 0 {
        usage = usage.cached_write_tokens(u.cache_write);
    }
    usage
}
