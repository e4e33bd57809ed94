//! What a session's transcript holds: one [`Record`] per line — every prompt, everything shown,
//! every change to the conversation the model sees, settings changes and the end of each turn.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::StopReason;
use super::input::UserBlock;
use crate::providers::{AssistantPart, Message, Usage};
use crate::settings::{Mode, ReasoningEffort};
use crate::stream::tool_update::Patch;
use crate::tools::ToolCallState;
use crate::tools::plan::PlanEntry;

/// The transcript format this build writes (the `v` of the first line).
pub const FORMAT_VERSION: u32 = 1;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Record {
    /// The first line.
    Session {
        v: u32,
        id: String,
        cwd: PathBuf,
        created_at: i64,
    },
    /// The session's model, mode and reasoning from here on.
    Settings {
        model: String,
        mode: Mode,
        reasoning: Option<ReasoningEffort>,
    },
    /// A turn starts: the prompt as the user sent it.
    User {
        turn: u64,
        id: String,
        blocks: Vec<UserBlock>,
        at: i64,
    },
    /// Reply text (consecutive records with one id are one message).
    Text {
        id: String,
        text: String,
    },
    Thought {
        id: String,
        text: String,
    },
    /// A tool call, as announced.
    Tool {
        state: ToolCallState,
    },
    /// A tool call's final state, as the fields that changed since it was announced.
    ToolEnd {
        id: String,
        patch: Patch,
    },
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// A message added to the model's context.
    Message {
        message: Message,
    },
    /// An assistant message added to the model's context whose text and thinking are the `text`
    /// and `thought` records already written under `text_id` and `thought_id` as they streamed:
    /// only their lengths are here, so a reply is written once.
    Reply {
        text_id: String,
        thought_id: String,
        parts: Vec<ReplyPart>,
    },
    /// The current turn's messages leave the model's context (a refusal, or a failure before
    /// anything was shown).
    Discard,
    /// The model's context became a summary plus the last `kept` messages.
    Compaction {
        id: String,
        summary: String,
        kept: usize,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The model's context was cleared (`/new`, `/reset`).
    Reset,
    /// The model was asked to save what should outlast the coming compaction to the memory files
    /// (once per compaction cycle; docs/memory.md).
    MemoryFlush {
        at: i64,
    },
    /// A turn ended.
    End {
        turn: u64,
        /// `None`: it failed (see `error`).
        stop: Option<StopReason>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        usage: Usage,
        /// Tokens in the context after the turn's last model request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<u64>,
        /// `provider/model` of the model that answered the turn's last request (the session's
        /// own, or the fallback it failed over to).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The turn never ended: acp stopped during it (recorded when the session was next opened).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
        at: i64,
    },
}

/// A part of a [`Record::Reply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReplyPart {
    /// The next `len` bytes of the text streamed under `text_id`.
    Text { len: usize },
    /// The next `len` bytes of the thoughts streamed under `thought_id`.
    Thinking {
        len: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Any other part, whole.
    Other { part: AssistantPart },
}

impl ReplyPart {
    /// A reply's parts without their streamed text.
    pub fn of(parts: &[AssistantPart]) -> Vec<Self> {
        parts
            .iter()
            .map(|p| match p {
                AssistantPart::Text(text) => Self::Text { len: text.len() },
                AssistantPart::Thinking { text, signature } => {
                    Self::Thinking { len: text.len(), signature: signature.clone() }
                }
                other => Self::Other { part: other.clone() },
            })
            .collect()
    }
}
