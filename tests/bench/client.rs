//! `acp client` benchmarks: start to prompt ready (spawning `acp serve` included), and how far
//! rendering lags behind a model streaming 5,000 deltas a second. Runs the release binary in a
//! pseudo-terminal against the mock model; prints medians. Figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/pty.rs"]
mod pty;
mod stream;

use std::path::Path;
use std::time::{Duration, Instant};

use mock_model::{Chunking, MockModel, Reply};
use stream::deltas;

const RUNS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<52} {value:>12}   (target {target})");
}

fn client(home: &Path, mock: &MockModel) -> pty::Pty {
    let env = [
        ("ACP_HOME", home.display().to_string()),
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_API_KEY", "bench".to_owned()),
        ("ANTHROPIC_BASE_URL", mock.base()),
    ];
    pty::Pty::spawn(Path::new(env!("CARGO_BIN_EXE_acp")), &["client"], &env, home)
}

/// Waits until the output after byte `from` contains `needle`; when it first did, and where.
fn seen(p: &pty::Pty, from: usize, needle: &str) -> (Instant, usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut checked = from;
    loop {
        let len = p.raw_len();
        if let Some(at) = p.find_from(checked, needle.as_bytes()) {
            return (Instant::now(), at);
        }
        checked = len.saturating_sub(needle.len()).max(from);
        assert!(Instant::now() < deadline, "never saw {needle:?}");
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn main() {
    println!("acp client benchmarks — medians ({})", env!("CARGO_BIN_EXE_acp"));
    let mock = MockModel::start();

    // Start → the prompt is drawn (the agent spawned, initialized, a session opened).
    let mut start = Vec::new();
    for _ in 0..RUNS {
        let home = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let mut p = client(home.path(), &mock);
        let _ = seen(&p, 0, "› ");
        start.push(t.elapsed());
        p.send("\x04");
        p.wait_exit();
    }
    report(
        "acp client start → prompt ready (spawns acp serve)",
        format!("{:.1} ms", median(start).as_secs_f64() * 1e3),
        "≤ 100 ms",
    );

    // 10,000 deltas at about 5,000/s: 32 SSE events per write, a write every 5 ms and a bit. The lag is from
    // the mock writing the last delta to the client drawing it.
    let n = 10_000;
    let body = deltas(n);
    let header = deltas(0).len() - 200; // message_start + content_block_start, roughly
    let per_event = (body.len() - header) / n;
    let chunk = per_event * 32;
    let text = String::from_utf8(body.clone()).unwrap();
    let last_delta_end = text.find(&format!("token {} ", n - 1)).unwrap();
    let last_piece = last_delta_end / chunk;
    let mut lags = Vec::new();
    let mut rates = Vec::new();
    for _ in 0..5 {
        let home = tempfile::tempdir().unwrap();
        let mut p = client(home.path(), &mock);
        let (_, at) = seen(&p, 0, "› ");
        mock.push(Reply::sse(body.clone()).chunking(Chunking::Bytes(chunk)).delay(Duration::from_millis(5)));
        let base = mock.requests().len();
        p.send("stream\r");
        // The last delta's number alone: on screen a line may wrap between "token" and it.
        let (shown_last, _) = seen(&p, at, &format!("{}", n - 1));
        let r = mock.wait_done(base);
        let (first, last) = (r.piece_times[0], r.piece_times[last_piece]);
        rates.push(n as f64 / (last - first).as_secs_f64());
        lags.push(shown_last.saturating_duration_since(last));
        let _ = seen(&p, at, "── ");
        p.send("\x04");
        p.wait_exit();
    }
    rates.sort_by(f64::total_cmp);
    report("  model streaming rate achieved by the mock", format!("{:.0}/s", rates[rates.len() / 2]), "5,000/s");
    report(
        "rendering lag of the last of 10,000 deltas",
        format!("{:.2} ms", median(lags).as_secs_f64() * 1e3),
        "no falling behind",
    );
}
