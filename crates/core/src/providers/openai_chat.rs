//! OpenAI Chat Completions: request body and chunk decoding. Also serves the compatible servers
//! (Ollama, llama.cpp, vLLM, LM Studio, OpenRouter): reasoning in `reasoning_content` or
//! `reasoning`, `choices: null`, in-stream `error` objects (also bare `{"object":"error"}`), numeric
//! error codes, and llama.cpp's non-standard `error:` SSE field.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::error::{ErrorKind, ProviderError};
use super::sse::SseEvent;
use super::wire::{AssistantPart, FinishReason, ModelRequest, ResponseEvent, Turn, Usage, UserPart};

pub fn url(base_url: &str) -> String {
    format!("{base_url}/chat/completions")
}

/// The request body, serialized straight from the borrowed conversation. `official` selects
/// `max_completion_tokens` (OpenAI itself) over `max_tokens` (what the compatible servers know),
/// and sends the reasoning levels only OpenAI has (`minimal`, `xhigh`) as they are.
pub fn body(req: &ModelRequest<'_>, official: bool, cache_key: bool) -> serde_json::Result<Vec<u8>> {
    // Chat Completions takes back text and tool calls: reasoning is never replayed.
    let turns = super::wire::turns(
        &req.messages,
        |_| true,
        |p| match p {
            AssistantPart::Text(t) => !t.is_empty(),
            AssistantPart::ToolCall { .. } => true,
            _ => false,
        },
    );
    let mut messages = Vec::with_capacity(turns.len() + 1);
    if !req.system.is_empty() {
        messages.push(ChatMessage::text("system", Cow::Borrowed(req.system)));
    }
    for turn in &turns {
        push_messages(turn, &mut messages);
    }
    let (max_tokens, max_completion_tokens) =
        if official { (None, req.max_output_tokens) } else { (req.max_output_tokens, None) };
    let body = Body {
        model: req.model,
        stream: true,
        stream_options: StreamOptions { include_usage: true },
        messages,
        max_tokens,
        max_completion_tokens,
        tools: req
            .tools
            .iter()
            .map(|t| Tool {
                r#type: "function",
                function: Function { name: &t.name, description: &t.description, parameters: &t.parameters },
            })
            .collect(),
        reasoning_effort: req.reasoning.map(|e| if official { e } else { e.common() }.as_str()),
        prompt_cache_key: if cache_key { req.cache_key } else { None },
    };
    serde_json::to_vec(&body)
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    stream_options: StreamOptions,
    messages: Vec<ChatMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    /// Requests with one key are routed to the same cache (one per session).
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> ChatMessage<'a> {
    fn text(role: &'static str, text: Cow<'a, str>) -> Self {
        Self { role, content: Content::Text(text), tool_calls: Vec::new(), tool_call_id: None }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct ToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// One conversation turn may become several messages: each tool result is its own `tool` message.
fn push_messages<'a>(turn: &Turn<'a>, out: &mut Vec<ChatMessage<'a>>) {
    match turn {
        Turn::User(parts) => {
            for p in parts {
                if let UserPart::ToolResult(r) = p {
                    // There is no error flag: say it in the text.
                    let content = if r.is_error {
                        Cow::Owned(format!("ERROR: {}", r.content))
                    } else {
                        Cow::Borrowed(r.content.as_str())
                    };
                    out.push(ChatMessage { tool_call_id: Some(&r.call_id), ..ChatMessage::text("tool", content) });
                }
            }
            let rest: Vec<&UserPart> =
                parts.iter().copied().filter(|p| !matches!(p, UserPart::ToolResult(_))).collect();
            if rest.is_empty() {
                return;
            }
            if let [UserPart::Text(text)] = rest.as_slice() {
                out.push(ChatMessage::text("user", Cow::Borrowed(text)));
            } else if rest.iter().all(|p| matches!(p, UserPart::Text(_))) {
                let joined: Vec<&str> = rest
                    .iter()
                    .filter_map(|p| match p {
                        UserPart::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect();
                out.push(ChatMessage::text("user", Cow::Owned(joined.join("\n\n"))));
            } else {
                let parts = rest
                    .iter()
                    .filter_map(|p| match p {
                        UserPart::Text(text) => Some(Part::Text { text }),
                        UserPart::Image { mime_type, data } => Some(Part::ImageUrl {
                            image_url: ImageUrl { url: format!("data:{mime_type};base64,{data}") },
                        }),
                        UserPart::ToolResult(_) => None,
                    })
                    .collect();
                out.push(ChatMessage {
                    content: Content::Parts(parts),
                    ..ChatMessage::text("user", Cow::Borrowed(""))
                });
            }
        }
        Turn::Assistant(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    AssistantPart::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            let text = match texts.as_slice() {
                [one] => Cow::Borrowed(*one),
                many => Cow::Owned(many.concat()),
            };
            let tool_calls = parts
                .iter()
                .filter_map(|p| match p {
                    AssistantPart::ToolCall { id, name, arguments } => {
                        Some(ToolCall { id, r#type: "function", function: CallFunction { name, arguments } })
                    }
                    _ => None,
                })
                .collect();
            out.push(ChatMessage { tool_calls, ..ChatMessage::text("assistant", text) });
        }
    }
}

/// Error bodies: `{"error":{"message","type","param","code"}}`; OpenRouter uses a numeric `code`.
pub fn error_from_body(status: u16, body: &str) -> ProviderError {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v.get("error").is_some() || v.get("message").is_some() => {
            let err = if v.get("error").is_some() { &v["error"] } else { &v };
            let mut e = ProviderError::from_status(status, error_message(err, body));
            for key in ["code", "type"] {
                if let Some(code) = err[key].as_str() {
                    e = e.refine(code);
                }
            }
            e
        }
        _ => ProviderError::from_status(status, super::error::snippet(body)),
    }
}

fn error_message(err: &Value, fallback: &str) -> String {
    match err {
        Value::String(s) => s.clone(),
        _ => err["message"].as_str().map_or_else(|| super::error::snippet(fallback), str::to_owned),
    }
}

/// An error object inside the stream (HTTP status was 200).
fn in_stream_error(err: &Value, raw: &str) -> ProviderError {
    let message = error_message(err, raw);
    let mut e = match err["code"].as_u64() {
        Some(code @ 400..=599) => {
            let mut e = ProviderError::from_status(code as u16, message);
            e.status = None; // the HTTP status was 200; the code only classifies
            e
        }
        _ => ProviderError::new(ErrorKind::Server, message),
    };
    for key in ["code", "type"] {
        if let Some(code) = err[key].as_str() {
            e = e.refine(code);
        }
    }
    e
}

/// Decodes one Chat Completions stream.
#[derive(Debug, Default)]
pub struct Decoder {
    finish: Option<FinishReason>,
    refused: bool,
    done: bool,
    /// Tool calls being assembled, keyed by their `index` (not their id, which some servers repeat
    /// or omit): (id, name, arguments so far).
    calls: std::collections::BTreeMap<u64, (String, String, String)>,
    /// Argument text streamed so far, all calls together.
    argument_bytes: usize,
}

impl Decoder {
    pub fn event(&mut self, ev: &SseEvent, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        // llama.cpp reports mid-stream failures in a non-standard `error:` field.
        if let Some((_, raw)) = ev.other.iter().find(|(k, _)| k == "error") {
            let v: Value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()));
            return Err(in_stream_error(&v, raw));
        }
        if !ev.has_data {
            return Ok(());
        }
        if ev.data.trim() == "[DONE]" {
            self.done = true;
            return match self.finish {
                Some(reason) => {
                    self.complete(reason, out);
                    Ok(())
                }
                None => Err(ProviderError::new(ErrorKind::Truncated, "the stream ended without a finish reason")),
            };
        }
        let v = super::wire::parse_json(&ev.data)?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(in_stream_error(err, &ev.data));
        }
        if v["object"] == "error" {
            return Err(in_stream_error(&v, &ev.data));
        }
        if let Some(choices) = v["choices"].as_array() {
            for choice in choices.iter().filter(|c| c["index"].as_u64().unwrap_or(0) == 0) {
                let delta = &choice["delta"];
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(t) = delta[key].as_str().filter(|t| !t.is_empty()) {
                        out.push(ResponseEvent::ThoughtDelta(t.to_owned()));
                    }
                }
                if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                    out.push(ResponseEvent::TextDelta(t.to_owned()));
                }
                if let Some(t) = delta["refusal"].as_str().filter(|t| !t.is_empty()) {
                    self.refused = true;
                    out.push(ResponseEvent::TextDelta(t.to_owned()));
                }
                for call in delta["tool_calls"].as_array().map(Vec::as_slice).unwrap_or_default() {
                    let index = call["index"].as_u64().unwrap_or(self.calls.len() as u64);
                    if !self.calls.contains_key(&index) && self.calls.len() >= super::wire::MAX_CALLS_PER_REPLY {
                        return Err(super::wire::too_many_calls());
                    }
                    let entry = self.calls.entry(index).or_default();
                    if let Some(id) = call["id"].as_str().filter(|s| !s.is_empty())
                        && entry.0.is_empty()
                    {
                        entry.0 = id.to_owned();
                    }
                    // LM Studio sends `"name": ""` on continuation fragments: never overwrite with it.
                    if let Some(name) = call["function"]["name"].as_str().filter(|s| !s.is_empty()) {
                        entry.1 = name.to_owned();
                    }
                    if let Some(args) = call["function"]["arguments"].as_str() {
                        super::wire::count_arguments(&mut self.argument_bytes, args.len())?;
                        entry.2.push_str(args);
                    }
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    self.finish = Some(match reason {
                        "length" => FinishReason::MaxTokens,
                        "content_filter" => FinishReason::Refusal,
                        "tool_calls" | "function_call" => FinishReason::ToolUse,
                        _ if self.refused => FinishReason::Refusal,
                        _ => FinishReason::EndTurn,
                    });
                }
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.push(ResponseEvent::Usage(Usage {
                input: super::wire::tokens(&u["prompt_tokens"]).unwrap_or(0),
                output: super::wire::tokens(&u["completion_tokens"]).unwrap_or(0),
                cache_read: super::wire::tokens(&u["prompt_tokens_details"]["cached_tokens"]).unwrap_or(0),
                cache_write: 0,
                reasoning: super::wire::tokens(&u["completion_tokens_details"]["reasoning_tokens"]),
            }));
        }
        Ok(())
    }

    /// End of body without `[DONE]`: accepted only if a finish reason was seen.
    pub fn finish(&mut self, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        match self.finish {
            Some(reason) => {
                self.complete(reason, out);
                Ok(())
            }
            None => Err(ProviderError::new(ErrorKind::Truncated, "the stream ended before `[DONE]`")),
        }
    }

    /// Emits the assembled tool calls, then the terminal event.
    fn complete(&mut self, reason: FinishReason, out: &mut Vec<ResponseEvent>) {
        for (index, (id, name, arguments)) in std::mem::take(&mut self.calls) {
            let id = if id.is_empty() { format!("call_{}_{index}", uuid::Uuid::new_v4().simple()) } else { id };
            // Some servers send `""` for a call without arguments.
            let arguments = if arguments.trim().is_empty() { "{}".to_owned() } else { arguments };
            out.push(ResponseEvent::ToolCall { id, name, arguments });
        }
        out.push(ResponseEvent::Completed(reason));
    }
}
