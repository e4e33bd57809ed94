//! Subagent and OpenLang benchmarks (run by `tests/bench/run`): the time from a `sessions_spawn`
//! call arriving in the model's reply to the child's first model request (against the parent's
//! own next request after the same reply, which does everything but create the child), over fresh
//! `acp serve` processes with the mock model; and how fast OpenLang parses (the corpus's L2
//! messages). Figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;
mod stream;

use std::time::{Duration, Instant};

use agent::Options;
use measure::{median, ms, started_with};
use mock_model::MockModel;
use serde_json::json;

const RUNS: usize = 20;
const PARENT: &str = "\"name\":\"sessions_spawn\"";

fn report(name: &str, value: String, note: &str) {
    println!("{name:<52} {value:>12}   ({note})");
}

fn main() {
    let mock = MockModel::start();
    println!("subagent benchmarks — medians over {RUNS} fresh processes ({})", env!("CARGO_BIN_EXE_acp"));
    let mut to_child = Vec::new();
    let mut to_parent = Vec::new();
    for _ in 0..RUNS {
        let options = Options::default()
            .env("ANTHROPIC_API_KEY", "bench")
            .env("ANTHROPIC_BASE_URL", &mock.base())
            .env("RUST_LOG", "warn");
        let (mut a, _) = started_with(options);
        let cwd = tempfile::tempdir().unwrap();
        let session = a.new_session_in(cwd.path(), json!({}));
        let before = mock.requests().len();
        mock.push(
            script::calls("anthropic", &[("s1", "sessions_spawn", json!({"task": "TASK: say hi", "label": "b"}))])
                .when(PARENT),
        );
        mock.push(script::text("anthropic", "Started.").when(PARENT));
        mock.push(script::text("anthropic", "hi").unless(PARENT));
        mock.push(script::text("anthropic", "Noted.").when("Subagent announcement"));
        a.prompt(&session, "go");
        let all = mock.wait_requests(before + 4);
        let ours = &all[before..];
        let spawn_reply = mock.wait_done(before);
        let ended = spawn_reply.finished_at.unwrap();
        let child = ours.iter().find(|r| !r.body.to_string().contains(PARENT)).unwrap();
        let parent_next = ours[1..].iter().find(|r| r.body.to_string().contains(PARENT)).unwrap();
        to_child.push(child.at.saturating_duration_since(ended));
        to_parent.push(parent_next.at.saturating_duration_since(ended));
    }
    let (child, parent) = (median(to_child), median(to_parent));
    report("spawn call received → child's first model request", ms(child), "median");
    report("  the parent's own next request after that reply", ms(parent), "the same work but the child");
    report("  spawn overhead", ms(child.saturating_sub(parent)), "target ≤ 5 ms beyond the parent's");

    // OpenLang parsing.
    let corpus =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/openlang/corpus.jsonl")).unwrap();
    let messages: Vec<String> = corpus
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["l2"].as_str().map(str::to_owned))
        .collect();
    let bytes: usize = messages.iter().map(String::len).sum();
    let started = Instant::now();
    let mut parsed = 0usize;
    while started.elapsed() < Duration::from_secs(2) {
        for m in &messages {
            assert!(acp::openlang::parse(m).is_ok());
        }
        parsed += bytes;
    }
    let rate = parsed as f64 / started.elapsed().as_secs_f64() / 1e6;
    report(
        "OpenLang L2 parse throughput",
        format!("{rate:.1} MB/s"),
        &format!("{} messages, {bytes} bytes, parsed over and over for 2 s", messages.len()),
    );
}
