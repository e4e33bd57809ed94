//! Slash commands end to end: each answers as agent text and ends the prompt with `end_turn`;
//! wrong arguments get the usage; settings changes reach the editor as config updates and the
//! next request; `/stop` stops a running turn; none but `/compact` calls the model.

use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;
use crate::support::script::text;

fn said(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

/// Runs a command; returns (the text it answered, every update).
fn command(agent: &mut Agent, session: &str, line: &str) -> (String, Vec<Value>) {
    let (updates, response) = agent.prompt(session, line);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{line}: {response}\n{}", agent.stderr());
    (said(&updates), updates)
}

#[test]
fn every_command_once() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    mock.push(text("anthropic", "Hi!"));
    agent.prompt(&session, "hello");
    let requests = || mock.requests().len();
    assert_eq!(requests(), 1);

    let (help, _) = command(&mut agent, &session, "/help");
    for usage in [
        "/help",
        "/status",
        "/context [list|detail]",
        "/compact",
        "/model [provider/model]",
        "/think off|low|medium|high",
        "/new",
        "/reset",
        "/stop",
        "/usage",
    ] {
        assert!(help.contains(&format!("`{usage}")), "{usage} missing from {help}");
    }

    let (status, _) = command(&mut agent, &session, "/status");
    assert!(status.contains(&format!("`{session}`")), "{status}");
    assert!(status.contains("Model: `anthropic/claude-sonnet-4-5`"), "{status}");
    assert!(status.contains("Mode: Code"), "{status}");
    assert!(status.contains("of 200,000 tokens"), "{status}");
    assert!(status.contains("Tokens: 50 in · 20 out"), "{status}");
    assert!(status.contains(&format!("{session}.jsonl")), "{status}");

    let (usage, _) = command(&mut agent, &session, "/usage");
    assert!(
        usage.contains("Input: 50 tokens") && usage.contains("Output: 20 tokens") && usage.contains("Total: 70"),
        "{usage}"
    );
    assert!(usage.contains("Read from the prompt cache: 0% of input"), "{usage}");

    let (context, _) = command(&mut agent, &session, "/context");
    assert!(context.contains("| System prompt |") && context.contains("Tool schemas (10 tools)"), "{context}");
    assert!(context.contains("Conversation (2 messages)"), "{context}");
    assert!(!context.contains("**System prompt**"));
    let (detail, _) = command(&mut agent, &session, "/context detail");
    assert!(detail.contains("- `update_plan`:") && detail.contains("**System prompt**"), "{detail}");
    assert!(detail.contains("You are acp"), "the system prompt itself: {detail}");

    let (models, _) = command(&mut agent, &session, "/model");
    assert!(models.contains("- `anthropic/claude-sonnet-4-5` ← current\n"), "{models}");
    let (switched, updates) = command(&mut agent, &session, "/model anthropic/claude-opus-4-6");
    assert!(switched.contains("claude-opus-4-6"), "{switched}");
    let config = updates.iter().find(|u| u["sessionUpdate"] == "config_option_update").unwrap();
    assert_eq!(config["configOptions"][0]["currentValue"], "anthropic/claude-opus-4-6");
    let (unknown, updates) = command(&mut agent, &session, "/model nope/x");
    assert!(unknown.contains("nope") && unknown.contains("Available"), "{unknown}");
    assert!(!updates.iter().any(|u| u["sessionUpdate"] == "config_option_update"));

    let (think, updates) = command(&mut agent, &session, "/think high");
    assert_eq!(think, "Thinking: high.");
    let config = updates.iter().find(|u| u["sessionUpdate"] == "config_option_update").unwrap();
    assert_eq!(config["configOptions"][2]["currentValue"], "high");
    let (off, _) = command(&mut agent, &session, "/think off");
    assert!(off.starts_with("Thinking: off"), "{off}");
    command(&mut agent, &session, "/think medium");
    assert_eq!(requests(), 1, "no command so far asked the model");

    // The settings reach the next request.
    mock.push(text("anthropic", "Sure."));
    agent.prompt(&session, "again");
    let body = mock.requests()[1].body.clone();
    assert_eq!(body["model"], "claude-opus-4-6");
    assert!(body["thinking"]["budget_tokens"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);

    // /compact summarises with the model and the next request starts from the summary.
    mock.push(text("anthropic", "The user said hello twice."));
    let (compacted, _) = command(&mut agent, &session, "/compact keep greetings");
    assert!(compacted.starts_with("Compacted the conversation"), "{compacted}");
    let summary_request = mock.requests()[2].body.clone();
    let ask = summary_request["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(ask.contains("keep greetings") && ask.contains("<conversation>"), "{ask}");
    mock.push(text("anthropic", "Yes."));
    agent.prompt(&session, "after compaction");
    let body = mock.requests()[3].body.clone();
    let first = body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(first.contains("The user said hello twice."), "{body}");

    let (reset, updates) = command(&mut agent, &session, "/reset");
    assert!(reset.contains("context is cleared"), "{reset}");
    assert!(updates.iter().any(|u| u["sessionUpdate"] == "usage_update" && u["used"] == 0));
    mock.push(text("anthropic", "Fresh."));
    agent.prompt(&session, "fresh start");
    assert_eq!(mock.requests()[4].body["messages"].as_array().unwrap().len(), 1);

    let (new, updates) = command(&mut agent, &session, "/new anthropic/claude-haiku-4-5");
    assert!(new.contains("Started over") && new.contains("claude-haiku-4-5"), "{new}");
    assert!(updates.iter().any(|u| u["sessionUpdate"] == "config_option_update"));
    mock.push(text("anthropic", "New."));
    agent.prompt(&session, "brand new");
    let body = mock.requests()[5].body.clone();
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);

    let (stop, _) = command(&mut agent, &session, "/stop");
    assert_eq!(stop, "Nothing is running.");
    assert_eq!(mock.requests().len(), 6);

    // Unknown commands and other slashes go to the model as typed.
    mock.push(text("anthropic", "That path is fine."));
    agent.prompt(&session, "/usr/bin/env");
    assert_eq!(mock.requests()[6].body["messages"][2]["content"][0]["text"], "/usr/bin/env");
}

#[test]
fn bad_arguments_get_the_usage_and_nothing_changes() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    for (line, usage) in [
        ("/think hard", "/think off|low|medium|high"),
        ("/think", "/think off|low|medium|high"),
        ("/context everything", "/context [list|detail]"),
        ("/status please", "/status"),
        ("/model a b", "/model [provider/model]"),
        ("/new a b", "/new [provider/model]"),
        ("/help me", "/help"),
        ("/reset now", "/reset"),
        ("/stop it", "/stop"),
        ("/usage today", "/usage"),
    ] {
        let (answer, updates) = command(&mut agent, &session, line);
        assert!(answer.contains(&format!("Usage: `{usage}`")), "{line}: {answer}");
        assert!(!updates.iter().any(|u| u["sessionUpdate"] == "config_option_update"), "{line}");
    }
    assert!(mock.requests().is_empty());
}

#[test]
fn stop_ends_the_running_turn_and_the_queue() {
    let mock = MockModel::start();
    mock.push(Reply::fixture("anthropic", "text").stall_after(3));
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let running = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "long"}]}));
    let queued = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "next"}]}));
    mock.wait_requests(1);
    // /help answers at once, while the turn runs.
    let help = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/help"}]}));
    let (_, r) = agent.until_response(help);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    // /status waits behind the running and queued prompts (its figures would miss them).
    let status = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/status"}]}));
    let stop = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/stop"}]}));
    let mut answers = Vec::new();
    while answers.len() < 4 {
        let msg = agent.recv();
        if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_none()) {
            answers.push((id.as_i64().unwrap(), msg["result"]["stopReason"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(
        answers,
        vec![
            (running, "cancelled".to_owned()),
            (queued, "cancelled".to_owned()),
            (status, "cancelled".to_owned()),
            (stop, "end_turn".to_owned())
        ]
    );
    assert_eq!(mock.requests().len(), 1, "the queued prompt never ran");
}

#[test]
fn usage_shows_the_share_of_input_the_provider_read_from_its_cache() {
    let mock = MockModel::start();
    let reply = |read: u64| {
        let usage = json!({"input_tokens": 100, "cache_read_input_tokens": read, "cache_creation_input_tokens": 0, "output_tokens": 5});
        let events = [
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "usage": usage}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
            json!({"type": "message_stop"}),
        ];
        Reply::sse(
            events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect::<String>(),
        )
    };
    mock.push(reply(0));
    mock.push(reply(1900));
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    agent.prompt(&session, "first");
    let (_, response) = agent.prompt(&session, "second");
    assert_eq!(response["result"]["usage"]["cachedReadTokens"], 1900, "{response}");
    // 100 + (100 + 1900) input tokens, 1900 of them read from the cache: 90 %.
    let (usage, _) = command(&mut agent, &session, "/usage");
    assert!(usage.contains("Input: 2,100 tokens (cache read 1,900"), "{usage}");
    assert!(usage.contains("Read from the prompt cache: 90% of input"), "{usage}");
}
