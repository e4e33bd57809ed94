//! Cancellation: `session/cancel` mid-stream drops the model connection and ends the prompt with
//! `cancelled` exactly once; queued prompts, `$/cancel_request` and `session/close` behave too.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{chunk, ended, not_found, result, text_usage, title, turn, usage_update, without_usage};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::{APIS, FAST_RETRY, options_for, updates_of};

fn setup(api: &str, mock: &MockModel) -> (Agent, String) {
    let mut agent = Agent::in_process(options_for(api, mock).config(FAST_RETRY));
    agent.initialize();
    let session = agent.new_session();
    (agent, session)
}

fn prompt_request(agent: &mut Agent, session: &str, text: &str) -> i64 {
    agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
}

/// A cancelled turn's answer: Anthropic's stream counts its tokens from its first event, so what
/// it had counted comes with the answer; the OpenAI APIs count only at the end.
fn cancelled(api: &str) -> Value {
    match api {
        "anthropic" => ended(
            "cancelled",
            json!({"totalTokens": 113, "inputTokens": 112, "outputTokens": 1, "cachedReadTokens": 100}),
        ),
        _ => json!({"stopReason": "cancelled"}),
    }
}

/// Reads until the first agent_message_chunk of `session`.
fn wait_first_chunk(agent: &mut Agent) {
    loop {
        let m = agent.recv();
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            return;
        }
    }
}

#[test]
fn cancel_mid_stream_ends_the_turn_and_drops_the_connection() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = setup(api, &mock);
        // Stalled after the first words (Gemini's fixture has 3 events, the others more).
        let stall = if api == "gemini" { 1 } else { 5 };
        mock.push(Reply::fixture(api, "text").stall_after(stall));
        let id = prompt_request(&mut agent, &session, "long answer please");
        wait_first_chunk(&mut agent);
        agent.notify("session/cancel", json!({"sessionId": session}));
        // The stream stalls for good: only the cancel can end the turn.
        let (_, response) = agent.until_response(id);
        // (Whether the counts at the end of the Chat Completions fixture were read before the
        // cancel is a race.)
        assert_eq!(without_usage(&response), result(id, json!({"stopReason": "cancelled"})), "{api}");
        assert!(mock.wait_done(0).client_left, "{api}: the model connection was dropped");
        // Exactly one answer: nothing else arrives for that id.
        while let Some(m) = agent.recv_within(Duration::from_millis(200)) {
            assert_ne!(m.get("id"), Some(&json!(id)), "{api}: a second answer: {m}");
        }
        // The session goes on, with the partial reply in its history.
        mock.push(Reply::fixture(api, "text"));
        let (_, response) = agent.prompt(&session, "next");
        assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{api}");
        let body = mock.requests()[1].body.to_string();
        assert!(body.contains("long answer please") && body.contains("Hello"), "{api}: {body}");
    }
}

#[test]
fn a_second_prompt_waits_for_the_first() {
    let mock = MockModel::start();
    let (mut agent, session) = setup("anthropic", &mock);
    mock.push(Reply::fixture("anthropic", "text").delay(Duration::from_millis(30)));
    mock.push(Reply::fixture("anthropic", "thinking"));
    let first = prompt_request(&mut agent, &session, "one");
    let second = prompt_request(&mut agent, &session, "two");
    let (before_first, r1) = agent.until_response(first);
    let (before_second, r2) = agent.until_response(second);
    let thinking = json!({"totalTokens": 142, "inputTokens": 112, "outputTokens": 30, "cachedReadTokens": 100});
    assert_eq!(r1, result(first, ended("end_turn", text_usage("anthropic"))));
    assert_eq!(r2, result(second, ended("end_turn", thinking)));
    // Each turn's updates come before its answer: the second turn's all after the first's answer.
    assert_eq!(
        turn(&updates_of(&before_first)),
        json!([title("one"), chunk("agent_message_chunk", "Hello, wörld! 👋"), usage_update(121, 200_000)])
    );
    assert_eq!(
        turn(&updates_of(&before_second)),
        json!([
            chunk("agent_thought_chunk", "Let me think about this."),
            chunk("agent_message_chunk", "The answer is 42."),
            usage_update(142, 200_000)
        ])
    );
    let reqs = mock.requests();
    assert!(reqs[1].at >= reqs[0].finished_at.unwrap(), "the second turn started after the first ended");
    assert!(reqs[1].body.to_string().contains("Hello, wörld!"), "and saw its reply");
}

#[test]
fn cancel_also_ends_queued_prompts_in_order() {
    let mock = MockModel::start();
    let (mut agent, session) = setup("openai-chat", &mock);
    mock.push(Reply::fixture("openai-chat", "text").stall_after(3));
    let first = prompt_request(&mut agent, &session, "one");
    let second = prompt_request(&mut agent, &session, "two");
    wait_first_chunk(&mut agent);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (_, r1) = agent.until_response(first);
    let (_, r2) = agent.until_response(second);
    assert_eq!(r1, result(first, cancelled("openai-chat")));
    assert_eq!(r2, result(second, cancelled("openai-chat")));
    assert_eq!(mock.requests().len(), 1, "the queued prompt never reached the model");
}

#[test]
fn cancel_request_cancels_one_prompt() {
    let mock = MockModel::start();
    let (mut agent, session) = setup("openai-responses", &mock);
    mock.push(Reply::fixture("openai-responses", "text").stall_after(5));
    let id = prompt_request(&mut agent, &session, "one");
    wait_first_chunk(&mut agent);
    agent.notify("$/cancel_request", json!({"requestId": id}));
    let (_, r) = agent.until_response(id);
    assert_eq!(r, result(id, cancelled("openai-responses")));
    assert!(mock.wait_done(0).client_left);
}

#[test]
fn closing_a_session_cancels_its_turn() {
    let mock = MockModel::start();
    let (mut agent, session) = setup("anthropic", &mock);
    mock.push(Reply::fixture("anthropic", "text").stall_after(5));
    let id = prompt_request(&mut agent, &session, "one");
    wait_first_chunk(&mut agent);
    let close = agent.send_request("session/close", json!({"sessionId": session}));
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let m = agent.recv();
        if m.get("id").is_some() && m.get("method").is_none() {
            answers.push(m);
        }
    }
    let by_id = |i: i64| answers.iter().find(|m| m["id"] == i).unwrap().clone();
    assert_eq!(by_id(close), result(close, json!({})));
    assert_eq!(by_id(id), result(id, cancelled("anthropic")));
    let r = agent.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}));
    assert_eq!(r["error"], not_found(&session));
}

/// The log line the agent writes as it starts waiting to retry.
const RETRYING: &str = "model request failed; retrying";

#[test]
fn cancel_while_waiting_to_retry() {
    let mock = MockModel::start();
    let (mut agent, session) = setup("anthropic", &mock);
    // The server asks for 30 s, longer than the harness waits for an answer: that the answer comes
    // at all shows the wait was cut short.
    let mut long = Reply::fixture("anthropic", "429");
    long.headers.retain(|(k, _)| k != "retry-after");
    long.headers.push(("retry-after".into(), "30".into()));
    mock.push(long);
    let id = prompt_request(&mut agent, &session, "one");
    agent.wait_for_stderr(RETRYING, 1);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (_, r) = agent.until_response(id);
    assert_eq!(r, result(id, json!({"stopReason": "cancelled"})));
    assert_eq!(mock.requests().len(), 1, "answered before any retry");

    // Nor does the retry come later: here the wait would have ended after 1 s.
    mock.push(Reply::fixture("anthropic", "429")); // retry-after: 1
    let id = prompt_request(&mut agent, &session, "two");
    agent.wait_for_stderr(RETRYING, 2);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (_, r) = agent.until_response(id);
    assert_eq!(r, result(id, json!({"stopReason": "cancelled"})));
    // A prompt whose answer takes longer than the retry would have waited: by its end the retry's
    // moment has passed, and the model saw only this prompt's request after the two.
    mock.push(Reply::fixture("anthropic", "text").delay(Duration::from_millis(1200)));
    let (_, r) = agent.prompt(&session, "three");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "no retry after the cancel");
    assert!(requests[2].body.to_string().contains("three"), "{}", requests[2].body);
}
