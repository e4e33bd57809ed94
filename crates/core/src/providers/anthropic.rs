//! Anthropic Messages API: request body and stream decoding (`message_start` … `message_stop`).
//! Base URLs follow the official SDK: `ANTHROPIC_BASE_URL` has no `/v1`; we append `/v1/messages`.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::{ErrorKind, ProviderError};
use super::sse::SseEvent;
use super::wire::{AssistantPart, FinishReason, ModelRequest, ResponseEvent, Turn, Usage, UserPart};

pub const API_VERSION: &str = "2023-06-01";

pub fn url(base_url: &str) -> String {
    format!("{base_url}/v1/messages")
}

/// The request body, serialized straight from the borrowed conversation.
pub fn body(req: &ModelRequest<'_>) -> serde_json::Result<Vec<u8>> {
    let turns = super::wire::turns(
        &req.messages,
        |_| true,
        |p| match p {
            AssistantPart::Text(t) => !t.is_empty(),
            // Thinking is replayable only with its signature; other APIs' reasoning not at all.
            AssistantPart::Thinking { signature, .. } => signature.is_some(),
            AssistantPart::RedactedThinking { .. } | AssistantPart::ToolCall { .. } => true,
            AssistantPart::Reasoning { .. } | AssistantPart::Signature { .. } => false,
        },
    );
    let mut max_tokens = req.max_output_tokens.unwrap_or(16_384);
    let thinking = req.reasoning.map(|effort| {
        let budget = effort.budget_tokens();
        if max_tokens <= budget {
            max_tokens = budget + 4_096;
        }
        Thinking { r#type: "enabled", budget_tokens: budget }
    });
    let mut messages: Vec<MessageOut<'_>> = turns.iter().map(message).collect();
    // Prompt caching, four breakpoints at most: the tools, the system prompt, and the end of the
    // last two user messages — the end of this request (written to the cache) and the end of the
    // one before it (read from the cache, however many blocks this one added since). As the
    // conversation grows they move forward with it; the prefix behind them never changes.
    let users: Vec<usize> = messages.iter().enumerate().filter(|(_, m)| m.role == "user").map(|(i, _)| i).collect();
    for &i in users.iter().rev().take(2) {
        if let Some(last) = messages[i].content.last_mut() {
            last.cache_control = Some(EPHEMERAL);
        }
    }
    let tool_count = req.tools.len();
    let body = Body {
        model: req.model,
        max_tokens,
        stream: true,
        system: (!req.system.is_empty()).then_some([SystemBlock {
            r#type: "text",
            text: req.system,
            cache_control: EPHEMERAL,
        }]),
        messages,
        tools: req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| Tool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                cache_control: (i + 1 == tool_count).then_some(EPHEMERAL),
            })
            .collect(),
        thinking,
    };
    serde_json::to_vec(&body)
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
    messages: Vec<MessageOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    r#type: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    r#type: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { r#type: "ephemeral" };

#[derive(Serialize)]
struct Thinking {
    r#type: &'static str,
    budget_tokens: u32,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: Vec<Cached<'a>>,
}

/// A content block, maybe a cache breakpoint.
#[derive(Serialize)]
struct Cached<'a> {
    #[serde(flatten)]
    block: Block<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl<'a> From<Block<'a>> for Cached<'a> {
    fn from(block: Block<'a>) -> Self {
        Self { block, cache_control: None }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: ImageSource<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    r#type: &'static str,
    media_type: &'a str,
    data: &'a str,
}

fn message<'a>(turn: &Turn<'a>) -> MessageOut<'a> {
    match turn {
        Turn::User(parts) => {
            // Tool results must open the message; the user's own words follow.
            let results = parts.iter().filter_map(|p| match p {
                UserPart::ToolResult(r) => {
                    Some(Block::ToolResult { tool_use_id: &r.call_id, content: &r.content, is_error: r.is_error })
                }
                _ => None,
            });
            let rest = parts.iter().filter_map(|p| match p {
                UserPart::Text(text) => Some(Block::Text { text }),
                UserPart::Image { mime_type, data } => {
                    Some(Block::Image { source: ImageSource { r#type: "base64", media_type: mime_type, data } })
                }
                UserPart::ToolResult(_) => None,
            });
            MessageOut { role: "user", content: results.chain(rest).map(Cached::from).collect() }
        }
        Turn::Assistant(parts) => MessageOut {
            role: "assistant",
            content: parts
                .iter()
                .filter_map(|p| match p {
                    AssistantPart::Text(text) => Some(Block::Text { text }),
                    AssistantPart::Thinking { text, signature } => {
                        signature.as_deref().map(|signature| Block::Thinking { thinking: text, signature })
                    }
                    AssistantPart::RedactedThinking { data } => Some(Block::RedactedThinking { data }),
                    AssistantPart::ToolCall { id, name, arguments } => {
                        Some(Block::ToolUse { id, name, input: super::wire::arguments_raw(arguments) })
                    }
                    AssistantPart::Reasoning { .. } | AssistantPart::Signature { .. } => None,
                })
                .map(Cached::from)
                .collect(),
        },
    }
}

/// Error responses: `{"type":"error","error":{"type":…,"message":…},"request_id":…}`.
pub fn error_from_body(status: u16, body: &str) -> ProviderError {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let message = v["error"]["message"].as_str().unwrap_or(body).to_owned();
            let kind = v["error"]["type"].as_str().unwrap_or("");
            let mut e = ProviderError::from_status(status, message).refine(kind);
            e.request_id = v["request_id"].as_str().map(str::to_owned);
            e
        }
        Err(_) => ProviderError::from_status(status, super::error::snippet(body)),
    }
}

/// Decodes one Messages stream.
#[derive(Debug, Default)]
pub struct Decoder {
    usage: Usage,
    stop: Option<FinishReason>,
    finished: bool,
    /// Tool-use blocks being streamed, by block index: (id, name, JSON text so far).
    tools: std::collections::HashMap<u64, (String, String, String)>,
    /// Argument text streamed so far, all calls together.
    argument_bytes: usize,
}

impl Decoder {
    pub fn event(&mut self, ev: &SseEvent, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if !ev.has_data {
            return Ok(());
        }
        let v = super::wire::parse_json(&ev.data)?;
        let kind = v["type"].as_str().unwrap_or(ev.event_type());
        match kind {
            "message_start" => {
                self.read_usage(&v["message"]["usage"]);
                out.push(ResponseEvent::Usage(self.usage));
            }
            "content_block_start" => {
                let block = &v["content_block"];
                match block["type"].as_str() {
                    Some("text") => push_text(out, block["text"].as_str(), ResponseEvent::TextDelta),
                    Some("thinking") => push_text(out, block["thinking"].as_str(), ResponseEvent::ThoughtDelta),
                    Some("redacted_thinking") => {
                        out.push(ResponseEvent::RedactedThinking(block["data"].as_str().unwrap_or("").to_owned()));
                    }
                    Some("tool_use") => {
                        let index = v["index"].as_u64().unwrap_or(0);
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        let name = block["name"].as_str().unwrap_or_default().to_owned();
                        if self.tools.len() >= super::wire::MAX_CALLS_PER_REPLY {
                            return Err(super::wire::too_many_calls());
                        }
                        self.tools.insert(index, (id, name, String::new()));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = v["index"].as_u64().unwrap_or(0);
                if let Some((id, name, json)) = self.tools.remove(&index) {
                    // No fragments means no arguments.
                    let arguments = if json.trim().is_empty() { "{}".to_owned() } else { json };
                    out.push(ResponseEvent::ToolCall { id, name, arguments });
                }
            }
            "content_block_delta" => {
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => push_text(out, delta["text"].as_str(), ResponseEvent::TextDelta),
                    Some("thinking_delta") => push_text(out, delta["thinking"].as_str(), ResponseEvent::ThoughtDelta),
                    Some("signature_delta") => {
                        if let Some(sig) = delta["signature"].as_str() {
                            out.push(ResponseEvent::ThinkingSignature(sig.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        let index = v["index"].as_u64().unwrap_or(0);
                        if let (Some(call), Some(part)) = (self.tools.get_mut(&index), delta["partial_json"].as_str()) {
                            super::wire::count_arguments(&mut self.argument_bytes, part.len())?;
                            call.2.push_str(part);
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = v["delta"]["stop_reason"].as_str() {
                    self.stop = Some(finish_reason(reason));
                }
                self.read_usage(&v["usage"]);
                out.push(ResponseEvent::Usage(self.usage));
            }
            "message_stop" => {
                self.finished = true;
                out.push(ResponseEvent::Completed(self.stop.unwrap_or(FinishReason::EndTurn)));
            }
            "error" => {
                let message = v["error"]["message"].as_str().unwrap_or("error event without a message");
                let code = v["error"]["type"].as_str().unwrap_or("");
                return Err(ProviderError::new(ErrorKind::Server, message).refine(code));
            }
            _ => {} // ping, and event types added later
        }
        Ok(())
    }

    pub fn finish(&mut self, _out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if self.finished {
            Ok(())
        } else {
            Err(ProviderError::new(ErrorKind::Truncated, "the stream ended before `message_stop`"))
        }
    }

    /// Usage counts are cumulative: later values overwrite earlier ones; absent fields keep theirs.
    fn read_usage(&mut self, u: &Value) {
        let get = |k: &str| super::wire::tokens(&u[k]);
        let uncached = get("input_tokens");
        let write = get("cache_creation_input_tokens");
        let read = get("cache_read_input_tokens");
        if uncached.is_some() || write.is_some() || read.is_some() {
            if let Some(w) = write {
                self.usage.cache_write = w;
            }
            if let Some(r) = read {
                self.usage.cache_read = r;
            }
            let uncached = uncached.unwrap_or(
                self.usage.input.saturating_sub(self.usage.cache_read.saturating_add(self.usage.cache_write)),
            );
            self.usage.input = uncached.saturating_add(self.usage.cache_write).saturating_add(self.usage.cache_read);
        }
        if let Some(o) = get("output_tokens") {
            self.usage.output = o;
        }
        if let Some(t) = super::wire::tokens(&u["output_tokens_details"]["thinking_tokens"]) {
            self.usage.reasoning = Some(t);
        }
    }
}

fn push_text(out: &mut Vec<ResponseEvent>, text: Option<&str>, make: fn(String) -> ResponseEvent) {
    if let Some(t) = text.filter(|t| !t.is_empty()) {
        out.push(make(t.to_owned()));
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "max_tokens" => FinishReason::MaxTokens,
        "refusal" => FinishReason::Refusal,
        "tool_use" => FinishReason::ToolUse,
        "model_context_window_exceeded" => FinishReason::ContextWindow,
        _ => FinishReason::EndTurn, // end_turn, stop_sequence, pause_turn
    }
}
