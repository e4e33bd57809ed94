//! The model's view of a session: the messages sent with every request. Each change is one
//! operation — push, discard the current turn, compact, reset — and each is recorded in the
//! transcript as it happens, so replaying the records rebuilds exactly this state (replay calls the
//! same operations). Tool calls stay paired with their results through every operation.

use std::collections::HashSet;
use std::sync::Arc;

use super::Journal;
use super::record::Record;
use crate::providers::{Message, UserPart};

#[derive(Debug, Clone, Default)]
pub struct Conversation {
    messages: Vec<Message>,
    /// Where the running turn's messages start.
    turn_start: usize,
    journal: Option<Arc<dyn Journal>>,
    /// Every tool-call id the session has used (compacted ones included): a new call gets an id
    /// none of them has, whatever the provider sent.
    call_ids: HashSet<String>,
    /// Whether the memory was flushed since the last compaction or reset (once per cycle), and
    /// when it last was (Unix ms).
    flushed: bool,
    flushed_at: Option<i64>,
}

/// The user message a compaction summary becomes.
pub fn summary_message(summary: &str) -> Message {
    Message::User(vec![UserPart::Text(format!(
        "[Summary of the earlier conversation, written when it was compacted to fit the context window]\n\n{summary}"
    ))])
}

impl Conversation {
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Where the running (or last) turn's messages start.
    pub fn turn_start(&self) -> usize {
        self.turn_start.min(self.messages.len())
    }

    /// The messages of the running turn.
    pub fn turn_messages(&self) -> &[Message] {
        &self.messages[self.turn_start.min(self.messages.len())..]
    }

    /// Where each change is recorded from now on.
    pub fn set_journal(&mut self, journal: Option<Arc<dyn Journal>>) {
        self.journal = journal;
    }

    fn record(&self, record: &Record) {
        if let Some(t) = &self.journal {
            t.record(record);
        }
    }

    pub fn begin_turn(&mut self) {
        self.turn_start = self.messages.len();
    }

    pub fn push(&mut self, message: Message) {
        if let Some(t) = &self.journal {
            t.record(&Record::Message { message: message.clone() });
        }
        self.note_calls_of(&message);
        self.messages.push(message);
    }

    fn note_calls_of(&mut self, message: &Message) {
        if let Message::Assistant(parts) = message {
            for part in parts {
                if let crate::providers::AssistantPart::ToolCall { id, .. } = part {
                    self.call_ids.insert(id.clone());
                }
            }
        }
    }

    /// Tool-call ids used outside the conversation (the memory flush's): no later call gets them.
    pub fn note_call_ids(&mut self, ids: impl IntoIterator<Item = String>) {
        self.call_ids.extend(ids);
    }

    /// Whether a tool-call id was used in this session.
    pub fn call_id_taken(&self, id: &str) -> bool {
        self.call_ids.contains(id)
    }

    /// Adds the model's reply, whose text and thoughts were recorded as they streamed under
    /// `text_id` and `thought_id`: the transcript gets the rest (see [`Record::Reply`]).
    pub fn push_reply(&mut self, parts: Vec<crate::providers::AssistantPart>, text_id: &str, thought_id: &str) {
        if let Some(t) = &self.journal {
            t.record(&Record::Reply {
                text_id: text_id.to_owned(),
                thought_id: thought_id.to_owned(),
                parts: super::record::ReplyPart::of(&parts),
            });
        }
        let message = Message::Assistant(parts);
        self.note_calls_of(&message);
        self.messages.push(message);
    }

    /// The running turn's messages leave the context.
    pub fn discard_turn(&mut self) {
        self.record(&Record::Discard);
        self.messages.truncate(self.turn_start);
    }

    /// Replaces everything but the last `kept` messages with `summary` (a kept part never starts
    /// with tool results whose calls were summarised: those go too).
    pub fn compact(&mut self, id: &str, summary: &str, kept: usize, tokens_before: u64, tokens_after: u64) {
        self.record(&Record::Compaction {
            id: id.to_owned(),
            summary: summary.to_owned(),
            kept,
            tokens_before,
            tokens_after,
        });
        self.apply_compaction(summary, kept);
    }

    fn apply_compaction(&mut self, summary: &str, kept: usize) {
        let mut cut = self.messages.len() - kept.min(self.messages.len());
        while self.messages.get(cut).is_some_and(is_tool_results) {
            cut += 1;
        }
        let tail = self.messages.split_off(cut);
        self.messages = Vec::with_capacity(tail.len() + 1);
        self.messages.push(summary_message(summary));
        self.messages.extend(tail);
        self.turn_start = if self.turn_start >= cut { self.turn_start - cut + 1 } else { 1 };
        self.flushed = false;
    }

    /// Whether the memory was flushed since the conversation was last compacted or cleared.
    pub fn flushed(&self) -> bool {
        self.flushed
    }

    /// When the memory was last flushed (Unix ms), compactions since included.
    pub fn flushed_at(&self) -> Option<i64> {
        self.flushed_at
    }

    /// The memory was flushed at `at` (Unix ms): not again before the next compaction.
    pub fn mark_flushed(&mut self, at: i64) {
        self.record(&Record::MemoryFlush { at });
        self.flushed = true;
        self.flushed_at = Some(at);
    }

    /// Clears the context.
    pub fn reset(&mut self) {
        self.record(&Record::Reset);
        self.messages.clear();
        self.turn_start = 0;
        self.flushed = false;
    }

    /// Replays a record (without recording it again). Returns whether it concerned the context.
    pub fn apply(&mut self, record: &Record) -> bool {
        match record {
            Record::User { .. } => self.turn_start = self.messages.len(),
            Record::Message { message } => {
                self.note_calls_of(message);
                self.messages.push(message.clone());
            }
            Record::Tool { state } => {
                self.call_ids.insert(state.id.clone());
                return false;
            }
            Record::Discard => self.messages.truncate(self.turn_start),
            Record::Compaction { summary, kept, .. } => self.apply_compaction(summary, *kept),
            Record::Reset => {
                self.messages.clear();
                self.turn_start = 0;
                self.flushed = false;
            }
            Record::MemoryFlush { at } => {
                self.flushed = true;
                self.flushed_at = Some(*at);
                return false;
            }
            _ => return false,
        }
        true
    }
}

/// A user message carrying tool results (it must follow the assistant message with the calls).
pub fn is_tool_results(message: &Message) -> bool {
    matches!(message, Message::User(parts) if parts.iter().any(|p| matches!(p, UserPart::ToolResult(_))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{AssistantPart, ToolResult};

    fn user(t: &str) -> Message {
        Message::User(vec![UserPart::Text(t.into())])
    }

    fn call(id: &str) -> Message {
        Message::Assistant(vec![AssistantPart::ToolCall { id: id.into(), name: "read".into(), arguments: "{}".into() }])
    }

    fn result(id: &str) -> Message {
        Message::User(vec![UserPart::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read".into(),
            content: "x".into(),
            is_error: false,
        })])
    }

    #[test]
    fn discard_drops_only_the_running_turn() {
        let mut c = Conversation::default();
        c.begin_turn();
        c.push(user("a"));
        c.begin_turn();
        c.push(user("b"));
        c.push(call("1"));
        c.discard_turn();
        assert_eq!(c.messages(), &[user("a")]);
    }

    #[test]
    fn compaction_never_keeps_orphaned_results() {
        let mut c = Conversation::default();
        for m in [user("a"), call("1"), result("1"), call("2"), result("2")] {
            c.push(m);
        }
        c.begin_turn();
        // Keeping 3 would start at result("1"), whose call is summarised: it goes too.
        c.compact("k1", "S", 3, 100, 10);
        assert_eq!(c.messages(), &[summary_message("S"), call("2"), result("2")]);
    }

    /// Keeps records as the transcript would: one JSON line each.
    #[derive(Debug, Default)]
    struct Lines(std::sync::Mutex<Vec<String>>);

    impl Journal for Lines {
        fn record(&self, record: &Record) {
            self.0.lock().unwrap().push(serde_json::to_string(record).unwrap());
        }
    }

    #[test]
    fn replaying_records_gives_the_same_context() {
        let lines = Arc::new(Lines::default());
        let mut live = Conversation::default();
        live.set_journal(Some(lines.clone()));
        let turn = |c: &mut Conversation, n: u64| {
            lines.record(&Record::User { turn: n, id: format!("u{n}"), blocks: vec![], at: 0 });
            c.begin_turn();
        };
        turn(&mut live, 1);
        live.push(user("a"));
        live.push(call("1"));
        live.push(result("1"));
        turn(&mut live, 2);
        live.push(user("refused"));
        live.discard_turn();
        turn(&mut live, 3);
        live.push(user("b"));
        live.compact("k", "summary", 1, 50, 5);
        live.push(call("2"));
        live.push(result("2"));
        turn(&mut live, 4);
        live.reset();
        live.push(user("c"));

        let mut replayed = Conversation::default();
        for line in lines.0.lock().unwrap().iter() {
            replayed.apply(&serde_json::from_str(line).unwrap());
        }
        assert_eq!(replayed.messages(), live.messages());
        assert_eq!(replayed.turn_start, live.turn_start);
    }
}
