//! Language servers' cost (run by `tests/bench/run`; docs/lsp.md), with the real pyright the
//! tests install (tests/lsp): what acp adds to an edit's result beyond the server's own publish
//! time (from the diagnostics' arrival to the result being ready, as acp logs it), how long the
//! first server takes to be ready and whether the first edit still got its diagnostics, and acp's
//! own RSS with a server attached beside the same session with `[lsp] enabled = false`.
//! Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use serde_json::json;

use agent::{Agent, Options};
use mock_model::MockModel;

const EDITS: usize = 30;

fn config(enabled: bool) -> String {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/node_modules/.bin/pyright-langserver");
    assert!(bin.exists(), "run tests/run first: it installs pyright into tests/lsp");
    format!("[lsp]\nenabled = {enabled}\nwait_ms = 30000\n[lsp.pyright]\ncommand = \"{}\"\n", bin.display())
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One session: a read, then `EDITS` edits that break and fix the file in turn; returns the agent.
fn session(enabled: bool) -> (Agent, MockModel, std::time::Duration) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("pyproject.toml"), "[project]\nname = \"b\"\n").unwrap();
    std::fs::write(ws.path().join("b.py"), "def f(a: int) -> int:\n    return a\n\nx = f(1)\n").unwrap();
    let mock = MockModel::start();
    mock.push(script::calls("anthropic", &[("r", "read", json!({"path": "b.py"}))]));
    for i in 0..EDITS {
        let (from, to) = if i % 2 == 0 { ("x = f(1)", "x: str = f(1)") } else { ("x: str = f(1)", "x = f(1)") };
        let id = format!("e{i}");
        mock.push(script::calls(
            "anthropic",
            &[(id.as_str(), "edit", json!({"path": "b.py", "old_string": from, "new_string": to}))],
        ));
    }
    mock.push(script::text("anthropic", "done"));
    let options = Options::default()
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", &mock.base())
        .env("RUST_LOG", "lsp=debug")
        .config(&config(enabled));
    let mut a = Agent::spawn(options);
    a.initialize();
    let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "code"}}));
    let started = std::time::Instant::now();
    let (_, response) = a.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let took = started.elapsed();
    std::mem::forget(ws);
    (a, mock, took)
}

fn main() {
    let (agent, mock, took) = session(true);
    let stderr = agent.stderr();
    let mut overhead: Vec<f64> = stderr
        .lines()
        .filter(|l| l.contains("µs after the diagnostics came"))
        .filter_map(|l| l.split(" µs after").next()?.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    overhead.sort_by(f64::total_cmp);
    let told = (0..EDITS)
        .filter(|i| i % 2 == 0)
        .filter(|i| {
            script::result_for("anthropic", &mock.requests()[i + 2].body, &format!("e{i}")).contains("new problems")
        })
        .count();
    let first = script::result_for("anthropic", &mock.requests()[2].body, "e0").contains("new problems");
    let with = rss_kib(agent.pid());
    let (without_agent, _, took_without) = session(false);
    let without = rss_kib(without_agent.pid());
    let median = overhead.get(overhead.len() / 2).copied().unwrap_or(f64::NAN);
    let p90 = overhead.get(overhead.len() * 9 / 10).copied().unwrap_or(f64::NAN);
    println!("lsp: {EDITS} edits with pyright, {} diagnostics received", overhead.len());
    println!(
        "  diagnostics arrived → result ready (acp's overhead): median {:.3} ms, p90 {:.3} ms (target ≤ 5 ms)",
        median / 1000.0,
        p90 / 1000.0
    );
    println!(
        "  breaking edits told their new error: {told}/{}; first edit of the session (server started by the read): {}",
        EDITS / 2,
        if first { "told" } else { "not told" }
    );
    println!(
        "  whole turn: {:.0} ms with pyright, {:.0} ms without (the server's own analysis)",
        took.as_secs_f64() * 1000.0,
        took_without.as_secs_f64() * 1000.0
    );
    println!(
        "  acp's RSS: {with} KiB with a server attached, {without} KiB with [lsp] off (Δ {} KiB; target within 2 MB)",
        with as i64 - without as i64
    );
}
