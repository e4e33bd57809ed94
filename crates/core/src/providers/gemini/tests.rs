//! The Gemini wire against its documented bytes: the request body, the stream decoded from
//! `fixtures/sse/gemini/` in every cut, and its errors.

use serde_json::{Value, json};

use super::*;
use crate::providers::sse::SseParser;
use crate::providers::wire::{Message, ToolResult};
use crate::tools::ToolSpec;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sse/gemini").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The events of a whole stream fed `cut` bytes at a time, or the error it ended with.
fn decode(bytes: &[u8], cut: usize) -> Result<Vec<ResponseEvent>, ProviderError> {
    let mut parser = SseParser::default();
    let mut decoder = Decoder::default();
    let mut out = Vec::new();
    for piece in bytes.chunks(cut) {
        let mut events = Vec::new();
        parser.feed(piece, &mut events).unwrap();
        for ev in &events {
            decoder.event(ev, &mut out)?;
        }
    }
    parser.finish();
    decoder.finish()?;
    Ok(out)
}

#[test]
fn the_documented_stream_gives_a_thought_a_signed_call_and_its_usage_in_every_cut() {
    let bytes = fixture("tool_call.sse");
    assert!(bytes.windows(4).any(|w| w == b"\r\n\r\n"), "the documented framing is CRLF");
    for cut in [1, 2, 7, bytes.len()] {
        let events = decode(&bytes, cut).unwrap();
        let [thought, usage1, signature, ResponseEvent::ToolCall { id, name, arguments }, usage2, end] =
            events.as_slice()
        else {
            panic!("cut {cut}: {events:?}")
        };
        assert_eq!(*thought, ResponseEvent::ThoughtDelta("Checking the manifest first.".into()));
        assert!(matches!(usage1, ResponseEvent::Usage(_)));
        assert_eq!(*signature, ResponseEvent::PartSignature("CiQBVKhc7oFakeSignatureForFixtures".into()));
        assert!(id.starts_with("call_"), "Gemini gave no id: one is made: {id}");
        assert_eq!((name.as_str(), arguments.as_str()), ("read_file", r#"{"path":"Cargo.toml"}"#));
        // Candidates plus thoughts are the output; the thoughts apart.
        let expected = Usage { input: 391, output: 17 + 72, cache_read: 0, cache_write: 0, reasoning: Some(72) };
        assert_eq!(*usage2, ResponseEvent::Usage(expected));
        assert_eq!(*end, ResponseEvent::Completed(FinishReason::ToolUse), "STOP with a call is a tool turn");
    }
}

#[test]
fn stops_map_to_their_reasons_and_a_missing_finish_is_a_cut_stream() {
    let last = |name: &str| decode(&fixture(name), 5).unwrap().pop().unwrap();
    assert_eq!(last("text.sse"), ResponseEvent::Completed(FinishReason::EndTurn));
    assert_eq!(last("max_tokens.sse"), ResponseEvent::Completed(FinishReason::MaxTokens));
    assert_eq!(last("refusal.sse"), ResponseEvent::Completed(FinishReason::Refusal));
    assert_eq!(last("blocked_prompt.sse"), ResponseEvent::Completed(FinishReason::Refusal));
    let cut = decode(&fixture("truncated.sse"), 3).unwrap_err();
    assert_eq!(cut.kind, ErrorKind::Truncated);
    let malformed = "data: {\"candidates\": [{\"finishReason\": \"MALFORMED_FUNCTION_CALL\",\"index\": 0}]}\r\n\r\n";
    let e = decode(malformed.as_bytes(), 100).unwrap_err();
    assert!(e.is_retryable() && e.message.contains("MALFORMED_FUNCTION_CALL"), "{e:?}");
    let in_stream = decode(&fixture("error_before_output.sse"), 100).unwrap_err();
    assert_eq!((in_stream.kind, in_stream.status), (ErrorKind::Server, None));
}

#[test]
fn errors_are_classified_and_retry_info_is_the_delay() {
    let body = |name: &str| String::from_utf8(fixture(name)).unwrap();
    let limited = error_from_body(429, &body("429.json"));
    assert_eq!((limited.kind, limited.retry_after), (ErrorKind::RateLimited, Some(std::time::Duration::from_secs(1))));
    assert_eq!(error_from_body(503, &body("529.json")).kind, ErrorKind::Overloaded);
    assert_eq!(error_from_body(400, &body("401.json")).kind, ErrorKind::Auth, "API_KEY_INVALID is a 400");
    assert_eq!(error_from_body(400, &body("400_context_length.json")).kind, ErrorKind::ContextLength);
    assert_eq!(error_from_body(400, &body("400.json")).kind, ErrorKind::InvalidRequest);
    assert_eq!(delay("1.5s"), Some(std::time::Duration::from_millis(1_500)));
    assert_eq!(delay("-1s"), None);
    assert_eq!(delay("soon"), None);
}

#[test]
fn the_body_gives_back_calls_with_their_signatures_and_results_by_id() {
    let history = [
        Message::User(vec![UserPart::Text("Why does cargo build fail?".into())]),
        Message::Assistant(vec![
            AssistantPart::Thinking { text: "Checking the manifest first.".into(), signature: None },
            AssistantPart::Signature { signature: "CiQB".into() },
            AssistantPart::ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: r#"{"path":"Cargo.toml"}"#.into(),
            },
        ]),
        Message::User(vec![UserPart::ToolResult(ToolResult {
            call_id: "call_1".into(),
            name: "read".into(),
            content: "no such file".into(),
            is_error: true,
        })]),
    ];
    let tools = [ToolSpec {
        name: "read".into(),
        description: "Read a file.".into(),
        parameters: std::sync::Arc::new(
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}),
        ),
    }];
    let req = ModelRequest {
        model: "gemini-2.5-flash",
        system: "You are a coding agent.",
        messages: history.iter().collect(),
        max_output_tokens: Some(4096),
        reasoning: Some(crate::settings::ReasoningEffort::Low),
        tools: &tools,
        cache_key: Some("s1"),
    };
    let body: Value = serde_json::from_slice(&body(&req).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "You are a coding agent."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Why does cargo build fail?"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "read", "args": {"path": "Cargo.toml"}}, "thoughtSignature": "CiQB"}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "read", "response": {"error": "no such file"}}}]},
            ],
            "tools": [{"functionDeclarations": [{"name": "read", "description": "Read a file.", "parametersJsonSchema": *tools[0].parameters}]}],
            "generationConfig": {"maxOutputTokens": 4096, "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": true}},
        })
    );
    assert_eq!(
        url("https://generativelanguage.googleapis.com/v1beta", "gemini-2.5-flash"),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}
