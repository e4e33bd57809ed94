//! The examples under clients/: each NDJSON script runs as written against the mock model and
//! every request gets a successful answer; the editor configuration files parse.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::mock_model::MockModel;
use crate::support::script::{calls, text};

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// Pipes a script into `acp serve`; the answers by request id, and every line.
fn run_script(home: &Path, mock: &MockModel, name: &str) -> (Vec<Value>, Vec<Value>) {
    let script = std::fs::read(clients().join("scripts").join(name)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let requests = script.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count();
    let answers: Vec<Value> = lines.iter().filter(|l| l.get("id").is_some()).cloned().collect();
    assert_eq!(answers.len(), requests, "{name}: every request is answered");
    for a in &answers {
        assert!(a.get("result").is_some(), "{name}: {a}");
    }
    (answers, lines)
}

fn said(lines: &[Value]) -> String {
    lines
        .iter()
        .filter(|l| l["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|l| l["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[test]
fn the_ndjson_scripts_run_as_written() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();

    mock.push(text("anthropic", "Hello there."));
    let (answers, lines) = run_script(home.path(), &mock, "hello.ndjson");
    assert_eq!(answers[2]["result"]["stopReason"], "end_turn");
    assert_eq!(said(&lines), "Hello there.");

    // continue.ndjson picks up the stored session script-hello.
    mock.push(text("anthropic", "I said hello."));
    let (answers, lines) = run_script(home.path(), &mock, "continue.ndjson");
    assert_eq!(answers[2]["result"]["stopReason"], "end_turn");
    let messages = mock.requests()[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages[1]["content"][0]["text"], "Hello there.", "the history went along");
    assert!(said(&lines).contains("**Usage**"), "{}", said(&lines));
    // /usage (id 3) waited for the prompt before it (id 2): both turns are counted.
    assert!(said(&lines).contains("Input: 100 tokens"), "{}", said(&lines));

    let (answers, _) = run_script(home.path(), &mock, "sessions.ndjson");
    let titles: Vec<&str> =
        answers[1]["result"]["sessions"].as_array().unwrap().iter().filter_map(|s| s["title"].as_str()).collect();
    assert_eq!(titles, ["Say hello in one short sentence."]);
    assert_eq!(answers[2]["result"]["sessions"].as_array().unwrap().len(), 1, "the cwd filter");

    let note = Path::new("/tmp/acp-script-note.txt");
    let _ = std::fs::remove_file(note);
    mock.push(calls(
        "anthropic",
        &[("call_w", "write", json!({"path": "/tmp/acp-script-note.txt", "content": "hello\n"}))],
    ));
    mock.push(text("anthropic", "Created it."));
    let (answers, lines) = run_script(home.path(), &mock, "auto-edit.ndjson");
    assert_eq!(answers[2]["result"]["stopReason"], "end_turn");
    assert!(!lines.iter().any(|l| l["method"] == "session/request_permission"), "auto mode does not ask");
    assert_eq!(std::fs::read_to_string(note).unwrap(), "hello\n");
    std::fs::remove_file(note).unwrap();
}

#[test]
fn the_editor_configurations_parse() {
    for name in ["zed-settings.json", "acp.json"] {
        let text = std::fs::read_to_string(clients().join("editors").join(name)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let server = &v["agent_servers"]["acp"];
        assert_eq!(server["args"], json!(["serve"]), "{name}");
        assert!(server["command"].as_str().unwrap().ends_with("/acp"), "{name}");
    }
}
