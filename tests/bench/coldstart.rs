//! Cold start (run by `tests/bench/run`): what a fresh process pays that a warm one does not.
//! Medians over fresh processes, each beside its floor measured alternately in the same run:
//! spawn → `initialize` answered, against a bare tokio + serde_json responder built here
//! (examples/bare-responder.rs); the first prompt's first chunk against a second prompt's in the
//! same process; `acp run` end to end against a plain HTTP client reading the same mock stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
#[path = "../../examples/bare-client.rs"]
mod bare_client;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
mod stream;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent::{Agent, Options};
use measure::{median, ms};
use mock_model::{Chunking, MockModel, Reply};
use serde_json::json;

const RUNS: usize = 30;
/// Spawn → initialize is cheap and noisy: more processes.
const SPAWNS: usize = 200;

fn report(name: &str, value: String, beside: String, target: &str) {
    println!("{name:<46} {value:>11}   {beside:<34} (target {target})");
}

/// Builds `example` beside the acp binary with the same profile and `extra` rustc arguments, and
/// copies it to `name`.
fn build_example(example: &str, extra: &[&str], name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The profile the acp binary was built with (release under `cargo bench`).
    let profile = if cfg!(debug_assertions) { "dev" } else { "release" };
    let dir = Path::new(env!("CARGO_BIN_EXE_acp")).parent().unwrap().join("examples");
    // Everything it needs is built already for this benchmark: no registry is asked.
    let mut args = vec!["rustc", "--quiet", "--frozen", "--profile", profile, "--example", example, "--"];
    args.extend_from_slice(extra);
    let status = Command::new(&cargo).args(&args).status().expect("cargo runs");
    assert!(status.success(), "building {example} failed");
    let copy = dir.join(name);
    std::fs::copy(dir.join(example), &copy).unwrap();
    copy
}

/// The bare responder as Rust links it by default (position-independent), and linked as acp is
/// (`-no-pie`, see build.rs).
fn bare_responders() -> (PathBuf, PathBuf) {
    let default = build_example("bare-responder", &[], "bare-responder-pie");
    let linked_as_acp = if cfg!(all(target_os = "linux", target_env = "gnu")) && std::env::var_os("ACP_PIE").is_none() {
        build_example("bare-responder", &["-C", "link-arg=-no-pie"], "bare-responder-no-pie")
    } else {
        default.clone()
    };
    (default, linked_as_acp)
}

/// Spawns `program` and sends `initialize` at once; the time until its answer is read.
fn spawn_to_initialize(program: &Path, args: &[&str], home: &Path) -> Duration {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home)
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let took = started.elapsed();
    assert!(line.contains("\"id\":0") && line.contains("protocolVersion"), "{line}");
    drop(stdin);
    let _ = child.wait();
    took
}

/// Twenty text deltas, 1 ms apart (so a first chunk has something to wait for).
fn reply() -> Reply {
    Reply::sse(stream::deltas(20)).chunking(Chunking::PerEvent).delay(Duration::from_millis(1))
}

fn options(mock: &MockModel, home: &Path) -> Options {
    Options::default()
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", &mock.base())
        .env("RUST_LOG", "warn")
        .home(home)
}

/// From a prompt sent to its first `agent_message_chunk`.
fn first_chunk(a: &mut Agent, session: &str) -> Duration {
    let sent = Instant::now();
    let id =
        a.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    let mut first = None;
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(30)).expect("an answer");
        if first.is_none() && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            first = Some(at - sent);
        }
        if m["id"] == id {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            return first.expect("a chunk");
        }
    }
}

/// A fresh process: initialize, session/new, then two prompts; both first-chunk times.
fn first_and_warm(mock: &MockModel, home: &Path) -> (Duration, Duration) {
    mock.push(reply());
    mock.push(reply());
    let mut a = Agent::spawn(options(mock, home));
    a.initialize();
    let session = a.new_session_in(home, json!({}));
    let first = first_chunk(&mut a, &session);
    let warm = first_chunk(&mut a, &session);
    a.close_stdin();
    a.wait_exit(Duration::from_secs(5));
    (first, warm)
}

/// `acp run "Say hello."`, spawn to exit.
fn acp_run(acp: &Path, mock: &MockModel, home: &Path) -> Duration {
    mock.push(reply());
    let started = Instant::now();
    let out = Command::new(acp)
        .args(["run", "Say hello."])
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home)
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .stdin(Stdio::null())
        .output()
        .expect("acp run");
    let took = started.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("token 19"));
    took
}

/// A bare client process posting the same request and reading to the end, spawn to exit.
fn bare_client(program: &Path, mock: &MockModel) -> Duration {
    mock.push(reply());
    let addr = mock.base().trim_start_matches("http://").to_owned();
    let started = Instant::now();
    let status = Command::new(program).arg(&addr).env_clear().stdin(Stdio::null()).status().expect("bare client");
    let took = started.elapsed();
    assert!(status.success());
    took
}

/// The mock's own streaming: a plain HTTP client posting the same request and reading to the end.
fn plain_client(mock: &MockModel) -> Duration {
    mock.push(reply());
    let addr = mock.base().trim_start_matches("http://").to_owned();
    let started = Instant::now();
    let all = bare_client::exchange(&addr);
    let took = started.elapsed();
    assert!(String::from_utf8_lossy(&all).contains("message_stop"));
    took
}

/// How much of `link/startup.ld` (see build.rs) the binary matched: its patterns that name at
/// least one of the binary's functions (`nm`), so a list gone stale shows here.
fn start_up_layout(acp: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("link/startup.ld");
    let Ok(text) = std::fs::read_to_string(&script) else { return "start-up layout: no link/startup.ld".into() };
    let patterns: Vec<&str> = text
        .split_whitespace()
        .filter_map(|word| word.strip_prefix(".text."))
        .filter(|p| !p.starts_with("unlikely.") && *p != "startup_path")
        .collect();
    let Ok(nm) = Command::new("nm").arg(acp).output() else { return "start-up layout: nm not found".into() };
    let functions: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "t" | "T" | "w" | "W", name] => Some(name.to_owned()),
            _ => None,
        })
        .collect();
    let mut set = globset::GlobSetBuilder::new();
    for p in &patterns {
        set.add(globset::GlobBuilder::new(p).literal_separator(false).build().unwrap());
    }
    let set = set.build().unwrap();
    let mut named = vec![false; patterns.len()];
    for f in &functions {
        for i in set.matches(f) {
            named[i] = true;
        }
    }
    let found = named.iter().filter(|&&n| n).count();
    format!(
        "start-up layout: {found} of link/startup.ld's {} functions found in the binary (regenerate with tools/startup-order when this falls)",
        patterns.len()
    )
}

fn main() {
    // Every program measured is a copy, as an installed one is: a file just written by the
    // linker sits in the page cache differently and starts up to 0.1 ms slower.
    let (bare, bare_no_pie) = bare_responders();
    let acp = bare.parent().unwrap().join("acp-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_acp"), &acp).unwrap();
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len() as f64 / (1 << 20) as f64).unwrap_or(0.0);
    println!(
        "acp cold start — medians over {RUNS} fresh processes, {SPAWNS} for spawn → initialize ({}, {:.1} MiB; bare responder {:.1} MiB)",
        acp.display(),
        size(&acp),
        size(&bare)
    );
    println!("{}", start_up_layout(&acp));
    let home = tempfile::tempdir().unwrap();

    // Spawn → initialize, alternating so all see the same machine.
    let (mut ours, mut floor, mut floor_no_pie) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SPAWNS {
        ours.push(spawn_to_initialize(&acp, &["serve"], home.path()));
        floor.push(spawn_to_initialize(&bare, &[], home.path()));
        floor_no_pie.push(spawn_to_initialize(&bare_no_pie, &[], home.path()));
    }
    let (ours, floor, floor_no_pie) = (median(ours), median(floor), median(floor_no_pie));
    report(
        "spawn → initialize answered",
        ms(ours),
        format!("bare {} = {:.2}×", ms(floor), ours.as_secs_f64() / floor.as_secs_f64()),
        "≤ 1.3× the bare process",
    );
    report(
        "  the bare process linked as acp is",
        ms(floor_no_pie),
        format!("acp = {:.2}× this", ours.as_secs_f64() / floor_no_pie.as_secs_f64()),
        "—",
    );

    // The first prompt of a fresh process against its second.
    let mock = MockModel::start();
    let fresh_home = tempfile::tempdir().unwrap();
    let (new_home_first, new_home_warm) = first_and_warm(&mock, fresh_home.path());
    let (mut firsts, mut warms, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let (first, warm) = first_and_warm(&mock, home.path());
        firsts.push(first);
        warms.push(warm);
        gaps.push(first.saturating_sub(warm));
    }
    report(
        "first prompt's first chunk − warm prompt's",
        ms(median(gaps)),
        format!("first {} · warm {}", ms(median(firsts)), ms(median(warms))),
        "≤ 2 ms",
    );
    report(
        "  the same, first run on a new home",
        ms(new_home_first.saturating_sub(new_home_warm)),
        format!("first {} · warm {}", ms(new_home_first), ms(new_home_warm)),
        "—",
    );

    // `acp run` against the mock's own streaming, and against a bare client process, alternating.
    let client = build_example("bare-client", &[], "bare-client-copy");
    acp_run(&acp, &mock, home.path());
    let (mut runs, mut plain, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        runs.push(acp_run(&acp, &mock, home.path()));
        plain.push(plain_client(&mock));
        bare.push(bare_client(&client, &mock));
    }
    let (runs, plain, bare) = (median(runs), median(plain), median(bare));
    report(
        "acp run wall − the mock's own streaming",
        ms(runs.saturating_sub(plain)),
        format!("run {} · plain client {}", ms(runs), ms(plain)),
        "≤ 5 ms",
    );
    report(
        "  acp run wall − a bare client process's",
        ms(runs.saturating_sub(bare)),
        format!("bare client process {} (+{} on the plain client)", ms(bare), ms(bare.saturating_sub(plain))),
        "—",
    );
}
