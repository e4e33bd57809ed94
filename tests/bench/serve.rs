//! Benchmarks of `acp serve` (run by `tests/bench/run`): spawns the release binary against the mock
//! model and prints medians over repeated runs. Figures, not pass/fail: targets are printed beside
//! them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
mod stream;

use std::time::{Duration, Instant};

use agent::{Agent, Options};
use measure::{median, ms, peak_rss_kib, prompt, started_with, us};
use mock_model::{Chunking, MockModel, Reply};
use serde_json::json;
use stream::deltas;

const RUNS: usize = 25;

fn options(mock: &MockModel) -> Options {
    Options::default().env("ANTHROPIC_API_KEY", "bench").env("ANTHROPIC_BASE_URL", &mock.base()).env("RUST_LOG", "warn")
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<44} {value:>14}   (target {target})");
}

fn started(mock: &MockModel) -> (Agent, Duration) {
    started_with(options(mock))
}

fn new_session(a: &mut Agent) -> (String, Duration) {
    let cwd = a.home.path().display().to_string();
    let t = Instant::now();
    let id = a.send_request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(10)).unwrap();
        if m["id"] == id {
            let sid = m["result"]["sessionId"].as_str().unwrap().to_owned();
            // The setup updates end with the usage.
            while a.recv()["params"]["update"]["sessionUpdate"] != "usage_update" {}
            return (sid, at - t);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let mock = MockModel::start();
    println!("acp serve benchmarks — medians over {RUNS} runs ({})", env!("CARGO_BIN_EXE_acp"));

    let mut init = Vec::new();
    let mut first_new = Vec::new();
    let mut exit = Vec::new();
    for _ in 0..RUNS {
        let (mut a, took) = started(&mock);
        init.push(took);
        first_new.push(new_session(&mut a).1);
        let closed = Instant::now();
        a.close_stdin();
        a.wait_exit(Duration::from_secs(5)).expect("exit after EOF");
        exit.push(closed.elapsed());
    }
    report("spawn → initialize response", ms(median(init)), "≤ 5 ms");
    report("session/new latency (first in process)", ms(median(first_new)), "≤ 2 ms");

    let (mut a, _) = started(&mock);
    let steady: Vec<Duration> = (0..RUNS * 4).map(|_| new_session(&mut a).1).collect();
    report("session/new latency (steady state)", ms(median(steady)), "≤ 2 ms");
    drop(a);

    // Turn overhead: everything but the mock's own streaming of 200 deltas.
    let (mut a, _) = started(&mock);
    let (session, _) = new_session(&mut a);
    let mut overhead = Vec::new();
    let mut rss_one = 0;
    for i in 0..RUNS {
        mock.push(Reply::sse(deltas(200)).chunking(Chunking::PerEvent));
        let (sent, answered, chunks) = prompt(&mut a, &session);
        assert_eq!(chunks.len(), 200);
        let r = mock.wait_done(i);
        let streaming = r.finished_at.unwrap() - r.at;
        overhead.push((answered - sent).saturating_sub(streaming));
        if i == 0 {
            rss_one = peak_rss_kib(a.pid()).unwrap_or(0);
        }
    }
    report("text turn overhead beyond mock streaming", ms(median(overhead)), "≤ 5 ms");
    report("peak RSS after one turn", format!("{:.1} MiB", rss_one as f64 / 1024.0), "≤ 20 MB");
    let rss = peak_rss_kib(a.pid()).unwrap_or(0);
    report(&format!("peak RSS after {RUNS} turns"), format!("{:.1} MiB", rss as f64 / 1024.0), "≤ 20 MB");
    drop(a);

    // Per-event forwarding: mock event written → matching session/update read, events 2 ms apart.
    // Measured twice: with a reader that sleeps in `read` (includes this process waking up), and
    // with one that spins (the moment the line reached stdout).
    for (label, spin) in
        [("mock SSE event → session/update on stdout", true), ("  … as seen by a sleeping reader", false)]
    {
        let opts = if spin { options(&mock).spin() } else { options(&mock) };
        let (mut a, _) = started_with(opts);
        let (session, _) = new_session(&mut a);
        let mut forward = Vec::new();
        let base = mock.requests().len();
        for i in 0..4 {
            mock.push(Reply::sse(deltas(100)).chunking(Chunking::PerEvent).delay(Duration::from_millis(2)));
            let (_, _, chunks) = prompt(&mut a, &session);
            let r = mock.wait_done(base + i);
            // Pieces: message_start, block_start, then one per delta.
            for (k, at) in chunks.iter().enumerate() {
                forward.push(at.saturating_duration_since(r.piece_times[k + 2]));
            }
        }
        report(label, us(median(forward.clone())), "≤ 100 µs");
        let p90 = {
            let mut f = forward.clone();
            f.sort();
            f[f.len() * 9 / 10]
        };
        report("  … 90th percentile", us(p90), "—");
    }

    report("exit after stdin EOF (idle)", ms(median(exit)), "≤ 50 ms");

    // SIGTERM while a turn streams: the prompt is answered `cancelled` and the process exits.
    let mut term = Vec::new();
    for _ in 0..RUNS {
        let (mut a, _) = started(&mock);
        let (session, _) = new_session(&mut a);
        mock.push(Reply::sse(deltas(50)).stall_after(10));
        a.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
        while a.recv()["params"]["update"]["sessionUpdate"] != "agent_message_chunk" {}
        let sent = Instant::now();
        a.signal("TERM");
        a.wait_exit(Duration::from_secs(5)).expect("exit after SIGTERM");
        term.push(sent.elapsed());
    }
    report("exit after SIGTERM during a turn", ms(median(term)), "≤ 500 ms");
}
