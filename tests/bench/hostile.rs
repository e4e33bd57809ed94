//! Hostile-input figures (run by `tests/bench/run`): how fast a cancel is answered while a model
//! streams without end, what an endless reply costs in memory, what reading a file made of one
//! 1 GiB line costs, and what a peer that floods input without reading output costs. Figures, not
//! pass/fail: targets are printed beside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::io::Write;
use std::time::{Duration, Instant};

use agent::{Agent, Options};
use mock_model::{MockModel, Reply};
use serde_json::{Value, json};

const RUNS: usize = 11;

fn options(mock: &MockModel) -> Options {
    Options::default().env("ANTHROPIC_API_KEY", "bench").env("ANTHROPIC_BASE_URL", &mock.base()).env("RUST_LOG", "warn")
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<52} {value:>14}   (target {target})");
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn session(a: &mut Agent) -> String {
    let cwd = a.home.path().to_path_buf();
    session_in(a, &cwd)
}

fn session_in(a: &mut Agent, cwd: &std::path::Path) -> String {
    a.request("initialize", json!({"protocolVersion": 1}));
    let r = a.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"mode": "auto"}}));
    r["result"]["sessionId"].as_str().unwrap().to_owned()
}

/// Sends a prompt, waits until `streamed` bytes of reply text arrived, cancels, and returns the
/// time from the cancel to the answer.
fn cancel_after(a: &mut Agent, session: &str, streamed: usize) -> Duration {
    let id =
        a.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    let mut got = 0;
    while got < streamed {
        let m = a.recv();
        if let Some(t) = m["params"]["update"]["content"]["text"].as_str() {
            got += t.len();
        }
    }
    let cancelled = Instant::now();
    a.notify("session/cancel", json!({"sessionId": session}));
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(60)).expect("the cancel is answered");
        if m["id"] == id {
            assert_eq!(m["result"]["stopReason"], "cancelled", "{m}");
            return at - cancelled;
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mock = MockModel::start();
    println!("acp hostile-input benchmarks ({})", env!("CARGO_BIN_EXE_acp"));

    // Cancel while the model streams without end: right after the first text, and after 2 MiB.
    for (label, streamed, config) in [
        ("session/cancel → answer, endless stream, at once", 1, ""),
        ("session/cancel → answer, endless stream, after 2 MiB", 2 << 20, ""),
        ("  … with max_reply_bytes = 1 GiB, after 200 MiB", 200 << 20, "max_reply_bytes = 1073741824\n"),
    ] {
        let runs = if streamed > 10 << 20 { 3 } else { RUNS };
        let mut took = Vec::new();
        for _ in 0..runs {
            mock.push(script::endless_text(""));
            let mut a = Agent::spawn(options(&mock).config(config));
            let s = session(&mut a);
            took.push(cancel_after(&mut a, &s, streamed));
        }
        report(label, format!("{:.1} ms", median(took).as_secs_f64() * 1e3), "≤ 100 ms");
    }

    // An endless reply with the default limit: the turn ends by itself; what did it cost?
    mock.push(script::endless_text(""));
    let mut a = Agent::spawn(options(&mock));
    let s = session(&mut a);
    let id = a.send_request("session/prompt", json!({"sessionId": s, "prompt": [{"type": "text", "text": "go"}]}));
    let answer = loop {
        let m: Value = a.recv_timed(Duration::from_secs(120)).expect("the turn ends").1;
        if m["id"] == id {
            break m;
        }
    };
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("max_reply_bytes"), "{answer}");
    report("endless reply (stopped at 4 MiB): peak RSS", mib(status_kib(a.pid(), "VmHWM:")), "bounded");
    let transcript: u64 =
        std::fs::read_dir(a.home.path().join("sessions")).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    report("  … transcript size", mib(transcript / 1024), "≈ 4 MiB, written once");
    drop(a);

    // `read` of a file that is one 1 GiB line.
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&data).unwrap();
    let big = data.join("one-line-1g.txt");
    if std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0) != (1 << 30) + 1 {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        let chunk = vec![b'a'; 8 << 20];
        for _ in 0..128 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\n").unwrap();
    }
    let call = format!(
        "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: content_block_stop\ndata: {}\n\nevent: message_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "r1", "name": "read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json!({"path": big}).to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    );
    mock.push(Reply::sse(call));
    mock.push(Reply::sse(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ));
    let mut a = Agent::spawn(options(&mock));
    let s = session_in(&mut a, &data);
    let started = Instant::now();
    let id = a.send_request("session/prompt", json!({"sessionId": s, "prompt": [{"type": "text", "text": "read"}]}));
    while a.recv_timed(Duration::from_secs(300)).expect("the read ends").1["id"] != id {}
    report("read of a file that is one 1 GiB line: peak RSS", mib(status_kib(a.pid(), "VmHWM:")), "bounded");
    report("  … turn time", format!("{:.0} ms", started.elapsed().as_secs_f64() * 1e3), "—");
    drop(a);

    // A peer that writes requests without reading a byte of output.
    let home = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .arg("serve")
        .env_clear()
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "bench")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = written.clone();
    std::thread::spawn(move || {
        let pad = "p".repeat(1000);
        for n in 0u64.. {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"initialize\",\"params\":{{\"protocolVersion\":1,\"_meta\":{{\"pad\":\"{pad}\"}}}}}}\n"
            );
            if stdin.write_all(line.as_bytes()).is_err()
                || counter.load(std::sync::atomic::Ordering::Relaxed) > 366 << 20
            {
                return;
            }
            counter.fetch_add(line.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    let accepted = written.load(std::sync::atomic::Ordering::Relaxed);
    report("input flood, output unread: input accepted", mib(accepted / 1024), "bounded (was all 366 MiB)");
    report("  … agent RSS", mib(status_kib(pid, "VmRSS:")), "bounded");
    let _ = child.kill();
    let _ = child.wait();
}
