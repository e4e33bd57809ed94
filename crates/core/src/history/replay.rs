//! Transcript records → what a reloaded session shows (in order: prompts, reply text and thoughts
//! merged per message, every tool call in its final state, plans, notices) and what the model sees
//! next (the [`Conversation`], rebuilt by the same operations that built it live), plus the last
//! settings and the token totals.
//!
//! A turn that never ended (acp was killed during it) is closed here: tool calls still running are
//! marked failed, reply text already shown is kept as the assistant's message, calls without results
//! get "interrupted" results, and a turn with no reply at all leaves the context (so the prompt can be
//! sent again). These closing records are returned in `repair` so the writer can append them.

use std::collections::HashMap;

use super::record::{Record, ReplyPart};
use crate::clock::now_ms;
use crate::history::conversation::Conversation;
use crate::history::input::UserBlock;
use crate::providers::{AssistantPart, Message, ToolResult, Usage, UserPart};
use crate::settings::Mode;
use crate::settings::ReasoningEffort;
use crate::stream::tool_update::Patch;
use crate::tools::plan::PlanEntry;
use crate::tools::{ToolCallState, ToolContent, ToolStatus};

/// One thing a reloaded session shows, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    User {
        id: String,
        blocks: Vec<UserBlock>,
        /// When it was sent (Unix milliseconds; 0 in transcripts from before it was kept).
        at: i64,
    },
    Text {
        id: String,
        text: String,
    },
    Thought {
        id: String,
        text: String,
    },
    Tool(Box<ToolCallState>),
    Plan(Vec<PlanEntry>),
    Compaction {
        id: String,
        summary: String,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// What acp said about a turn: the error that ended it, or that it was interrupted.
    Notice {
        id: String,
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredSettings {
    pub model: String,
    pub mode: Mode,
    pub reasoning: Option<ReasoningEffort>,
}

#[derive(Debug, Default)]
pub struct Replay {
    pub shown: Vec<Shown>,
    pub conversation: Conversation,
    pub settings: Option<StoredSettings>,
    /// Token usage summed over every turn.
    pub usage: Usage,
    /// Tokens in the context after the last model request.
    pub context_tokens: Option<u64>,
    pub turns: u64,
    pub last_turn: u64,
    pub compactions: usize,
    /// Records that close a turn that never ended; append them before anything else.
    pub repair: Vec<Record>,
}

/// What replay tracks of the turn in progress.
#[derive(Default)]
struct Open {
    turn: u64,
    /// Reply text shown since the turn's last message was recorded.
    partial: String,
    replied: bool,
    running: Vec<String>,
}

pub const INTERRUPTED: &str = "acp stopped before this turn finished";

pub fn replay(records: impl IntoIterator<Item = Record>) -> Replay {
    let mut r = Builder::default();
    for record in records {
        r.apply(record);
    }
    if r.open.is_some() {
        let repair = r.close_open_turn();
        r.out.repair = repair;
    }
    let background = r.close_background();
    r.out.repair.extend(background);
    r.out
}

/// Tool calls that outlive their turn: a subagent's (`subagent-<id>`), which ends on its own.
fn outlives_turn(id: &str) -> bool {
    id.starts_with("subagent-")
}

#[derive(Default)]
struct Builder {
    out: Replay,
    tools: HashMap<String, usize>,
    open: Option<Open>,
    /// Text and thoughts streamed in the open turn, by message id, until a reply takes them.
    streamed: HashMap<String, String>,
    /// Calls still running after their turn ended ([`outlives_turn`]).
    background: Vec<String>,
}

impl Builder {
    /// The message a [`Record::Reply`] stands for: its parts, with the text streamed before it.
    fn resolve(&mut self, text_id: &str, thought_id: &str, parts: Vec<ReplyPart>) -> Message {
        let text = self.streamed.remove(text_id).unwrap_or_default();
        let thought = self.streamed.remove(thought_id).unwrap_or_default();
        let (mut at_text, mut at_thought) = (0, 0);
        // The next `len` bytes of `all` from `*at` (less if fewer were written).
        fn take(all: &str, at: &mut usize, len: usize) -> String {
            let start = (*at).min(all.len());
            let mut end = start.saturating_add(len).min(all.len());
            while !all.is_char_boundary(end) {
                end -= 1;
            }
            *at = end;
            all[start..end].to_owned()
        }
        let parts = parts
            .into_iter()
            .map(|p| match p {
                ReplyPart::Text { len } => AssistantPart::Text(take(&text, &mut at_text, len)),
                ReplyPart::Thinking { len, signature } => {
                    AssistantPart::Thinking { text: take(&thought, &mut at_thought, len), signature }
                }
                ReplyPart::Other { part } => part,
            })
            .collect();
        Message::Assistant(parts)
    }

    fn apply(&mut self, record: Record) {
        let record = match record {
            Record::Reply { text_id, thought_id, parts } => {
                Record::Message { message: self.resolve(&text_id, &thought_id, parts) }
            }
            other => other,
        };
        if matches!(record, Record::User { .. }) && self.open.is_some() {
            // A turn that never ended, followed by more: close it where it stopped.
            self.close_open_turn();
        }
        self.out.conversation.apply(&record);
        match record {
            Record::Session { .. } => {}
            Record::Settings { model, mode, reasoning } => {
                self.out.settings = Some(StoredSettings { model, mode, reasoning });
            }
            Record::User { turn, id, blocks, at } => {
                self.open = Some(Open { turn, ..Open::default() });
                self.out.turns += 1;
                self.out.last_turn = turn;
                self.out.shown.push(Shown::User { id, blocks, at });
            }
            Record::Text { id, text } => {
                if let Some(open) = &mut self.open {
                    open.partial.push_str(&text);
                    self.streamed.entry(id.clone()).or_default().push_str(&text);
                }
                match self.out.shown.last_mut() {
                    Some(Shown::Text { id: last, text: t }) if *last == id => t.push_str(&text),
                    _ => self.out.shown.push(Shown::Text { id, text }),
                }
            }
            Record::Thought { id, text } => {
                if self.open.is_some() {
                    self.streamed.entry(id.clone()).or_default().push_str(&text);
                }
                match self.out.shown.last_mut() {
                    Some(Shown::Thought { id: last, text: t }) if *last == id => t.push_str(&text),
                    _ => self.out.shown.push(Shown::Thought { id, text }),
                }
            }
            Record::Tool { state } => {
                if let Some(open) = &mut self.open
                    && !matches!(state.status, ToolStatus::Completed | ToolStatus::Failed)
                {
                    open.running.push(state.id.clone());
                }
                self.tools.insert(state.id.clone(), self.out.shown.len());
                self.out.shown.push(Shown::Tool(Box::new(state)));
            }
            Record::ToolEnd { id, patch } => {
                if let Some(open) = &mut self.open {
                    open.running.retain(|r| *r != id);
                }
                self.background.retain(|r| *r != id);
                if let Some(Shown::Tool(state)) = self.tools.get(&id).and_then(|i| self.out.shown.get_mut(*i)) {
                    patch.apply(state);
                }
            }
            Record::Plan { entries } => self.out.shown.push(Shown::Plan(entries)),
            Record::Message { message } => {
                if let Some(open) = &mut self.open {
                    open.partial.clear();
                    open.replied |= matches!(message, Message::Assistant(_));
                }
                if let Message::User(parts) = &message {
                    self.show_terminal_output(parts);
                }
            }
            Record::Discard | Record::Reset | Record::MemoryFlush { .. } => {}
            Record::Reply { .. } => {} // resolved into a message above
            Record::Compaction { id, summary, tokens_before, tokens_after, .. } => {
                self.out.compactions += 1;
                self.out.shown.push(Shown::Compaction { id, summary, tokens_before, tokens_after });
            }
            Record::End { turn, stop, error, usage, context, interrupted, .. } => {
                if let Some(open) = self.open.take() {
                    self.background.extend(open.running.into_iter().filter(|id| outlives_turn(id)));
                }
                self.streamed.clear();
                self.out.usage = self.out.usage.plus(usage);
                if context.is_some() {
                    self.out.context_tokens = context;
                }
                let notice = match (stop, error) {
                    _ if interrupted => Some(format!("\n\n*{INTERRUPTED}.*")),
                    (None, Some(error)) => Some(format!("\n\n**Error:** {error}")),
                    _ => None,
                };
                if let Some(text) = notice {
                    self.out.shown.push(Shown::Notice { id: format!("end_{turn}"), text });
                }
            }
        }
    }

    /// A call that ran in the editor's terminal showed that terminal, which is gone now: show what
    /// the model read of its output instead.
    fn show_terminal_output(&mut self, parts: &[UserPart]) {
        for part in parts {
            let UserPart::ToolResult(result) = part else { continue };
            let Some(Shown::Tool(state)) = self.tools.get(&result.call_id).and_then(|i| self.out.shown.get_mut(*i))
            else {
                continue;
            };
            for content in &mut state.content {
                if matches!(content, ToolContent::Terminal(_)) {
                    *content = ToolContent::Text(format!("```\n{}\n```", result.content.trim_end()));
                }
            }
        }
    }

    /// The records that end calls that outlived their turn and never ended; applies them too.
    fn close_background(&mut self) -> Vec<Record> {
        let ids = std::mem::take(&mut self.background);
        let repair = self.interrupted(&ids);
        for record in &repair {
            self.apply(record.clone());
        }
        repair
    }

    /// Records ending the calls `ids` as interrupted.
    fn interrupted(&self, ids: &[String]) -> Vec<Record> {
        let mut repair = Vec::new();
        for id in ids {
            let Some(Shown::Tool(state)) = self.tools.get(id).and_then(|i| self.out.shown.get(*i)) else { continue };
            let mut content = state.content.clone();
            content.push(ToolContent::Text(format!("Interrupted: {INTERRUPTED}.")));
            let patch = Patch { status: Some(ToolStatus::Failed), content: Some(content), ..Patch::default() };
            repair.push(Record::ToolEnd { id: id.clone(), patch });
        }
        repair
    }

    /// The records that end the open turn where it stopped; applies them too.
    fn close_open_turn(&mut self) -> Vec<Record> {
        let Some(open) = self.open.take() else { return Vec::new() };
        let mut repair = self.interrupted(&open.running);
        let messages = self.out.conversation.turn_messages();
        let unanswered = unanswered_calls(messages);
        if !open.partial.is_empty() {
            repair
                .push(Record::Message { message: Message::Assistant(vec![AssistantPart::Text(open.partial.clone())]) });
        } else if !unanswered.is_empty() {
            let results = unanswered
                .into_iter()
                .map(|(id, name)| {
                    UserPart::ToolResult(ToolResult {
                        call_id: id,
                        name,
                        content: format!("Not finished: {INTERRUPTED}; the call may or may not have taken effect."),
                        is_error: true,
                    })
                })
                .collect();
            repair.push(Record::Message { message: Message::User(results) });
        } else if !open.replied {
            repair.push(Record::Discard);
        }
        repair.push(Record::End {
            turn: open.turn,
            stop: None,
            error: None,
            usage: Usage::default(),
            context: None,
            model: None,
            interrupted: true,
            at: now_ms(),
        });
        for record in &repair {
            self.apply(record.clone());
        }
        repair
    }
}

/// Tool calls of the last assistant message that no result answers.
fn unanswered_calls(messages: &[Message]) -> Vec<(String, String)> {
    let Some(Message::Assistant(parts)) = messages.last() else { return Vec::new() };
    parts
        .iter()
        .filter_map(|p| match p {
            AssistantPart::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect()
}
