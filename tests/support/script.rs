//! Scripted model replies in each wire API's exact streaming grammar: text, or tool calls whose
//! JSON arguments arrive split into fragments (cut inside strings, as real streams do). Used where
//! a test needs a model that calls tools with arguments of its choosing.

#![allow(dead_code)]

use serde_json::{Value, json};

use super::mock_model::Reply;

/// One tool call: (id, name, arguments).
pub type Call<'a> = (&'a str, &'a str, Value);

fn event(name: Option<&str>, data: &Value) -> String {
    let mut s = String::new();
    if let Some(n) = name {
        s.push_str(&format!("event: {n}\n"));
    }
    s.push_str(&format!("data: {}\n\n", serde_json::to_string(data).unwrap()));
    s
}

/// Cuts a JSON text into 3 fragments at character boundaries (the first may be empty).
fn fragments(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let (a, b) = (chars.len() / 3, 2 * chars.len() / 3);
    vec![chars[..a].iter().collect(), chars[a..b].iter().collect(), chars[b..].iter().collect()]
}

/// A reply that calls tools.
pub fn calls(api: &str, calls: &[Call<'_>]) -> Reply {
    Reply::sse(match api {
        "anthropic" => anthropic(calls, None),
        "openai-chat" => chat(calls, None, 50),
        "gemini" => gemini(calls, None, 50),
        _ => responses(calls, None, 50),
    })
}

/// A reply with some text and then tool calls.
pub fn text_then_calls(api: &str, text: &str, calls: &[Call<'_>]) -> Reply {
    Reply::sse(match api {
        "anthropic" => anthropic(calls, Some(text)),
        "openai-chat" => chat(calls, Some(text), 50),
        "gemini" => gemini(calls, Some(text), 50),
        _ => responses(calls, Some(text), 50),
    })
}

/// A reply that is only text.
pub fn text(api: &str, text: &str) -> Reply {
    text_with_usage(api, text, 50)
}

/// A reply that is only text, reporting `input_tokens` of prompt.
pub fn text_with_usage(api: &str, text: &str, input_tokens: u64) -> Reply {
    Reply::sse(match api {
        "anthropic" => anthropic_full(None, &[], Some(text), input_tokens),
        "openai-chat" => chat(&[], Some(text), input_tokens),
        "gemini" => gemini(&[], Some(text), input_tokens),
        _ => responses(&[], Some(text), input_tokens),
    })
}

/// An Anthropic reply with extended thinking (signed), then text and tool calls.
pub fn anthropic_thinking(thought: &str, text: Option<&str>, calls: &[Call<'_>]) -> Reply {
    Reply::sse(anthropic_full(Some(thought), calls, text, 50))
}

fn anthropic(calls: &[Call<'_>], text: Option<&str>) -> String {
    anthropic_full(None, calls, text, 50)
}

fn anthropic_full(thought: Option<&str>, calls: &[Call<'_>], text: Option<&str>, input_tokens: u64) -> String {
    let mut s = event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": "msg_script", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}}),
    );
    let mut index = 0;
    if let Some(t) = thought {
        s.push_str(&event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ));
        s.push_str(&event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": t}}),
        ));
        s.push_str(&event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": "c2lnbmVkLXRob3VnaHQ="}}),
        ));
        s.push_str(&event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    if let Some(t) = text {
        s.push_str(&event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        s.push_str(&event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
        ));
        s.push_str(&event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    for (id, name, args) in calls {
        s.push_str(&event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for part in fragments(&args.to_string()) {
            s.push_str(&event(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        s.push_str(&event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    let reason = if calls.is_empty() { "end_turn" } else { "tool_use" };
    s.push_str(&event(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    ));
    s.push_str(&event(Some("message_stop"), &json!({"type": "message_stop"})));
    s
}

fn chat(calls: &[Call<'_>], text: Option<&str>, input_tokens: u64) -> String {
    let chunk = |delta: Value, finish: Value| {
        event(
            None,
            &json!({"id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 1751980800, "model": "gpt-4.1",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null}),
        )
    };
    let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if let Some(t) = text {
        s.push_str(&chunk(json!({"content": t}), Value::Null));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        s.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for part in fragments(&args.to_string()) {
            s.push_str(&chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}), Value::Null));
        }
    }
    let reason = if calls.is_empty() { "stop" } else { "tool_calls" };
    s.push_str(&chunk(json!({}), json!(reason)));
    s.push_str(&event(
        None,
        &json!({"id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 1751980800, "model": "gpt-4.1",
            "choices": [], "usage": {"prompt_tokens": input_tokens, "completion_tokens": 20, "total_tokens": input_tokens + 20}}),
    ));
    s.push_str("data: [DONE]\n\n");
    s
}

/// Gemini's grammar: each call whole in one part (the first with a thought signature), CRLF
/// framing, cumulative usage, `finishReason` on the last chunk.
fn gemini(calls: &[Call<'_>], text: Option<&str>, input_tokens: u64) -> String {
    let chunk = |parts: Value, finish: Option<&str>, output: u64| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let data = json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": input_tokens,
            "candidatesTokenCount": output, "totalTokenCount": input_tokens + output}, "modelVersion": "gemini-2.5-flash"});
        format!("data: {}\r\n\r\n", serde_json::to_string(&data).unwrap())
    };
    let mut s = String::new();
    if let Some(t) = text {
        s.push_str(&chunk(json!([{"text": t}]), None, 5));
    }
    let parts: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            let mut part = json!({"functionCall": {"id": id, "name": name, "args": args}});
            if i == 0 {
                part["thoughtSignature"] = json!(format!("sig-{id}"));
            }
            part
        })
        .collect();
    s.push_str(&chunk(Value::Array(parts), Some("STOP"), 20));
    s
}

fn responses(calls: &[Call<'_>], text: Option<&str>, input_tokens: u64) -> String {
    let mut seq = 0;
    let mut ev = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        event(Some(name), &data)
    };
    let mut s = ev(
        "response.created",
        json!({"response": {"id": "resp_script", "object": "response", "status": "in_progress", "output": []}}),
    );
    let mut index = 0;
    if let Some(t) = text {
        s.push_str(&ev("response.output_item.added", json!({"output_index": index, "item": {"id": "msg_s", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}})));
        s.push_str(&ev(
            "response.output_text.delta",
            json!({"item_id": "msg_s", "output_index": index, "content_index": 0, "delta": t}),
        ));
        s.push_str(&ev("response.output_item.done", json!({"output_index": index, "item": {"id": "msg_s", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": t}]}})));
        index += 1;
    }
    for (id, name, args) in calls {
        let item_id = format!("fc_{id}");
        let arguments = args.to_string();
        s.push_str(&ev("response.output_item.added", json!({"output_index": index, "item": {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": id, "name": name}})));
        for part in fragments(&arguments) {
            s.push_str(&ev(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": part}),
            ));
        }
        s.push_str(&ev(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
        ));
        s.push_str(&ev("response.output_item.done", json!({"output_index": index, "item": {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": id, "name": name}})));
        index += 1;
    }
    s.push_str(&ev(
        "response.completed",
        json!({"response": {"id": "resp_script", "object": "response", "status": "completed", "output": [],
            "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input_tokens + 20}}}),
    ));
    s
}

/// The tool results the model received in a request body, as (call id, text), for any wire API.
pub fn tool_results(api: &str, body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match api {
        "anthropic" => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for block in m["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        out.push((
                            block["tool_use_id"].as_str().unwrap().to_owned(),
                            block["content"].as_str().unwrap_or("").to_owned(),
                        ));
                    }
                }
            }
        }
        "gemini" => {
            for c in body["contents"].as_array().into_iter().flatten() {
                for part in c["parts"].as_array().into_iter().flatten() {
                    let r = &part["functionResponse"];
                    if r.is_object() {
                        let text = r["response"]["output"].as_str().or(r["response"]["error"].as_str());
                        out.push((r["id"].as_str().unwrap().to_owned(), text.unwrap_or("").to_owned()));
                    }
                }
            }
        }
        "openai-chat" => {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] == "tool" {
                    out.push((
                        m["tool_call_id"].as_str().unwrap().to_owned(),
                        m["content"].as_str().unwrap_or("").to_owned(),
                    ));
                }
            }
        }
        _ => {
            for item in body["input"].as_array().into_iter().flatten() {
                if item["type"] == "function_call_output" {
                    out.push((
                        item["call_id"].as_str().unwrap().to_owned(),
                        item["output"].as_str().unwrap_or("").to_owned(),
                    ));
                }
            }
        }
    }
    out
}

/// The result the model received for one call, in the latest request.
pub fn result_for(api: &str, body: &Value, call_id: &str) -> String {
    tool_results(api, body)
        .into_iter()
        .rev()
        .find(|(id, _)| id == call_id)
        .map(|(_, text)| text)
        .unwrap_or_else(|| panic!("no result for {call_id} in {body}"))
}

/// The names of the tools offered in a request body.
pub fn offered_tools(api: &str, body: &Value) -> Vec<String> {
    if api == "gemini" {
        return body["tools"][0]["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
    }
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| match api {
            "openai-chat" => t["function"]["name"].as_str().unwrap().to_owned(),
            _ => t["name"].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// The editor scenario's model script: fix `add` in src/lib.rs, run `sh check.sh`, say "Fixed."
/// (tests/suite/editor.rs with an editor's fs and terminals, tests/suite/tools.rs without).
pub fn push_fix_and_check(mock: &super::mock_model::MockModel, api: &str) {
    mock.push(calls(
        api,
        &[(
            "e1",
            "edit",
            serde_json::json!({"path": "src/lib.rs", "old_string": "    a - b", "new_string": "    a + b"}),
        )],
    ));
    mock.push(calls(api, &[("x1", "exec", serde_json::json!({"command": "sh check.sh"}))]));
    mock.push(text(api, "Fixed."));
}

/// An Anthropic reply that starts a text block with `first` and then streams 32 KiB text deltas
/// until the client hangs up (a model that never stops).
pub fn endless_text(first: &str) -> Reply {
    let start = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\n"
    );
    let delta = |text: &str| {
        event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        )
    };
    Reply::sse(format!("{start}{}", delta(first))).forever(delta(&"y".repeat(32 * 1024)))
}

/// [`endless_text`] at a person's reading pace: after `first`, a word every `every`.
pub fn endless_text_slowly(first: &str, every: std::time::Duration) -> Reply {
    let Reply { body, .. } = endless_text(first);
    let word = event(
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "on "}}),
    );
    Reply::sse(body).forever(word).delay(every)
}

/// An Anthropic reply streaming `words` one per event, `every` apart, then ending (a reply long
/// enough to watch from elsewhere, and to cut a bus under).
pub fn words_slowly(words: &[&str], every: std::time::Duration) -> Reply {
    let mut s = event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": "msg_words", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    s.push_str(&event(
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for word in words {
        s.push_str(&event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}),
        ));
    }
    s.push_str(&event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": 0})));
    s.push_str(&event(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    ));
    s.push_str(&event(Some("message_stop"), &json!({"type": "message_stop"})));
    Reply::sse(s).delay(every)
}

/// An OpenAI Chat Completions reply streaming `text` one word per chunk (a gateway that throttles
/// its deltas then carries the tail only in its final event).
pub fn chat_words(text: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        event(
            None,
            &json!({"id": "chatcmpl-words", "object": "chat.completion.chunk", "created": 1751980800, "model": "mock-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    for (i, word) in text.split(' ').enumerate() {
        let piece = if i == 0 { word.to_owned() } else { format!(" {word}") };
        s.push_str(&chunk(json!({"content": piece}), Value::Null));
    }
    s.push_str(&chunk(json!({}), json!("stop")));
    s.push_str("data: [DONE]\n\n");
    Reply::sse(s)
}

/// An OpenAI Chat Completions reply that starts with `first` and then never stops (a chunk every
/// 20 ms until the client hangs up).
pub fn endless_chat_text(first: &str) -> Reply {
    let chunk = |text: &str| {
        event(
            None,
            &json!({"id": "chatcmpl-endless", "object": "chat.completion.chunk", "created": 1751980800, "model": "mock-model",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        )
    };
    Reply::sse(chunk(first)).forever(chunk(" and on")).delay(std::time::Duration::from_millis(20))
}

/// The text of the last user message of a request (what that run was asked).
pub fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// A text's words (to compare a reply with what arrived in pieces).
pub fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

/// What every run so far was asked (the last user text of each request).
pub fn asked(mock: &super::mock_model::MockModel) -> Vec<String> {
    mock.requests().iter().map(|r| last_user_text(&r.body)).collect()
}
