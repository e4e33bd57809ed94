//! Provider failures: what is retried (and how long we wait), what is not, and that every failure
//! ends the turn with a message to the user and a clear error — never a hang.

use std::time::Duration;

use serde_json::Value;

use crate::support::agent::{Agent, text_of};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::{APIS, FAST_RETRY, options_for};

fn agent_with(api: &str, mock: &MockModel, config: &str) -> (Agent, String) {
    let mut agent = Agent::spawn(options_for(api, mock).config(config));
    agent.initialize();
    let session = agent.new_session();
    (agent, session)
}

/// The error of a failed prompt, after checking the user was told in the conversation.
fn failed(api: &str, updates: &[Value], response: &Value) -> Value {
    let error = response.get("error").unwrap_or_else(|| panic!("{api}: expected an error, got {response}")).clone();
    let told = text_of(updates, "agent_message_chunk");
    assert!(told.contains("**Error:**"), "{api}: the user must see the failure: {told:?}");
    assert!(told.contains(error["message"].as_str().unwrap()), "{api}: chunk and error agree: {told:?} / {error}");
    error
}

#[test]
fn unauthorized_is_not_retried_and_asks_for_a_key() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, "401"));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        assert_eq!(error["code"], -32000, "{api}: auth failures are auth_required: {error}");
        assert_eq!(error["data"]["kind"], "auth");
        assert_eq!(error["data"]["status"], 401);
        let var = if api == "anthropic" { "ANTHROPIC_API_KEY" } else { "OPENAI_API_KEY" };
        assert!(error["message"].as_str().unwrap().contains(var), "{api}: says which key: {error}");
        assert_eq!(mock.requests().len(), 1, "{api}: a 401 is never retried");
        // The session still works, and the failed prompt left no trace in the history.
        let (updates, response) = agent.prompt(&session, "again");
        assert_eq!(response["result"]["stopReason"], "end_turn");
        assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello, wörld! 👋");
        let body = mock.requests()[1].body.to_string();
        assert!(!body.contains("\"hi\""), "{api}: {body}");
    }
}

#[test]
fn rate_limits_wait_for_retry_after_then_succeed() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, "429"));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "hi");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{api}: {response}\n{}", agent.stderr());
        assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello, wörld! 👋");
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 2, "{api}");
        // From the first request's arrival, which comes before the agent could start waiting: a
        // lower bound that a slow machine only makes longer.
        let waited = reqs[1].at.duration_since(reqs[0].at);
        assert!(waited >= Duration::from_secs(1), "{api}: retry-after: 1 honoured, waited {waited:?}");
        assert!(
            !text_of(&updates, "agent_message_chunk").contains("Error"),
            "{api}: nothing shown for a retried failure"
        );
    }
}

#[test]
fn overload_is_retried_with_backoff_until_the_budget_runs_out() {
    for api in APIS {
        let mock = MockModel::start();
        let config = format!("{FAST_RETRY}max_retries = 2\n");
        let (mut agent, session) = agent_with(api, &mock, &config);
        mock.push(Reply::fixture(api, "529"));
        mock.push(Reply::fixture(api, "text"));
        let (_, response) = agent.prompt(&session, "hi");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{api}: {response}");
        assert_eq!(mock.requests().len(), 2);

        for _ in 0..3 {
            mock.push(Reply::fixture(api, "529"));
        }
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        assert_eq!(error["code"], -32603, "{api}: {error}");
        assert_eq!(error["data"]["kind"], "overloaded");
        assert_eq!(error["data"]["retryable"], true);
        assert_eq!(mock.requests().len(), 5, "{api}: 1 attempt + 2 retries");
    }
}

#[test]
fn non_retryable_client_errors_fail_at_once() {
    let cases = [
        ("anthropic", "400", "invalid_request"),
        ("openai-chat", "429_quota", "billing"),
        ("openai-responses", "429_quota", "billing"),
    ];
    for (api, fixture, kind) in cases {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, fixture));
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        assert_eq!(error["data"]["kind"], kind, "{api}/{fixture}: {error}");
        assert_eq!(mock.requests().len(), 1, "{api}/{fixture}: not retried");
    }
}

#[test]
fn in_stream_errors_before_output_are_retried() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, "error_before_output"));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "hi");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{api}: {response}\n{}", agent.stderr());
        assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello, wörld! 👋");
        assert_eq!(mock.requests().len(), 2, "{api}");
    }
}

#[test]
fn failures_after_output_are_never_retried() {
    for api in APIS {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, "error_after_output"));
        mock.push(Reply::fixture(api, "text"));
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        let told = text_of(&updates, "agent_message_chunk");
        assert!(told.starts_with("Partial"), "{api}: the partial reply stays: {told:?}");
        assert_eq!(error["data"]["retryable"], true, "{api}: retryable in itself, yet not retried");
        assert_eq!(mock.requests().len(), 1, "{api}: output reached the client, so no retry");
        // What the user saw stays in the history.
        agent.prompt(&session, "go on");
        assert!(mock.requests()[1].body.to_string().contains("Partial"), "{api}");
    }
}

#[test]
fn truncated_streams_are_retried_then_reported() {
    for api in APIS {
        let mock = MockModel::start();
        let config = format!("{FAST_RETRY}max_retries = 1\n");
        let (mut agent, session) = agent_with(api, &mock, &config);
        // Truncated after output: not retried.
        mock.push(Reply::fixture(api, "truncated"));
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        assert_eq!(error["data"]["kind"], "truncated", "{api}: {error}");
        assert_eq!(mock.requests().len(), 1);
    }
    // Truncated before any output: retried.
    let mock = MockModel::start();
    let (mut agent, session) = agent_with("openai-chat", &mock, FAST_RETRY);
    mock.push(Reply::sse(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n".to_vec()));
    mock.push(Reply::fixture("openai-chat", "text"));
    let (_, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn server_quirk_errors_are_understood() {
    let mock = MockModel::start();
    let (mut agent, session) = agent_with("openai-chat", &mock, FAST_RETRY);
    mock.push(Reply::fixture("openai-chat", "llamacpp_error"));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("llama.cpp", &updates, &response);
    assert_eq!(error["data"]["kind"], "context_length", "{error}");
    assert!(error["message"].as_str().unwrap().contains("exceeds the available context size"), "{error}");
    assert_eq!(mock.requests().len(), 1, "context errors are not retried");

    // A 200 that is not an event stream.
    let mut html = Reply::sse(b"<html><body>Bad gateway</body></html>".to_vec());
    html.headers = vec![("content-type".into(), "text/html".into())];
    mock.push(html);
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("html", &updates, &response);
    assert_eq!(error["data"]["kind"], "protocol", "{error}");
    assert!(error["message"].as_str().unwrap().contains("text/html"), "{error}");
}

#[test]
fn silence_hits_the_idle_and_first_event_timeouts() {
    let mock = MockModel::start();
    let config = "[timeouts]\nidle = 0.3\nfirst_event = 0.5\n[retry]\nmax_retries = 0\n";
    let (mut agent, session) = agent_with("anthropic", &mock, config);
    mock.push(Reply::fixture("anthropic", "text").stall_after(4));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("idle", &updates, &response);
    assert_eq!(error["data"]["kind"], "timeout", "{error}");
    assert!(error["message"].as_str().unwrap().contains("went silent"), "{error}");
    assert!(mock.wait_done(0).client_left, "the stalled connection was dropped");

    mock.push(Reply::fixture("anthropic", "text").stall_after(0));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("first event", &updates, &response);
    assert_eq!(error["data"]["kind"], "timeout", "{error}");
    assert!(error["message"].as_str().unwrap().contains("no data arrived"), "{error}");
}

#[test]
fn unreachable_servers_say_so() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut agent = Agent::spawn(
        crate::support::agent::Options::default()
            .env("ANTHROPIC_API_KEY", "k")
            .env("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}"))
            .config(&format!("{FAST_RETRY}max_retries = 1\n")),
    );
    agent.initialize();
    let session = agent.new_session();
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("connect", &updates, &response);
    assert_eq!(error["data"]["kind"], "connect", "{error}");
    assert!(error["message"].as_str().unwrap().contains("Could not reach the provider"), "{error}");
}
