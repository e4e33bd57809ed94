//! Approvals against the real binary, with a client that offers neither fs nor terminals: what
//! each mode asks before (the question carrying the whole tool call, diff included), answers
//! remembered as rules, leaving the workspace asking every time (with no "always"), and a cancel
//! that withdraws a pending question.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{calc_lib_edit, ended, replies, result, scripted_usage};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, result_for, text};
use crate::support::{agent_in, answer_with, no_requests, options_for, status_sequence, updates_of, workspace};

/// A permission question as the editor gets it: the tool call in full, then the options —
/// "always" ones naming what they cover, none outside the workspace.
fn permission(id: u64, session: &str, tool_call: Value, always: Option<&str>) -> Value {
    let mut options = vec![json!({"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"})];
    if let Some(what) = always {
        options.push(
            json!({"optionId": "allow-always", "name": format!("Always allow `{what}`"), "kind": "allow_always"}),
        );
    }
    options.push(json!({"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}));
    if let Some(what) = always {
        options.push(
            json!({"optionId": "reject-always", "name": format!("Always reject `{what}`"), "kind": "reject_always"}),
        );
    }
    let params = json!({"sessionId": session, "toolCall": tool_call, "options": options});
    json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": params})
}

#[test]
fn ask_mode_asks_before_edits_and_commands_and_remembers_always() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    // Turn 1: a read (free) and an edit (asks; rejected).
    mock.push(calls(
        api,
        &[
            ("r1", "read", json!({"path": "README.md"})),
            ("e1", "edit", json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"})),
        ],
    ));
    mock.push(text(api, "ok"));
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "ask");
    let mut asked = Vec::new();
    let (before, response) = agent.prompt_answering(&session, "fix it", answer_with("reject_once", &mut asked));
    assert_eq!(response["result"], replies(api, 2));
    // Only the edit asks, with everything a client deciding by kind or policy needs in the question.
    assert_eq!(asked, [permission(0, &session, calc_lib_edit(ws.path(), "e1", "a - b", "a + b"), Some("edit"))]);
    // The announcement (with its diff) came before the question.
    let pos_call = before.iter().position(|m| m["params"]["update"]["toolCallId"] == "e1").unwrap();
    let pos_ask = before.iter().position(|m| m["method"] == "session/request_permission").unwrap();
    assert!(pos_call < pos_ask);
    assert!(std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap().contains("a - b"), "rejected: unchanged");
    assert_eq!(status_sequence(&updates_of(&before), "e1"), vec!["pending", "failed"]);
    assert!(result_for(api, &mock.requests()[1].body, "e1").contains("rejected"));

    // Turn 2: a command; the user always allows `sh check.sh`, which covers exactly that command.
    mock.push(calls(api, &[("x1", "exec", json!({"command": "sh check.sh"}))]));
    mock.push(calls(api, &[("x2", "exec", json!({"command": "sh  'check.sh'"}))]));
    mock.push(text(api, "ok"));
    let mut asked = Vec::new();
    let (_, response) = agent.prompt_answering(&session, "run the tests", answer_with("allow_always", &mut asked));
    assert_eq!(response["result"], replies(api, 3));
    // Once: the second command is the same program and arguments.
    let run = json!({
        "toolCallId": "x1",
        "kind": "execute",
        "title": "Run `sh check.sh`",
        "content": [],
        "locations": [],
        "rawInput": {"command": "sh check.sh"},
        "_meta": {"toolName": "exec"}
    });
    assert_eq!(asked, [permission(1, &session, run, Some("sh check.sh"))]);
    let config = std::fs::read_to_string(agent.home.path().join("config.toml")).unwrap();
    assert!(
        config.contains("[[permissions]]")
            && config.contains("command = \"sh check.sh\"")
            && config.contains("decision = \"allow\""),
        "{config}"
    );

    // A new session in the same workspace starts with the saved rule.
    let session2 = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "ask"}}));
    mock.push(calls(api, &[("x3", "exec", json!({"command": "sh check.sh"}))]));
    mock.push(text(api, "ok"));
    let (_, response) = agent.prompt_answering(&session2, "again", no_requests);
    assert_eq!(response["result"], replies(api, 2));

    // ask mode asks even for a remembered-free read? No: reads stay free; commands ask.
    agent.request("session/set_mode", json!({"sessionId": session2, "modeId": "ask"}));
    mock.push(calls(
        api,
        &[("r2", "read", json!({"path": "README.md"})), ("w2", "write", json!({"path": "x.txt", "content": "x"}))],
    ));
    mock.push(text(api, "ok"));
    let mut asked = Vec::new();
    agent.prompt_answering(&session2, "write", answer_with("allow_once", &mut asked));
    let x = ws.path().join("x.txt");
    let write = json!({
        "toolCallId": "w2",
        "kind": "edit",
        "title": "Create x.txt",
        "content": [{"type": "diff", "path": x, "newText": "x"}],
        "locations": [{"path": x, "line": 1}],
        "rawInput": {"path": "x.txt", "content": "x"},
        "_meta": {"toolName": "write"}
    });
    assert_eq!(asked, [permission(2, &session2, write, Some("write"))]);
    assert_eq!(std::fs::read_to_string(ws.path().join("x.txt")).unwrap(), "x");
}

#[test]
fn leaving_the_workspace_always_asks() {
    let ws = workspace("calc");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    let mock = MockModel::start();
    let api = "openai-chat";
    let outside_file = outside.path().join("secret.txt").display().to_string();
    mock.push(calls(
        api,
        &[
            ("a", "read", json!({"path": "../escape.txt"})),
            ("b", "read", json!({"path": outside_file})),
            ("c", "read", json!({"path": "link/secret.txt"})),
            ("d", "write", json!({"path": "link/planted.txt", "content": "x"})),
            ("e", "exec", json!({"command": "ls", "cwd": outside.path().display().to_string()})),
        ],
    ));
    mock.push(text(api, "ok"));
    // Even in auto mode.
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "auto");
    let mut asked = Vec::new();
    let (_, response) = agent.prompt_answering(&session, "look around", answer_with("reject_once", &mut asked));
    assert_eq!(response["result"], replies(api, 2));
    // Every escape asks, and with no "always" outside the workspace.
    let read = |id: &str, shown: String, path: std::path::PathBuf, asked: &str| {
        json!({
            "toolCallId": id,
            "kind": "read",
            "title": format!("Read {shown}"),
            "content": [],
            "locations": [{"path": path, "line": 1}],
            "rawInput": {"path": asked},
            "_meta": {"toolName": "read"}
        })
    };
    let escape = ws.path().parent().unwrap().join("escape.txt");
    let planted = ws.path().join("link/planted.txt");
    let escapes = [
        read("a", escape.display().to_string(), escape, "../escape.txt"),
        read("b", outside_file.clone(), outside_file.clone().into(), &outside_file),
        read("c", "link/secret.txt".into(), ws.path().join("link/secret.txt"), "link/secret.txt"),
        json!({
            "toolCallId": "d",
            "kind": "edit",
            "title": "Create link/planted.txt",
            "content": [{"type": "diff", "path": planted, "newText": "x"}],
            "locations": [{"path": planted, "line": 1}],
            "rawInput": {"path": "link/planted.txt", "content": "x"},
            "_meta": {"toolName": "write"}
        }),
        json!({
            "toolCallId": "e",
            "kind": "read",
            "title": format!("Run `ls` in {}", outside.path().display()),
            "content": [],
            "locations": [],
            "rawInput": {"command": "ls", "cwd": outside.path()},
            "_meta": {"toolName": "exec"}
        }),
    ];
    let expected: Vec<Value> =
        escapes.into_iter().enumerate().map(|(i, call)| permission(i as u64, &session, call, None)).collect();
    assert_eq!(asked, expected);
    assert!(!outside.path().join("planted.txt").exists());
    let body = &mock.requests()[1].body;
    assert!(!result_for(api, body, "c").contains("top secret"));

    // An additional directory is part of the workspace.
    let ws2 = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls(
        api,
        &[("w", "write", json!({"path": outside.path().join("ok.txt").display().to_string(), "content": "fine"}))],
    ));
    mock.push(text(api, "ok"));
    let mut agent = Agent::spawn(options_for(api, &mock));
    agent.initialize();
    let session =
        agent.new_session_in(ws2.path(), json!({"additionalDirectories": [outside.path()], "_meta": {"mode": "auto"}}));
    let (_, response) = agent.prompt_answering(&session, "write there", no_requests);
    assert_eq!(response["result"], replies(api, 2));
    assert_eq!(std::fs::read_to_string(outside.path().join("ok.txt")).unwrap(), "fine");
}

#[test]
fn cancel_answers_a_pending_permission_question() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "openai-chat";
    mock.push(calls(api, &[("e", "exec", json!({"command": "sh check.sh"}))]));
    let (mut agent, session) = agent_in(api, &mock, ws.path(), "ask");
    let id = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "test"}]}));
    let ask = loop {
        let m = agent.recv();
        if m["method"] == "session/request_permission" {
            break m;
        }
    };
    agent.notify("session/cancel", json!({"sessionId": session}));
    // The agent gives up on its question and ends the turn.
    let mut saw_cancel_request = false;
    let response = loop {
        let m = agent.recv();
        if m["method"] == "$/cancel_request" {
            assert_eq!(m, json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": ask["id"]}}));
            saw_cancel_request = true;
        }
        if m["id"] == id && m.get("method").is_none() {
            break m;
        }
    };
    assert!(saw_cancel_request);
    assert_eq!(response, result(id, ended("cancelled", scripted_usage(api, 1))));
    // A late answer to the question does no harm.
    agent.respond(&ask["id"], json!({"outcome": {"outcome": "cancelled"}}));
    assert_eq!(agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}))["result"], json!({}));
}
