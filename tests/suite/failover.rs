//! Models that fail over: `fallbacks` after the session's model, credentials (auth profiles)
//! rotated and cooled down across restarts, each failure class's action, and what the user is
//! told — against mock providers that fail in scripted ways.

use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::script::{calls, text};
use crate::support::{FAST_RETRY, options_for, workspace};

/// Anthropic first, OpenAI Chat Completions as the fallback, both on `mock`.
fn two_providers(mock: &MockModel, config: &str) -> Options {
    options_for("anthropic", mock)
        .env("OPENAI_API_KEY", "test-key")
        .env("OPENAI_BASE_URL", &mock.base_v1())
        .config(&format!("fallbacks = [\"openai/gpt-4.1\"]\n{FAST_RETRY}{config}"))
}

fn paths(mock: &MockModel) -> Vec<String> {
    mock.requests().iter().map(|r| r.path.clone()).collect()
}

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "/v1/chat/completions";

/// The failover notices among a turn's updates: (text, `_meta.failover`).
fn notices(updates: &[Value]) -> Vec<(String, Value)> {
    updates
        .iter()
        .filter(|u| u["_meta"]["failover"].is_object())
        .map(|u| (u["content"]["text"].as_str().unwrap_or("").to_owned(), u["_meta"]["failover"].clone()))
        .collect()
}

/// The `end` records of a session's transcript.
fn ends(home: &std::path::Path, session: &str) -> Vec<Value> {
    let path = home.join("sessions").join(format!("{session}.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["t"] == "end")
        .collect()
}

#[test]
fn an_overloaded_model_fails_over_mid_turn_with_the_tool_calls_converted_and_the_user_told_once() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let mut agent = Agent::in_process(two_providers(&mock, ""));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    // Anthropic calls a tool, then is overloaded: OpenAI reads the call and its result, calls
    // another tool, and answers — the rest of the turn never goes back to Anthropic.
    mock.push(calls("anthropic", &[("toolu_01", "read", json!({"path": "src/lib.rs"}))]));
    mock.push(Reply::fixture("anthropic", "529"));
    mock.push(calls("openai-chat", &[("call_02", "ls", json!({"path": "."}))]));
    mock.push(text("openai-chat", "Both files are fine."));
    let (updates, response) = agent.prompt(&session, "Look at the code");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}\n{}", agent.stderr());
    assert_eq!(paths(&mock), [MESSAGES, MESSAGES, CHAT, CHAT]);
    let told = notices(&updates);
    assert_eq!(told.len(), 1, "told once a turn: {told:?}");
    assert_eq!(
        told[0].1,
        json!({"from": "anthropic/claude-sonnet-4-5", "to": "openai/gpt-4.1", "reason": "overloaded"})
    );
    assert!(told[0].0.contains("is overloaded (HTTP 529)") && told[0].0.contains("trying `openai/gpt-4.1` instead"));
    // The call made on Anthropic, in Chat Completions' words.
    let body = &mock.requests()[2].body;
    assert_eq!(body["model"], "gpt-4.1");
    let messages = body["messages"].as_array().unwrap();
    let call = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["tool_calls"][0]["id"], "toolu_01");
    assert_eq!(call["tool_calls"][0]["function"]["name"], "read");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "toolu_01");
    assert!(result["content"].as_str().unwrap().contains("pub fn add"), "{result}");
    // The reply streamed once.
    let said: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk" && u["_meta"].get("failover").is_none())
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(said, "Both files are fine.");
    // The transcript says which model answered.
    assert_eq!(ends(agent.home.path(), &session)[0]["model"], "openai/gpt-4.1");

    // The next turn: Anthropic is cooling down, so the fallback answers at once, and says why.
    mock.push(text("openai-chat", "Still here."));
    let (updates, _) = agent.prompt(&session, "And now?");
    assert_eq!(paths(&mock)[4], CHAT, "a cooling model is passed over");
    let told = notices(&updates);
    assert_eq!(told.len(), 1);
    assert!(told[0].0.contains("is cooling down for") && told[0].0.contains("(overloaded)"), "{told:?}");
    // `/model` shows it.
    let (updates, _) = agent.prompt(&session, "/model");
    let shown: String = updates.iter().map(|u| u["content"]["text"].as_str().unwrap_or("")).collect();
    assert!(shown.contains("Fallbacks, in order: openai/gpt-4.1."), "{shown}");
    assert!(shown.contains("`anthropic/claude-sonnet-4-5` —") && shown.contains("(overloaded, 1 in a row)"), "{shown}");
}

#[test]
fn a_stream_that_fails_before_output_fails_over_without_showing_anything_twice() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(two_providers(&mock, ""));
    agent.initialize();
    let session = agent.new_session();
    // Anthropic starts its message, then is overloaded in the stream.
    mock.push(Reply::fixture("anthropic", "error_before_output"));
    mock.push(Reply::fixture("openai-chat", "text"));
    let (updates, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(paths(&mock), [MESSAGES, CHAT]);
    let said: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk" && u["_meta"].get("failover").is_none())
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(said.concat(), "Hello, wörld! 👋");
    assert_eq!(notices(&updates).len(), 1);
}

#[test]
fn each_failure_class_gets_its_action() {
    // (primary's failure, fixtures, the paths tried, whether the turn ends well).
    let cases: [(&str, Vec<Reply>, Vec<&str>, bool); 4] = [
        // A refused key, with no other key: the next model.
        (
            "auth",
            vec![Reply::fixture("anthropic", "401"), Reply::fixture("openai-chat", "text")],
            vec![MESSAGES, CHAT],
            true,
        ),
        // A request the provider calls wrong: given up on; another model would refuse it too.
        ("invalid", vec![Reply::fixture("anthropic", "400")], vec![MESSAGES], false),
        // A passing server error: once more on the same model, then the next.
        (
            "server",
            vec![Reply::sse(server_error()), Reply::sse(server_error()), Reply::fixture("openai-chat", "text")],
            vec![MESSAGES, MESSAGES, CHAT],
            true,
        ),
        // Rate limited with one key: the next model at once (no wait for retry-after).
        (
            "rate",
            vec![Reply::fixture("anthropic", "429"), Reply::fixture("openai-chat", "text")],
            vec![MESSAGES, CHAT],
            true,
        ),
    ];
    for (what, replies, expected, ok) in cases {
        let mock = MockModel::start();
        let mut agent = Agent::in_process(two_providers(&mock, ""));
        agent.initialize();
        let session = agent.new_session();
        for reply in replies {
            mock.push(reply);
        }
        let (_, response) = agent.prompt(&session, "hi");
        assert_eq!(paths(&mock), expected, "{what}: {response}");
        assert_eq!(response.get("result").is_some(), ok, "{what}: {response}");
    }
    // Nothing listening where the model should be: the next model, without retrying.
    let mock = MockModel::start();
    let options = two_providers(&mock, "").env("ANTHROPIC_BASE_URL", "http://127.0.0.1:1");
    let mut agent = Agent::in_process(options);
    agent.initialize();
    let session = agent.new_session();
    mock.push(Reply::fixture("openai-chat", "text"));
    let (updates, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(notices(&updates)[0].1["reason"], "connect");
}

/// An Anthropic stream that fails with an in-stream server error before any output.
fn server_error() -> &'static str {
    concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
        "\n\nevent: error\n",
        r#"data: {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}"#,
        "\n\n"
    )
}

/// Config with a second Anthropic key (`second`, from `ANTHROPIC_KEY_2`).
const TWO_KEYS: &str = "[[providers.anthropic.profiles]]\nid = \"second\"\napi_key_env = \"ANTHROPIC_KEY_2\"\n";

fn keys(mock: &MockModel) -> Vec<String> {
    mock.requests().iter().map(|r| r.header("x-api-key").unwrap_or("").to_owned()).collect()
}

#[test]
fn a_rate_limited_key_gives_way_to_the_next_and_its_cooldown_outlives_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let start = |mock: &MockModel| {
        let options = options_for("anthropic", mock)
            .env("ANTHROPIC_KEY_2", "key-two")
            .config(&format!("{FAST_RETRY}{TWO_KEYS}"))
            .home(home.path());
        let mut agent = Agent::in_process(options);
        agent.initialize();
        agent
    };
    let mut agent = start(&mock);
    let session = agent.new_session();
    mock.push(Reply::fixture("anthropic", "429"));
    mock.push(Reply::fixture("anthropic", "text"));
    let (updates, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(keys(&mock), ["test-key", "key-two"], "the second key at once");
    assert!(notices(&updates).is_empty(), "another key of the same model is no failover to tell");
    // The session keeps the key that answered.
    mock.push(Reply::fixture("anthropic", "text"));
    agent.prompt(&session, "again");
    assert_eq!(keys(&mock)[2], "key-two");
    let (updates, _) = agent.prompt(&session, "/model");
    let shown: String = updates.iter().map(|u| u["content"]["text"].as_str().unwrap_or("")).collect();
    assert!(shown.contains("- default (ANTHROPIC_API_KEY) — cooling down"), "{shown}");
    assert!(
        shown.contains("(rate_limited, 1 in a row)") && shown.contains("- second (ANTHROPIC_KEY_2) ← this session"),
        "{shown}"
    );
    drop(agent);

    // Restarted: a new session would start with the first key, but it is still cooling down.
    let mock = MockModel::start();
    let mut agent = start(&mock);
    let session = agent.new_session();
    mock.push(Reply::fixture("anthropic", "text"));
    agent.prompt(&session, "hi");
    assert_eq!(keys(&mock), ["key-two"]);
    drop(agent);

    // Once its time is up, it is tried again.
    let state_path = home.path().join("models-state.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    assert_eq!(state["profiles"]["anthropic/default"]["reason"], "rate_limited");
    state["profiles"]["anthropic/default"]["until_ms"] = json!(0);
    std::fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    let mock = MockModel::start();
    let mut agent = start(&mock);
    let session = agent.new_session();
    mock.push(Reply::fixture("anthropic", "text"));
    agent.prompt(&session, "hi");
    assert_eq!(keys(&mock), ["test-key"]);
    // It answered: its record is gone.
    drop(agent);
    let state: Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    assert!(state["profiles"].get("anthropic/default").is_none(), "{state}");
}

#[test]
fn new_sessions_take_turns_with_the_keys_round_robin() {
    let mock = MockModel::start();
    let options = options_for("anthropic", &mock).env("ANTHROPIC_KEY_2", "key-two").config(TWO_KEYS);
    let mut agent = Agent::in_process(options);
    agent.initialize();
    for _ in 0..4 {
        let session = agent.new_session();
        mock.push(Reply::fixture("anthropic", "text"));
        agent.prompt(&session, "hi");
    }
    assert_eq!(keys(&mock), ["test-key", "key-two", "test-key", "key-two"]);
}

#[test]
fn when_every_model_fails_the_error_names_each_and_retries_count_once() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(two_providers(&mock, "max_retries = 2\n"));
    agent.initialize();
    let session = agent.new_session();
    mock.push(Reply::fixture("anthropic", "529"));
    for _ in 0..3 {
        mock.push(Reply::fixture("openai-chat", "529"));
    }
    let (updates, response) = agent.prompt(&session, "hi");
    // The last candidate is retried as `[retry]` says; the first is not tried again.
    assert_eq!(paths(&mock), [MESSAGES, CHAT, CHAT, CHAT]);
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "retries did not help. Try again shortly, or switch model. Every model was tried, in turn: \
             `anthropic/claude-sonnet-4-5` (overloaded), `openai/gpt-4.1` (overloaded)."
        ),
        "{message}"
    );
    assert!(notices(&updates)[0].0.contains("trying `openai/gpt-4.1` instead"));
    // One request's retries are one failure in a row, not three.
    let state: Value =
        serde_json::from_slice(&std::fs::read(agent.home.path().join("models-state.json")).unwrap()).unwrap();
    assert_eq!(state["models"]["openai/gpt-4.1"]["errors"], 1, "{state}");
    assert_eq!(state["models"]["anthropic/claude-sonnet-4-5"]["errors"], 1, "{state}");
}
