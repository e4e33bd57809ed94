//! What the ACP benchmarks share: medians, units, spawn → `initialize` answered, one timed prompt
//! and a process's peak RSS.

use std::time::{Duration, Instant};

use serde_json::json;

use super::agent::{Agent, Options};

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

pub fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Spawns the agent; returns it and the time from spawn to its `initialize` answer.
pub fn started_with(options: Options) -> (Agent, Duration) {
    let mut a = Agent::spawn(options);
    let id = a.send_request("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(30)).expect("initialize answered");
        if m["id"] == id {
            let took = at - a.spawned_at;
            return (a, took);
        }
    }
}

/// Runs one prompt that must end `end_turn`: (sent, answered, every chunk's arrival).
pub fn prompt(a: &mut Agent, session: &str) -> (Instant, Instant, Vec<Instant>) {
    let sent = Instant::now();
    let id =
        a.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    let mut chunks = Vec::new();
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(30)).unwrap();
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            chunks.push(at);
        }
        if m["id"] == id {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            return (sent, at, chunks);
        }
    }
}

/// The process's peak resident set, in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}
