//! Streamed turns for all three wire APIs: exact fixture bytes in every chunking, thinking, usage,
//! stop reasons, SSE framing variants, server quirks, and what each request carried.

use serde_json::{Value, json};

use crate::support::agent::{Agent, kinds, text_of};
use crate::support::mock_model::{Chunking, MockModel, Reply};
use crate::support::{APIS, FAST_RETRY, options_for, path_for};

fn agent_for(api: &str, mock: &MockModel) -> (Agent, String) {
    let mut agent = Agent::spawn(options_for(api, mock).config(FAST_RETRY));
    agent.initialize();
    let session = agent.new_session();
    (agent, session)
}

fn assert_text_turn(api: &str, updates: &[Value], response: &Value) {
    assert_eq!(text_of(updates, "agent_message_chunk"), "Hello, wörld! 👋", "{api}: {updates:?}");
    let ids: Vec<&Value> =
        updates.iter().filter(|u| u["sessionUpdate"] == "agent_message_chunk").map(|u| &u["messageId"]).collect();
    assert!(ids.iter().all(|id| id.is_string() && *id == ids[0]), "{api}: one message, one id: {ids:?}");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{api}: {response}");
    let usage = &response["result"]["usage"];
    assert_eq!(
        (usage["inputTokens"].clone(), usage["outputTokens"].clone(), usage["totalTokens"].clone()),
        (json!(112), json!(9), json!(121)),
        "{api}: {response}"
    );
    let fill: Vec<&Value> = updates.iter().filter(|u| u["sessionUpdate"] == "usage_update").collect();
    assert_eq!(fill.len(), 1, "{api}: one usage_update per model request");
    assert_eq!(fill[0]["used"], 121);
    assert!(fill[0]["size"].as_u64().unwrap() >= 128_000);
    assert_eq!(kinds(updates).last().map(String::as_str), Some("usage_update"), "{api}: usage after the text");
}

#[test]
fn text_turns_stream_in_every_chunking() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        for chunking in [Chunking::Whole, Chunking::PerEvent, Chunking::Bytes(1), Chunking::Bytes(7)] {
            mock.push(Reply::fixture(api, "text").chunking(chunking));
            let (updates, response) = agent.prompt(&session, "Say hello");
            assert_text_turn(&format!("{api} {chunking:?}"), &updates, &response);
        }
    }
}

#[test]
fn framing_variants_parse_the_same() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        let mut fixtures = vec!["bom", "cr"];
        if api == "anthropic" {
            fixtures.push("crlf");
        }
        if api == "openai-chat" {
            fixtures.extend(["openrouter_keepalive", "vllm_null_choices"]);
        }
        for name in fixtures {
            for chunking in [Chunking::Whole, Chunking::Bytes(1)] {
                mock.push(Reply::fixture(api, name).chunking(chunking));
                let (updates, response) = agent.prompt(&session, "Say hello");
                assert_eq!(
                    text_of(&updates, "agent_message_chunk"),
                    "Hello, wörld! 👋",
                    "{api}/{name} {chunking:?}: {updates:?}\n{}",
                    agent.stderr()
                );
                assert_eq!(response["result"]["stopReason"], "end_turn", "{api}/{name}: {response}");
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
            assert_eq!(r.body["stream"], true, "{api}");
            assert_eq!(r.header("content-type"), Some("application/json"));
        }
        let (first, second) = (&reqs[0].body, &reqs[1].body);
        match api {
            "anthropic" => {
                assert_eq!(reqs[0].header("x-api-key"), Some("test-key"));
                assert_eq!(reqs[0].header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(first["model"], "claude-sonnet-4-5");
                assert!(first["max_tokens"].as_u64().unwrap() > 0);
                assert!(first["system"][0]["text"].as_str().unwrap().contains("Working directory: "));
                // Cache breakpoints: the tools, the system prompt, the end of the last two user
                // messages (this request's end, and the previous request's).
                let cached = json!({"type": "ephemeral"});
                assert_eq!(first["system"][0]["cache_control"], cached);
                let tools = first["tools"].as_array().unwrap();
                assert_eq!(tools.last().unwrap()["cache_control"], cached);
                assert!(tools[..tools.len() - 1].iter().all(|t| t.get("cache_control").is_none()));
                assert_eq!(
                    first["messages"],
                    json!([{"role": "user", "content": [{"type": "text", "text": "first question", "cache_control": cached}]}])
                );
                assert_eq!(
                    second["messages"],
                    json!([
                        {"role": "user", "content": [{"type": "text", "text": "first question", "cache_control": cached}]},
                        {"role": "assistant", "content": [{"type": "text", "text": "Hello, wörld! 👋"}]},
                        {"role": "user", "content": [{"type": "text", "text": "second question", "cache_control": cached}]},
                    ])
                );
            }
            "openai-chat" => {
                assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
                assert_eq!(first["model"], "gpt-4.1");
                assert_eq!(first["stream_options"], json!({"include_usage": true}));
                // One cache key per session, on every request of it.
                assert_eq!(first["prompt_cache_key"], session.as_str());
                assert_eq!(second["prompt_cache_key"], session.as_str());
                assert_eq!(first["messages"][0]["role"], "system");
                assert_eq!(
                    second["messages"].as_array().unwrap()[1..],
                    [
                        json!({"role": "user", "content": "first question"}),
                        json!({"role": "assistant", "content": "Hello, wörld! 👋"}),
                        json!({"role": "user", "content": "second question"}),
                    ]
                );
            }
            _ => {
                assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
                assert_eq!(first["model"], "gpt-5-codex");
                assert_eq!(first["store"], false);
                assert_eq!(first["prompt_cache_key"], session.as_str());
                assert_eq!(second["prompt_cache_key"], session.as_str());
                assert!(first["instructions"].as_str().unwrap().contains("Working directory: "));
                assert_eq!(
                    second["input"],
                    json!([
                        {"role": "user", "content": [{"type": "input_text", "text": "first question"}]},
                        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello, wörld! 👋"}]},
                        {"role": "user", "content": [{"type": "input_text", "text": "second question"}]},
                    ])
                );
            }
        }
    }
}

#[test]
fn thinking_streams_as_thought_chunks_and_replays_where_the_api_allows() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        mock.push(Reply::fixture(api, "thinking").chunking(Chunking::Bytes(3)));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "What is the answer?");
        assert_eq!(text_of(&updates, "agent_thought_chunk"), "Let me think about this.", "{api}");
        assert_eq!(text_of(&updates, "agent_message_chunk"), "The answer is 42.", "{api}");
        let k = kinds(&updates);
        let first_text = k.iter().position(|k| k == "agent_message_chunk").unwrap();
        assert!(
            k[..first_text].iter().all(|k| k == "agent_thought_chunk" || k == "session_info_update"),
            "{api}: thoughts come first: {k:?}"
        );
        assert_eq!(response["result"]["stopReason"], "end_turn");
        if api != "anthropic" {
            assert_eq!(response["result"]["usage"]["thoughtTokens"], 21, "{api}: {response}");
        }

        agent.prompt(&session, "And why?");
        let second = &mock.requests()[1].body;
        match api {
            "anthropic" => {
                let assistant = &second["messages"][1];
                assert_eq!(assistant["content"][0]["type"], "thinking");
                assert_eq!(assistant["content"][0]["thinking"], "Let me think about this.");
                assert!(assistant["content"][0]["signature"].as_str().unwrap().starts_with("EqQB"));
                assert_eq!(assistant["content"][1], json!({"type": "text", "text": "The answer is 42."}));
            }
            "openai-chat" => {
                assert_eq!(second["messages"][2], json!({"role": "assistant", "content": "The answer is 42."}));
            }
            _ => {
                assert_eq!(second["input"][1]["type"], "reasoning");
                assert_eq!(second["input"][1]["encrypted_content"], "gAAAAABoFakeEncryptedReasoningForFixtures==");
                assert_eq!(second["input"][2]["content"][0]["text"], "The answer is 42.");
            }
        }
    }
}

#[test]
fn max_tokens_and_refusal_stop_reasons() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_for(api, &mock);
        mock.push(Reply::fixture(api, "max_tokens"));
        let (updates, response) = agent.prompt(&session, "Tell a long story");
        assert_eq!(text_of(&updates, "agent_message_chunk"), "Once upon a");
        assert_eq!(response["result"]["stopReason"], "max_tokens", "{api}: {response}");

        mock.push(Reply::fixture(api, "refusal"));
        let (updates, response) = agent.prompt(&session, "Something forbidden");
        assert_eq!(text_of(&updates, "agent_message_chunk"), "I can't help with that.");
        assert_eq!(response["result"]["stopReason"], "refusal", "{api}: {response}");

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
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let content = &mock.requests()[0].body["messages"][0]["content"];
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
    assert!(content[2]["text"].as_str().unwrap().contains("remember the milk"));
    assert_eq!(content[3]["text"], "[Resource: main.rs](file:///p/main.rs)");
}
