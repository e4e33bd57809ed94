//! Google Gemini's native API: `streamGenerateContent?alt=sse` (without `alt=sse` the endpoint
//! streams a JSON array, which no SSE reader sees). Each event is one `data:` chunk with no event
//! name and no `[DONE]`: the stream ends at EOF after the chunk that carries `finishReason`.
//! Function calls arrive whole in one part; thought summaries are parts marked `thought`; usage is
//! cumulative on every chunk; a blocked prompt is a 200 with `promptFeedback.blockReason`.
//! `thoughtSignature`s are kept (`AssistantPart::Signature`) and given back on the part they came
//! with, as Gemini requires for function calls.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::error::{ErrorKind, ProviderError};
use super::sse::SseEvent;
use super::wire::{AssistantPart, FinishReason, ModelRequest, ResponseEvent, Turn, Usage, UserPart};

pub fn url(base_url: &str, model: &str) -> String {
    format!("{base_url}/models/{model}:streamGenerateContent?alt=sse")
}

/// The request body, serialized straight from the borrowed conversation.
pub fn body(req: &ModelRequest<'_>) -> serde_json::Result<Vec<u8>> {
    // Text, tool calls and Gemini's own signatures; other APIs' reasoning is never replayed.
    let turns = super::wire::turns(
        &req.messages,
        |_| true,
        |p| match p {
            AssistantPart::Text(t) => !t.is_empty(),
            AssistantPart::ToolCall { .. } | AssistantPart::Signature { .. } => true,
            AssistantPart::Thinking { .. }
            | AssistantPart::RedactedThinking { .. }
            | AssistantPart::Reasoning { .. } => false,
        },
    );
    let body = Body {
        system_instruction: (!req.system.is_empty())
            .then(|| Content { role: None, parts: vec![Part::text(req.system)] }),
        contents: turns.iter().filter_map(content).collect(),
        tools: (!req.tools.is_empty()).then(|| {
            [Tools {
                function_declarations: req
                    .tools
                    .iter()
                    .map(|t| Declaration {
                        name: &t.name,
                        description: &t.description,
                        parameters_json_schema: &t.parameters,
                    })
                    .collect(),
            }]
        }),
        generation_config: GenerationConfig {
            max_output_tokens: req.max_output_tokens,
            thinking_config: req
                .reasoning
                .map(|effort| ThinkingConfig { thinking_budget: effort.budget_tokens(), include_thoughts: true }),
        },
    };
    serde_json::to_vec(&body)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tools<'a>; 1]>,
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools<'a> {
    function_declarations: Vec<Declaration<'a>>,
}

/// A tool, its schema as JSON Schema (`parametersJsonSchema`: the whole language, not the OpenAPI
/// subset `parameters` takes).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Declaration<'a> {
    name: &'a str,
    description: &'a str,
    parameters_json_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    thinking_budget: u32,
    include_thoughts: bool,
}

#[derive(Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inline_data: Option<InlineData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

impl<'a> Part<'a> {
    fn text(text: &'a str) -> Self {
        Self { text: Some(text), ..Self::default() }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineData<'a> {
    mime_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    name: &'a str,
    args: &'a serde_json::value::RawValue,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    id: &'a str,
    name: &'a str,
    response: ToolOutput<'a>,
}

/// What a tool answered: `output`, or `error` for a failed call.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum ToolOutput<'a> {
    Output(&'a str),
    Error(&'a str),
}

fn content<'a>(turn: &Turn<'a>) -> Option<Content<'a>> {
    let (role, parts) = match turn {
        Turn::User(parts) => {
            let parts: Vec<Part<'a>> = parts
                .iter()
                .map(|p| match p {
                    UserPart::Text(text) => Part::text(text),
                    UserPart::Image { mime_type, data } => {
                        Part { inline_data: Some(InlineData { mime_type, data }), ..Part::default() }
                    }
                    UserPart::ToolResult(r) => Part {
                        function_response: Some(FunctionResponse {
                            id: &r.call_id,
                            name: &r.name,
                            response: if r.is_error {
                                ToolOutput::Error(&r.content)
                            } else {
                                ToolOutput::Output(&r.content)
                            },
                        }),
                        ..Part::default()
                    },
                })
                .collect();
            ("user", parts)
        }
        Turn::Assistant(parts) => {
            let mut out: Vec<Part<'a>> = Vec::with_capacity(parts.len());
            // A signature belongs to the part that follows it.
            let mut signature = None;
            for p in parts {
                match p {
                    AssistantPart::Signature { signature: s } => signature = Some(s.as_str()),
                    AssistantPart::Text(text) => {
                        out.push(Part { thought_signature: signature.take(), ..Part::text(text) });
                    }
                    AssistantPart::ToolCall { id, name, arguments } => out.push(Part {
                        function_call: Some(FunctionCall { id, name, args: super::wire::arguments_raw(arguments) }),
                        thought_signature: signature.take(),
                        ..Part::default()
                    }),
                    _ => {}
                }
            }
            ("model", out)
        }
    };
    (!parts.is_empty()).then_some(Content { role: Some(role), parts })
}

/// Error bodies: `{"error":{"code","message","status","details":[…RetryInfo{retryDelay}…]}}`.
pub fn error_from_body(status: u16, body: &str) -> ProviderError {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["error"].is_object() => error_from_value(&v["error"], Some(status)),
        _ => ProviderError::from_status(status, super::error::snippet(body)),
    }
}

/// An error object, from an error response (`status`) or inside the stream.
fn error_from_value(err: &Value, status: Option<u16>) -> ProviderError {
    let message = err["message"].as_str().unwrap_or("the provider reported an error").to_owned();
    let code = status.or_else(|| err["code"].as_u64().and_then(|c| u16::try_from(c).ok())).unwrap_or(500);
    let mut e = ProviderError::from_status(code, message);
    let details = err["details"].as_array().map(Vec::as_slice).unwrap_or_default();
    let reason = |r: &str| details.iter().any(|d| d["reason"] == r);
    e.kind = match err["status"].as_str().unwrap_or("") {
        "UNAUTHENTICATED" => ErrorKind::Auth,
        _ if reason("API_KEY_INVALID") => ErrorKind::Auth,
        "PERMISSION_DENIED" => ErrorKind::PermissionDenied,
        "RESOURCE_EXHAUSTED" if e.message.contains("billing") && !details.iter().any(is_retry_info) => {
            ErrorKind::Billing
        }
        "RESOURCE_EXHAUSTED" => ErrorKind::RateLimited,
        "UNAVAILABLE" => ErrorKind::Overloaded,
        "DEADLINE_EXCEEDED" => ErrorKind::Timeout,
        "NOT_FOUND" => ErrorKind::NotFound,
        "INTERNAL" => ErrorKind::Server,
        _ => e.kind,
    };
    e.retry_after = details.iter().filter(|d| is_retry_info(d)).find_map(|d| delay(d["retryDelay"].as_str()?));
    if status.is_none() {
        e.status = None;
    }
    // "The input token count (…) exceeds the maximum number of tokens allowed (…)".
    e.refine("")
}

fn is_retry_info(detail: &Value) -> bool {
    detail["@type"].as_str().is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
}

/// A protobuf duration as JSON writes it: `"37s"`, `"1.5s"`.
fn delay(text: &str) -> Option<Duration> {
    let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
}

/// Decodes one `streamGenerateContent` stream.
#[derive(Debug, Default)]
pub struct Decoder {
    finished: bool,
    calls: usize,
    argument_bytes: usize,
}

impl Decoder {
    pub fn event(&mut self, ev: &SseEvent, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        if !ev.has_data || ev.data.trim().is_empty() {
            return Ok(());
        }
        let v = super::wire::parse_json(&ev.data)?;
        if v["error"].is_object() {
            return Err(error_from_value(&v["error"], None));
        }
        let candidate = &v["candidates"][0];
        for part in candidate["content"]["parts"].as_array().map(Vec::as_slice).unwrap_or_default() {
            if let Some(signature) = part["thoughtSignature"].as_str().filter(|s| !s.is_empty()) {
                out.push(ResponseEvent::PartSignature(signature.to_owned()));
            }
            if let Some(call) = part.get("functionCall").filter(|c| c.is_object()) {
                if self.calls >= super::wire::MAX_CALLS_PER_REPLY {
                    return Err(super::wire::too_many_calls());
                }
                self.calls += 1;
                let arguments = match &call["args"] {
                    args @ Value::Object(_) => args.to_string(),
                    Value::Null => "{}".to_owned(),
                    // Some proxies send the arguments as JSON text: taken as text, as OpenAI's are
                    // (and refused by the tool like theirs when it is not an object).
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                super::wire::count_arguments(&mut self.argument_bytes, arguments.len())?;
                let id = match call["id"].as_str().filter(|s| !s.is_empty()) {
                    Some(id) => id.to_owned(),
                    None => format!("call_{}", uuid::Uuid::new_v4().simple()),
                };
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                out.push(ResponseEvent::ToolCall { id, name, arguments });
            } else if let Some(text) = part["text"].as_str().filter(|t| !t.is_empty()) {
                out.push(match part["thought"].as_bool() {
                    Some(true) => ResponseEvent::ThoughtDelta(text.to_owned()),
                    _ => ResponseEvent::TextDelta(text.to_owned()),
                });
            }
        }
        if let Some(u) = v.get("usageMetadata").filter(|u| u.is_object()) {
            let thoughts = super::wire::tokens(&u["thoughtsTokenCount"]);
            let candidates = super::wire::tokens(&u["candidatesTokenCount"]).unwrap_or(0);
            out.push(ResponseEvent::Usage(Usage {
                input: super::wire::tokens(&u["promptTokenCount"]).unwrap_or(0),
                output: candidates.saturating_add(thoughts.unwrap_or(0)),
                cache_read: super::wire::tokens(&u["cachedContentTokenCount"]).unwrap_or(0),
                cache_write: 0,
                reasoning: thoughts,
            }));
        }
        // A prompt blocked before any answer: no candidates, a reason.
        if v["promptFeedback"]["blockReason"].is_string() && candidate.is_null() {
            return self.complete(FinishReason::Refusal, out);
        }
        match candidate["finishReason"].as_str() {
            None | Some("FINISH_REASON_UNSPECIFIED") => Ok(()),
            Some("STOP") if self.calls > 0 => self.complete(FinishReason::ToolUse, out),
            Some("STOP" | "OTHER" | "LANGUAGE") => self.complete(FinishReason::EndTurn, out),
            Some("MAX_TOKENS") => self.complete(FinishReason::MaxTokens, out),
            Some("MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS") => {
                let reason = candidate["finishReason"].as_str().unwrap_or_default();
                let message = candidate["finishMessage"].as_str().unwrap_or("");
                // A slip of the model's: asking again usually gets a well-formed call.
                Err(ProviderError::new(
                    ErrorKind::Server,
                    format!("the model's tool call was not valid ({reason}) {message}").trim_end().to_owned(),
                ))
            }
            // SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, …
            Some(_) => self.complete(FinishReason::Refusal, out),
        }
    }

    fn complete(&mut self, reason: FinishReason, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        self.finished = true;
        out.push(ResponseEvent::Completed(reason));
        Ok(())
    }

    /// End of body: complete only after a chunk with `finishReason`.
    pub fn finish(&self) -> Result<(), ProviderError> {
        if self.finished {
            return Ok(());
        }
        Err(ProviderError::new(ErrorKind::Truncated, "the stream ended before a chunk with `finishReason`"))
    }
}

#[cfg(test)]
mod tests;
