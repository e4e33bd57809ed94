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

# As written for Claude Code: its tool name, `type`, `timeout`.
[[hooks]]
event = "PreToolUse"
matcher = "Bash"
type = "command"
command = """echo '{"hookSpecificOutput": {"updatedInput": {"command": "ls"}}}'"""
timeout = 7

[[hooks]]
event = "Stop"
command = "echo broken >&2; exit 7"
"#,
    )
    .unwrap();
    let (ok, out) = acp(home.path(), &["hooks", "list"]);
    assert!(ok && out.contains("PreToolUse [exec]: `grep") && out.contains("(timeout 5 s)"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "PreToolUse", "--tool", "exec"]);
    assert!(ok, "{out}");
    assert!(out.contains("blocks: no rm -rf here"), "{out}");
    assert!(out.contains("done, decision ask, reason: commands are reviewed"), "{out}");
    assert!(!out.contains("never"), "the read hook does not match exec: {out}");
    assert!(out.contains(r#"updatedInput: {"command":"ls"}"#), "Claude Code's names carry over: {out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "Stop"]);
    assert!(ok && out.contains("failed (blocks nothing): exit 7: broken"), "{out}");
    // A workspace's own file: listed as waiting, then allowed from the command line.
    std::fs::create_dir_all(home.path().join(".acp")).unwrap();
    std::fs::write(home.path().join(".acp/hooks.toml"), "[[hooks]]\nevent = \"Stop\"\ncommand = \"echo ws\"\n")
        .unwrap();
    let (ok, out) = acp(home.path(), &["hooks", "list"]);
    assert!(ok && out.contains("they do not run until you allow them"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "allow"]);
    assert!(ok && out.contains("Allowed") && out.contains("Stop: echo ws"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "list"]);
    assert!(ok && out.contains("(.acp/hooks.toml, allowed; run in the sandbox)"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "test", "Nope"]);
    assert!(!ok && out.contains("no event `Nope` (events: SessionStart,"), "{out}");
    // A hook with a mistake in its entry is a broken configuration, said as such.
    std::fs::write(home.path().join("config.toml"), "[[hooks]]\nevent = \"BeforeEverything\"\ncommand = \"true\"\n")
        .unwrap();
    let (ok, out) = acp(home.path(), &["hooks", "test", "Stop"]);
    assert!(!ok && out.contains("BeforeEverything"), "{out}");
    let (ok, out) = acp(home.path(), &["hooks", "list"]);
    assert!(!ok && out.contains("the configuration file is broken") && out.contains("BeforeEverything"), "{out}");
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
    assert!(last.to_string().contains("a hook blocked this call: deleting files is not allowed"), "{last}");
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
    let (msgs, response) = agent.prompt_answering(&session, "my password is hunter2", crate::support::no_requests);
    assert_eq!(mock.requests().len(), 1, "the blocked prompt reached no model");
    assert_eq!(response["result"]["stopReason"], "refusal", "a script tells it from a reply: {response}");
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

/// An agent under `config` with a mock Anthropic model, and a session in a fresh workspace.
fn agent_with(
    config: &str,
    mode: &str,
) -> (crate::support::agent::Agent, crate::support::mock_model::MockModel, tempfile::TempDir, String) {
    let ws = crate::support::workspace("calc");
    let mock = crate::support::mock_model::MockModel::start();
    let mut agent = crate::support::agent::Agent::spawn(crate::support::options_for("anthropic", &mock).config(config));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), serde_json::json!({"_meta": {"mode": mode}}));
    (agent, mock, ws, session)
}

#[test]
fn a_stop_hook_asks_for_one_more_turn_exactly_once() {
    use crate::support::script::text;
    let log = tempfile::NamedTempFile::new().unwrap();
    // Always blocks the stop; writes down whether it runs inside a continuation already.
    let config = format!(
        r#"
[[hooks]]
event = "Stop"
command = '''grep -o '"stop_hook_active":[a-z]*' >> {log}; echo '{{"decision": "block", "reason": "run the tests first"}}' '''
"#,
        log = log.path().display()
    );
    let (mut agent, mock, _ws, session) = agent_with(&config, "auto");
    mock.push(text("anthropic", "Done."));
    mock.push(text("anthropic", "The tests pass."));
    let (msgs, response) = agent.prompt_answering(&session, "fix it", crate::support::no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "one more request for the hook, and no third");
    let body = requests[1].body.to_string();
    assert!(body.contains("[Stop hook] Before you finish: run the tests first"), "{body}");
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap(),
        "\"stop_hook_active\":false\n\"stop_hook_active\":true\n",
        "the second run sees the loop guard"
    );
    let shown = serde_json::to_string(&msgs).unwrap();
    assert!(shown.contains("A Stop hook asks for more: run the tests first"), "{shown}");
    // The next prompt is a turn of its own: the hook may ask once again there.
    mock.push(text("anthropic", "Hello."));
    mock.push(text("anthropic", "Still fine."));
    agent.prompt_answering(&session, "hi", crate::support::no_requests);
    assert_eq!(mock.requests().len(), 4);
}

#[test]
fn a_hook_that_hangs_is_killed_at_its_timeout_and_the_turn_goes_on() {
    use crate::support::script::{calls, result_for, text};
    let pid_file = tempfile::NamedTempFile::new().unwrap();
    let config = format!(
        r#"
[[hooks]]
event = "PreToolUse"
matcher = "exec"
command = "sleep 600 & echo $! > {pid}; wait"
timeout_sec = 1
"#,
        pid = pid_file.path().display()
    );
    let (mut agent, mock, _ws, session) = agent_with(&config, "auto");
    mock.push(calls("anthropic", &[("x", "exec", serde_json::json!({"command": "echo still here"}))]));
    mock.push(text("anthropic", "Ran."));
    mock.push(calls("anthropic", &[("y", "exec", serde_json::json!({"command": "echo again"}))]));
    mock.push(text("anthropic", "Ran again."));
    let (msgs, _) = agent.prompt_answering(&session, "run it", crate::support::no_requests);
    assert!(result_for("anthropic", &mock.requests()[1].body, "x").contains("still here"), "the call ran");
    let shown = serde_json::to_string(&msgs).unwrap();
    assert!(shown.contains("The PreToolUse hook `sleep 600") && shown.contains("was stopped"), "{shown}");
    // The sleep it started went with its process group.
    let pid = std::fs::read_to_string(pid_file.path()).unwrap().trim().to_owned();
    assert!(!pid.is_empty());
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(!alive, "the hook's child {pid} is gone");
    // Failing again, it is not told again.
    let (msgs, _) = agent.prompt_answering(&session, "again", crate::support::no_requests);
    assert!(result_for("anthropic", &mock.requests()[3].body, "y").contains("again"));
    assert!(!serde_json::to_string(&msgs).unwrap().contains("was stopped"), "the failure is told once");
}

#[test]
fn a_hook_that_prints_100_mb_is_read_up_to_a_bound() {
    use crate::support::script::{calls, result_for, text};
    let config = r#"
[[hooks]]
event = "PostToolUse"
command = "cat > /dev/null; head -c 100000000 /dev/zero | tr '\\0' a"
"#;
    let (mut agent, mock, _ws, session) = agent_with(config, "auto");
    mock.push(calls("anthropic", &[("x", "exec", serde_json::json!({"command": "echo hi"}))]));
    mock.push(text("anthropic", "Ok."));
    let (_, response) = agent.prompt_answering(&session, "go", crate::support::no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let result = result_for("anthropic", &mock.requests()[1].body, "x");
    assert!(result.starts_with("hi") && result.contains("[hook] aaaa"), "{}", &result[..100.min(result.len())]);
    assert!(result.len() <= 65 * 1024, "the note is bounded: {} bytes", result.len());
}

#[test]
fn pre_tool_use_may_rewrite_arguments_only_into_ones_that_fit_the_schema() {
    use crate::support::script::{calls, result_for, text};
    let config = r#"
[[hooks]]
event = "PreToolUse"
matcher = "exec"
command = '''if grep -q bad; then echo '{"updatedInput": {"command": 5}}'; else echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo rewritten"}}}'; fi'''

[[hooks]]
event = "PreToolUse"
matcher = "read"
command = "echo 'reading is off today' >&2; exit 2"
"#;
    let (mut agent, mock, ws, session) = agent_with(config, "auto");
    std::fs::write(ws.path().join("a.txt"), "secret").unwrap();
    mock.push(calls("anthropic", &[("x", "exec", serde_json::json!({"command": "echo original"}))]));
    mock.push(calls("anthropic", &[("y", "exec", serde_json::json!({"command": "echo bad"}))]));
    mock.push(calls("anthropic", &[("z", "read", serde_json::json!({"path": "a.txt"}))]));
    mock.push(text("anthropic", "Ok."));
    let (msgs, _) = agent.prompt_answering(&session, "go", crate::support::no_requests);
    let requests = mock.requests();
    let x = result_for("anthropic", &requests[1].body, "x");
    assert!(x.contains("rewritten") && !x.contains("original"), "{x}");
    // The editor was shown what ran.
    let updates = crate::support::updates_of(&msgs);
    let shown = crate::support::tool_updates(&updates, "x");
    assert_eq!(shown[0]["rawInput"]["command"], "echo rewritten", "{shown:?}");
    let y = result_for("anthropic", &requests[2].body, "y");
    assert!(y.contains("a hook blocked this call") && y.contains("`command` must be string"), "{y}");
    // A read that runs without asking still meets the hooks.
    let z = result_for("anthropic", &requests[3].body, "z");
    assert_eq!(z, "Not run: a hook blocked this call: reading is off today.");
}

#[test]
fn session_start_runs_on_new_load_and_resume_and_session_end_on_close() {
    use crate::support::script::text;
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = format!(
        r#"
[[hooks]]
event = "SessionStart"
command = '''src=$(grep -o '"source":"[a-z]*"' | cut -d'"' -f4); echo "start $src" >> {log}; echo "Opened by $src."'''

[[hooks]]
event = "SessionEnd"
command = '''grep -o '"reason":"[a-z]*"' >> {log}'''
"#,
        log = log.path().display()
    );
    let (mut agent, mock, ws, session) = agent_with(&config, "auto");
    for _ in 0..3 {
        mock.push(text("anthropic", "Hi."));
    }
    agent.prompt_answering(&session, "one", crate::support::no_requests);
    assert!(mock.requests()[0].body.to_string().contains("Opened by startup."));
    let cwd = ws.path().display().to_string();
    let r = agent.request("session/load", serde_json::json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    assert!(r.get("result").is_some(), "{r}");
    agent.prompt_answering(&session, "two", crate::support::no_requests);
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("Opened by load.") && second.contains("Opened by startup."), "{second}");
    let r = agent.request("session/resume", serde_json::json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    assert!(r.get("result").is_some(), "{r}");
    agent.prompt_answering(&session, "three", crate::support::no_requests);
    assert!(mock.requests()[2].body.to_string().contains("Opened by resume."));
    let r = agent.request("session/close", serde_json::json!({"sessionId": session}));
    assert!(r.get("result").is_some(), "{r}");
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(
        logged,
        "start startup\n\"reason\":\"close\"\nstart load\n\"reason\":\"close\"\nstart resume\n\"reason\":\"close\"\n",
        "each opening starts once and ends once"
    );
}

#[test]
fn a_workspace_hooks_file_is_ignored_until_the_user_allows_it() {
    use crate::support::script::text;
    let ws = crate::support::workspace("calc");
    std::fs::create_dir_all(ws.path().join(".acp")).unwrap();
    let file = ws.path().join(".acp/hooks.toml");
    std::fs::write(
        &file,
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo 'From the workspace: run make check.'\"\n",
    )
    .unwrap();
    let mock = crate::support::mock_model::MockModel::start();
    for _ in 0..4 {
        mock.push(text("anthropic", "Ok."));
    }
    let mut agent = crate::support::agent::Agent::spawn(crate::support::options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), serde_json::json!({}));
    let (msgs, _) = agent.prompt_answering(&session, "one", crate::support::no_requests);
    assert!(!mock.requests()[0].body.to_string().contains("From the workspace"), "not run before it is allowed");
    let shown = serde_json::to_string(&msgs).unwrap();
    assert!(shown.contains("This workspace has hooks") && shown.contains("/hooks allow"), "{shown}");
    // The user allows it.
    let (updates, _) = agent.prompt(&session, "/hooks allow");
    let said = crate::support::agent::text_of(&updates, "agent_message_chunk");
    assert!(said.contains("Allowed") && said.contains("UserPromptSubmit"), "{said}");
    agent.prompt_answering(&session, "two", crate::support::no_requests);
    assert!(mock.requests()[1].body.to_string().contains("From the workspace: run make check."));
    // Changed (by anyone, the model included), it waits to be allowed again.
    std::fs::write(&file, "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo 'Changed behind your back.'\"\n")
        .unwrap();
    let other = agent.new_session_in(ws.path(), serde_json::json!({}));
    let (msgs, _) = agent.prompt_answering(&other, "three", crate::support::no_requests);
    assert!(!mock.requests()[2].body.to_string().contains("Changed behind"));
    assert!(serde_json::to_string(&msgs).unwrap().contains("changed since you allowed them"));
    // `/hooks` says how each went; another agent's words are never a command.
    let (updates, _) = agent.prompt(&session, "/hooks");
    let said = crate::support::agent::text_of(&updates, "agent_message_chunk");
    assert!(said.contains("**This workspace**") && said.contains("last ran"), "{said}");
}

#[test]
fn pre_compact_hooks_add_to_what_the_summary_keeps() {
    use crate::support::script::text;
    let config = r#"
[[hooks]]
event = "PreCompact"
matcher = "manual"
command = "echo 'keep the list of failing tests'"
"#;
    let (mut agent, mock, _ws, session) = agent_with(config, "auto");
    mock.push(text("anthropic", "First answer."));
    mock.push(text("anthropic", "Second answer."));
    mock.push(text("anthropic", "A summary."));
    agent.prompt_answering(&session, "one", crate::support::no_requests);
    agent.prompt_answering(&session, "two", crate::support::no_requests);
    agent.prompt_answering(&session, "/compact", crate::support::no_requests);
    let body = mock.requests()[2].body.to_string();
    assert!(body.contains("Summarise the conversation") && body.contains("keep the list of failing tests"), "{body}");
}

#[test]
fn acp_run_waits_for_the_session_end_hooks_before_it_exits() {
    use crate::support::script::text;
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("end.log");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[hooks]]\nevent = \"SessionEnd\"\ncommand = '''grep -o '\"reason\":\"[a-z]*\"' >> {}'''\n\n\
             [[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Bash\"\ncommand = \"echo 'not in this repo' >&2; exit 2\"\n",
            log.display()
        ),
    )
    .unwrap();
    let mock = crate::support::mock_model::MockModel::start();
    mock.push(crate::support::script::calls(
        "anthropic",
        &[("x", "exec", serde_json::json!({"command": "rm -r src"}))],
    ));
    mock.push(text("anthropic", "Hi."));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["run", "hello"])
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The blocked call is shown failed, with the hook's reason.
    assert!(stderr.contains("✗ ") && stderr.contains("a hook blocked this call: not in this repo"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "\"reason\":\"close\"\n");
}
