//! Cron on `acp gateway` with 10,000 jobs (run by `tests/bench/run`): how fast they are added, the
//! memory they take, the CPU the gateway spends between runs (one timer over all of them), how
//! late a due job starts (p50, p99), and a restart with all of them: listening, and jobs loaded.
//! Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

mod gw;
#[path = "../support/mock_model.rs"]
mod mock_model;

use std::time::{Duration, Instant};

use futures_util::SinkExt as _;
use mock_model::MockModel;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use gw::{Ws, connect, next};

const JOBS: usize = 10_000;
/// Jobs that come due during the measurement.
const DUE: usize = 300;

fn report(name: &str, value: String, note: &str) {
    println!("{name:<52} {value:>14}   ({note})");
}

fn kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) the process has used.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

fn percentile(mut v: Vec<i64>, p: f64) -> i64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Sends the requests, at most 200 waiting for their answers at a time (the gateway answers 256
/// at once per connection), until each is answered.
async fn pipelined(ws: &mut Ws, requests: Vec<(String, Value)>) {
    let n = requests.len();
    let mut requests = requests.into_iter().enumerate();
    let (mut sent, mut answered) = (0, 0);
    while answered < n {
        while sent - answered < 200 {
            let Some((i, (method, params))) = requests.next() else { break };
            let frame = json!({"type": "req", "id": format!("r{i}"), "method": method, "params": params});
            ws.feed(Message::Text(frame.to_string().into())).await.unwrap();
            sent += 1;
        }
        ws.flush().await.unwrap();
        let frame = next(ws).await;
        if frame["type"] == "res" {
            assert_eq!(frame["ok"], true, "{frame}");
            answered += 1;
        }
    }
}

/// The 10,000 jobs: a third each of `every`, cron expressions in time zones, and `at` times, none
/// due for a day.
fn jobs() -> Vec<(String, Value)> {
    let now = now_ms();
    let zones = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC"];
    (0..JOBS)
        .map(|i| {
            let schedule = match i % 3 {
                0 => json!({"kind": "every", "everyMs": 86_400_000 + i as u64 * 1000}),
                1 => json!({"kind": "cron", "expr": format!("{} {} * * 1-5", i % 60, i % 24), "tz": zones[i % 4]}),
                _ => json!({"kind": "at", "at": iso(now + 86_400_000 + i as i64 * 1000)}),
            };
            let job = json!({"name": format!("job {i}"), "schedule": schedule, "sessionTarget": "isolated",
                "payload": {"kind": "agentTurn", "message": format!("Job {i}: check the thing and report.")},
                "delivery": {"mode": "announce", "channel": "telegram", "to": format!("{}", 1000 + i)}});
            ("cron.add".to_owned(), job)
        })
        .collect()
}

fn main() {
    println!("acp gateway cron benchmarks ({})", env!("CARGO_BIN_EXE_acp"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mock = MockModel::start();
    let gw = gw::start_with(&mock, "[heartbeat]\nevery = 0\n[cron]\nmax_concurrent = 8\n");
    let pid = gw.child.id();
    let mut ws = rt.block_on(connect(gw.port));
    std::thread::sleep(Duration::from_secs(1));
    let before = kib(pid, "VmRSS:");
    // The same gateway idle without jobs, to compare with.
    let (c0, t0) = (cpu(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let idle = (cpu(pid) - c0).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0;

    let t = Instant::now();
    rt.block_on(pipelined(&mut ws, jobs()));
    let took = t.elapsed();
    report("cron.add of 10,000 jobs", format!("{:.0} /s", JOBS as f64 / took.as_secs_f64()), "pipelined on one socket");
    std::thread::sleep(Duration::from_secs(2));
    let after = kib(pid, "VmRSS:");
    report(
        "RSS growth with 10,000 jobs",
        format!("{:.1} MB", after.saturating_sub(before) as f64 / 1024.0),
        &format!("target ≤ 20 MB; {:.1} → {:.1} MB", before as f64 / 1024.0, after as f64 / 1024.0),
    );

    // Between runs: one timer sleeps until the next job.
    let (c0, t0) = (cpu(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let used = cpu(pid) - c0;
    report(
        "CPU between runs, 10,000 jobs",
        format!("{:.2} %", used.as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0),
        &format!("target ≈ 0; {} ms of CPU in 10 s (10 ms ticks); without jobs {idle:.2} %", used.as_millis()),
    );

    // Jobs that come due, 20 ms apart, among the 10,000: how late each starts.
    let first = now_ms() + 3_000;
    let due: Vec<(String, Value)> = (0..DUE)
        .map(|i| {
            let job = json!({"name": format!("due {i}"), "schedule": {"kind": "at", "at": iso(first + i as i64 * 20)},
                "sessionTarget": "main", "wakeMode": "next-heartbeat",
                "payload": {"kind": "systemEvent", "text": format!("due {i}")}});
            ("cron.add".to_owned(), job)
        })
        .collect();
    let (late, heard) = rt.block_on(async {
        pipelined(&mut ws, due).await;
        let (mut late, mut heard) = (Vec::new(), Vec::new());
        while late.len() < DUE {
            let frame = next(&mut ws).await;
            let p = &frame["payload"];
            if frame["event"] == "cron" && p["action"] == "started" {
                let at: i64 = p["job"]["schedule"]["at"].as_str().map_or(0, |a| {
                    // The times were made here: read them back the same way.
                    let i: i64 = p["job"]["name"].as_str().unwrap()[4..].parse().unwrap();
                    assert_eq!(iso(first + i * 20), a);
                    first + i * 20
                });
                late.push(p["runAtMs"].as_i64().unwrap() - at);
                heard.push(now_ms() - at);
            }
        }
        (late, heard)
    });
    report(
        "due job → begun (runAtMs − its time), p50",
        format!("{} ms", percentile(late.clone(), 0.5)),
        &format!("{DUE} jobs 20 ms apart among 10,000"),
    );
    report("due job → begun, p99", format!("{} ms", percentile(late, 0.99)), "target ≤ 50 ms");
    report(
        "due job → its `started` event at a client, p99",
        format!("{} ms", percentile(heard, 0.99)),
        "claimed in the store first",
    );
    drop(ws);

    // A restart with the 10,000 jobs: listening, then the jobs loaded.
    let gw = gw.restart(&mock);
    report(
        "restart with 10,000 jobs → listening",
        format!("{:.1} ms", gw.started.as_secs_f64() * 1e3),
        "target ≤ 100 ms",
    );
    let t = Instant::now();
    let loaded = rt.block_on(async {
        let mut ws = connect(gw.port).await;
        let frame = json!({"type": "req", "id": "s", "method": "cron.status", "params": {}});
        ws.send(Message::Text(frame.to_string().into())).await.unwrap();
        loop {
            let frame = next(&mut ws).await;
            if frame["id"] == "s" {
                return frame["payload"]["jobs"].as_u64().unwrap();
            }
        }
    });
    report(
        "restart → jobs loaded (cron.status answers)",
        format!("{:.1} ms", (gw.started + t.elapsed()).as_secs_f64() * 1e3),
        &format!("{loaded} jobs"),
    );
    std::thread::sleep(Duration::from_secs(1));
    report(
        "RSS after the restart",
        format!("{:.1} MB", kib(gw.child.id(), "VmRSS:") as f64 / 1024.0),
        "10,000 jobs loaded",
    );
}
