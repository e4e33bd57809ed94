//! `acp client` in a pseudo-terminal, against `acp serve` and the mock model: a turn with a tool
//! call and a permission answered with the keyboard, Ctrl-C cancelling a turn, slash-command
//! completion, and the screen compared with a golden file.

use std::path::Path;

use serde_json::json;

use crate::support::mock_model::MockModel;
use crate::support::pty::Pty;
use crate::support::script::{calls, text};
use crate::support::workspace;

fn client(home: &Path, mock: &MockModel, cwd: &Path, args: &[&str]) -> Pty {
    let mut all = vec!["client"];
    all.extend_from_slice(args);
    let env = [
        ("ACP_HOME", home.display().to_string()),
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
        ("ANTHROPIC_BASE_URL", mock.base()),
    ];
    Pty::spawn(Path::new(env!("CARGO_BIN_EXE_acp")), &all, &env, cwd)
}

#[test]
fn a_turn_with_a_tool_call_and_a_permission_answered_with_the_keyboard() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("call_w", "write", json!({"path": "NOTES.md", "content": "add() adds.\n"}))]));
    mock.push(text("anthropic", "Wrote **NOTES.md** for you."));
    let mut pty = client(home.path(), &mock, ws.path(), &["--mode", "ask"]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Write the notes\r");
    let screen = pty.wait_for("Allow Create NOTES.md?");
    assert!(screen.contains("+add() adds."), "the diff is shown before the question:\n{screen}");
    pty.wait_for("1. Allow");
    // Down to the second option, up again, then Enter: allow once.
    pty.send("\x1b[B");
    pty.wait_for("❯ 2.");
    pty.send("\x1b[A");
    pty.wait_for("❯ 1.");
    pty.send("\r");
    let screen = pty.wait_for("Wrote NOTES.md for you.");
    assert!(screen.contains("✓ Create NOTES.md"), "{screen}");
    assert_eq!(std::fs::read_to_string(ws.path().join("NOTES.md")).unwrap(), "add() adds.\n");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn ctrl_c_cancels_the_turn_and_twice_leaves() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let long: String = (0..40).map(|i| format!("word{i} ")).collect();
    mock.push(text("anthropic", &long).stall_after(4));
    mock.push(text("anthropic", "Still here."));
    let mut pty = client(home.path(), &mock, ws.path(), &[]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Talk for a while\r");
    pty.wait_for("word0");
    pty.send("\x03");
    let screen = pty.wait_for("stopped: cancelled");
    assert!(screen.contains("cancelling…"), "{screen}");
    assert!(mock.wait_done(0).client_left, "the model request was dropped");
    // The agent is still there: the next prompt works.
    pty.send("Are you there?\r");
    pty.wait_for("Still here.");
    // Twice during a turn: the client leaves at once.
    mock.push(text("anthropic", &long).stall_after(4));
    pty.send("Again\r");
    mock.wait_requests(3);
    pty.send("\x03");
    // (Two signals sent at once may arrive as one: the second waits for the first to be seen.)
    pty.wait_for_count("Ctrl-C again to leave", 2);
    pty.send("\x03");
    assert_eq!(pty.wait_exit(), 130);
}

#[test]
fn commands_run_in_the_clients_terminals_and_their_output_is_shown() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("call_x", "exec", json!({"command": "echo hi-from-a-client-terminal"}))]));
    mock.push(text("anthropic", "It printed."));
    let mut pty = client(home.path(), &mock, ws.path(), &["--mode", "auto"]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Run it\r");
    let screen = pty.wait_for("It printed.");
    assert!(screen.contains("✓ Run `echo hi-from-a-client-terminal`"), "{screen}");
    assert!(screen.contains("│ hi-from-a-client-terminal"), "the terminal's output is shown: {screen}");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn slash_commands_complete_with_tab() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let mut pty = client(home.path(), &mock, ws.path(), &[]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    // The agent advertises its commands just after the session opens, before it answers anything
    // else: once `/help` is answered, they are known.
    pty.send("/help\r");
    pty.wait_for("List the slash commands");
    pty.wait_for_prompt();
    pty.send("/sta\t");
    pty.wait_for("› /status");
    pty.send("\r");
    let screen = pty.wait_for("Working directory");
    assert!(screen.contains("Model: anthropic/"), "{screen}");
    assert!(mock.requests().is_empty(), "a command never reaches the model");
    pty.wait_for_prompt();
    pty.send("/quit\r");
    assert_eq!(pty.wait_exit(), 0);
}

/// The screen with what changes between runs masked: session ids, durations, temporary paths.
fn masked(screen: &str, ws: &Path) -> String {
    let mut out = screen.replace(&ws.display().to_string(), "<workspace>");
    while let Some(i) = out.find("sess_") {
        let end = out[i + 5..].find(|c: char| !c.is_ascii_hexdigit()).map_or(out.len(), |n| i + 5 + n);
        out.replace_range(i..end, "<session>");
    }
    let mut result = String::new();
    let mut rest = out.as_str();
    // "(12ms)" / "(1.2s)" → "(<time>)"
    while let Some(i) = rest.find('(') {
        let close = rest[i..].find(')').map(|n| i + n);
        let inner = close.map(|c| &rest[i + 1..c]);
        match (close, inner) {
            (Some(c), Some(inner))
                if (inner.ends_with("ms") || inner.ends_with('s'))
                    && inner.trim_end_matches(['m', 's']).chars().all(|ch| ch.is_ascii_digit() || ch == '.')
                    && !inner.trim_end_matches(['m', 's']).is_empty() =>
            {
                result.push_str(&rest[..i]);
                result.push_str("(<time>)");
                rest = &rest[c + 1..];
            }
            _ => {
                result.push_str(&rest[..=i]);
                rest = &rest[i + 1..];
            }
        }
    }
    result.push_str(rest);
    result
}

#[test]
fn the_screen_of_a_turn_matches_the_golden_file() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls(
        "anthropic",
        &[
            ("call_plan", "update_plan", json!({"plan": [{"step": "Read lib.rs", "status": "completed"}, {"step": "Explain", "status": "in_progress"}]})),
            ("call_read", "read", json!({"path": "src/lib.rs"})),
        ],
    ));
    mock.push(text(
        "anthropic",
        "# The bug\n\n`add` subtracts: it returns **a - b** where it should return a + b. The fix is one line:\n\n```rust\npub fn add(a: i32, b: i32) -> i32 { a + b }\n```\n\nRun the tests after changing it.",
    ));
    let mut pty = client(home.path(), &mock, ws.path(), &[]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Why does add fail?\r");
    pty.wait_for("── ");
    // The turn's screen is whole once the prompt is back under its usage line.
    let screen = masked(&pty.wait_for_prompt(), ws.path());
    let golden = crate::support::mock_model::fixtures_dir().join("client/turn.screen");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, format!("{screen}\n")).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(format!("{screen}\n"), expected, "the screen differs from {}", golden.display());
    // Escape codes reached the terminal (colour), none of them in the text itself.
    assert!(pty.raw().contains("\x1b[32m✓"), "a green tick");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

/// The Python test agent (tests/agents/py_agent.py) under the official Python SDK that `tests/run`
/// installs into tests/agents/.venv.
fn py_agent() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents");
    let python = root.join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run tests/run, which installs the ACP Python SDK", python.display());
    format!("{} {}", python.display(), root.join("py_agent.py").display())
}

#[test]
fn the_client_drives_an_agent_built_on_the_python_sdk() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("note.txt"), "written by the test\n").unwrap();
    let mock = MockModel::start();
    let agent = py_agent();
    let mut pty = client(home.path(), &mock, ws.path(), &["--agent", &agent]);
    let screen = pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.wait_for_prompt();
    assert!(screen.contains("Python test agent · session py-session-1"), "{screen}");
    pty.send("hello there\r");
    let screen = pty.wait_for("Allow Run echo?");
    assert!(screen.contains("$ echo from-terminal"), "the command is shown: {screen}");
    pty.wait_for("❯ 1. Allow");
    pty.send("1");
    // The agent ran `echo` in a terminal of this client and read a file through it.
    let screen = pty.wait_for("note.txt says 'written by the test'");
    assert!(screen.contains("The terminal said 'from-terminal' (exit 0)"), "{screen}");
    assert!(screen.contains("✓ Run echo"), "{screen}");
    assert!(mock.requests().is_empty());
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn an_agent_that_dies_mid_turn_is_reported_and_the_terminal_restored() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let agent = py_agent();
    let mut pty = client(home.path(), &mock, ws.path(), &["--agent", &agent]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("crash\r");
    let screen = pty.wait_for("acp client: the agent exited (exit code 3)");
    assert!(screen.contains("Python agent heard: crash"), "{screen}");
    assert_eq!(pty.wait_exit(), 1);
    // Line editing mode was left: bracketed paste is off again at the end.
    let raw = pty.raw();
    assert!(raw.rfind("\x1b[?2004l") > raw.rfind("\x1b[?2004h"), "the terminal was left in editing mode");
}

#[test]
fn multi_line_input_history_and_loading_a_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(text("anthropic", "Two lines received."));
    let mut pty = client(home.path(), &mock, ws.path(), &[]);
    let screen = pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.wait_for_prompt();
    let session = screen.split("session ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    // A trailing backslash continues the prompt on the next line.
    pty.send("line one \\\r");
    pty.send("line two\r");
    pty.wait_for("Two lines received.");
    assert_eq!(mock.requests()[0].body["messages"][0]["content"][0]["text"], "line one \nline two");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
    let history = std::fs::read_to_string(home.path().join("client_history")).unwrap();
    assert!(history.contains("line two"), "{history}");

    // Loading the session shows the conversation as it was.
    let mut pty = client(home.path(), &mock, ws.path(), &["--session", &session]);
    let screen = pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.wait_for_prompt();
    assert!(screen.contains("› line one\n  line two"), "{screen}");
    assert!(screen.contains("Two lines received."), "{screen}");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
    assert_eq!(mock.requests().len(), 1, "loading sends nothing to the model");
}

#[test]
fn review_shows_each_write_as_a_diff_and_can_skip_it() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls(
        "anthropic",
        &[("call_e", "edit", json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}))],
    ));
    mock.push(text("anthropic", "Edit skipped, then."));
    let mut pty = client(home.path(), &mock, ws.path(), &["--review", "--mode", "auto"]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Fix add\r");
    let screen = pty.wait_for("Skip this write");
    assert!(screen.contains("-    a - b") && screen.contains("+    a + b"), "{screen}");
    pty.send("2");
    let screen = pty.wait_for("Edit skipped, then.");
    assert!(screen.contains("✗ Edit src/lib.rs"), "{screen}");
    assert!(std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap().contains("a - b"), "not written");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn without_a_terminal_the_output_is_plain_text() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(text("anthropic", "Plain **and** simple."));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["client", "--cwd"])
        .arg(ws.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains('\x1b'), "no escape codes: {stdout:?}");
    assert!(stdout.contains("Plain **and** simple.\n"), "{stdout:?}");
}

#[test]
fn acp_serve_started_by_hand_in_a_terminal_says_what_it_is() {
    let home = tempfile::tempdir().unwrap();
    let env = [("ACP_HOME", home.path().display().to_string()), ("HOME", home.path().display().to_string())];
    let mut pty = Pty::spawn(Path::new(env!("CARGO_BIN_EXE_acp")), &["serve"], &env, home.path());
    let screen = pty.wait_for("acp client");
    assert!(screen.contains("speaks the Agent Client Protocol"), "{screen}");
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
    // Spoken to through pipes (as editors do), it says nothing but protocol.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .arg("serve")
        .env_clear()
        .env("ACP_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

#[test]
fn text_that_arrives_after_a_cancel_is_not_shown() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let agent = py_agent();
    let mut pty = client(home.path(), &mock, ws.path(), &["--agent", &agent]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("late\r");
    pty.wait_for("Python agent heard: late");
    pty.send("\x03");
    let screen = pty.wait_for("stopped: cancelled");
    assert!(screen.contains("cancelling…"), "{screen}");
    assert!(!screen.contains("LATE TEXT"), "{screen}");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn an_answered_question_leaves_one_line_and_the_diff_once() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("call_w", "write", json!({"path": "NOTES.md", "content": "add() adds.\n"}))]));
    mock.push(text("anthropic", "Done."));
    // Ctrl-C at the second question cancels the turn: the call is cancelled, not rejected.
    mock.push(calls("anthropic", &[("call_x", "exec", json!({"command": "echo hi"}))]));
    let mut pty = client(home.path(), &mock, ws.path(), &["--review", "--mode", "ask"]);
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Write the notes\r");
    pty.wait_for("❯ 1. Allow");
    pty.send("1");
    let screen = pty.wait_for("Done.");
    assert!(screen.contains("→ Allow"), "the answer in one line: {screen}");
    assert!(!screen.contains("2. Always allow"), "the menu is gone: {screen}");
    assert_eq!(screen.matches("+add() adds.").count(), 1, "the diff once: {screen}");
    // --review did not ask again about the write just approved.
    assert!(!screen.contains("Write it"), "{screen}");
    assert_eq!(std::fs::read_to_string(ws.path().join("NOTES.md")).unwrap(), "add() adds.\n");
    pty.wait_for_prompt();
    pty.send("Run it\r");
    pty.wait_for("❯ 1. Allow");
    pty.send("\x03");
    let screen = pty.wait_for("stopped: cancelled");
    assert!(screen.contains("→ Cancelled (Ctrl-C)"), "{screen}");
    assert!(!screen.contains("Rejected by the user"), "{screen}");
    assert!(screen.contains("│ Cancelled"), "the call is shown cancelled: {screen}");
    let body = &mock.requests().len();
    assert_eq!(*body, 3, "no request after the cancel");
    pty.wait_for_prompt();
    pty.send("/help\r");
    pty.wait_for("/quit or /exit");
    pty.send("/quit\r");
    assert_eq!(pty.wait_exit(), 0);
}

/// Some terminals (serial consoles, some CI runners) report 0×0: text is laid out for 80 columns,
/// not squeezed into the narrowest width.
#[test]
fn a_terminal_that_reports_no_size_gets_80_columns() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let line = "one two three four five six seven eight nine ten eleven twelve";
    mock.push(text("anthropic", line));
    let env = [
        ("ACP_HOME", home.path().display().to_string()),
        ("HOME", home.path().display().to_string()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
        ("ANTHROPIC_BASE_URL", mock.base()),
    ];
    let mut pty = Pty::spawn_reporting(Path::new(env!("CARGO_BIN_EXE_acp")), &["client"], &env, ws.path(), (0, 0));
    pty.wait_for_prompt();
    pty.send("count\r");
    let screen = pty.wait_for("twelve");
    assert!(screen.lines().any(|l| l.trim_end() == line), "one line of {} columns: {screen}", line.len());
    pty.send("/quit\r");
    assert_eq!(pty.wait_exit(), 0);
}

/// The client's exit codes are `acp run`'s, and its errors are in the user's words.
#[test]
fn the_clients_errors_are_the_users_words_with_the_exit_codes_of_acp_run() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let client = |args: &[&str], key: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_acp"));
        cmd.arg("client")
            .args(args)
            .current_dir(ws.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", home.path())
            .env("ANTHROPIC_BASE_URL", mock.base())
            .stdin(std::process::Stdio::null());
        if key {
            cmd.env("ANTHROPIC_API_KEY", "test-key");
        }
        let out = cmd.output().unwrap();
        // The client shows its errors where it shows everything: on its output.
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), said)
    };
    let (code, stderr) = client(&["--model", "foo/bar"], true);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--model foo/bar: unknown provider `foo`"), "{stderr}");
    assert!(!stderr.contains("invalid params") && !stderr.contains("`value`"), "{stderr}");
    let (code, stderr) = client(&["--model", "openai/gpt-4.1"], true);
    assert_eq!(code, Some(4), "a provider without its key: {stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
    let (code, stderr) = client(&[], false);
    assert_eq!(code, Some(4), "no provider: {stderr}");
    let (code, stderr) = client(&["--model", "foo/bar"], false);
    assert_eq!(code, Some(2), "a wrong name is said as such even with no provider: {stderr}");
    assert!(stderr.contains("--model foo/bar: unknown provider `foo`"), "{stderr}");
    std::fs::write(home.path().join("config.toml"), "mode = \"yolo\"\n").unwrap();
    let (code, stderr) = client(&[], true);
    assert_eq!(code, Some(7), "a broken file, as acp run says it: {stderr}");
    assert!(stderr.contains("the configuration file is broken"), "{stderr}");
    std::fs::remove_file(home.path().join("config.toml")).unwrap();
    let (code, stderr) = client(&["--mode", "yolo"], true);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("invalid params"), "{stderr}");
    assert!(mock.requests().is_empty());
}
