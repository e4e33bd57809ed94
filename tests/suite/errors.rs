//! Provider failures: what is retried (and how long we wait), what is not, and that every failure
//! ends the turn with a message to the user and a clear error — never a hang.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, text_of};
use crate::support::expect::{BLANK, blank, ended, text_usage};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::{APIS, FAST_RETRY, options_for};

fn agent_with(api: &str, mock: &MockModel, config: &str) -> (Agent, String) {
    let mut agent = Agent::in_process(options_for(api, mock).config(config));
    agent.initialize();
    let session = agent.new_session();
    (agent, session)
}

/// The name a wire API's built-in provider goes by in errors.
fn provider(api: &str) -> &'static str {
    match api {
        "anthropic" => "anthropic",
        "openai-chat" => "openai",
        "gemini" => "gemini",
        _ => "openai-responses",
    }
}

/// A failed prompt's error: what the user reads, and what a client can act on.
fn provider_error(api: &str, code: i64, message: &str, mut data: Value) -> Value {
    data["provider"] = json!(provider(api));
    json!({"code": code, "message": format!("{} request failed{message}", provider(api)), "data": data})
}

/// What a failure the provider is to blame for asks of the user.
const TRY_LATER: &str = "The provider is having trouble; retries did not help. Try again shortly, or switch model.";
const GARBLED: &str =
    "The reply was cut off or garbled; try again. If it keeps happening, check the provider's base URL and API type.";

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
        // Auth failures are auth_required, and say which key.
        // Gemini says a wrong key with a 400 (`API_KEY_INVALID`).
        let status = if api == "gemini" { 400 } else { 401 };
        let (said, var, request) = match api {
            "anthropic" => ("invalid x-api-key.", "ANTHROPIC_API_KEY", json!("req_011CSHoEeqs5C35K2UUqR7Fy")),
            "gemini" => ("API key not valid. Please pass a valid API key.", "GEMINI_API_KEY", Value::Null),
            _ => (
                "Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.",
                "OPENAI_API_KEY",
                json!("req_8a1b2c3d4e5f"),
            ),
        };
        let message = format!(
            " (HTTP {status}): {said} Check the API key in {var} (it must be set in acp's environment: your shell's, \
             or the one your editor starts acp with), then try again."
        );
        let data = json!({"kind": "auth", "status": status, "retryable": false, "requestId": request});
        assert_eq!(error, provider_error(api, -32000, &message, data), "{api}");
        assert_eq!(mock.requests().len(), 1, "{api}: a 401 is never retried");
        // The session still works, and the failed prompt left no trace in the history.
        let (updates, response) = agent.prompt(&session, "again");
        assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{api}");
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
        assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{api}\n{}", agent.stderr());
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
        assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{api}");
        assert_eq!(mock.requests().len(), 2);

        for _ in 0..3 {
            mock.push(Reply::fixture(api, "529"));
        }
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        // Gemini says it with a 503.
        let (said, request, status) = match api {
            "anthropic" => ("Overloaded.", json!("req_011CSHoEeqs5C35K2UUqR7G0"), 529),
            "gemini" => ("The model is overloaded. Please try again later.", Value::Null, 503),
            _ => ("The server is overloaded or not ready yet.", Value::Null, 529),
        };
        let data = json!({"kind": "overloaded", "status": status, "retryable": true, "requestId": request});
        let message = format!(" (HTTP {status}): {said} {TRY_LATER}");
        assert_eq!(error, provider_error(api, -32603, &message, data), "{api}");
        assert_eq!(mock.requests().len(), 5, "{api}: 1 attempt + 2 retries");
    }
}

#[test]
fn non_retryable_client_errors_fail_at_once() {
    let quota = " (HTTP 429): You exceeded your current quota, please check your plan and billing details. The \
                 account is out of credit or quota; check billing with the provider.";
    let cases = [
        (
            "anthropic",
            "400",
            " (HTTP 400): max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for \
             claude-sonnet-4-5. The provider refused the request; check the model and provider settings.",
            json!({"kind": "invalid_request", "status": 400, "retryable": false, "requestId": "req_011CSHoEeqs5C35K2UUqR7G1"}),
        ),
        (
            "openai-chat",
            "429_quota",
            quota,
            json!({"kind": "billing", "status": 429, "retryable": false, "requestId": null}),
        ),
        (
            "openai-responses",
            "429_quota",
            quota,
            json!({"kind": "billing", "status": 429, "retryable": false, "requestId": null}),
        ),
        (
            "gemini",
            "400",
            " (HTTP 400): * GenerateContentRequest.contents: contents is not specified. The provider refused the \
             request; check the model and provider settings.",
            json!({"kind": "invalid_request", "status": 400, "retryable": false, "requestId": null}),
        ),
    ];
    for (api, fixture, message, data) in cases {
        let mock = MockModel::start();
        let (mut agent, session) = agent_with(api, &mock, FAST_RETRY);
        mock.push(Reply::fixture(api, fixture));
        let (updates, response) = agent.prompt(&session, "hi");
        let error = failed(api, &updates, &response);
        assert_eq!(error, provider_error(api, -32603, message, data), "{api}/{fixture}");
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
        assert_eq!(response["result"], ended("end_turn", text_usage(api)), "{api}\n{}", agent.stderr());
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
        // Retryable in itself, yet not retried.
        let (said, kind) = match api {
            "anthropic" => ("Overloaded.", "overloaded"),
            "openai-chat" => {
                ("The server had an error while processing your request. Sorry about that!", "server_error")
            }
            "gemini" => (
                "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting.",
                "server_error",
            ),
            _ => ("The model produced invalid content.", "server_error"),
        };
        let data = json!({"kind": kind, "status": null, "retryable": true, "requestId": null});
        assert_eq!(error, provider_error(api, -32603, &format!(": {said} {TRY_LATER}"), data), "{api}");
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
        let end = match api {
            "anthropic" => "ended before `message_stop`",
            "openai-chat" => "ended before `[DONE]`",
            "gemini" => "ended before a chunk with `finishReason`",
            _ => "closed before `response.completed`",
        };
        let data = json!({"kind": "truncated", "status": null, "retryable": true, "requestId": null});
        assert_eq!(error, provider_error(api, -32603, &format!(": the stream {end}. {GARBLED}"), data), "{api}");
        assert_eq!(mock.requests().len(), 1);
    }
    // Truncated before any output: retried.
    let mock = MockModel::start();
    let (mut agent, session) = agent_with("openai-chat", &mock, FAST_RETRY);
    mock.push(Reply::sse(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n".to_vec()));
    mock.push(Reply::fixture("openai-chat", "text"));
    let (_, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"], ended("end_turn", text_usage("openai-chat")));
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn server_quirk_errors_are_understood() {
    let mock = MockModel::start();
    let (mut agent, session) = agent_with("openai-chat", &mock, FAST_RETRY);
    mock.push(Reply::fixture("openai-chat", "llamacpp_error"));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("llama.cpp", &updates, &response);
    let message = ": the request exceeds the available context size, try increasing it. The conversation is too \
                   long for this model: run /compact to summarise it, /new to start over, or choose a model with a \
                   larger context window.";
    let data = json!({"kind": "context_length", "status": null, "retryable": false, "requestId": null});
    assert_eq!(error, provider_error("openai-chat", -32603, message, data));
    assert_eq!(mock.requests().len(), 1, "context errors are not retried");

    // A 200 that is not an event stream.
    let mut html = Reply::sse(b"<html><body>Bad gateway</body></html>".to_vec());
    html.headers = vec![("content-type".into(), "text/html".into())];
    mock.push(html);
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("html", &updates, &response);
    let message =
        format!(": expected an event stream but got `text/html`: <html><body>Bad gateway</body></html>. {GARBLED}");
    let data = json!({"kind": "protocol", "status": null, "retryable": false, "requestId": null});
    assert_eq!(error, provider_error("openai-chat", -32603, &message, data));
}

#[test]
fn silence_hits_the_idle_and_first_event_timeouts() {
    let mock = MockModel::start();
    let config = "[timeouts]\nidle = 0.3\nfirst_event = 0.5\n[retry]\nmax_retries = 0\n";
    let (mut agent, session) = agent_with("anthropic", &mock, config);
    mock.push(Reply::fixture("anthropic", "text").stall_after(4));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("idle", &updates, &response);
    let timeout = json!({"kind": "timeout", "status": null, "retryable": true, "requestId": null});
    let stopped = "The provider stopped answering; try again.";
    assert_eq!(
        error,
        provider_error(
            "anthropic",
            -32603,
            &format!(": the stream went silent within 0.3 s. {stopped}"),
            timeout.clone()
        )
    );
    assert!(mock.wait_done(0).client_left, "the stalled connection was dropped");

    mock.push(Reply::fixture("anthropic", "text").stall_after(0));
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("first event", &updates, &response);
    assert_eq!(
        error,
        provider_error("anthropic", -32603, &format!(": no data arrived within 0.5 s. {stopped}"), timeout)
    );
}

#[test]
fn unreachable_servers_say_so() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut agent = Agent::in_process(
        crate::support::agent::Options::default()
            .env("ANTHROPIC_API_KEY", "k")
            .env("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}"))
            .config(&format!("{FAST_RETRY}max_retries = 1\n")),
    );
    agent.initialize();
    let session = agent.new_session();
    let (updates, response) = agent.prompt(&session, "hi");
    let error = failed("connect", &updates, &response);
    // The middle of the message is the HTTP stack's own account of the refused connection.
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "anthropic request failed: error sending request for url (http://127.0.0.1:{port}/v1/messages): "
        )),
        "{message}"
    );
    assert!(
        message.ends_with(
            ". Could not reach the provider; check the network and the base URL (is a local server running?)."
        ),
        "{message}"
    );
    // Nothing listens on this machine's port: said at once, not after retries.
    let data =
        json!({"kind": "connect", "provider": "anthropic", "status": null, "retryable": false, "requestId": null});
    assert_eq!(blank(&error, &["message"]), json!({"code": -32603, "message": BLANK, "data": data}));
}
