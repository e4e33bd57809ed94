//! Streamed turns for all three wire APIs: exact fixture bytes in every chunking, thinking, usage,
//! stop reasons, SSE framing variants, server quirks, and what each request carried.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{BLANK, blank, chunk, ended, result, text_usage, title, turn, usage_update};
use crate::support::mock_model::{Chunking, MockModel, Reply};
use crate::support::{APIS, FAST_RETRY, options_for, path_for};

fn agent_for(api: &str, mock: &MockModel) -> (Agent, String) {
    let mut agent = Agent::in_process(options_for(api, mock).config(FAST_RETRY));
    agent.initialize();
    let session = agent.new_session();
    (agent, session)
}

/// The context window of each wire API's default model.
fn window(api: &str) -> u64 {
    match api {
        "anthropic" => 200_000,
        "openai-chat" => 1_047_576,
        "gemini" => 1_048_576,
        _ => 400_000,
    }
}

/// A turn of the `text` fixture: the title on a session's first prompt, the reply as one message
/// (one id), then one usage_update for the one model request; the answer with the token counts.
fn assert_text_turn(api: &str, what: &str, first: bool, updates: &[Value], response: &Value) {
    let ids: Vec<&Value> =
        updates.iter().filter(|u| u["sessionUpdate"] == "agent_message_chunk").map(|u| &u["messageId"]).collect();
    assert!(ids.iter().all(|id| id.is_string()), "{what}: {ids:?}");
    let mut expected = vec![chunk("agent_message_chunk", "Hello, wörld! 👋"), usage_update(121, window(api))];
    if first {
        expected.insert(0, title("Say hello"));
    }
    assert_eq!(turn(updates), json!(expected), "{what}");
    assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{what}");
}

#[test]
fn text_turns_stream_in_every_chunking() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        for (i, chunking) in
            [Chunking::Whole, Chunking::PerEvent, Chunking::Bytes(1), Chunking::Bytes(7)].into_iter().enumerate()
        {
            mock.push(Reply::fixture(api, "text").chunking(chunking));
            let (updates, response) = agent.prompt(&session, "Say hello");
            assert_text_turn(api, &format!("{api} {chunking:?}"), i == 0, &updates, &response);
        }
    }
}

#[test]
fn framing_variants_parse_the_same() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        let mut fixtures = vec!["bom", "cr"];
        if api == "anthropic" || api == "gemini" {
            fixtures.push("crlf");
        }
        if api == "openai-chat" {
            fixtures.extend(["openrouter_keepalive", "vllm_null_choices"]);
        }
        let mut first = true;
        for name in fixtures {
            for chunking in [Chunking::Whole, Chunking::Bytes(1)] {
                mock.push(Reply::fixture(api, name).chunking(chunking));
                let (updates, response) = agent.prompt(&session, "Say hello");
                if name == "vllm_null_choices" {
                    // vLLM counts no cached or reasoning tokens.
                    let usage = json!({"totalTokens": 121, "inputTokens": 112, "outputTokens": 9});
                    assert_eq!(response["result"], ended("end_turn", usage), "{name} {chunking:?}");
                    assert_eq!(
                        turn(&updates),
                        json!([chunk("agent_message_chunk", "Hello, wörld! 👋"), usage_update(121, window(api))])
                    );
                } else {
                    assert_text_turn(api, &format!("{api}/{name} {chunking:?}"), first, &updates, &response);
                }
                first = false;
            }
        }
    }
}

#[test]
fn requests_carry_auth_model_system_and_history() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        mock.push(Reply::fixture(api, "text"));
        mock.push(Reply::fixture(api, "text"));
        agent.prompt(&session, "first question");
        agent.prompt(&session, "second question");
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 2);
        for r in &reqs {
            assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", path_for(api)), "{api}");
            assert_eq!(r.header("content-type"), Some("application/json"));
        }
        let (first, second) = (&reqs[0].body, &reqs[1].body);
        match api {
            "anthropic" => {
                assert_eq!(reqs[0].header("x-api-key"), Some("test-key"));
                assert_eq!(reqs[0].header("anthropic-version"), Some("2023-06-01"));
                assert!(first["system"][0]["text"].as_str().unwrap().contains("Working directory: "));
                // Cache breakpoints: the tools, the system prompt, the end of the last two user
                // messages (this request's end, and the previous request's).
                let cached = json!({"type": "ephemeral"});
                assert_eq!(first["system"][0]["cache_control"], cached);
                let tools = first["tools"].as_array().unwrap();
                assert_eq!(tools.last().unwrap()["cache_control"], cached);
                assert!(tools[..tools.len() - 1].iter().all(|t| t.get("cache_control").is_none()));
                let user = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text, "cache_control": cached}]});
                let body = |messages: Value| json!({"model": "claude-sonnet-4-5", "max_tokens": 16384, "stream": true, "system": BLANK, "messages": messages, "tools": BLANK});
                assert_eq!(shape(api, first), body(json!([user("first question")])));
                assert_eq!(
                    shape(api, second),
                    body(json!([
                        user("first question"),
                        {"role": "assistant", "content": [{"type": "text", "text": "Hello, wörld! 👋"}]},
                        user("second question"),
                    ]))
                );
            }
            "openai-chat" => {
                assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
                assert_eq!(first["messages"][0]["role"], "system");
                // One cache key per session, on every request of it.
                let body = |messages: Value| {
                    json!({
                        "model": "gpt-4.1",
                        "stream": true,
                        "stream_options": {"include_usage": true},
                        "messages": messages,
                        "tools": BLANK,
                        "prompt_cache_key": session
                    })
                };
                let system = json!({"role": "system", "content": BLANK});
                assert_eq!(shape(api, first), body(json!([system, {"role": "user", "content": "first question"}])));
                assert_eq!(
                    shape(api, second),
                    body(json!([
                        system,
                        {"role": "user", "content": "first question"},
                        {"role": "assistant", "content": "Hello, wörld! 👋"},
                        {"role": "user", "content": "second question"},
                    ]))
                );
            }
            "gemini" => {
                assert_eq!(reqs[0].header("x-goog-api-key"), Some("test-key"));
                assert_eq!(reqs[0].header("authorization"), None);
                let system = first["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
                assert!(system.contains("Working directory: "));
                let declarations = first["tools"][0]["functionDeclarations"].as_array().unwrap();
                assert!(declarations.iter().all(|d| d["parametersJsonSchema"]["type"] == "object"));
                let body = |contents: Value| json!({"systemInstruction": BLANK, "contents": contents, "tools": BLANK, "generationConfig": {}});
                let user = |text: &str| json!({"role": "user", "parts": [{"text": text}]});
                assert_eq!(shape(api, first), body(json!([user("first question")])));
                assert_eq!(
                    shape(api, second),
                    body(json!([
                        user("first question"),
                        {"role": "model", "parts": [{"text": "Hello, wörld! 👋"}]},
                        user("second question"),
                    ]))
                );
            }
            _ => {
                assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
                assert!(first["instructions"].as_str().unwrap().contains("Working directory: "));
                let body = |input: Value| {
                    json!({
                        "model": "gpt-5-codex",
                        "stream": true,
                        "store": false,
                        "instructions": BLANK,
                        "input": input,
                        "tools": BLANK,
                        "prompt_cache_key": session
                    })
                };
                let user = |text: &str| json!({"role": "user", "content": [{"type": "input_text", "text": text}]});
                assert_eq!(shape(api, first), body(json!([user("first question")])));
                assert_eq!(
                    shape(api, second),
                    body(json!([
                        user("first question"),
                        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello, wörld! 👋"}]},
                        user("second question"),
                    ]))
                );
            }
        }
    }
}

/// A request body with what every request carries and other tests look into blanked: the system
/// prompt and the tool schemas.
fn shape(api: &str, body: &Value) -> Value {
    let mut body = blank(body, &["system", "instructions", "tools", "systemInstruction"]);
    if api == "openai-chat" {
        body["messages"][0]["content"] = json!(BLANK);
    }
    body
}

#[test]
fn thinking_streams_as_thought_chunks_and_replays_where_the_api_allows() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        mock.push(Reply::fixture(api, "thinking").chunking(Chunking::Bytes(3)));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "What is the answer?");
        // Thoughts come first, as a message of their own.
        assert_eq!(
            turn(&updates),
            json!([
                title("What is the answer?"),
                chunk("agent_thought_chunk", "Let me think about this."),
                chunk("agent_message_chunk", "The answer is 42."),
                usage_update(142, window(api)),
            ]),
            "{api}"
        );
        // The OpenAI APIs count the reasoning tokens apart.
        let mut usage = json!({"totalTokens": 142, "inputTokens": 112, "outputTokens": 30, "cachedReadTokens": 100});
        if api != "anthropic" {
            usage["thoughtTokens"] = json!(21);
        }
        assert_eq!(response["result"], ended("end_turn", usage), "{api}");

        agent.prompt(&session, "And why?");
        let second = &mock.requests()[1].body;
        let answer = "The answer is 42.";
        match api {
            "anthropic" => {
                let signature =
                    "EqQBCkgIBxABGAIqQFakeSignaturePlaceholderForFixturesOnlyAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";
                assert_eq!(
                    second["messages"][1],
                    json!({"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "Let me think about this.", "signature": signature},
                        {"type": "text", "text": answer}
                    ]})
                );
            }
            "openai-chat" => {
                // Chat Completions has no way to send reasoning back.
                assert_eq!(second["messages"][2], json!({"role": "assistant", "content": answer}));
            }
            "gemini" => {
                // Thought summaries are not sent back (only signatures, of which there are none here).
                assert_eq!(second["contents"][1], json!({"role": "model", "parts": [{"text": answer}]}));
            }
            _ => {
                assert_eq!(
                    second["input"].as_array().unwrap()[1..3],
                    [
                        json!({
                            "type": "reasoning",
                            "id": "rs_68b1c0df11d88190",
                            "encrypted_content": "gAAAAABoFakeEncryptedReasoningForFixtures==",
                            "summary": [{"type": "summary_text", "text": "Let me think about this."}]
                        }),
                        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}),
                    ]
                );
            }
        }
    }
}

#[test]
fn max_tokens_and_refusal_stop_reasons() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        // The token counts as each fixture has them (Chat Completions' carry none): (total, output).
        let counts = |total: u64, output: u64| match api {
            "openai-chat" => None,
            "anthropic" | "gemini" => {
                Some(json!({"totalTokens": total, "inputTokens": 112, "outputTokens": output, "cachedReadTokens": 100}))
            }
            _ => Some(
                json!({"totalTokens": total, "inputTokens": 112, "outputTokens": output, "thoughtTokens": 0, "cachedReadTokens": 100}),
            ),
        };
        let expect = |reason: &str, usage: Option<Value>, mut updates: Vec<Value>| {
            let answer = match &usage {
                Some(u) => ended(reason, u.clone()),
                None => json!({"stopReason": reason}),
            };
            updates.extend(usage.map(|u| usage_update(u["totalTokens"].as_u64().unwrap_or_default(), window(api))));
            (json!(updates), answer)
        };

        mock.push(Reply::fixture(api, "max_tokens"));
        let (updates, response) = agent.prompt(&session, "Tell a long story");
        let (shown, answer) = expect(
            "max_tokens",
            counts(116, 4),
            vec![title("Tell a long story"), chunk("agent_message_chunk", "Once upon a")],
        );
        assert_eq!((turn(&updates), response["result"].clone()), (shown, answer), "{api}");

        mock.push(Reply::fixture(api, "refusal"));
        let (updates, response) = agent.prompt(&session, "Something forbidden");
        let (shown, answer) = match api {
            "anthropic" => {
                expect("refusal", counts(119, 7), vec![chunk("agent_message_chunk", "I can't help with that.")])
            }
            // A safety stop: no words, the reason alone.
            "gemini" => expect("refusal", counts(112, 0), vec![]),
            _ => expect("refusal", counts(121, 9), vec![chunk("agent_message_chunk", "I can't help with that.")]),
        };
        assert_eq!((turn(&updates), response["result"].clone()), (shown, answer), "{api}");

        // A refused prompt and its reply leave the context.
        mock.push(Reply::fixture(api, "text"));
        agent.prompt(&session, "Something fine");
        let body = mock.requests()[2].body.to_string();
        assert!(!body.contains("Something forbidden") && !body.contains("I can't help"), "{api}: {body}");
        assert!(body.contains("Tell a long story") && body.contains("Something fine"), "{api}: {body}");
    }
}

#[test]
fn images_and_resources_reach_the_model() {
    let mock = MockModel::start();
    let (mut agent, session) = agent_for("anthropic", &mock);
    mock.push(Reply::fixture("anthropic", "text"));
    let id = agent.send_request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "What is in the picture?"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "resource", "resource": {"uri": "file:///p/notes.md", "text": "remember the milk"}},
            {"type": "resource_link", "name": "main.rs", "uri": "file:///p/main.rs"}
        ]}),
    );
    let (_, response) = agent.until_response(id);
    assert_eq!(response, result(id, ended("end_turn", text_usage("anthropic"))));
    assert_eq!(
        mock.requests()[0].body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is in the picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "<resource uri=\"file:///p/notes.md\">\nremember the milk\n</resource>"},
            {"type": "text", "text": "[Resource: main.rs](file:///p/main.rs)", "cache_control": {"type": "ephemeral"}}
        ])
    );
}
