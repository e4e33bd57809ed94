//! Hostile input and faults, each as it was found: provider headers and config values that would
//! overflow a duration, a model that streams forever, an editor that never answers, a FIFO in the
//! workspace, a line of a gigabyte, provider tool-call ids reused, lone surrogates, arguments
//! nested too deep, token counts at `2^64 − 1`, `session/cancel` sent as a request, a close during
//! a running command, and a corpus of malformed requests for every method. The process must
//! answer every request, end every turn, lose nothing, and never panic.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{chunk, ended, replies, result, scripted_usage, title, turn, usage_update, without_usage};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::script::{self, calls, result_for, text};
use crate::support::{FAST_RETRY, options_for, tool_updates, updates_of, workspace};

/// The agent is still there: a new session answers a prompt.
fn still_works(agent: &mut Agent, mock: &MockModel, api: &str) {
    mock.push(text(api, "Still here."));
    let session = agent.new_session();
    let (updates, response) = agent.prompt(&session, "are you there?");
    assert_eq!(response["result"], replies("anthropic", 1), "{}", agent.stderr());
    let window = if api == "anthropic" { 200_000 } else { 1_047_576 };
    assert_eq!(
        turn(&updates),
        json!([title("are you there?"), chunk("agent_message_chunk", "Still here."), usage_update(70, window)])
    );
}

/// (wire API, error fixture, headers, body).
type Hostile = (&'static str, &'static str, Vec<(&'static str, &'static str)>, Option<&'static str>);

#[test]
fn absurd_retry_delays_from_a_server_fail_the_turn_without_a_panic() {
    let cases: [Hostile; 4] = [
        ("anthropic", "429", vec![("retry-after", "1e30")], None),
        ("anthropic", "429", vec![("retry-after-ms", "1e30")], None),
        ("anthropic", "529", vec![("retry-after", "inf"), ("retry-after-ms", "-5")], None),
        (
            "openai-chat",
            "429",
            vec![],
            Some(
                r#"{"error":{"message":"Please try again in 100000000000000000000000s.","type":"tokens","code":"rate_limit_exceeded"}}"#,
            ),
        ),
    ];
    for (api, fixture, headers, body) in cases {
        let mock = MockModel::start();
        let mut reply = Reply::fixture(api, fixture);
        reply.headers.retain(|(k, _)| !k.starts_with("retry-after"));
        reply.headers.extend(headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        if let Some(body) = body {
            reply.body = body.as_bytes().to_vec();
        }
        mock.push(reply);
        let mut agent = Agent::in_process(options_for(api, &mock).config(FAST_RETRY));
        agent.initialize();
        let session = agent.new_session();
        let (_, response) = agent.prompt(&session, "hi");
        // Whatever the server asked for is at most a day: past the retry limit, so the turn fails
        // at once with the provider's error (or retries at once for a negative or infinite value).
        assert!(response.get("error").is_some() || response.get("result").is_some(), "{response}");
        assert!(!agent.stderr().contains("panicked"), "{api} {headers:?}: {}", agent.stderr());
        still_works(&mut agent, &mock, api);
    }
}

#[test]
fn absurd_durations_in_the_config_are_a_clear_error() {
    for (toml, says) in [
        ("[timeouts]\nidle = 1e30\n", "[timeouts] idle"),
        ("[retry]\ninitial_delay = 1e300\n", "[retry] initial_delay"),
        ("[timeouts]\nconnect = -1\n", "[timeouts] connect"),
        ("[retry]\nmax_retry_after = nan\n", "[retry] max_retry_after"),
    ] {
        let mock = MockModel::start();
        let mut agent = Agent::in_process(options_for("anthropic", &mock).config(toml));
        agent.initialize();
        let cwd = agent.home.path().display().to_string();
        let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says) && message.contains("config.toml"), "{toml}: {r}");
        assert!(!agent.stderr().contains("panicked"), "{toml}: {}", agent.stderr());
        // The process is fine.
        assert!(agent.request("initialize", json!({"protocolVersion": 1})).get("result").is_some());
    }
}

fn transcript_of(home: &Path, session: &str) -> String {
    let dir = home.join("sessions");
    let name = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(session))
        .unwrap();
    std::fs::read_to_string(name).unwrap()
}

#[test]
fn an_endless_reply_is_stopped_at_the_limit_and_written_once() {
    let mock = MockModel::start();
    mock.push(script::endless_text("MARKER-START "));
    let home = tempfile::tempdir().unwrap();
    let options = options_for("anthropic", &mock).home(home.path()).config("max_reply_bytes = 262144\n");
    let mut agent = Agent::in_process(options);
    agent.initialize();
    let session = agent.new_session_in(home.path(), json!({}));
    let (updates, response) = agent.prompt(&session, "talk forever");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_reply_bytes") && message.contains("256 KiB"), "{response}");
    assert!(mock.wait_done(0).client_left, "the stream was dropped");
    let shown: usize = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .filter(|t| !t.contains("**Error:**"))
        .map(str::len)
        .sum();
    assert_eq!(shown, 256 << 10, "exactly the limit was shown");
    // The transcript holds the text once (streamed), not again as the context's message.
    let transcript = transcript_of(home.path(), &session);
    assert_eq!(transcript.matches("MARKER-START").count(), 1);
    assert!(transcript.len() < (256 << 10) + 64 * 1024, "{} bytes", transcript.len());
    // The next request carries the reply once, whole; a reload shows it and sends it the same way.
    mock.push(text("anthropic", "ok"));
    agent.prompt(&session, "and now?");
    let sent = |mock: &MockModel| {
        let body = mock.requests().last().unwrap().body.clone();
        let m = &body["messages"];
        m[1]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{:.300}", m.to_string())).len()
    };
    assert_eq!(sent(&mock), 256 << 10);
    drop(agent);
    let mut b = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let id = b.send_request("session/load", json!({"sessionId": session, "cwd": home.path(), "mcpServers": []}));
    let (replayed, response) = b.until_response(id);
    assert!(response.get("result").is_some(), "{response}");
    let replayed_text: usize = updates_of(&replayed)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .filter(|t| t.contains("MARKER-START"))
        .map(str::len)
        .sum();
    assert_eq!(replayed_text, 256 << 10);
    mock.push(text("anthropic", "ok"));
    b.prompt(&session, "again");
    assert_eq!(sent(&mock), 256 << 10);
}

#[test]
fn cancel_ends_an_endless_reply_and_keeps_it_once() {
    let mock = MockModel::start();
    mock.push(script::endless_text("MARKER-CANCEL "));
    let home = tempfile::tempdir().unwrap();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session_in(home.path(), json!({}));
    let id =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    loop {
        let m = agent.recv();
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (_, response) = agent.until_response(id);
    // With what the reply had counted by its first event.
    let counted = json!({"totalTokens": 11, "inputTokens": 10, "outputTokens": 1});
    assert_eq!(response, result(id, ended("cancelled", counted)));
    assert!(mock.wait_done(0).client_left);
    assert_eq!(transcript_of(home.path(), &session).matches("MARKER-CANCEL").count(), 1);
    still_works(&mut agent, &mock, "anthropic");
}

/// What the silent editor leaves unanswered, and how the model gets there.
struct Silent {
    never_answers: &'static str,
    call: (&'static str, Value),
}

/// Plays an editor that offers fs and terminals but never answers `case.never_answers` (it
/// answers everything else as a real editor would).
fn silent_editor(case: &Silent) {
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("c1", case.call.0, case.call.1.clone())]));
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    let caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true});
    agent.request("initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let id =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    let mut cancelled = false;
    let mut withdrawn = Vec::new();
    let response = loop {
        let m = agent.recv();
        if m["id"] == id && m.get("method").is_none() {
            break m;
        }
        let Some(method) = m["method"].as_str() else { continue };
        if method == "$/cancel_request" {
            withdrawn.push(m["params"]["requestId"].clone());
            continue;
        }
        if m.get("id").is_none() {
            continue;
        }
        if method == case.never_answers {
            // Cancel once the agent waits on what will never come.
            if !cancelled {
                agent.notify("session/cancel", json!({"sessionId": session}));
                cancelled = true;
            }
            continue;
        }
        let result = match method {
            "fs/read_text_file" => json!({"content": "fn main() {}\n"}),
            "terminal/create" => json!({"terminalId": "t1"}),
            "terminal/output" => json!({"output": "", "truncated": false}),
            // A command that does not end by itself: the turn is cancelled while it waits.
            "terminal/wait_for_exit" => {
                if !cancelled {
                    agent.notify("session/cancel", json!({"sessionId": session}));
                    cancelled = true;
                }
                continue;
            }
            _ => json!({}),
        };
        agent.respond(&m["id"], result);
    };
    assert!(cancelled, "{}: the agent never asked", case.never_answers);
    // The model's reply was whole before the call ran: its tokens are counted.
    assert_eq!(response, result(id, ended("cancelled", scripted_usage("anthropic", 1))), "{}", case.never_answers);
    assert!(!withdrawn.is_empty(), "{}: the unanswered request is withdrawn", case.never_answers);
    still_works(&mut agent, &mock, "anthropic");
}

#[test]
fn cancel_ends_a_turn_whose_editor_never_answers() {
    let cases = [
        Silent { never_answers: "fs/read_text_file", call: ("read", json!({"path": "src/lib.rs"})) },
        Silent { never_answers: "fs/write_text_file", call: ("write", json!({"path": "NEW.md", "content": "x"})) },
        Silent { never_answers: "terminal/create", call: ("exec", json!({"command": "true"})) },
        Silent { never_answers: "terminal/wait_for_exit", call: ("exec", json!({"command": "sleep 100"})) },
        Silent { never_answers: "terminal/kill", call: ("exec", json!({"command": "sleep 100"})) },
        Silent { never_answers: "terminal/output", call: ("exec", json!({"command": "sleep 100"})) },
        Silent { never_answers: "terminal/release", call: ("exec", json!({"command": "sleep 100"})) },
    ];
    std::thread::scope(|scope| {
        for case in &cases {
            scope.spawn(move || silent_editor(case));
        }
    });
}

#[test]
fn a_fifo_or_a_gigantic_line_in_the_workspace_cannot_stall_or_swell_a_read() {
    let ws = workspace("calc");
    let fifo = ws.path().join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // One 64 MiB line, then a short one.
    let mut big = "a".repeat(64 << 20);
    big.push_str("\nsecond line\n");
    std::fs::write(ws.path().join("huge.txt"), big).unwrap();
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(calls(
        api,
        &[
            ("r1", "read", json!({"path": "pipe"})),
            ("r2", "read", json!({"path": "huge.txt", "limit": 4000000000u64})),
            ("w1", "write", json!({"path": "pipe", "content": "x"})),
        ],
    ));
    mock.push(text(api, "done"));
    let mut agent = Agent::in_process(options_for(api, &mock));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (updates, response) = agent.prompt(&session, "read them");
    assert_eq!(response["result"], replies("anthropic", 2));
    let body = &mock.requests()[1].body;
    for id in ["r1", "w1"] {
        assert!(result_for(api, body, id).contains("not a regular file"), "{id}: {}", result_for(api, body, id));
    }
    // The editor sees both fail, and why.
    let said = |text: String| json!([{"type": "content", "content": {"type": "text", "text": text}}]);
    assert_eq!(
        tool_updates(&updates, "r1"),
        [
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": "r1",
                "title": "Read pipe",
                "kind": "read",
                "locations": [{"path": fifo, "line": 1}],
                "rawInput": {"path": "pipe"},
                "_meta": {"toolName": "read"}
            }),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "r1", "status": "in_progress"}),
            json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": "r1",
                "status": "failed",
                "content": said("pipe: is not a regular file (a FIFO, socket or device); it is not read".into())
            }),
        ]
    );
    let not_regular =
        format!("cannot read pipe: {} is not a regular file (a directory, FIFO, socket or device)", fifo.display());
    assert_eq!(
        tool_updates(&updates, "w1"),
        [json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "w1",
            "title": "write: path: pipe, content: x",
            "kind": "edit",
            "status": "failed",
            "content": said(not_regular),
            "rawInput": {"path": "pipe", "content": "x"},
            "_meta": {"toolName": "write"}
        })]
    );
    let huge = result_for(api, body, "r2");
    assert!(huge.contains("line cut") && huge.contains("second line"), "{}", &huge[..huge.len().min(300)]);
    assert!(huge.len() < 64 * 1024, "{} bytes", huge.len());
}

#[test]
fn tool_call_ids_are_unique_in_a_session_whatever_the_provider_sends() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    for api in ["anthropic", "openai-chat"] {
        let read = || json!({"path": "README.md"});
        mock.push(calls(api, &[("call_fixed", "read", read())]));
        mock.push(calls(api, &[("call_fixed", "read", read())]));
        mock.push(text(api, "read twice"));
        mock.push(calls(api, &[("dup", "read", read()), ("dup", "read", read())]));
        mock.push(text(api, "read both"));
        let mut agent = Agent::in_process(options_for(api, &mock));
        agent.initialize();
        let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
        let (first, _) = agent.prompt(&session, "read it twice");
        let (second, response) = agent.prompt(&session, "read it two ways");
        assert_eq!(response["result"], replies(api, 2), "{api}");
        let ids: Vec<String> = first
            .iter()
            .chain(&second)
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| u["toolCallId"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), 4, "{api}: {ids:?}");
        // What goes back to the provider pairs every call with its own result, once.
        let last = mock.requests().last().unwrap().body.clone();
        let results = script::tool_results(api, &last);
        let result_ids: std::collections::HashSet<&String> = results.iter().map(|(id, _)| id).collect();
        assert_eq!(result_ids.len(), results.len(), "{api}: {results:?}");
        assert_eq!(results.len(), 4, "{api}: {results:?}");
        for id in &ids {
            assert!(result_ids.contains(id), "{api}: {id} has no result in {results:?}");
        }
    }
}

#[test]
fn a_lone_surrogate_in_a_prompt_is_read_as_a_replacement_character() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "ok"));
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    // As JavaScript's JSON.stringify writes half an emoji.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":77,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"broken \ud83d emoji"}}]}}}}"#
    );
    agent.send_raw(format!("{line}\n").as_bytes());
    let (_, response) = agent.until_response(77);
    assert_eq!(response, result(77, replies("anthropic", 1)));
    let sent = mock.requests()[0].body["messages"][0]["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(sent, "broken \u{fffd} emoji");
}

#[test]
fn arguments_nested_too_deep_are_refused_and_the_call_reloads() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let mut deep = json!("bottom");
    for _ in 0..126 {
        deep = json!([deep]);
    }
    let arguments = json!({"path": deep});
    mock.push(calls("anthropic", &[("deep1", "read", arguments.clone())]));
    mock.push(text("anthropic", "ok"));
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session_in(home.path(), json!({"_meta": {"mode": "auto"}}));
    let (updates, response) = agent.prompt(&session, "go deep");
    assert_eq!(response["result"], replies("anthropic", 2));
    // Refused as it arrives: the editor gets the call failed, with the arguments as they came.
    let refused = "the arguments nest deeper than 32 levels; the tool was not run. Call `read` again with flatter \
                   arguments";
    assert_eq!(
        tool_updates(&updates, "deep1"),
        [json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "deep1",
            "title": "read",
            "kind": "read",
            "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": refused}}],
            "rawInput": arguments.to_string(),
            "_meta": {"toolName": "read"}
        })]
    );
    assert!(result_for("anthropic", &mock.requests()[1].body, "deep1").contains("deeper than"));
    drop(agent);
    // What was written reads back: the call is in the replay.
    let mut b = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let id = b.send_request("session/load", json!({"sessionId": session, "cwd": home.path(), "mcpServers": []}));
    let (replayed, response) = b.until_response(id);
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(tool_updates(&updates_of(&replayed), "deep1").len(), 1, "{replayed:?}");
    assert!(!b.stderr().contains("skipping an unreadable transcript line"), "{}", b.stderr());
}

#[test]
fn token_counts_at_the_top_of_u64_saturate() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let max = u64::MAX;
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "big"}, "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": max, "completion_tokens": max, "total_tokens": max, "prompt_tokens_details": {"cached_tokens": max}}}),
    );
    // (Counts that large also make the agent compact the context: a reply for that too.)
    for _ in 0..6 {
        mock.push(Reply::sse(body.clone()));
    }
    let mut agent = Agent::in_process(options_for("openai-chat", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session_in(home.path(), json!({}));
    for _ in 0..2 {
        let (updates, response) = agent.prompt(&session, "count");
        let total = response["result"]["usage"]["totalTokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("{response}\n{}", agent.stderr()));
        assert!(total >= 1 << 48, "{response}");
        let used = updates.iter().find(|u| u["sessionUpdate"] == "usage_update").unwrap()["used"].as_u64().unwrap();
        assert!(used >= 1 << 48, "{used}");
    }
    let (updates, _) = agent.prompt(&session, "/usage");
    assert!(!updates.is_empty());
    assert!(!agent.stderr().contains("panicked"), "{}", agent.stderr());
    let listed = agent.request("session/list", json!({}));
    assert!(listed["result"]["sessions"][0]["_meta"]["inputTokens"].as_u64().unwrap() >= 1 << 48, "{listed}");
}

#[test]
fn session_cancel_sent_as_a_request_cancels_and_is_answered() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "a long story").stall_after(2));
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let prompt =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    mock.wait_requests(1);
    let cancel = agent.send_request("session/cancel", json!({"sessionId": session}));
    let (_, answer) = agent.until_response(cancel);
    assert_eq!(answer, result(cancel, Value::Null));
    let (_, response) = agent.until_response(prompt);
    // (What the reply had counted by then depends on how far the agent had read it.)
    assert_eq!(without_usage(&response), result(prompt, json!({"stopReason": "cancelled"})));
}

#[test]
fn a_session_closed_during_a_command_loads_at_once() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    for round in 0..5 {
        mock.push(calls("anthropic", &[("x1", "exec", json!({"command": "sleep 30"}))]));
        let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
        agent.initialize();
        let session = agent.new_session_in(home.path(), json!({"_meta": {"mode": "auto"}}));
        let prompt = agent.send_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}),
        );
        loop {
            let m = agent.recv();
            if m["params"]["update"]["status"] == "in_progress" {
                break;
            }
        }
        // Close, then load right away (pipelined, as an editor reopening a thread does).
        let close = agent.send_request("session/close", json!({"sessionId": session}));
        let load =
            agent.send_request("session/load", json!({"sessionId": session, "cwd": home.path(), "mcpServers": []}));
        let (before, closed) = agent.until_response(close);
        let cancelled =
            before.iter().find(|m| m["id"] == prompt).unwrap_or_else(|| panic!("round {round}: {before:?}"));
        let counted = scripted_usage("anthropic", 1);
        assert_eq!(*cancelled, result(prompt, ended("cancelled", counted)), "round {round}");
        assert!(closed.get("result").is_some(), "round {round}: {closed}");
        let (_, loaded) = agent.until_response(load);
        assert!(loaded.get("result").is_some(), "round {round}: {loaded}\n{}", agent.stderr());
        let _ = prompt; // answered `cancelled` by the close, among the messages above
    }
}

/// Requests with every kind of broken params for every method, plus lines that are not requests:
/// each request is answered exactly once, under its own id, and the process lives on.
#[test]
fn a_corpus_of_malformed_requests_is_answered_one_by_one() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config(FAST_RETRY));
    agent.initialize();
    let session = agent.new_session();
    let methods = [
        "initialize",
        "authenticate",
        "session/new",
        "session/load",
        "session/resume",
        "session/list",
        "session/delete",
        "session/close",
        "session/prompt",
        "session/set_mode",
        "session/set_config_option",
        "session/cancel",
        "_acp/unknown",
    ];
    let long = "k".repeat(100_000);
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"a": deep});
    }
    let params = [
        json!(null),
        json!([]),
        json!([1, 2, 3]),
        json!({}),
        json!({"sessionId": 7}),
        json!({"sessionId": long}),
        json!({"sessionId": "x\u{0}y"}),
        json!({"sessionId": session, "prompt": "not a list"}),
        json!({"sessionId": session, "prompt": [{"type": "text"}]}),
        json!({"sessionId": session, "prompt": [{"type": "image", "data": "!!", "mimeType": "image/png"}]}),
        json!({"sessionId": session, "modeId": null, "configId": 5, "value": {"x": []}}),
        json!({"cwd": "relative", "mcpServers": "none"}),
        json!({"cwd": "/", "mcpServers": [], "_meta": {"sessionKey": ""}}),
        json!({"cwd": "/", "mcpServers": [], "additionalDirectories": ["rel"]}),
        json!({"cursor": "zz", "cwd": 5}),
        json!({"protocolVersion": {"major": 1}}),
        json!({"methodId": ["x"]}),
        json!({"deep": deep}),
        json!({"sessionId": session, "_meta": {"sessionKey": 1e308, "model": -1}}),
    ];
    let mut id = 1000;
    let mut sent = Vec::new();
    for method in methods {
        for p in &params {
            id += 1;
            agent.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": p}));
            sent.push(id);
        }
    }
    // Lines that are not requests at all.
    for raw in [
        &b"{\"jsonrpc\":\"2.0\",\"id\":\"raw1\",\"method\":"[..],
        b"[{\"jsonrpc\":\"2.0\",\"id\":\"raw2\",\"method\":\"initialize\"}]",
        b"\xff\xfe\xfd",
        b"{\"jsonrpc\":\"1.0\",\"id\":\"raw3\",\"method\":\"initialize\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"initialize\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999999,\"method\":\"initialize\"}",
        b"null",
        b"\"just a string\"",
    ] {
        let mut line = raw.to_vec();
        line.push(b'\n');
        agent.send_raw(&line);
    }
    let mut answered = std::collections::HashMap::new();
    while answered.len() < sent.len() {
        let m = agent.recv();
        if let Some(n) = m["id"].as_i64().filter(|n| *n > 1000)
            && m.get("method").is_none()
        {
            *answered.entry(n).or_insert(0) += 1;
        }
    }
    assert!(answered.values().all(|n| *n == 1), "{answered:?}");
    assert!(!agent.stderr().contains("panicked"), "{}", agent.stderr());
    still_works(&mut agent, &mock, "anthropic");
}

#[test]
fn a_reply_that_opens_call_after_call_is_stopped() {
    let mock = MockModel::start();
    let many: Vec<(String, &str, Value)> =
        (0..300).map(|i| (format!("c{i}"), "read", json!({"path": "README.md"}))).collect();
    let many: Vec<script::Call<'_>> = many.iter().map(|(id, n, a)| (id.as_str(), *n, a.clone())).collect();
    mock.push(calls("anthropic", &many));
    let ws = workspace("calc");
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config(FAST_RETRY));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (updates, response) = agent.prompt(&session, "call everything");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("256 tool calls"), "{response}");
    assert!(!updates.iter().any(|u| u["sessionUpdate"] == "tool_call"), "none of them ran");
    still_works(&mut agent, &mock, "anthropic");
}

#[test]
fn an_instruction_file_that_never_ends_is_not_read() {
    // /proc/self/pagemap says it is a regular file of 0 bytes and reads on for gigabytes.
    let ws = workspace("calc");
    std::os::unix::fs::symlink("/proc/self/pagemap", ws.path().join("AGENTS.md")).unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "Fine."));
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({}));
    let (_, response) = agent.prompt(&session, "hello");
    assert_eq!(response["result"], replies("anthropic", 1));
    let system = mock.requests()[0].body["system"][0]["text"].as_str().unwrap().to_owned();
    assert!(system.len() < 200_000, "{} bytes of system prompt", system.len());
}

#[test]
fn a_transcript_with_the_largest_turn_number_loads_and_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "First."));
    let mut a = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session_in(home.path(), json!({}));
    a.prompt(&session, "one");
    drop(a);
    let path = home.path().join("sessions").join(format!("{session}.jsonl"));
    let records = std::fs::read_to_string(&path).unwrap().replace("\"turn\":1,", &format!("\"turn\":{},", u64::MAX));
    std::fs::write(&path, records).unwrap();
    let mut b = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let id = b.send_request("session/load", json!({"sessionId": session, "cwd": home.path(), "mcpServers": []}));
    let (_, response) = b.until_response(id);
    assert!(response.get("result").is_some(), "{response}");
    mock.push(text("anthropic", "Second."));
    let (_, response) = b.prompt(&session, "two");
    assert_eq!(response["result"], replies("anthropic", 1), "{}", b.stderr());
    assert!(!b.stderr().contains("panicked"), "{}", b.stderr());
}
