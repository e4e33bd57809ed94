//! Tool benchmarks (run by `tests/bench/run`): the `grep` engine against `rg` on a generated tree
//! of 50,000 files / 500 MB; an edit of a 10 MB file through the agent (time and peak memory);
//! and the overhead of one tool call beyond the tool's own work. Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use acp::tools::grep::Search;
use agent::{Agent, Options};
use mock_model::MockModel;
use serde_json::json;

const FILES: usize = 50_000;
const FILE_BYTES: usize = 10_500;
const PATTERN: &str = r"needle_[0-9]+_xyz";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<48} {value:>16}   ({target})");
}

/// The generated tree, cached under target/ between runs.
fn tree() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/grep-tree");
    let marker = root.join(".complete");
    if marker.exists() {
        return root;
    }
    eprintln!("generating {FILES} files of {FILE_BYTES} bytes under {} …", root.display());
    let _ = std::fs::remove_dir_all(&root);
    let words = [
        "alpha", "beta", "gamma", "delta", "let", "fn", "struct", "impl", "return", "match", "value", "index",
        "buffer", "parse", "error", "result",
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    for f in 0..FILES {
        let dir = root.join(format!("d{:03}/e{:02}", f / 1000, (f / 100) % 10));
        if f % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let mut text = String::with_capacity(FILE_BYTES + 100);
        let mut line = 0;
        while text.len() < FILE_BYTES {
            line += 1;
            if f % 500 == 7 && line == 40 {
                text.push_str(&format!("    let found = needle_{f}_xyz; // the match\n"));
                continue;
            }
            for _ in 0..8 {
                text.push_str(words[rng.usize(..words.len())]);
                text.push(' ');
            }
            text.push_str(&rng.u32(..).to_string());
            text.push('\n');
        }
        std::fs::write(dir.join(format!("f{f:05}.rs")), text).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "d049/\n").unwrap();
    std::fs::write(&marker, "").unwrap();
    root
}

fn bench_grep() {
    let root = tree();
    let bytes: u64 = walk_size(&root);
    report("grep tree", format!("{FILES} files, {} MB", bytes / 1_000_000), "≥ 50,000 files / ≥ 500 MB");
    let rg = which("rg").expect("rg is needed for this benchmark (apt-get install ripgrep)");
    let run_rg = || {
        let t = Instant::now();
        let out = Command::new(&rg).args(["-n", "--no-require-git", PATTERN]).arg(&root).output().unwrap();
        let took = t.elapsed();
        (took, String::from_utf8_lossy(&out.stdout).lines().count())
    };
    let search = Search {
        pattern: PATTERN.into(),
        root: root.clone(),
        globs: Vec::new(),
        case_insensitive: false,
        fixed_strings: false,
        context: 0,
        max_matches: 1_000_000,
        files_only: false,
    };
    let run_ours = || {
        let t = Instant::now();
        let found = search.run(&AtomicBool::new(false)).unwrap();
        (t.elapsed(), found.matches)
    };
    // Warm the page cache, and check both find the same.
    let (_, rg_matches) = run_rg();
    let (_, our_matches) = run_ours();
    assert_eq!(rg_matches, our_matches, "rg and the grep tool disagree");
    let mut rg_times = Vec::new();
    let mut our_times = Vec::new();
    for _ in 0..7 {
        rg_times.push(run_rg().0);
        our_times.push(run_ours().0);
    }
    let (rg_t, our_t) = (median(rg_times), median(our_times));
    report("rg (median of 7)", ms(rg_t), &format!("{rg_matches} matches"));
    report("grep tool (median of 7)", ms(our_t), &format!("{our_matches} matches"));
    report("grep tool / rg", format!("{:.2}×", our_t.as_secs_f64() / rg_t.as_secs_f64()), "target ≤ 1.3×");
}

fn walk_size(root: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() { walk_size(&entry.path()) } else { meta.len() };
    }
    total
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

fn options(mock: &MockModel) -> Options {
    Options::default().env("ANTHROPIC_API_KEY", "bench").env("ANTHROPIC_BASE_URL", &mock.base()).env("RUST_LOG", "warn")
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn bench_big_edit() {
    let ws = tempfile::tempdir().unwrap();
    let text: String = (0..200_000).map(|i| format!("line {i:06}: some text of a large generated file\n")).collect();
    std::fs::write(ws.path().join("big.txt"), &text).unwrap();
    let mut times = Vec::new();
    let mut rss = 0.0;
    for run in 0..5 {
        let mock = MockModel::start();
        let (old, new) = (format!("line {:06}: some", 100_000 + run), format!("LINE {:06}: some", 100_000 + run));
        mock.push(script::calls(
            "anthropic",
            &[("e", "edit", json!({"path": "big.txt", "old_string": old, "new_string": new}))],
        ));
        mock.push(script::text("anthropic", "done"));
        let mut a = Agent::spawn(options(&mock));
        a.initialize();
        let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
        let (_, response) = a.prompt_answering(&session, "edit", |m| panic!("unexpected {m}"));
        assert_eq!(response["result"]["stopReason"], "end_turn");
        let reqs = mock.requests();
        times.push(reqs[1].at - reqs[0].finished_at.unwrap());
        rss = f64::max(rss, peak_rss_mib(a.pid()));
        assert!(
            std::fs::read_to_string(ws.path().join("big.txt")).unwrap().contains(&format!("LINE {:06}", 100_000 + run))
        );
    }
    report("edit of a 10 MB file (tool call → next request)", ms(median(times)), "median of 5");
    report("  peak RSS of the agent", format!("{rss:.1} MiB"), "file 10.0 MB");
}

fn bench_call_overhead() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("empty")).unwrap();
    let mock = MockModel::start();
    const CALLS: usize = 60;
    for i in 0..CALLS {
        mock.push(script::calls("anthropic", &[(&format!("c{i}"), "ls", json!({"path": "empty"}))]));
    }
    mock.push(script::text("anthropic", "done"));
    let mut a = Agent::spawn(options(&mock).config("max_turn_requests = 1000\n"));
    a.initialize();
    let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (_, response) = a.prompt_answering(&session, "go", |m| panic!("unexpected {m}"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let reqs = mock.requests();
    let gaps: Vec<Duration> = (0..CALLS).map(|i| reqs[i + 1].at - reqs[i].finished_at.unwrap()).skip(5).collect();
    // The tool's own work: listing an empty directory.
    let t = Instant::now();
    for _ in 0..1000 {
        let _ = std::fs::read_dir(ws.path().join("empty")).unwrap().count();
    }
    let work = t.elapsed() / 1000;
    let gap = median(gaps);
    report(
        "tool call: reply end → next model request",
        format!("{:.3} ms", gap.as_secs_f64() * 1e3),
        &format!("median of {}", CALLS - 5),
    );
    report("  of which the tool's own work (ls of an empty dir)", format!("{:.3} ms", work.as_secs_f64() * 1e3), "");
    report(
        "  overhead per tool call",
        format!("{:.3} ms", gap.saturating_sub(work).as_secs_f64() * 1e3),
        "target ≤ 1 ms",
    );
}

/// The exec sandbox's cost per command: `bash -c true` started directly and through the launcher
/// (`acp-sandbox …`, and `acp __sandbox …` where that is missing, with the policy a session gets: the workspace and temp dir writable, the
/// agent's home and the default credential paths hidden), alternated, medians of 200 each.
fn bench_sandbox_overhead() {
    let ws = tempfile::tempdir().unwrap();
    // A home as users have one: 40 entries, the agent's home and credentials among them (not under
    // the temp dir, which is writable and would be split around them).
    let home = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/home");
    for dir in [".acp", ".ssh", ".aws", ".config/gh", ".cargo", ".cache", ".local/share", "src", "Documents"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    for i in 0..30 {
        std::fs::write(home.join(format!(".rc{i}")), "x").unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), "key").unwrap();
    let mut policy: Vec<String> = vec!["__sandbox".into()];
    for w in [ws.path().display().to_string(), std::env::temp_dir().display().to_string()] {
        policy.extend(["--write".into(), w]);
    }
    policy.extend(["--hide".into(), home.join(".acp").display().to_string()]);
    for d in acp::config::DEFAULT_DENY_READ {
        policy.extend(["--hide".into(), d.replacen('~', &home.display().to_string(), 1)]);
    }
    // As the agent runs it: the workspace's sockets reachable (the host's hidden), the process
    // limit (a cgroup per command, made and removed around it, where the machine allows one).
    policy.extend(["--sockets-in".into(), ws.path().display().to_string()]);
    policy.extend(["--max-procs".into(), acp::sandbox::pids::DEFAULT_MAX.to_string()]);
    let with_network = {
        let mut p = policy.clone();
        p.insert(1, "--network".into());
        p
    };
    // What the agent runs: `acp-sandbox` (`acp __sandbox` where it is missing), bash by its path.
    let bash = ["--", "/bin/bash", "-c", "true"];
    let run = |args: &[String]| {
        let t = Instant::now();
        let cgroup = acp::sandbox::pids::Cgroup::new(acp::sandbox::pids::DEFAULT_MAX);
        let mut command = Command::new(env!("CARGO_BIN_EXE_acp-sandbox"));
        command.args(&args[1..]);
        if let Some(cgroup) = &cgroup {
            command.arg("--cgroup").arg(&cgroup.dir);
        }
        let status = command.args(bash).status().unwrap();
        assert!(status.success());
        drop(cgroup);
        t.elapsed()
    };
    let run_agent = |args: &[String]| {
        let t = Instant::now();
        assert!(Command::new(env!("CARGO_BIN_EXE_acp")).args(args).args(bash).status().unwrap().success());
        t.elapsed()
    };
    let plain = |_: &[String]| {
        let t = Instant::now();
        assert!(Command::new("/bin/bash").args(["-c", "true"]).status().unwrap().success());
        t.elapsed()
    };
    let (mut direct, mut sandboxed, mut networked, mut by_agent) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..200 {
        direct.push(plain(&policy));
        sandboxed.push(run(&policy));
        networked.push(run(&with_network));
        by_agent.push(run_agent(&policy));
    }
    let (direct, sandboxed, networked, by_agent) =
        (median(direct), median(sandboxed), median(networked), median(by_agent));
    let us = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    report("exec `true` unconfined (bash -c true)", us(direct), "median of 200");
    report("exec `true` sandboxed, network off", us(sandboxed), "Landlock + user/PID/mount/net namespaces, own /proc");
    report("  sandbox overhead per command", us(sandboxed.saturating_sub(direct)), "target ≤ 2 ms");
    report("exec `true` sandboxed, network on", us(networked), "Landlock + user/PID/mount namespaces, own /proc");
    report("  sandbox overhead per command", us(networked.saturating_sub(direct)), "target ≤ 2 ms");
    report("exec `true` through `acp __sandbox` (fallback)", us(by_agent), "network off");
    report("  sandbox overhead per command", us(by_agent.saturating_sub(direct)), "");
}

fn main() {
    println!("acp tool benchmarks ({})", env!("CARGO_BIN_EXE_acp"));
    // `cargo bench --bench tools -- sandbox` runs only the benchmarks whose name contains a word.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let benches: [(&str, fn()); 4] = [
        ("sandbox", bench_sandbox_overhead),
        ("call", bench_call_overhead),
        ("edit", bench_big_edit),
        ("grep", bench_grep),
    ];
    for (name, bench) in benches {
        if only.is_empty() || only.iter().any(|o| name.contains(o.as_str())) {
            bench();
        }
    }
}
