//! OpenAI Responses API: request body (stateless, `store: false`) and event decoding. There is no
//! `[DONE]`: the stream ends with `response.completed`, `response.incomplete`, `response.failed` or
//! `error`.

use serde_json::{Value, json};

use super::sse::SseEvent;
use super::{
    AssistantPart, ErrorKind, FinishReason, Message, ModelRequest, ProviderError, ResponseEvent, Usage, UserPart,
};

pub fn url(base_url: &str) -> String {
    format!("{base_url}/responses")
}

pub fn body(req: &ModelRequest) -> Value {
    let kept: Vec<Message> = req.messages.iter().filter_map(keep).collect();
    let mut input = Vec::new();
    for m in super::alternating(&kept) {
        push_items(&m, &mut input);
    }
    let mut body = json!({
        "model": req.model,
        "stream": true,
        "store": false,
        "input": input,
    });
    if !req.system.is_empty() {
        body["instructions"] = json!(req.system);
    }
    if let Some(max) = req.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({ "type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false })
            })
            .collect();
        body["tools"] = json!(tools);
    }
    if let Some(effort) = req.reasoning {
        body["reasoning"] = json!({ "effort": effort.as_str(), "summary": "auto" });
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    body
}

/// Keeps text and replayable reasoning items (those with encrypted content).
fn keep(m: &Message) -> Option<Message> {
    match m {
        Message::User(parts) => (!parts.is_empty()).then(|| m.clone()),
        Message::Assistant(parts) => {
            let kept: Vec<AssistantPart> = parts
                .iter()
                .filter(|p| match p {
                    AssistantPart::Text(t) => !t.is_empty(),
                    AssistantPart::Reasoning { encrypted_content, .. } => encrypted_content.is_some(),
                    AssistantPart::ToolCall { .. } => true,
                    _ => false,
                })
                .cloned()
                .collect();
            (!kept.is_empty()).then_some(Message::Assistant(kept))
        }
    }
}

fn push_items(m: &Message, input: &mut Vec<Value>) {
    match m {
        Message::User(parts) => {
            for p in parts {
                if let UserPart::ToolResult(r) = p {
                    let output = if r.is_error { format!("ERROR: {}", r.content) } else { r.content.clone() };
                    input.push(json!({ "type": "function_call_output", "call_id": r.call_id, "output": output }));
                }
            }
            let content: Vec<Value> = parts
                .iter()
                .filter_map(|p| match p {
                    UserPart::Text(text) => Some(json!({ "type": "input_text", "text": text })),
                    UserPart::Image { mime_type, data } => {
                        Some(json!({ "type": "input_image", "image_url": format!("data:{mime_type};base64,{data}") }))
                    }
                    UserPart::ToolResult(_) => None,
                })
                .collect();
            if !content.is_empty() {
                input.push(json!({ "role": "user", "content": content }));
            }
        }
        Message::Assistant(parts) => {
            let mut text = String::new();
            let mut calls = Vec::new();
            for p in parts {
                match p {
                    AssistantPart::ToolCall { id, name, arguments } => calls.push(json!({
                        "type": "function_call", "call_id": id, "name": name, "arguments": arguments,
                    })),
                    AssistantPart::Reasoning { id, encrypted_content, summary } => input.push(json!({
                        "type": "reasoning",
                        "id": id,
                        "encrypted_content": encrypted_content,
                        "summary": summary.iter().map(|s| json!({ "type": "summary_text", "text": s })).collect::<Vec<_>>(),
                    })),
                    AssistantPart::Text(t) => text.push_str(t),
                    _ => {}
                }
            }
            if !text.is_empty() {
                input.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{ "type": "output_text", "text": text }],
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
}

impl Decoder {
    pub fn event(&mut self, ev: &SseEvent, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if !ev.has_data {
            return Ok(());
        }
        let v = super::parse_json(&ev.data)?;
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
                        input: u["input_tokens"].as_u64().unwrap_or(0),
                        output: u["output_tokens"].as_u64().unwrap_or(0),
                        cache_read: u["input_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
                        cache_write: 0,
                        reasoning: u["output_tokens_details"]["reasoning_tokens"].as_u64(),
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
