//! Hooks' cost per tool call (run by `tests/bench/run`; docs/hooks.md): the gap from a reply's end
//! to the next model request for a cheap tool call (`ls` of an empty directory) with no hooks,
//! with 20 hooks that do not match it, and with one `PreToolUse` hook that does (`cat > /dev/null`:
//! it reads its input and says nothing); and that hook's own run time, the same program started
//! directly with the same input. Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent::{Agent, Options};
use measure::{median, ms};
use mock_model::MockModel;
use serde_json::json;

const CALLS: usize = 60;
const HOOK: &str = "cat > /dev/null";

/// `a - b`, signed (a difference within noise may come out below zero).
fn diff(a: Duration, b: Duration) -> String {
    format!("{:+.3} ms", (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<58} {value:>12}   ({target})");
}

/// The median gap from a reply's end to the next request, over `CALLS` calls of `ls`, under
/// `config`.
fn gap(config: &str) -> Duration {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("empty")).unwrap();
    let mock = MockModel::start();
    for i in 0..CALLS {
        mock.push(script::calls("anthropic", &[(&format!("c{i}"), "ls", json!({"path": "empty"}))]));
    }
    mock.push(script::text("anthropic", "done"));
    let options = Options::default()
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", &mock.base())
        .env("RUST_LOG", "warn")
        .config(&format!("max_turn_requests = 1000\n{config}"));
    let mut a = Agent::spawn(options);
    a.initialize();
    let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (_, response) = a.prompt_answering(&session, "go", |m| panic!("unexpected {m}"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let reqs = mock.requests();
    median((0..CALLS).map(|i| reqs[i + 1].at - reqs[i].finished_at.unwrap()).skip(5).collect())
}

/// The hook's own run time: the user's shell started with it directly, fed the same kind of
/// input, waited for.
fn own_run_time(cwd: &std::path::Path) -> Duration {
    let shell = std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "sh".into());
    let input = json!({
        "hook_event_name": "PreToolUse",
        "session_id": "sess_0123456789abcdef0123456789abcdef",
        "cwd": cwd,
        "tool_name": "ls",
        "tool_input": {"path": "empty"},
    })
    .to_string();
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let mut child = Command::new(&shell)
            .args(["-c", HOOK])
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        child.wait_with_output().unwrap();
        times.push(t.elapsed());
    }
    median(times)
}

fn main() {
    let none = gap("");
    let others: String = (0..10)
        .map(|i| {
            format!(
                "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"exec|mcp__x{i}__*\"\ncommand = \"false\"\n\n\
                 [[hooks]]\nevent = \"PostToolUse\"\nmatcher = \"write{i}\"\ncommand = \"false\"\n\n"
            )
        })
        .collect();
    let unmatched = gap(&others);
    let matched = gap(&format!("[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"ls\"\ncommand = \"{HOOK}\"\n"));
    let own = own_run_time(&std::env::temp_dir());
    println!("hooks: per tool call (`ls` of an empty dir; medians of {} calls)", CALLS - 5);
    report("reply end → next request, no hooks", ms(none), "baseline");
    report("  with 20 hooks that do not match", ms(unmatched), "");
    report("  overhead of hooks that do not match", diff(unmatched, none), "target ≈ 0");
    report("  with one matching PreToolUse hook (`cat > /dev/null`)", ms(matched), "");
    report("  the hook's own run time (started directly)", ms(own), "median of 200");
    report("  a matching hook's whole cost per call", diff(matched, none), "");
    report(
        "  overhead of a matching hook beyond its own run time",
        diff(matched.saturating_sub(none), own),
        "target ≤ 3 ms",
    );
}
