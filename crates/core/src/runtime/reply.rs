//! One model reply as it streams in: assembled into an assistant message (text, thinking, tool
//! calls with ids unique in the session), its deltas forwarded as events (unless quiet), and its
//! size held to the limits.

use std::sync::Arc;

use super::event::{Emitter, EventKind, new_message_id};
use super::tool_calls::{self, Call};
use crate::history::conversation::Conversation;
use crate::providers::retry;
use crate::providers::{AssistantPart, FinishReason, ResponseEvent, Usage};

/// One reply, as received.
pub(crate) struct Received {
    pub(crate) parts: Vec<AssistantPart>,
    pub(crate) calls: Vec<Call>,
    pub(crate) finish: Option<FinishReason>,
    pub(crate) usage: Usage,
    pub(crate) text_id: Arc<str>,
    pub(crate) thought_id: Arc<str>,
    /// The reply passed its limits and was stopped; `text_overflow`: by its text.
    pub(crate) full: bool,
    pub(crate) text_overflow: bool,
    /// Whether the request held the whole conversation (nothing pruned), so its token count
    /// calibrates the estimate.
    pub(crate) calibrate: bool,
}

/// Assembles one assistant message from the stream and forwards its deltas as events.
pub(crate) struct Reply<'a> {
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
    /// Text and thoughts are not sent out (the memory flush's).
    quiet: bool,
}

impl<'a> Reply<'a> {
    pub(crate) fn new(events: Emitter, conversation: &'a Conversation, limit: usize, quiet: bool) -> Self {
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
            quiet,
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

    pub(crate) fn received(self, calibrate: bool) -> Received {
        Received {
            text_overflow: self.bytes >= self.limit,
            parts: self.parts,
            calls: self.calls,
            finish: self.finish,
            usage: self.usage,
            text_id: self.text_id,
            thought_id: self.thought_id,
            full: self.full,
            calibrate,
        }
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
                if !self.quiet {
                    self.events.emit(EventKind::TextDelta { message_id: self.text_id.clone(), text });
                }
            }
            ResponseEvent::ThoughtDelta(text) => {
                let Some(text) = self.admit(text) else { return };
                match self.parts.last_mut() {
                    Some(AssistantPart::Thinking { text: t, signature: None }) => t.push_str(&text),
                    _ => self.parts.push(AssistantPart::Thinking { text: text.clone(), signature: None }),
                }
                if !self.quiet {
                    self.events.emit(EventKind::ThoughtDelta { message_id: self.thought_id.clone(), text });
                }
            }
            ResponseEvent::ThinkingSignature(sig) if !self.admit_other(sig.len()) => {}
            ResponseEvent::RedactedThinking(data) if !self.admit_other(data.len()) => {}
            ResponseEvent::ReasoningItem { ref encrypted_content, ref summary, .. }
                if !self.admit_other(
                    encrypted_content.as_ref().map_or(0, String::len) + summary.iter().map(String::len).sum::<usize>(),
                ) => {}
            ResponseEvent::ToolCall { ref arguments, .. } if !self.admit_other(arguments.len()) => {}
            ResponseEvent::PartSignature(ref sig) if !self.admit_other(sig.len()) => {}
            ResponseEvent::PartSignature(signature) => self.parts.push(AssistantPart::Signature { signature }),
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
