//! Tools end to end against the real binary, with a client that offers neither fs nor terminals
//! (so files go to local disk and commands run as local processes): every tool through every
//! wire API, the tool-call lifecycle the editor sees, approvals by mode, remembered answers,
//! workspace escapes, patches that do not apply, broken arguments, cancellation mid-command,
//! output size on the wire, and the turn limit.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{calc_lib_edit, ended, replies, result, scripted_usage, tool_text};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::script::{self, calls, result_for, text};
use crate::support::{
    APIS, agent_in, answer_with, no_requests, options_for, status_sequence, tool_updates, updates_of, workspace,
};

const PATCH: &str = "*** Begin Patch
*** Update File: README.md
@@
 # calc
 
-A tiny calculator.
+A tiny calculator that adds correctly.
*** Add File: docs/CHANGES.md
+- add() adds.
*** Delete File: old.txt
*** End Patch";

#[test]
fn every_tool_through_every_wire_api() {
    for api in APIS {
        let ws = workspace("calc");
        let mock = MockModel::start();
        mock.push(calls(
            api,
            &[
                ("c1", "ls", json!({})),
                ("c2", "glob", json!({"pattern": "**/*.rs"})),
                ("c3", "grep", json!({"pattern": "fn add"})),
            ],
        ));
        mock.push(calls(api, &[("c4", "read", json!({"path": "src/lib.rs"}))]));
        mock.push(calls(
            api,
            &[("c5", "edit", json!({"path": "src/lib.rs", "old_string": "    a - b", "new_string": "    a + b"}))],
        ));
        mock.push(calls(api, &[("c6", "exec", json!({"command": "sh check.sh"}))]));
        mock.push(calls(
            api,
            &[
                ("c7", "write", json!({"path": "NOTES.md", "content": "Fixed add.\n"})),
                ("c8", "apply_patch", json!({"patch": PATCH})),
            ],
        ));
        mock.push(calls(api, &[("c9", "web_fetch", json!({"url": format!("{}/page.html", mock.base())}))]));
        let mut page =
            Reply::sse(b"<html><body><h1>Calc docs</h1><p>Addition is <b>commutative</b>.</p></body></html>".to_vec());
        page.headers = vec![("content-type".into(), "text/html; charset=utf-8".into())];
        mock.push(page);
        mock.push(text(api, "Fixed the failing test."));

        // The page is served by the mock on loopback, which web_fetch reaches only when allowed.
        let mut agent =
            Agent::spawn(options_for(api, &mock).config("[web_fetch]\nallow_private_hosts = [\"127.0.0.1\"]\n"));
        agent.initialize();
        let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
        let (before, response) = agent.prompt_answering(&session, "fix the failing test", no_requests);
        assert_eq!(response["result"], replies(api, 7), "{api}\n{}", agent.stderr());
        assert_eq!(mock.remaining(), 0, "{api}: every scripted reply was used");
        let updates = updates_of(&before);

        // The files changed as the tools said.
        let read = |p: &str| std::fs::read_to_string(ws.path().join(p)).unwrap_or_default();
        assert!(read("src/lib.rs").contains("    a + b\n"), "{api}");
        assert_eq!(read("NOTES.md"), "Fixed add.\n");
        assert!(read("README.md").contains("adds correctly"));
        assert_eq!(read("docs/CHANGES.md"), "- add() adds.\n");
        assert!(!ws.path().join("old.txt").exists(), "{api}: deleted");

        // Every call: announced, then in progress, then completed — with the right kind and title.
        let expect = [
            ("c1", "read", "List ."),
            ("c2", "search", "Find `**/*.rs`"),
            ("c3", "search", "Search `fn add`"),
            ("c4", "read", "Read src/lib.rs"),
            ("c5", "edit", "Edit src/lib.rs"),
            ("c6", "execute", "Run `sh check.sh`"),
            ("c7", "edit", "Create NOTES.md"),
            ("c8", "edit", "Apply patch: README.md, docs/CHANGES.md, old.txt"),
            ("c9", "fetch", "Fetch "),
        ];
        for (id, kind, title) in expect {
            let seq = tool_updates(&updates, id);
            assert_eq!(
                status_sequence(&updates, id),
                vec!["pending", "in_progress", "completed"],
                "{api} {id}: {seq:?}"
            );
            assert_eq!(seq[0]["sessionUpdate"], "tool_call");
            assert_eq!(seq[0]["kind"], kind, "{api} {id}");
            assert!(seq[0]["title"].as_str().unwrap().starts_with(title), "{api} {id}: {}", seq[0]["title"]);
            assert!(seq[0]["rawInput"].is_object(), "{api} {id}");
            for u in &seq[1..] {
                assert!(
                    u.get("title").is_none() && u.get("rawInput").is_none(),
                    "{api} {id}: only changed fields: {u}"
                );
            }
        }
        // The edit is reviewable before it runs: its announcement carries the diff and a location.
        let mut edit = calc_lib_edit(ws.path(), "c5", "    a - b", "    a + b");
        edit["sessionUpdate"] = json!("tool_call");
        assert_eq!(tool_updates(&updates, "c5")[0], edit, "{api}");
        // A new file has no old text.
        let notes = ws.path().join("NOTES.md");
        assert_eq!(
            tool_updates(&updates, "c7")[0],
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": "c7",
                "title": "Create NOTES.md",
                "kind": "edit",
                "content": [{"type": "diff", "path": notes, "newText": "Fixed add.\n"}],
                "locations": [{"path": notes, "line": 1}],
                "rawInput": {"path": "NOTES.md", "content": "Fixed add.\n"},
                "_meta": {"toolName": "write"}
            }),
            "{api}"
        );

        // What the model read back.
        let reqs = mock.requests();
        let model_reqs: Vec<&Value> = reqs.iter().filter(|r| r.method == "POST").map(|r| &r.body).collect();
        let offered = script::offered_tools(api, model_reqs[0]);
        for t in ["read", "write", "edit", "apply_patch", "exec", "grep", "glob", "ls", "web_fetch"] {
            assert!(offered.iter().any(|o| o == t), "{api}: {t} offered: {offered:?}");
        }
        let r = |n: usize, id: &str| result_for(api, model_reqs[n], id);
        assert!(r(1, "c1").contains("src/") && r(1, "c1").contains("README.md"), "{api}: {}", r(1, "c1"));
        assert!(r(1, "c2").contains("src/lib.rs") && !r(1, "c2").contains("ignored/"), "{api}: {}", r(1, "c2"));
        assert!(r(1, "c3").contains("src/lib.rs:2:pub fn add"), "{api}: {}", r(1, "c3"));
        assert!(!r(1, "c3").contains("generated"), "{api}: .gitignore is honoured: {}", r(1, "c3"));
        assert!(r(2, "c4").contains("     3\t    a - b"), "{api}: numbered lines: {}", r(2, "c4"));
        assert!(r(3, "c5").contains("-    a - b\n+    a + b"), "{api}: a unified diff: {}", r(3, "c5"));
        assert!(r(4, "c6").contains("ok: 1 passed") && r(4, "c6").contains("[exit code 0]"), "{api}: {}", r(4, "c6"));
        assert!(r(5, "c8").contains("M README.md") && r(5, "c8").contains("D old.txt"), "{api}: {}", r(5, "c8"));
        let fetched = r(6, "c9");
        assert!(
            fetched.contains("Calc docs") && fetched.contains("commutative") && !fetched.contains("<b>"),
            "{api}: {fetched}"
        );
        assert_eq!(reqs.iter().filter(|r| r.method == "GET").count(), 1);
    }
}

#[test]
fn a_patch_that_does_not_apply_changes_nothing() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "openai-responses";
    let patch = "*** Begin Patch\n*** Update File: README.md\n@@\n-A tiny calculator.\n+A big calculator.\n*** Update File: src/lib.rs\n@@\n-    a * b\n+    a + b\n*** Add File: new.txt\n+new\n*** End Patch";
    mock.push(calls(api, &[("p", "apply_patch", json!({"patch": patch}))]));
    mock.push(text(api, "ok"));
    let before_readme = std::fs::read_to_string(ws.path().join("README.md")).unwrap();
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "auto");
    let (msgs, response) = agent.prompt_answering(&session, "patch it", no_requests);
    assert_eq!(response["result"], replies(api, 2));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("README.md")).unwrap(),
        before_readme,
        "the first file was not changed either"
    );
    assert!(!ws.path().join("new.txt").exists());
    let result = result_for(api, &mock.requests()[1].body, "p");
    assert!(
        result.contains("does not apply (nothing was changed)") && result.contains("src/lib.rs: hunk 1 does not apply"),
        "{result}"
    );
    // Announced as failed, never run.
    let title = "apply_patch: patch: *** Begin Patch\\n*** Update File: README.md\\n@@\\n-A tiny calculator.\\n+A big \
                 calculator.\\n*** Update...";
    let failed = "the patch does not apply (nothing was changed): src/lib.rs: hunk 1 does not apply: its 1 \
                  context/removed lines (starting with \"    a * b\") were not found";
    assert_eq!(
        tool_updates(&updates_of(&msgs), "p"),
        [json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "p",
            "title": title,
            "kind": "edit",
            "status": "failed",
            "content": tool_text(failed),
            "rawInput": {"patch": patch},
            "_meta": {"toolName": "apply_patch"}
        })]
    );
}

#[test]
fn broken_arguments_and_unknown_tools_are_not_run() {
    for api in APIS {
        let ws = workspace("calc");
        let mock = MockModel::start();
        // Arguments cut off mid-string are a broken parse; the call must not run.
        let broken = match api {
            "anthropic" => anthropic_broken_call(),
            _ => Reply::sse(broken_chat_or_responses(api)),
        };
        mock.push(broken);
        mock.push(calls(api, &[("u", "rm_rf", json!({"path": "/"}))]));
        mock.push(text(api, "sorry"));
        let (mut agent, session) = agent_in(api, &mock, ws.path(), "auto");
        let (msgs, response) = agent.prompt_answering(&session, "go", no_requests);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{api}: {response}");
        let reqs = mock.requests();
        let broken_result = result_for(api, &reqs[1].body, "bad");
        assert!(
            broken_result.contains("not valid JSON") && broken_result.contains("was not run"),
            "{api}: {broken_result}"
        );
        assert!(!ws.path().join("should-not-exist.txt").exists());
        let unknown = result_for(api, &reqs[2].body, "u");
        assert!(unknown.contains("there is no tool `rm_rf`"), "{api}: {unknown}");
        // Both announced as failed; foreign names get a kind.
        let updates = updates_of(&msgs);
        let tools = "read, write, edit, apply_patch, exec, grep, glob, ls, web_fetch, update_plan, memory_search, memory_get, sessions_spawn, sessions_send, sessions_list, sessions_history";
        assert_eq!(
            tool_updates(&updates, "u"),
            [json!({
                "sessionUpdate": "tool_call",
                "toolCallId": "u",
                "title": "rm_rf: path: /",
                "kind": "delete",
                "status": "failed",
                "content": tool_text(&format!("there is no tool `rm_rf`; the tools are: {tools}")),
                "rawInput": {"path": "/"},
                "_meta": {"toolName": "rm_rf"}
            })],
            "{api}"
        );
        let not_json = "the arguments were not valid JSON (EOF while parsing a string at line 1 column 57); the \
                        tool was not run. Call `write` again with a valid JSON object";
        assert_eq!(
            tool_updates(&updates, "bad"),
            [json!({
                "sessionUpdate": "tool_call",
                "toolCallId": "bad",
                "title": "write",
                "kind": "edit",
                "status": "failed",
                "content": tool_text(not_json),
                "rawInput": "{\"path\": \"should-not-exist.txt\", \"content\": \"unterminated",
                "_meta": {"toolName": "write"}
            })],
            "{api}"
        );
    }
}

fn anthropic_broken_call() -> Reply {
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"bad\",\"name\":\"write\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"should-not-exist.txt\\\", \\\"content\\\": \\\"unterminated\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    Reply::sse(body.as_bytes().to_vec())
}

fn broken_chat_or_responses(api: &str) -> Vec<u8> {
    let args = "{\"path\": \"should-not-exist.txt\", \"content\": \"unterminated";
    if api == "gemini" {
        // Gemini's calls carry their arguments parsed; a proxy's may carry them as text.
        let call = json!({"candidates": [{"content": {"parts": [{"functionCall": {"id": "bad", "name": "write", "args": args}}], "role": "model"}, "finishReason": "STOP", "index": 0}]});
        return format!("data: {call}\r\n\r\n").into_bytes();
    }
    if api == "openai-chat" {
        let c = |d: Value, f: Value| {
            format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": d, "finish_reason": f}]}))
        };
        let mut s = c(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "bad", "type": "function", "function": {"name": "write", "arguments": args}}]}),
            Value::Null,
        );
        s.push_str(&c(json!({}), json!("tool_calls")));
        s.push_str("data: [DONE]\n\n");
        s.into_bytes()
    } else {
        let mut s = String::new();
        s.push_str(&format!("event: response.output_item.done\ndata: {}\n\n", json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "function_call", "call_id": "bad", "name": "write", "arguments": args}})));
        s.push_str(&format!("event: response.completed\ndata: {}\n\n", json!({"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 5, "output_tokens": 5}}})));
        s.into_bytes()
    }
}

#[test]
fn cancelling_a_command_kills_its_whole_process_group() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    // Found by their command lines (the command runs in a PID namespace of its own, with a /proc
    // of its own, so it cannot say its pids as this side numbers them).
    let (shell_line, child_line) = (crate::support::unique_sleep(0), crate::support::unique_sleep(1));
    let command = format!(
        "sh -c 'echo started > child.pid; exec {child_line}' & while [ ! -s child.pid ]; do sleep 0.01; done; \
         echo started; exec {shell_line}"
    );
    mock.push(calls(api, &[("x", "exec", json!({"command": command}))]));
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "auto");
    let id = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "run"}]}));
    // Wait until the command is running.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ws.path().join("child.pid").exists()
        || std::fs::read_to_string(ws.path().join("child.pid")).unwrap().trim().is_empty()
    {
        assert!(Instant::now() < deadline, "the command did not start\n{}", agent.stderr());
        std::thread::sleep(Duration::from_millis(10));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while crate::support::running(&shell_line).is_none() || crate::support::running(&child_line).is_none() {
        assert!(Instant::now() < deadline, "the command's processes are not seen running");
        std::thread::sleep(Duration::from_millis(10));
    }
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (msgs, response) = agent.until_response(id);
    // The model's reply was whole before the command ran: its tokens are counted.
    assert_eq!(response, result(id, ended("cancelled", scripted_usage(api, 1))));
    // A final update for the killed command, with what it had printed.
    let output = json!({"type": "content", "content": {"type": "text", "text": "```\nstarted\n```"}});
    assert_eq!(
        tool_updates(&updates_of(&msgs), "x")[1..],
        [
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "x", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "x", "content": [output]}),
            json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": "x",
                "status": "failed",
                "content": [output, {"type": "content", "content": {"type": "text", "text": "[cancelled; the command was killed]"}}],
                "rawOutput": {"cancelled": true}
            }),
        ]
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    for line in [&shell_line, &child_line] {
        while let Some(pid) = crate::support::running(line) {
            assert!(Instant::now() < deadline, "process {pid} ({line}) survived the cancel");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Alive and not a zombie.
fn wire_bytes_of(msgs: &[Value], id: &str) -> usize {
    msgs.iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["update"]["toolCallId"] == id)
        .map(|m| serde_json::to_string(m).unwrap().len() + 1)
        .sum()
}

#[test]
fn long_command_output_costs_at_most_its_size_on_the_wire() {
    // 50,000 lines of output, streamed to a Zed-style client (display-only terminal increments)
    // and to a plain client (a bounded, throttled tail).
    let command = "i=0; while [ $i -lt 50000 ]; do echo \"line $i: the quick brown fox jumps\"; i=$((i+1)); done";
    let expected_bytes: usize = (0..50_000).map(|i| format!("line {i}: the quick brown fox jumps\n").len()).sum();
    for terminal_output in [true, false] {
        let ws = workspace("calc");
        let mock = MockModel::start();
        let api = "anthropic";
        mock.push(calls(api, &[("x", "exec", json!({"command": command}))]));
        mock.push(text(api, "done"));
        let mut agent = Agent::spawn(options_for(api, &mock));
        let caps = if terminal_output { json!({"_meta": {"terminal_output": true}}) } else { json!({}) };
        let r = agent.request("initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
        assert!(r.get("result").is_some());
        let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
        let (msgs, response) = agent.prompt_answering(&session, "count", no_requests);
        assert_eq!(response["result"], replies(api, 2));
        let wire = wire_bytes_of(&msgs, "x");
        let ratio = wire as f64 / expected_bytes as f64;
        assert!(
            ratio <= 1.2,
            "terminal_output={terminal_output}: {wire} wire bytes for {expected_bytes} bytes of output ({ratio:.2}×)"
        );
        if terminal_output {
            let streamed: String = msgs
                .iter()
                .filter_map(|m| m["params"]["update"]["_meta"]["terminal_output"]["data"].as_str())
                .collect();
            assert_eq!(streamed.len(), expected_bytes, "every byte streamed once");
            assert!(streamed.starts_with("line 0: ") && streamed.ends_with("line 49999: the quick brown fox jumps\n"));
            let exit =
                msgs.iter().rev().find_map(|m| m["params"]["update"]["_meta"].get("terminal_exit").cloned()).unwrap();
            assert_eq!(exit["exit_code"], 0);
        }
        // The model got a truncated view with a marker saying where the rest is.
        let result = result_for(api, &mock.requests()[1].body, "x");
        assert!(
            result.len() < 40_000 && result.contains("omitted") && result.contains("line 49999"),
            "{}",
            &result[result.len().saturating_sub(300)..]
        );
        let log = result
            .split("read ")
            .nth(1)
            .and_then(|s| s.split(" (the full output)").next())
            .expect("a log path in the marker");
        assert_eq!(std::fs::read_to_string(log).unwrap().len(), expected_bytes);
    }
}

#[test]
fn the_turn_stops_at_its_request_limit() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "openai-chat";
    for i in 0..3 {
        mock.push(calls(api, &[(&format!("l{i}"), "ls", json!({}))]));
    }
    let mut agent = Agent::spawn(options_for(api, &mock).config("max_turn_requests = 3\n"));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({}));
    let (msgs, response) = agent.prompt_answering(&session, "loop", no_requests);
    assert_eq!(response["result"], ended("max_turn_requests", scripted_usage(api, 3)));
    let said: String = updates_of(&msgs)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(said.contains("limit of 3 model requests"), "{said}");
    assert_eq!(mock.requests().len(), 3);
    assert!(tool_updates(&updates_of(&msgs), "l2").is_empty(), "the last calls were not run");
    // The history stays valid: the next prompt works.
    mock.push(text(api, "resumed"));
    let (_, response) = agent.prompt_answering(&session, "continue", no_requests);
    assert_eq!(response["result"], replies(api, 1));
    assert!(result_for(api, &mock.requests()[3].body, "l2").contains("limit of 3"));
}

#[test]
fn tool_policy_hides_denied_tools() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(calls(api, &[("x", "exec", json!({"command": "touch pwned"}))]));
    mock.push(text(api, "ok"));
    let mut agent = Agent::spawn(options_for(api, &mock).config("[tools]\ndeny = [\"EXEC\", \"web_*\"]\n"));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    agent.prompt_answering(&session, "go", no_requests);
    let offered = script::offered_tools(api, &mock.requests()[0].body);
    assert!(!offered.contains(&"exec".to_owned()) && !offered.contains(&"web_fetch".to_owned()), "{offered:?}");
    assert!(offered.contains(&"read".to_owned()));
    assert!(result_for(api, &mock.requests()[1].body, "x").contains("there is no tool `exec`"));
    assert!(!ws.path().join("pwned").exists());
}

#[test]
fn options_reach_the_process_env_and_cwd() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "openai-responses";
    mock.push(calls(
        api,
        &[("x", "exec", json!({"command": "pwd; echo $GREETING; exit 3", "cwd": "docs", "env": {"GREETING": "hi"}}))],
    ));
    mock.push(calls(api, &[("t", "exec", json!({"command": "sleep 5", "timeout_ms": 200}))]));
    // A command that sends its output elsewhere and goes on: its time limit still holds.
    mock.push(calls(api, &[("q", "exec", json!({"command": "exec >/dev/null 2>&1; sleep 30", "timeout_ms": 300}))]));
    mock.push(text(api, "ok"));
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "auto");
    let (msgs, _) = agent.prompt_answering(&session, "go", no_requests);
    let r = result_for(api, &mock.requests()[1].body, "x");
    assert!(
        r.contains(&format!("{}/docs", ws.path().canonicalize().unwrap().display())) || r.contains("/docs\n"),
        "{r}"
    );
    assert!(r.contains("hi\n") && r.contains("[exit code 3]"), "{r}");
    assert_eq!(
        tool_updates(&updates_of(&msgs), "x").last().unwrap()["status"],
        "failed",
        "a non-zero exit fails the call"
    );
    let t = result_for(api, &mock.requests()[2].body, "t");
    assert!(t.contains("timed out after 200 ms"), "{t}");
    let q = result_for(api, &mock.requests()[3].body, "q");
    assert!(q.contains("timed out after 300 ms"), "{q}");
}

#[test]
fn the_editor_scenario_without_editor_capabilities_uses_disk_and_local_processes() {
    // The same script as the editor test (tests/suite/editor.rs), with a client that offers
    // neither fs nor terminals: the agent writes the file itself and runs the command itself.
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    script::push_fix_and_check(&mock, api);
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "ask");
    let mut asked = Vec::new();
    let (msgs, response) =
        agent.prompt_answering(&session, "fix the failing test", answer_with("allow_once", &mut asked));
    assert_eq!(response["result"], replies(api, 3));
    // For each call: the announcement (the edit's with its diff), then the question, then the run.
    for id in ["e1", "x1"] {
        let announced = msgs
            .iter()
            .position(|m| {
                m["params"]["update"]["sessionUpdate"] == "tool_call" && m["params"]["update"]["toolCallId"] == id
            })
            .unwrap();
        let asked_at = msgs
            .iter()
            .position(|m| m["method"] == "session/request_permission" && m["params"]["toolCall"]["toolCallId"] == id)
            .unwrap();
        let running = msgs
            .iter()
            .position(|m| m["params"]["update"]["toolCallId"] == id && m["params"]["update"]["status"] == "in_progress")
            .unwrap();
        let done = msgs
            .iter()
            .position(|m| m["params"]["update"]["toolCallId"] == id && m["params"]["update"]["status"] == "completed")
            .unwrap();
        assert!(
            announced < asked_at && asked_at < running && running < done,
            "{id}: {announced} {asked_at} {running} {done}"
        );
    }
    let edit = &tool_updates(&updates_of(&msgs), "e1")[0];
    assert_eq!(edit["content"][0]["type"], "diff");
    assert!(std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap().contains("    a + b"));
    assert!(
        !msgs.iter().any(|m| m["method"].as_str().is_some_and(|m| m.starts_with("fs/") || m.starts_with("terminal/"))),
        "no editor calls without the capabilities"
    );
    let result = result_for(api, &mock.requests()[2].body, "x1");
    assert!(result.contains("ok: 1 passed") && result.contains("[exit code 0]"), "{result}");
    let x1 = tool_updates(&updates_of(&msgs), "x1");
    let last = x1.last().unwrap();
    assert!(last["content"].to_string().contains("ok: 1 passed"), "the output is shown: {last}");
}

#[test]
fn an_editor_that_cannot_write_says_why_and_the_model_hears_it() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(calls(api, &[("w1", "write", json!({"path": "NOTES.md", "content": "notes"}))]));
    mock.push(text(api, "ok"));
    let mut agent = Agent::spawn(options_for(api, &mock));
    let caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let r = agent.request("initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    assert!(r.get("result").is_some(), "{r}");
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let id = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "note"}]}));
    let mut updates = Vec::new();
    loop {
        let msg = agent.recv();
        match msg["method"].as_str() {
            // The official TypeScript SDK's shape for a handler that throws.
            Some("fs/write_text_file") => agent.send(&json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
                "code": -32603, "message": "Internal error",
                "data": {"details": "Permission denied for fs/write_text_file"}}})),
            Some("fs/read_text_file") => agent.send(&json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
                "code": -32002, "message": "Resource not found"}})),
            Some("session/update") => updates.push(msg["params"]["update"].clone()),
            _ if msg["id"] == id => break,
            _ => panic!("unexpected: {msg}"),
        }
    }
    let end = tool_updates(&updates, "w1").last().cloned().unwrap();
    assert_eq!(end["status"], "failed", "{end}");
    assert!(end.to_string().contains("Permission denied for fs/write_text_file"), "{end}");
    assert!(result_for(api, &mock.requests()[1].body, "w1").contains("Permission denied for fs/write_text_file"));
}
