//! The user's hooks from the command line (`acp hooks list|test`), as real shell commands from a
//! real config.toml: a PreToolUse hook that blocks `rm` with its reason, one that answers in JSON,
//! one that fails (and blocks nothing), a matcher that does not match.

fn acp(home: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(args)
        .current_dir(home)
        .env("ACP_HOME", home)
        .env("HOME", home)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn hooks_are_listed_and_a_sample_event_shows_what_each_answers() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        r#"
[[hooks]]
event = "PreToolUse"
matcher = "exec"
command = 'grep -q "rm -rf" && { echo "no rm -rf here" >&2; exit 2; }; exit 0'

[[hooks]]
event = "PreToolUse"
matcher = "exec|write"
command = '''echo '{"decision": "ask", "reason": "commands are reviewed"}' '''
timeout_sec = 5

[[hooks]]
event = "PreToolUse"
matcher = "read"
command = "echo never"

[[hooks]]
event = "Stop"
command = "echo broken >&2; exit 7"
"#,
    )
    .unwrap();
    let (ok, out) = acp(home.path(), &["hooks", "list"]);
    assert!(ok && out.contains("PreToolUse [exec]: grep") && out.contains("(timeout 5 s)"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "PreToolUse", "--tool", "exec"]);
    assert!(ok, "{out}");
    assert!(out.contains("blocks: no rm -rf here"), "{out}");
    assert!(out.contains("done, decision ask, reason: commands are reviewed"), "{out}");
    assert!(!out.contains("never"), "the read hook does not match exec: {out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "Stop"]);
    assert!(ok && out.contains("failed (blocks nothing): exit 7: broken"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "Nope"]);
    assert!(!ok && out.contains("no event `Nope` (events: SessionStart,"), "{out}");
    // A hook with a mistake in its entry is a broken configuration, said as such.
    std::fs::write(home.path().join("config.toml"), "[[hooks]]\nevent = \"BeforeEverything\"\ncommand = \"true\"\n")
        .unwrap();
    let (ok, out) = acp(home.path(), &["hooks", "test", "Stop"]);
    assert!(!ok && out.contains("BeforeEverything"), "{out}");
}

#[test]
fn a_pre_tool_use_hook_blocks_rm_the_model_reads_why_and_the_file_survives() {
    use crate::support::mock_model::MockModel;
    use crate::support::script::{calls, result_for, text};
    use serde_json::json;
    let ws = crate::support::workspace("calc");
    std::fs::write(ws.path().join("keep.txt"), "precious").unwrap();
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(calls(api, &[("x", "exec", json!({"command": "rm keep.txt"}))]));
    mock.push(calls(api, &[("y", "exec", json!({"command": "echo fine"}))]));
    mock.push(text(api, "Understood."));
    let hook = r#"
[[hooks]]
event = "PreToolUse"
matcher = "exec"
command = 'if grep -q "\"rm "; then echo "deleting files is not allowed in this repository" >&2; exit 2; fi'
"#;
    let mut agent = crate::support::agent::Agent::spawn(crate::support::options_for(api, &mock).config(hook));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (msgs, _) = agent.prompt_answering(&session, "clean up", crate::support::no_requests);
    assert_eq!(std::fs::read_to_string(ws.path().join("keep.txt")).unwrap(), "precious", "the file survives");
    let blocked = result_for(api, &mock.requests()[1].body, "x");
    assert_eq!(blocked, "Not run: a hook blocked this call: deleting files is not allowed in this repository.");
    let fine = result_for(api, &mock.requests()[2].body, "y");
    assert!(fine.contains("fine"), "a call the hook lets through runs: {fine}");
    // The editor sees the blocked call failed, with the hook's reason.
    let updates = crate::support::updates_of(&msgs);
    let last = crate::support::tool_updates(&updates, "x").last().cloned().unwrap();
    assert_eq!(last["status"], "failed", "{last}");
    assert!(last.to_string().contains("Blocked by a hook: deleting files is not allowed"), "{last}");
}

#[test]
fn user_prompt_submit_hooks_add_context_to_every_prompt_and_can_block_one() {
    use crate::support::mock_model::MockModel;
    use crate::support::script::text;
    use serde_json::json;
    let ws = crate::support::workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(text(api, "Noted."));
    let hooks = r#"
[[hooks]]
event = "UserPromptSubmit"
command = "echo 'Context from a hook: the team uses tabs.'"

[[hooks]]
event = "UserPromptSubmit"
command = 'if grep -q "password"; then echo "prompts must not carry passwords" >&2; exit 2; fi'
"#;
    let mut agent = crate::support::agent::Agent::spawn(crate::support::options_for(api, &mock).config(hooks));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({}));
    agent.prompt_answering(&session, "How should I indent?", crate::support::no_requests);
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("How should I indent?") && body.contains("the team uses tabs"), "{body}");
    // Blocked: the model is never asked, and the user is told why.
    let (msgs, _) = agent.prompt_answering(&session, "my password is hunter2", crate::support::no_requests);
    assert_eq!(mock.requests().len(), 1, "the blocked prompt reached no model");
    let shown = serde_json::to_string(&msgs).unwrap();
    assert!(shown.contains("A hook blocked this prompt: prompts must not carry passwords"), "{shown}");
}

#[test]
fn a_post_tool_use_formatter_runs_after_a_write_and_its_note_reaches_the_model() {
    use crate::support::mock_model::MockModel;
    use crate::support::script::{calls, result_for, text};
    use serde_json::json;
    let ws = crate::support::workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    mock.push(calls(api, &[("w", "write", json!({"path": "notes.txt", "content": "one  two\n"}))]));
    mock.push(text(api, "Written."));
    // A formatter: two spaces become a tab in the file the call wrote; it says so on stdout.
    let hook = r#"
[[hooks]]
event = "PostToolUse"
matcher = "write|edit"
command = '''cat >/dev/null; sed -i 's/  /\t/g' notes.txt && echo "formatted notes.txt (tabs)"'''
"#;
    let mut agent = crate::support::agent::Agent::spawn(crate::support::options_for(api, &mock).config(hook));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    agent.prompt_answering(&session, "write notes", crate::support::no_requests);
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "one\ttwo\n");
    let result = result_for(api, &mock.requests()[1].body, "w");
    assert!(result.ends_with("[hook] formatted notes.txt (tabs)"), "{result}");
}
