//! `acp run`: one prompt in process, text or NDJSON out, permissions from flags, and an exit code
//! for every outcome.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::TIMEOUT;
use crate::support::expect::{BLANK, blank, chunk, commands_update, replies, title, usage_update};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::script::{calls, text};
use crate::support::workspace;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn command(home: &Path, mock: Option<&MockModel>, cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_acp"));
    cmd.arg("run")
        .arg("--cwd")
        .arg(cwd)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(mock) = mock {
        cmd.env("ANTHROPIC_API_KEY", "test-key").env("ANTHROPIC_BASE_URL", mock.base());
    }
    cmd
}

fn finish(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn run(home: &Path, mock: Option<&MockModel>, cwd: &Path, args: &[&str]) -> Run {
    finish(command(home, mock, cwd, args).output().unwrap())
}

/// `acp sessions list --json` under `home`.
fn listed(home: &Path) -> Vec<Value> {
    let list = Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["sessions", "list", "--json"])
        .env_clear()
        .env("ACP_HOME", home)
        .output()
        .unwrap();
    json_lines(&String::from_utf8(list.stdout).unwrap())
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

#[test]
fn text_mode_prints_the_reply_and_exits_zero() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    std::fs::write(ws.path().join("AGENTS.md"), "Answer in one line.\n").unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from a script."));
    let r = run(home.path(), Some(&mock), ws.path(), &["Say hello"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Hello from a script.\n");
    let body = &mock.requests()[0].body;
    assert_eq!(body["messages"][0]["content"][0]["text"], "Say hello");
    // The system prompt (built while the session is set up) is the workspace's.
    let system = body["system"][0]["text"].as_str().unwrap();
    assert!(system.contains(&format!("Working directory: {}", ws.path().display())), "{system}");
    assert!(system.contains("Answer in one line."), "{system}");
    // The session was saved: `acp sessions list` shows it.
    let rows = listed(home.path());
    // Kept apart from the editors' sessions by where it came from.
    let row = json!({
        "id": BLANK,
        "title": "Say hello",
        "cwd": ws.path(),
        "additionalDirectories": [],
        "createdAt": BLANK,
        "updatedAt": BLANK,
        "model": "anthropic/claude-sonnet-4-5",
        "mode": "code",
        "reasoning": null,
        "inputTokens": 50,
        "outputTokens": 20,
        "contextTokens": 70,
        "parentId": null,
        "origin": "run"
    });
    assert_eq!(blank(&json!(rows), &["id", "createdAt", "updatedAt"]), json!([row]));
}

#[test]
fn json_mode_prints_every_update_then_the_result() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("call_r", "read", json!({"path": "src/lib.rs"}))]));
    mock.push(text("anthropic", "It adds."));
    let r = run(home.path(), Some(&mock), ws.path(), &["--json", "What does lib.rs do?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines = json_lines(&r.stdout);
    let session = lines.last().unwrap()["sessionId"].as_str().unwrap_or_default().to_owned();
    let line = |update: Value| json!({"sessionId": session, "update": update});
    let lib = ws.path().join("src/lib.rs");
    let read = json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_r", "status": "completed",
                      "content": [{"type": "content", "content": {"type": "text", "text": "14 lines (1–14)"}}]});
    assert_eq!(
        blank(&json!(lines), &["messageId", "updatedAt"]),
        json!([
            line(commands_update()),
            line(usage_update(0, 200_000)),
            line(title("What does lib.rs do?")),
            line(usage_update(70, 200_000)),
            line(json!({
                "sessionUpdate": "tool_call",
                "toolCallId": "call_r",
                "title": "Read src/lib.rs",
                "kind": "read",
                "locations": [{"path": lib, "line": 1}],
                "rawInput": {"path": "src/lib.rs"},
                "_meta": {"toolName": "read"}
            })),
            line(json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_r", "status": "in_progress"})),
            line(read),
            line(chunk("agent_message_chunk", "It adds.")),
            line(usage_update(70, 200_000)),
            {"sessionId": session, "result": replies("anthropic", 2), "exitCode": 0},
        ])
    );
}

#[test]
fn permissions_are_refused_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let write = || calls("anthropic", &[("call_w", "write", json!({"path": "NOTES.md", "content": "hi\n"}))]);

    // In ask mode: refused (the model is told, the file is not written, the run still ends normally).
    mock.push(write());
    mock.push(text("anthropic", "I could not write it."));
    let r = run(home.path(), Some(&mock), ws.path(), &["--mode", "ask", "Write NOTES.md"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!ws.path().join("NOTES.md").exists());
    assert!(r.stderr.contains("not allowed: Create NOTES.md (allow it with --allow write)"), "{}", r.stderr);
    assert!(r.stderr.contains("✗ Create NOTES.md"), "{}", r.stderr);
    assert_eq!(r.stdout, "I could not write it.\n");

    // Allowed by name, by kind, or all.
    for allow in ["write", "edit", "all"] {
        std::fs::remove_file(ws.path().join("NOTES.md")).ok();
        mock.push(write());
        mock.push(text("anthropic", "Done."));
        let r = run(home.path(), Some(&mock), ws.path(), &["--mode", "ask", "--allow", allow, "Write NOTES.md"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(std::fs::read_to_string(ws.path().join("NOTES.md")).unwrap(), "hi\n", "--allow {allow}");
        assert!(r.stderr.contains("✓ Create NOTES.md"), "{}", r.stderr);
    }

    // The default mode (code): edits inside the workspace do not ask.
    std::fs::remove_file(ws.path().join("NOTES.md")).unwrap();
    mock.push(write());
    mock.push(text("anthropic", "Done."));
    let r = run(home.path(), Some(&mock), ws.path(), &["Write NOTES.md"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(ws.path().join("NOTES.md").exists());

    // `mode = "ask"` in config.toml: every new session asks first, without --mode.
    std::fs::remove_file(ws.path().join("NOTES.md")).unwrap();
    std::fs::write(home.path().join("config.toml"), "mode = \"ask\"\n").unwrap();
    mock.push(write());
    mock.push(text("anthropic", "I could not write it."));
    let r = run(home.path(), Some(&mock), ws.path(), &["Write NOTES.md"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("not allowed: Create NOTES.md"), "{}", r.stderr);
    assert!(!ws.path().join("NOTES.md").exists());
    // A mode that does not exist is a mistake in the file, said with where.
    std::fs::write(home.path().join("config.toml"), "mode = \"yolo\"\n").unwrap();
    let r = run(home.path(), Some(&mock), ws.path(), &["Write NOTES.md"]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr.contains("config.toml: `mode` must be \"ask\", \"code\" or \"auto\", not \"yolo\""),
        "{}",
        r.stderr
    );
}

#[test]
fn stdin_prompts_and_named_sessions_continue() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(text("anthropic", "First."));
    mock.push(text("anthropic", "Second."));
    for (i, prompt) in ["one\ntwo lines", "and again"].iter().enumerate() {
        let mut child = command(home.path(), Some(&mock), ws.path(), &["--session", "nightly", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(prompt.as_bytes()).unwrap();
        let r = finish(child.wait_with_output().unwrap());
        assert_eq!(r.code, 0, "run {i}: {}", r.stderr);
    }
    let requests = mock.requests();
    assert_eq!(requests[0].body["messages"][0]["content"][0]["text"], "one\ntwo lines");
    // The second run continued the stored session: the whole history went to the model.
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[1]["content"][0]["text"], "First.");
    assert!(home.path().join("sessions/nightly.jsonl").exists());
}

#[test]
fn every_outcome_has_its_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let cwd = ws.path();

    mock.push(Reply::fixture("anthropic", "refusal"));
    let r = run(home.path(), Some(&mock), cwd, &["bad things"]);
    assert_eq!(r.code, 5, "refusal: {}", r.stderr);
    assert!(r.stderr.contains("refusal"), "{}", r.stderr);

    mock.push(Reply::fixture("anthropic", "max_tokens"));
    assert_eq!(run(home.path(), Some(&mock), cwd, &["write a novel"]).code, 6, "max_tokens");

    mock.push(Reply::fixture("anthropic", "400"));
    let r = run(home.path(), Some(&mock), cwd, &["--json", "hi"]);
    assert_eq!(r.code, 3, "provider error: {}", r.stderr);
    let last = json_lines(&r.stdout).pop().unwrap();
    let refused = "anthropic request failed (HTTP 400): max_tokens: 100000 > 64000, which is the maximum allowed \
                   number of output tokens for claude-sonnet-4-5. The provider refused the request; check the model \
                   and provider settings.";
    let data = json!({"kind": "invalid_request", "provider": "anthropic", "status": 400, "retryable": false,
                      "requestId": "req_011CSHoEeqs5C35K2UUqR7G1"});
    assert_eq!(
        blank(&last, &["sessionId"]),
        json!({"sessionId": BLANK, "error": {"code": -32603, "message": refused, "data": data}, "exitCode": 3})
    );

    // Text mode: the error goes to stderr, once; stdout holds only the reply (none here).
    mock.push(Reply::fixture("anthropic", "400"));
    let r = run(home.path(), Some(&mock), cwd, &["hi"]);
    assert_eq!(r.code, 3, "provider error: {}", r.stderr);
    assert_eq!(r.stdout, "", "nothing but the reply on stdout");
    assert_eq!(r.stderr.matches("acp run:").count(), 1, "{}", r.stderr);

    mock.push(Reply::fixture("anthropic", "401"));
    assert_eq!(run(home.path(), Some(&mock), cwd, &["hi"]).code, 4, "rejected key");

    // A broken config file has its own code and says where.
    let broken = tempfile::tempdir().unwrap();
    std::fs::write(broken.path().join("config.toml"), "model = \"anthropic/x\"\nmodle = 1\n").unwrap();
    let r = run(broken.path(), Some(&mock), cwd, &["hi"]);
    assert_eq!(r.code, 7, "broken config: {}", r.stderr);
    assert!(r.stderr.contains("config.toml:2:1: unknown field `modle`"), "{}", r.stderr);
    assert!(!r.stderr.contains("authentication"), "{}", r.stderr);

    let r = run(home.path(), None, cwd, &["hi"]);
    assert_eq!(r.code, 4, "no provider");
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);

    // Bad usage: nothing reaches the model.
    let before = mock.requests().len();
    for (args, says) in [
        (&["--model", "nope/model-1", "hi"][..], "--model nope/model-1"),
        (&["--mode", "yolo", "hi"][..], "--mode yolo"),
        (&["   "][..], "the prompt is empty"),
        (&["--session", "two\nlines", "hi"][..], "--session"),
        (&["--no-such-flag", "hi"][..], "--no-such-flag"),
    ] {
        let r = run(home.path(), Some(&mock), cwd, args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        // The user's words, not JSON-RPC's.
        for wire in ["invalid params", "`value`", "_meta", "-326"] {
            assert!(!r.stderr.contains(wire), "{args:?}: {}", r.stderr);
        }
    }
    let r = run(home.path(), Some(&mock), &cwd.join("missing"), &["hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(mock.requests().len(), before);
}

#[test]
fn an_interrupt_cancels_the_turn() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let long: String = (0..50).map(|i| format!("word{i} ")).collect();
    mock.push(text("anthropic", &long).stall_after(4));
    let mut child = command(home.path(), Some(&mock), ws.path(), &["Talk"]).spawn().unwrap();
    mock.wait_requests(1);
    std::thread::sleep(Duration::from_millis(200));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    // The stream stalls for good: only the interrupt can end the run. The harness waits long, not
    // forever.
    let deadline = Instant::now() + TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            child.kill().unwrap();
            panic!("acp run still running {TIMEOUT:?} after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = finish(child.wait_with_output().unwrap());
    assert_eq!(r.code, 130, "{}", r.stderr);
    assert!(r.stderr.contains("cancelled"), "{}", r.stderr);
    assert!(mock.wait_done(0).client_left, "the model request was dropped");
    // The process exits as soon as the cancelled turn is answered: its end is on disk by then.
    let transcripts: Vec<_> = std::fs::read_dir(home.path().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    let written = std::fs::read_to_string(&transcripts[0]).unwrap();
    let last: Value = serde_json::from_str(written.lines().last().unwrap()).unwrap();
    assert_eq!((&last["t"], &last["stop"]), (&json!("end"), &json!("cancelled")), "{written}");
}

#[test]
fn the_model_is_asked_while_the_store_opens_and_the_run_ends_once_its_session_is_listed() {
    // Another process is setting the new home's database up and holds its lock (see `store`).
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello meanwhile."));
    let setting_up = std::fs::File::open(home.path()).unwrap();
    rustix::fs::flock(&setting_up, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let child = command(home.path(), Some(&mock), ws.path(), &["Say hello"]).spawn().unwrap();
    // The model is asked and answers meanwhile…
    mock.wait_done(0);
    // …but the answer waits for the session's index row, which waits for the lock (for up to the
    // store's 10 s busy timeout, after which the run would go on without it).
    let mut child = child;
    assert!(child.try_wait().unwrap().is_none(), "the run ended before its session was stored");
    drop(setting_up);
    let r = finish(child.wait_with_output().unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Hello meanwhile.\n");
    let rows = listed(home.path());
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (&rows[0]["title"], &rows[0]["inputTokens"], &rows[0]["origin"]),
        (&json!("Say hello"), &json!(50), &json!("run")),
        "the turn's updates reached the row stored after it began: {rows:?}"
    );
    let id = rows[0]["id"].as_str().unwrap();
    let transcript = std::fs::read_to_string(home.path().join(format!("sessions/{id}.jsonl"))).unwrap();
    assert!(
        transcript.contains("Hello meanwhile.") && transcript.contains(r#"{"t":"end","turn":1,"stop":"end_turn""#),
        "{transcript}"
    );
}

#[test]
fn failed_runs_leave_nothing_in_the_session_list() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let listed = || listed(home.path()).len();
    mock.push(Reply::fixture("anthropic", "401"));
    assert_eq!(run(home.path(), Some(&mock), ws.path(), &["hi"]).code, 4);
    mock.push(Reply::fixture("anthropic", "400"));
    assert_eq!(run(home.path(), Some(&mock), ws.path(), &["--session", "nightly", "hi"]).code, 3);
    assert_eq!(listed(), 0, "sessions in which the model never answered are not listed");
    // The named one is kept, and listed once it has an answer.
    mock.push(text("anthropic", "Now it works."));
    assert_eq!(run(home.path(), Some(&mock), ws.path(), &["--session", "nightly", "again"]).code, 0);
    assert_eq!(listed(), 1);
    let history = mock.requests().last().unwrap().body["messages"].clone();
    assert_eq!(history[0]["content"][0]["text"], "again", "the failed prompt left the context: {history}");
}

/// Mistakes said in the user's words, each with the exit code its kind has whichever way it was
/// made: a malformed ACP_MODEL is bad usage as --model is; a provider without its key is setup.
#[test]
fn mistakes_are_said_plainly_with_one_exit_code_per_kind() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    let cwd = ws.path();
    let with = |vars: &[(&str, &str)], args: &[&str], stdin: Option<&str>| {
        let mut cmd = command(home.path(), Some(&mock), cwd, args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = stdin {
            // acp may exit (a usage error) before it reads its input: a closed pipe is no failure.
            let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
        }
        finish(child.wait_with_output().unwrap())
    };
    let r = with(&[("ACP_MODEL", "sonnet-please")], &["hi"], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "ACP_MODEL=sonnet-please: `sonnet-please` is neither a model a configured provider offers nor an alias"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("authentication"), "{}", r.stderr);
    let r = with(&[("ACP_MODEL", "nope/x")], &["hi"], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("ACP_MODEL=nope/x: unknown provider `nope`"), "{}", r.stderr);
    // A provider without its key: setup, both ways.
    let r = with(&[("ACP_MODEL", "openai/gpt-4.1")], &["hi"], None);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("set OPENAI_API_KEY"), "{}", r.stderr);
    let r = with(&[], &["--model", "openai/gpt-4.1", "hi"], None);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("--model openai/gpt-4.1: provider `openai` needs an API key: set OPENAI_API_KEY"),
        "{}",
        r.stderr
    );
    // A wrong name is said as such even when no provider has a key.
    let r = with(&[("ANTHROPIC_API_KEY", "")], &["--model", "foo/bar", "hi"], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--model foo/bar: unknown provider `foo`"), "{}", r.stderr);
    // No prompt, with input on a pipe: the hint to read it with `-`.
    let r = with(&[], &[], Some("what is this?"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("`… | acp run -`"), "{}", r.stderr);
    // An --allow naming nothing that exists is a mistake, not a silent no-op.
    let r = with(&[], &["--allow", "edit,bogus", "hi"], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--allow bogus: no tool or kind of that name. Tools: read, write, edit"), "{}", r.stderr);
    for fine in ["exec", "EXECUTE", "mcp__files__read_file", "web_*", "all"] {
        mock.push(text("anthropic", "ok"));
        let r = with(&[], &["--allow", fine, "hi"], None);
        assert_eq!(r.code, 0, "--allow {fine}: {}", r.stderr);
    }
    assert_eq!(mock.requests().len(), 5, "no mistake reached the model");
    // A provider on this machine that is not running: said once, at once, without log lines.
    let r = with(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")], &["hi"], None);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
    assert!(r.stderr.starts_with("acp run: ") && r.stderr.contains("Could not reach the provider"), "{}", r.stderr);
    assert!(!r.stderr.contains("WARN") && !r.stderr.contains("retry"), "{}", r.stderr);
}
