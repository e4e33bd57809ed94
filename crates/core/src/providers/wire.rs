//! What every wire API shares: the conversation's messages, the request, usage, the
//! provider-neutral response events, and the limits a reply is held to (tokens, arguments, calls).

use super::error::{ErrorKind, ProviderError};
use crate::settings::ReasoningEffort;
use crate::tools::ToolSpec;

/// One message of the conversation, as sent to a model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    User(Vec<UserPart>),
    Assistant(Vec<AssistantPart>),
}

impl Message {
    /// Its words: a user message's text parts (a line apart), a reply's text (no reasoning, no
    /// tool calls or results).
    pub fn text(&self) -> String {
        match self {
            Self::User(parts) => parts
                .iter()
                .filter_map(|p| if let UserPart::Text(t) = p { Some(t.as_str()) } else { None })
                .collect::<Vec<_>>()
                .join("\n"),
            Self::Assistant(parts) => parts
                .iter()
                .filter_map(|p| if let AssistantPart::Text(t) = p { Some(t.as_str()) } else { None })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserPart {
    Text(String),
    /// Base64 image data.
    Image {
        mime_type: String,
        data: String,
    },
    /// The result of a tool call the model made in the previous assistant message.
    ToolResult(ToolResult),
}

/// A tool's answer to one call, as the model reads it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssistantPart {
    Text(String),
    /// Anthropic extended thinking (replayable only with its signature) or reasoning text from
    /// OpenAI-compatible servers (never replayed).
    Thinking {
        text: String,
        signature: Option<String>,
    },
    /// Anthropic redacted thinking, replayed as is.
    RedactedThinking {
        data: String,
    },
    /// An OpenAI Responses reasoning item, replayed as is when it carries encrypted content.
    Reasoning {
        id: String,
        encrypted_content: Option<String>,
        summary: Vec<String>,
    },
    /// Gemini's `thoughtSignature` for the part after it, given back to Gemini alone.
    Signature {
        signature: String,
    },
    /// A tool call; `arguments` is the JSON text exactly as the model produced it.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

/// One request to a model. It borrows the conversation: building a request copies nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub messages: Vec<&'a Message>,
    pub max_output_tokens: Option<u32>,
    pub reasoning: Option<ReasoningEffort>,
    pub tools: &'a [ToolSpec],
    /// Groups requests that share a prefix (a session's id), for providers that route on it
    /// (OpenAI's `prompt_cache_key`).
    pub cache_key: Option<&'a str>,
}

/// Token usage of one model request, normalised across providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// All input tokens, cached ones included.
    pub input: u64,
    /// All output tokens, reasoning included.
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: Option<u64>,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// The sum of two usages (saturating: a server's absurd count never wraps around).
    #[must_use]
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            cache_read: self.cache_read.saturating_add(other.cache_read),
            cache_write: self.cache_write.saturating_add(other.cache_write),
            reasoning: match (self.reasoning, other.reasoning) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            },
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    EndTurn,
    MaxTokens,
    Refusal,
    ToolUse,
    /// The model filled its context window.
    ContextWindow,
}

/// The provider-neutral stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseEvent {
    TextDelta(String),
    ThoughtDelta(String),
    /// Closes the current thinking block with its signature (Anthropic).
    ThinkingSignature(String),
    RedactedThinking(String),
    /// A complete reasoning item (OpenAI Responses).
    ReasoningItem {
        id: String,
        encrypted_content: Option<String>,
        summary: Vec<String>,
    },
    /// A complete tool call: its arguments were assembled from every fragment (still unparsed).
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// Gemini's `thoughtSignature` for the part that follows.
    PartSignature(String),
    /// Usage so far (cumulative for this request; the latest value wins).
    Usage(Usage),
    /// The terminal event: the stream ended properly.
    Completed(FinishReason),
    /// The request is being retried: forget whatever the failed attempt produced (never output the
    /// user saw — that is never retried).
    Restarted,
}

impl ResponseEvent {
    /// Whether this event shows something to the user (after which a request must not be retried).
    pub fn is_output(&self) -> bool {
        matches!(self, Self::TextDelta(_) | Self::ThoughtDelta(_))
    }
}

/// One message of the conversation as a wire API will send it: the parts it can take back, with
/// consecutive messages of the same role merged (every API wants roles to alternate, and a
/// cancelled or failed turn can leave two user messages in a row). Borrows; copies nothing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn<'a> {
    User(Vec<&'a UserPart>),
    Assistant(Vec<&'a AssistantPart>),
}

pub(crate) fn turns<'a>(
    messages: &[&'a Message],
    keep_user: impl Fn(&UserPart) -> bool,
    keep_assistant: impl Fn(&AssistantPart) -> bool,
) -> Vec<Turn<'a>> {
    let mut out: Vec<Turn<'a>> = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::User(parts) => {
                let kept = parts.iter().filter(|p| keep_user(p));
                match out.last_mut() {
                    Some(Turn::User(prev)) => prev.extend(kept),
                    _ => {
                        let kept: Vec<&UserPart> = kept.collect();
                        if !kept.is_empty() {
                            out.push(Turn::User(kept));
                        }
                    }
                }
            }
            Message::Assistant(parts) => {
                let kept = parts.iter().filter(|p| keep_assistant(p));
                match out.last_mut() {
                    Some(Turn::Assistant(prev)) => prev.extend(kept),
                    _ => {
                        let kept: Vec<&AssistantPart> = kept.collect();
                        if !kept.is_empty() {
                            out.push(Turn::Assistant(kept));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The arguments of a tool call as raw JSON, always an object (`{}` when they are not one).
pub(crate) fn arguments_raw(raw: &str) -> &serde_json::value::RawValue {
    static EMPTY: std::sync::OnceLock<Box<serde_json::value::RawValue>> = std::sync::OnceLock::new();
    match serde_json::from_str::<&serde_json::value::RawValue>(raw) {
        Ok(v) if v.get().trim_start().starts_with('{') => v,
        _ => EMPTY.get_or_init(|| serde_json::value::RawValue::from_string("{}".to_owned()).unwrap_or_default()),
    }
}

/// The largest token count taken from a provider's usage report; larger ones (`2^64 − 1`) are
/// this. Far above any real count, and low enough that sums of them never overflow.
pub const MAX_REPORTED_TOKENS: u64 = 1 << 48;

/// A token count from a usage report.
pub(crate) fn tokens(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().map(|n| n.min(MAX_REPORTED_TOKENS))
}

/// The most tool-call argument text one reply may stream, all its calls together: no real call
/// comes near it; a server streaming arguments forever is stopped here.
pub const MAX_ARGUMENTS_BYTES: usize = 8 << 20;

/// The most tool calls one reply may make: far above any real reply; a server that opens call
/// after call is stopped here.
pub const MAX_CALLS_PER_REPLY: usize = 256;

pub(crate) fn too_many_calls() -> ProviderError {
    ProviderError::new(
        ErrorKind::Protocol,
        format!("the model's reply opened more than {MAX_CALLS_PER_REPLY} tool calls; stopped"),
    )
}

/// Counts streamed argument bytes against [`MAX_ARGUMENTS_BYTES`].
pub(crate) fn count_arguments(total: &mut usize, added: usize) -> Result<(), ProviderError> {
    *total = total.saturating_add(added);
    if *total > MAX_ARGUMENTS_BYTES {
        return Err(ProviderError::new(
            ErrorKind::Protocol,
            format!("the model's tool-call arguments passed {} MiB; stopped", MAX_ARGUMENTS_BYTES >> 20),
        ));
    }
    Ok(())
}

/// Parses a JSON body from a provider, naming the provider in the error.
pub(crate) fn parse_json(data: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        let snippet: String = data.chars().take(200).collect();
        ProviderError::new(ErrorKind::Protocol, format!("the provider sent invalid JSON ({e}): {snippet}"))
    })
}
