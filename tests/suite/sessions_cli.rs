//! `acp sessions` against a real `$ACP_HOME`: list (as a table and as JSON, filtered by cwd), show,
//! export (JSON and Markdown) and delete one stored session; and four of them started together on
//! one new home.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{BLANK, blank};
use crate::support::fix_turn::{PROMPT, push_fix_turn};
use crate::support::mock_model::MockModel;
use crate::support::{options_for, workspace};

/// Four `acp` processes started together on one new `$ACP_HOME`, 500 times: each must open the
/// store (`.ci/run` runs it: `cargo test -- --ignored stress_`).
#[test]
#[ignore = "stress loop, run by .ci/run"]
fn stress_processes_opening_a_new_home_at_once() {
    for round in 0..500 {
        let home = tempfile::tempdir().unwrap();
        let children: Vec<_> = (0..4)
            .map(|_| {
                std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
                    .args(["sessions", "list"])
                    .env_clear()
                    .env("ACP_HOME", home.path())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && stdout.trim() == "No sessions.", "round {round}: {stdout}{stderr}");
        }
    }
}

/// `acp sessions …` against a home with one stored session.
fn cli(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .arg("sessions")
        .args(args)
        .env_clear()
        .env("ACP_HOME", home)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn the_sessions_command_lists_shows_exports_and_deletes() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    push_fix_turn(&mock);
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    agent.prompt(&session, PROMPT);
    drop(agent);

    let (ok, table, _) = cli(home.path(), &["list"]);
    assert!(ok);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("ID ") && lines[0].contains("  ORIGIN  "), "{table}");
    assert!(lines[1].contains("  acp  "), "where it was made: {table}");
    assert!(lines[1].starts_with(&session) && lines[1].contains("Fix the add bug"), "{table}");
    assert!(lines[1].contains(&ws.path().display().to_string()), "{table}");

    let (ok, jsonl, _) = cli(home.path(), &["list", "--json"]);
    assert!(ok);
    let row: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    // Three requests of 50 tokens in and 20 out.
    let stored = json!({
        "id": session,
        "title": PROMPT,
        "cwd": ws.path(),
        "additionalDirectories": [],
        "createdAt": BLANK,
        "updatedAt": BLANK,
        "model": "anthropic/claude-sonnet-4-5",
        "mode": "auto",
        "reasoning": null,
        "inputTokens": 150,
        "outputTokens": 60,
        "contextTokens": 70,
        "parentId": null,
        "origin": "acp"
    });
    assert_eq!(blank(&row, &["createdAt", "updatedAt"]), stored);
    let (_, none, _) = cli(home.path(), &["list", "--cwd", "/nowhere"]);
    assert_eq!(none.trim(), "No sessions in /nowhere.");

    let (ok, shown, _) = cli(home.path(), &["show", &session]);
    assert!(ok);
    assert!(shown.starts_with(&format!("# {PROMPT}\n")), "{shown}");
    assert!(shown.contains("> The bug is in src/lib.rs: add() subtracts."), "{shown}");
    assert!(shown.contains("**Tool** `Edit src/lib.rs` — completed"), "{shown}");
    assert!(shown.contains("-    a - b\n+    a + b"), "{shown}");
    assert!(shown.contains("- [x] Write NOTES.md"), "{shown}");
    assert!(shown.contains("Fixed `add` and wrote NOTES.md."), "{shown}");

    let (ok, exported, _) = cli(home.path(), &["export", &session, "--format", "json"]);
    assert!(ok);
    let doc: Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(blank(&doc["session"], &["createdAt", "updatedAt"]), stored);
    let types: Vec<&str> = doc["items"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["user", "thought", "assistant", "tool_call", "plan", "tool_call", "plan", "assistant"]);
    let file = home.path().join("out.md");
    let (ok, _, _) = cli(home.path(), &["export", &session, "--format", "md", "-o", file.to_str().unwrap()]);
    assert!(ok);
    assert!(std::fs::read_to_string(&file).unwrap().contains("## Assistant"));

    let (ok, said, _) = cli(home.path(), &["delete", &session]);
    assert!(ok, "{said}");
    assert!(!home.path().join("sessions").join(format!("{session}.jsonl")).exists());
    let (ok, _, err) = cli(home.path(), &["show", &session]);
    assert!(!ok);
    assert!(err.contains(&format!("no session `{session}`")), "{err}");
    // As session/delete: deleting what is not there succeeds, and says so.
    let (ok, said, _) = cli(home.path(), &["delete", "never-was"]);
    assert!(ok && said.contains("No session `never-was`") && said.contains("nothing to delete"), "{said}");
}
