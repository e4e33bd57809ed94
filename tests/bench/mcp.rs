//! MCP benchmarks (run by `tests/bench/run`; needs the reference servers tests/run installs):
//! `session/new` with 3 stdio servers configured against none (servers start in the background);
//! the time until their tools are usable (session/new sent → the first model request, which waits
//! for them); and the overhead of one MCP tool call beyond the server's own time. Prints figures,
//! not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent::{Agent, Options};
use mock_model::MockModel;
use serde_json::json;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, note: &str) {
    println!("{name:<58} {value:>14}   ({note})");
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn everything() -> String {
    let path = root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.exists(), "run tests/run first: it installs the MCP reference servers");
    path.display().to_string()
}

fn stub() -> String {
    root().join("tests/mcp/stub_server.py").display().to_string()
}

fn options(mock: &MockModel, config: &str) -> Options {
    Options::default()
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", &mock.base())
        .env("RUST_LOG", "warn")
        .config(config)
}

/// `n` server-everything servers on stdio, as config.toml sections.
fn servers(n: usize) -> String {
    (0..n)
        .map(|i| format!("[mcp_servers.s{i}]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n", everything()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// session/new in `cwd`: request sent → response read (by the reader thread, timestamped).
fn session_new(a: &mut Agent, cwd: &std::path::Path) -> Duration {
    let t = Instant::now();
    let id = a.send_request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(10)).unwrap();
        if m["id"] == id {
            assert!(m["result"]["sessionId"].is_string(), "{m}");
            // The setup updates end with the usage.
            while a.recv()["params"]["update"]["sessionUpdate"] != "usage_update" {}
            return at - t;
        }
    }
}

fn fresh(mock: &MockModel, config: &str) -> Agent {
    let mut a = Agent::spawn(options(mock, config));
    a.initialize();
    a
}

fn bench_session_new() {
    const ROUNDS: usize = 20;
    let mock = MockModel::start();
    let (with, without) = (servers(3), String::new());
    let (mut three, mut none) = (Vec::new(), Vec::new());
    // Each round waits for the servers it started to come up (and lets them go) before the next,
    // so no measurement runs beside another round's node processes starting.
    let settle = || std::thread::sleep(Duration::from_millis(800));
    for _ in 0..ROUNDS {
        let ws = tempfile::tempdir().unwrap();
        three.push(session_new(&mut fresh(&mock, &with), ws.path()));
        settle();
        none.push(session_new(&mut fresh(&mock, &without), ws.path()));
    }
    report("session/new (first in process), 3 stdio servers", ms(median(three)), "target ≤ 2 ms; 20 fresh agents");
    report("session/new (first in process), no servers", ms(median(none)), "the same, alternated");
    // Later sessions of the same project share the running servers.
    let ws = tempfile::tempdir().unwrap();
    let mut a = fresh(&mock, &with);
    session_new(&mut a, ws.path());
    settle();
    let shared: Vec<Duration> = (0..40).map(|_| session_new(&mut a, ws.path())).collect();
    report("session/new (steady), 3 servers shared", ms(median(shared)), "target ≤ 2 ms; median of 40");
    // Each in a new workspace: three new server processes every time (the stub, lighter than node).
    let stubs: String = (0..3)
        .map(|i| format!("[mcp_servers.s{i}]\ncommand = \"python3\"\nargs = [{:?}, \"tools\"]\n", stub()))
        .collect();
    let mut a = fresh(&mock, &stubs);
    let dirs: Vec<tempfile::TempDir> = (0..20).map(|_| tempfile::tempdir().unwrap()).collect();
    let spawning: Vec<Duration> = dirs
        .iter()
        .map(|d| {
            let took = session_new(&mut a, d.path());
            std::thread::sleep(Duration::from_millis(300));
            took
        })
        .skip(1)
        .collect();
    report("session/new (steady), starting 3 new servers each", ms(median(spawning)), "target ≤ 2 ms; median of 19");
}

/// session/new sent → the first model request (the turn waits for the servers' tools).
fn bench_tools_usable() {
    for n in [1, 3] {
        let config = servers(n);
        let mut times = Vec::new();
        for _ in 0..10 {
            let mock = MockModel::start();
            mock.push(script::text("anthropic", "ok"));
            let ws = tempfile::tempdir().unwrap();
            let mut a = Agent::spawn(options(&mock, &config));
            a.initialize();
            let t = Instant::now();
            let r = a.request("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
            let session = r["result"]["sessionId"].as_str().unwrap().to_owned();
            let (_, response) = a.prompt(&session, "hi");
            assert_eq!(response["result"]["stopReason"], "end_turn");
            let request = &mock.requests()[0];
            let tools = script::offered_tools("anthropic", &request.body);
            assert_eq!(tools.iter().filter(|t| t.starts_with("mcp__")).count(), 15 * n, "{tools:?}");
            times.push(request.at - t);
        }
        report(
            &format!("session/new → tools usable, {n} server-everything (node)"),
            ms(median(times)),
            "median of 10 fresh agents",
        );
    }
}

/// One `tools/call` of the stub's `pid`, straight over its pipes: the server's own time.
fn raw_round_trip() -> Duration {
    let mut child = Command::new("python3")
        .args([stub().as_str(), "tools"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut call = |id: usize, method: &str, params: serde_json::Value| {
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
    };
    call(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}),
    );
    let mut times = Vec::new();
    for i in 1..=300 {
        let t = Instant::now();
        call(i, "tools/call", json!({"name": "pid", "arguments": {}}));
        times.push(t.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    median(times[50..].to_vec())
}

/// Reply end → next model request, for `calls` calls of `tool` in a row.
fn call_gaps(config: &str, tool: &str, args: serde_json::Value) -> Duration {
    const CALLS: usize = 60;
    let mock = MockModel::start();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("empty")).unwrap();
    for i in 0..CALLS {
        mock.push(script::calls("anthropic", &[(&format!("c{i}"), tool, args.clone())]));
    }
    mock.push(script::text("anthropic", "done"));
    let mut a = Agent::spawn(options(&mock, &format!("max_turn_requests = 1000\n{config}")));
    a.initialize();
    let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (_, response) = a.prompt_answering(&session, "go", |m| panic!("unexpected {m}"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let reqs = mock.requests();
    median((0..CALLS).map(|i| reqs[i + 1].at - reqs[i].finished_at.unwrap()).skip(5).collect())
}

fn bench_call_overhead() {
    let config = format!("[mcp_servers.stub]\ncommand = \"python3\"\nargs = [{:?}, \"tools\"]\n", stub());
    let mcp = call_gaps(&config, "mcp__stub__pid", json!({}));
    let builtin = call_gaps("", "ls", json!({"path": "empty"}));
    let raw = raw_round_trip();
    report("MCP tool call: reply end → next model request", ms(mcp), "median of 55");
    report("  built-in `ls` of an empty dir, the same way", ms(builtin), "median of 55");
    report("  the server's own time (tools/call straight over its pipes)", ms(raw), "median of 250");
    report(
        "  MCP overhead per call (MCP − built-in − server's own)",
        ms(mcp.saturating_sub(builtin).saturating_sub(raw)),
        "target ≤ 1 ms",
    );
}

fn main() {
    println!("acp MCP benchmarks ({})", env!("CARGO_BIN_EXE_acp"));
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let benches: [(&str, fn()); 3] =
        [("session_new", bench_session_new), ("usable", bench_tools_usable), ("call", bench_call_overhead)];
    for (name, bench) in benches {
        if only.is_empty() || only.iter().any(|o| name.contains(o.as_str())) {
            bench();
        }
    }
}
