//! Benchmarks of sessions that last (run by `tests/bench/run`): `session/load` of a 10,000-event
//! transcript (time to the response, peak RSS), `session/list` over 10,000 sessions, and the cost
//! of appending one event to a transcript. Figures, not pass/fail: targets are printed beside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp::history::StopReason;
use acp::history::input::UserBlock;
use acp::history::record::{FORMAT_VERSION, Record};
use acp::providers::{AssistantPart, Message, ToolResult, Usage, UserPart};
use acp::settings::Mode;
use acp::store::transcript::{Live, Transcript};
use acp::store::{SessionRow, Store};
use acp::stream::tool_update::Patch;
use acp::tools::plan::{PlanEntry, PlanPriority, PlanStatus};
use acp::tools::{ToolCallState, ToolContent, ToolKind, ToolStatus};
use agent::{Agent, Options};
use serde_json::{Value, json};

const RUNS: usize = 11;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, target: &str) {
    println!("{name:<52} {value:>14}   (target {target})");
}

fn row(id: &str, cwd: &str, at: i64) -> SessionRow {
    SessionRow {
        id: id.into(),
        cwd: cwd.into(),
        additional_dirs: vec![],
        title: Some(format!("Session {id}: refactor the parser and fix the failing tests")),
        created_at: at,
        updated_at: at,
        model: "anthropic/claude-sonnet-4-5".into(),
        mode: "code".into(),
        reasoning: None,
        input_tokens: 120_000,
        output_tokens: 8_000,
        context_tokens: 40_000,
        parent_id: None,
        origin: "acp".into(),
        prompted: true,
    }
}

fn words(n: usize, seed: usize) -> String {
    const W: [&str; 12] =
        ["parser", "token", "the", "fix", "returns", "error", "while", "span", "of", "test", "ok", "node"];
    (0..n).map(|i| W[(i * 7 + seed) % W.len()]).collect::<Vec<_>>().join(" ")
}

/// Writes a long session: 500 turns of 20 records each (prompt, thinking, streamed text, an edit
/// with its diff, a read, tool results, a plan, the end) — 10,000 records, about 6 MB.
fn long_session(store: &Store, id: &str, cwd: &Path) -> (usize, u64) {
    store.create(&row(id, &cwd.display().to_string(), 1)).unwrap();
    let path = store.transcript_path(id);
    let t = Transcript::create(
        &path,
        &Record::Session { v: FORMAT_VERSION, id: id.into(), cwd: cwd.into(), created_at: 1 },
    )
    .unwrap();
    t.record(&Record::Settings { model: "anthropic/claude-sonnet-4-5".into(), mode: Mode::Code, reasoning: None });
    let file = (0..60).map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n")).collect::<String>();
    let mut records = 2;
    for turn in 1..=500u64 {
        let prompt = words(35, turn as usize);
        t.record(&Record::User { turn, id: format!("u{turn}"), blocks: vec![UserBlock::text(prompt.clone())], at: 1 });
        t.record(&Record::Message { message: Message::User(vec![UserPart::Text(prompt)]) });
        t.record(&Record::Thought { id: format!("th{turn}"), text: words(50, 1) });
        for k in 0..5 {
            t.record(&Record::Text { id: format!("m{turn}"), text: words(14, k) });
        }
        let edit = ToolCallState {
            id: format!("e{turn}"),
            name: "edit".into(),
            title: "Edit src/parser.rs".into(),
            kind: ToolKind::Edit,
            status: ToolStatus::Pending,
            locations: vec![acp::tools::Location::file(cwd.join("src/parser.rs"))],
            raw_input: json!({"path": "src/parser.rs", "old_string": "f1()", "new_string": "g1()"}),
            content: vec![ToolContent::Diff {
                path: cwd.join("src/parser.rs"),
                old_text: Some(file.clone()),
                new_text: file.replace("f1()", "g1()"),
            }],
            raw_output: None,
            streams_output: false,
        };
        t.record(&Record::Tool { state: edit });
        t.record(&Record::ToolEnd {
            id: format!("e{turn}"),
            patch: Patch { status: Some(ToolStatus::Completed), ..Patch::default() },
        });
        let read = ToolCallState {
            id: format!("r{turn}"),
            name: "read".into(),
            title: "Read src/lexer.rs".into(),
            kind: ToolKind::Read,
            status: ToolStatus::Pending,
            locations: vec![],
            raw_input: json!({"path": "src/lexer.rs"}),
            content: vec![],
            raw_output: None,
            streams_output: false,
        };
        t.record(&Record::Tool { state: read });
        t.record(&Record::ToolEnd {
            id: format!("r{turn}"),
            patch: Patch {
                status: Some(ToolStatus::Completed),
                content: Some(vec![ToolContent::Text(format!("```\n{file}```"))]),
                ..Patch::default()
            },
        });
        t.record(&Record::Message {
            message: Message::Assistant(vec![
                AssistantPart::Thinking { text: words(50, 1), signature: Some("sig".repeat(20)) },
                AssistantPart::Text(words(70, 2)),
                AssistantPart::ToolCall { id: format!("e{turn}"), name: "edit".into(), arguments: "{}".into() },
                AssistantPart::ToolCall { id: format!("r{turn}"), name: "read".into(), arguments: "{}".into() },
            ]),
        });
        let result = |id: String, name: &str| {
            UserPart::ToolResult(ToolResult { call_id: id, name: name.into(), content: file.clone(), is_error: false })
        };
        t.record(&Record::Message {
            message: Message::User(vec![result(format!("e{turn}"), "edit"), result(format!("r{turn}"), "read")]),
        });
        t.record(&Record::Plan {
            entries: (0..3)
                .map(|i| PlanEntry {
                    content: words(6, i),
                    priority: PlanPriority::Medium,
                    status: if i == 0 { PlanStatus::Completed } else { PlanStatus::Pending },
                })
                .collect(),
        });
        for k in 0..3 {
            t.record(&Record::Text { id: format!("m{turn}b"), text: words(14, k) });
        }
        t.record(&Record::Message { message: Message::Assistant(vec![AssistantPart::Text(words(42, 3))]) });
        t.record(&Record::End {
            turn,
            stop: Some(StopReason::EndTurn),
            error: None,
            usage: Usage { input: 30_000, output: 900, ..Usage::default() },
            context: Some(30_900),
            model: None,
            interrupted: false,
            at: 2,
        });
        records += 20;
    }
    drop(t);
    (records, std::fs::metadata(&path).unwrap().len())
}

fn spawn(home: &Path) -> Agent {
    let mut a = Agent::spawn(
        Options::default()
            .home(home)
            .env("ANTHROPIC_API_KEY", "bench")
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .env("RUST_LOG", "warn"),
    );
    let r = a.request("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    assert!(r.get("result").is_some());
    a
}

/// Sends a request; returns the time to its response and what came before it.
fn timed(a: &mut Agent, method: &str, params: Value) -> (Duration, usize, Value) {
    let sent = Instant::now();
    let id = a.send_request(method, params);
    let mut before = 0;
    loop {
        let (at, m) = a.recv_timed(Duration::from_secs(30)).expect("answered");
        if m["id"] == id && m.get("method").is_none() {
            assert!(m.get("result").is_some(), "{method} failed: {m}");
            return (at - sent, before, m);
        }
        before += 1;
    }
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    println!("session store benchmarks — medians ({})", env!("CARGO_BIN_EXE_acp"));
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).unwrap();

    // session/load of a 10,000-event transcript, each run in a fresh process.
    let (records, bytes) = long_session(&store, "long", cwd.path());
    let mut load = Vec::new();
    let mut rss = Vec::new();
    let mut updates = 0;
    for _ in 0..RUNS {
        let mut a = spawn(home.path());
        let base = peak_rss_kib(a.pid()).unwrap_or(0);
        let (took, before, _) =
            timed(&mut a, "session/load", json!({"sessionId": "long", "cwd": cwd.path(), "mcpServers": []}));
        load.push(took);
        updates = before;
        rss.push((base, peak_rss_kib(a.pid()).unwrap_or(0)));
    }
    println!("  transcript: {records} records, {:.1} MB; replayed as {updates} session/updates", bytes as f64 / 1e6);
    report("session/load, 10,000 events: request → response", ms(median(load)), "≤ 150 ms");
    rss.sort();
    let (base, peak) = rss[rss.len() / 2];
    report("  peak RSS after the load", format!("{:.1} MiB", peak as f64 / 1024.0), "—");
    report("  … of which the load added", format!("{:.1} MiB", (peak.saturating_sub(base)) as f64 / 1024.0), "—");

    // session/list over 10,000 sessions in 20 directories.
    let t = Instant::now();
    for i in 0..10_000 {
        store.create(&row(&format!("sess_{i:05}"), &format!("/work/project-{}", i % 20), 1_000_000 + i)).unwrap();
    }
    println!("  (10,000 index rows written in {})", ms(t.elapsed()));
    let mut a = spawn(home.path());
    let (cold, _, _) = timed(&mut a, "session/list", json!({}));
    let mut first = Vec::new();
    let mut filtered = Vec::new();
    let mut deep = Vec::new();
    let mut cursor = json!(null);
    for i in 0..RUNS * 5 {
        let (took, _, page) = timed(&mut a, "session/list", json!({}));
        assert_eq!(page["result"]["sessions"].as_array().unwrap().len(), 50);
        first.push(took);
        filtered.push(timed(&mut a, "session/list", json!({"cwd": "/work/project-7"})).0);
        // Walk down the pages: each next page from the last cursor.
        let params = if i == 0 { json!({}) } else { json!({"cursor": cursor}) };
        let (took, _, page) = timed(&mut a, "session/list", params);
        cursor = page["result"]["nextCursor"].clone();
        deep.push(took);
    }
    report("session/list, 10,000 sessions: first page", ms(median(first)), "≤ 20 ms");
    report("  … filtered by cwd (500 match)", ms(median(filtered)), "≤ 20 ms");
    report("  … following pages by cursor", ms(median(deep)), "≤ 20 ms");
    report("  … the first in a process (opens the database)", ms(cold), "—");
    drop(a);

    // Appending: streamed text merged per burst, and whole records.
    let path = home.path().join("append.jsonl");
    let t = Arc::new(
        Transcript::create(&path, &Record::Session { v: 1, id: "a".into(), cwd: "/w".into(), created_at: 0 }).unwrap(),
    );
    let id: Arc<str> = Arc::from("msg_bench");
    let n = 200_000;
    // As a stream drives it: an idle flush after every delta, which writes when the text is due.
    let start = Instant::now();
    for i in 0..n {
        t.record_live(Live::Text { thought: false, message_id: &id, text: &format!("token {i} ") });
        t.flush_due();
    }
    t.flush();
    let streamed = start.elapsed() / n;
    // The worst case: a forced write every 8 deltas.
    let start = Instant::now();
    for i in 0..n {
        t.record_live(Live::Text { thought: false, message_id: &id, text: &format!("token {i} ") });
        if i % 8 == 7 {
            t.flush();
        }
    }
    t.flush();
    let delta = start.elapsed() / n;
    let call = ToolCallState {
        id: "c".into(),
        name: "read".into(),
        title: "Read src/lib.rs".into(),
        kind: ToolKind::Read,
        status: ToolStatus::Pending,
        locations: vec![],
        raw_input: json!({"path": "src/lib.rs"}),
        content: vec![],
        raw_output: None,
        streams_output: false,
    };
    let n2 = 20_000;
    let start = Instant::now();
    for i in 0..n2 {
        let mut s = call.clone();
        s.id = format!("c{i}");
        t.record_live(Live::ToolCall(&s));
        s.status = ToolStatus::Completed;
        s.content = vec![ToolContent::Text("fn main() {}".into())];
        t.record_live(Live::ToolCallUpdate(&s));
    }
    let tool = start.elapsed() / (2 * n2);
    let message = Message::Assistant(vec![AssistantPart::Text(words(80, 1))]);
    let start = Instant::now();
    for _ in 0..n2 {
        t.record(&Record::Message { message: message.clone() });
    }
    let whole = start.elapsed() / n2;
    report(
        "append: a streamed text delta (written every 100 ms)",
        format!("{:.2} µs", streamed.as_secs_f64() * 1e6),
        "≤ 20 µs",
    );
    report(
        "append: a streamed text delta (written every 8)",
        format!("{:.2} µs", delta.as_secs_f64() * 1e6),
        "≤ 20 µs",
    );
    report("append: a tool-call event (announce or end)", format!("{:.2} µs", tool.as_secs_f64() * 1e6), "≤ 20 µs");
    report("append: a 500-byte message record", format!("{:.2} µs", whole.as_secs_f64() * 1e6), "≤ 20 µs");

    // The index row's update at the end of every turn (in a database of 10,000 sessions).
    let n3 = 2_000;
    let start = Instant::now();
    for i in 0..n3 {
        store.finish_turn("sess_00042", 1_000, 200, Some(1_200 + i), Some("title"), true).unwrap();
    }
    report(
        "index update at the end of a turn",
        format!("{:.1} µs", (start.elapsed() / n3 as u32).as_secs_f64() * 1e6),
        "—",
    );
}
