//! OpenAI Responses API: request body (stateless, `store: false`) and event decoding. There is no
//! `[DONE]`: the stream ends with `response.completed`, `response.incomplete`, `response.failed` or
//! `error`.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::error::{ErrorKind, ProviderError};
use super::sse::SseEvent;
use super::wire::{AssistantPart, FinishReason, ModelRequest, ResponseEvent, Turn, Usage, UserPart};

pub fn url(base_url: &str) -> String {
    format!("{base_url}/responses")
}

/// The request body (stateless: `store: false`), serialized straight from the borrowed
/// conversation.
pub fn body(req: &ModelRequest<'_>, cache_key: bool) -> serde_json::Result<Vec<u8>> {
    // Text, tool calls and the reasoning items that can be replayed (those with encrypted content).
    let turns = super::wire::turns(
        &req.messages,
        |_| true,
        |p| match p {
            AssistantPart::Text(t) => !t.is_empty(),
            AssistantPart::Reasoning { encrypted_content, .. } => encrypted_content.is_some(),
            AssistantPart::ToolCall { .. } => true,
            _ => false,
        },
    );
    let mut input = Vec::with_capacity(turns.len());
    for turn in &turns {
        push_items(turn, &mut input);
    }
    let body = Body {
        model: req.model,
        stream: true,
        store: false,
        instructions: (!req.system.is_empty()).then_some(req.system),
        input,
        max_output_tokens: req.max_output_tokens,
        tools: req
            .tools
            .iter()
            .map(|t| Tool {
                r#type: "function",
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
                strict: false,
            })
            .collect(),
        reasoning: req.reasoning.map(|e| Reasoning { effort: e.as_str(), summary: "auto" }),
        include: if req.reasoning.is_some() { vec!["reasoning.encrypted_content"] } else { Vec::new() },
        prompt_cache_key: if cache_key { req.cache_key } else { None },
    };
    serde_json::to_vec(&body)
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    include: Vec<&'static str>,
    /// Requests with one key are routed to the same cache (one per session).
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct Reasoning {
    effort: &'static str,
    summary: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    User { role: &'static str, content: Vec<UserContent<'a>> },
    Typed(TypedItem<'a>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TypedItem<'a> {
    FunctionCallOutput { call_id: &'a str, output: Cow<'a, str> },
    Reasoning { id: &'a str, encrypted_content: Option<&'a str>, summary: Vec<Summary<'a>> },
    Message { role: &'static str, content: Vec<OutputText<'a>> },
    FunctionCall { call_id: &'a str, name: &'a str, arguments: &'a str },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum UserContent<'a> {
    InputText { text: &'a str },
    InputImage { image_url: String },
}

#[derive(Serialize)]
struct Summary<'a> {
    r#type: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct OutputText<'a> {
    r#type: &'static str,
    text: Cow<'a, str>,
}

fn push_items<'a>(turn: &Turn<'a>, input: &mut Vec<Item<'a>>) {
    match turn {
        Turn::User(parts) => {
            for p in parts {
                if let UserPart::ToolResult(r) = p {
                    let output = if r.is_error {
                        Cow::Owned(format!("ERROR: {}", r.content))
                    } else {
                        Cow::Borrowed(r.content.as_str())
                    };
                    input.push(Item::Typed(TypedItem::FunctionCallOutput { call_id: &r.call_id, output }));
                }
            }
            let content: Vec<UserContent<'a>> = parts
                .iter()
                .filter_map(|p| match p {
                    UserPart::Text(text) => Some(UserContent::InputText { text }),
                    UserPart::Image { mime_type, data } => {
                        Some(UserContent::InputImage { image_url: format!("data:{mime_type};base64,{data}") })
                    }
                    UserPart::ToolResult(_) => None,
                })
                .collect();
            if !content.is_empty() {
                input.push(Item::User { role: "user", content });
            }
        }
        Turn::Assistant(parts) => {
            let mut texts: Vec<&str> = Vec::new();
            let mut calls = Vec::new();
            for p in parts {
                match p {
                    AssistantPart::Reasoning { id, encrypted_content, summary } => {
                        input.push(Item::Typed(TypedItem::Reasoning {
                            id,
                            encrypted_content: encrypted_content.as_deref(),
                            summary: summary.iter().map(|text| Summary { r#type: "summary_text", text }).collect(),
                        }));
                    }
                    AssistantPart::Text(t) => texts.push(t),
                    AssistantPart::ToolCall { id, name, arguments } => {
                        calls.push(Item::Typed(TypedItem::FunctionCall { call_id: id, name, arguments }));
                    }
                    _ => {}
                }
            }
            if !texts.is_empty() {
                let text = if texts.len() == 1 { Cow::Borrowed(texts[0]) } else { Cow::Owned(texts.concat()) };
                input.push(Item::Typed(TypedItem::Message {
                    role: "assistant",
                    content: vec![OutputText { r#type: "output_text", text }],
                }));
            }
            input.extend(calls);
        }
    }
}

/// Error bodies have the Chat Completions shape.
pub fn error_from_body(status: u16, body: &str) -> ProviderError {
    super::openai_chat::error_from_body(status, body)
}

/// Decodes one Responses stream.
#[derive(Debug, Default)]
pub struct Decoder {
    refused: bool,
    finished: bool,
    /// Tool calls and their argument text so far.
    calls: usize,
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
            "response.output_text.delta" => push_text(out, &v["delta"], ResponseEvent::TextDelta),
            "response.refusal.delta" => {
                self.refused = true;
                push_text(out, &v["delta"], ResponseEvent::TextDelta);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                push_text(out, &v["delta"], ResponseEvent::ThoughtDelta);
            }
            "response.reasoning_summary_part.added"
                // Separate the parts of a multi-part summary.
                if v["summary_index"].as_u64().unwrap_or(0) > 0 => {
                    out.push(ResponseEvent::ThoughtDelta("\n\n".into()));
                }
            "response.output_item.done" => {
                let item = &v["item"];
                if item["type"] == "function_call" {
                    let arguments = item["arguments"].as_str().unwrap_or_default();
                    super::wire::count_arguments(&mut self.argument_bytes, arguments.len())?;
                    self.calls += 1;
                    if self.calls > super::wire::MAX_CALLS_PER_REPLY {
                        return Err(super::wire::too_many_calls());
                    }
                    out.push(ResponseEvent::ToolCall {
                        id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                        name: item["name"].as_str().unwrap_or_default().to_owned(),
                        arguments: if arguments.trim().is_empty() { "{}".to_owned() } else { arguments.to_owned() },
                    });
                }
                if item["type"] == "reasoning" {
                    let summary = item["summary"]
                        .as_array()
                        .map(|parts| parts.iter().filter_map(|p| p["text"].as_str().map(str::to_owned)).collect())
                        .unwrap_or_default();
                    out.push(ResponseEvent::ReasoningItem {
                        id: item["id"].as_str().unwrap_or_default().to_owned(),
                        encrypted_content: item["encrypted_content"].as_str().map(str::to_owned),
                        summary,
                    });
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = &v["response"];
                if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
                    out.push(ResponseEvent::Usage(Usage {
                        input: super::wire::tokens(&u["input_tokens"]).unwrap_or(0),
                        output: super::wire::tokens(&u["output_tokens"]).unwrap_or(0),
                        cache_read: super::wire::tokens(&u["input_tokens_details"]["cached_tokens"]).unwrap_or(0),
                        cache_write: 0,
                        reasoning: super::wire::tokens(&u["output_tokens_details"]["reasoning_tokens"]),
                    }));
                }
                let reason = if kind == "response.incomplete" {
                    match response["incomplete_details"]["reason"].as_str() {
                        Some("content_filter") => FinishReason::Refusal,
                        _ => FinishReason::MaxTokens,
                    }
                } else if self.refused {
                    FinishReason::Refusal
                } else {
                    FinishReason::EndTurn
                };
                self.finished = true;
                out.push(ResponseEvent::Completed(reason));
            }
            "response.failed" => {
                let err = &v["response"]["error"];
                return Err(failure(err, "the response failed"));
            }
            "error" => {
                let err = if v["error"].is_object() { &v["error"] } else { &v };
                return Err(failure(err, "error event without a message"));
            }
            _ => {}
        }
        Ok(())
    }

    pub fn finish(&mut self, _out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if self.finished {
            Ok(())
        } else {
            Err(ProviderError::new(ErrorKind::Truncated, "the stream closed before `response.completed`"))
        }
    }
}

fn failure(err: &Value, fallback: &str) -> ProviderError {
    let message = err["message"].as_str().unwrap_or(fallback);
    let code = err["code"].as_str().or(err["type"].as_str()).unwrap_or("");
    ProviderError::new(ErrorKind::Server, message).refine(code)
}

fn push_text(out: &mut Vec<ResponseEvent>, delta: &Value, make: fn(String) -> ResponseEvent) {
    if let Some(t) = delta.as_str().filter(|t| !t.is_empty()) {
        out.push(make(t.to_owned()));
    }
}
