//! Prompt caching over a 20-turn tool-using session (run by `tests/bench/run`): every request the
//! agent sends is replayed against a model of each provider's prompt cache, and the figure is the
//! share of all input (bytes of the request's blocks, a stand-in for tokens) that the cache would
//! have served.
//!
//! - Anthropic: a prefix is cached where a request puts a `cache_control` breakpoint; a later
//!   request reads the longest cached prefix ending at one of its own breakpoints or within the 20
//!   blocks before one (the documented look-back).
//! - OpenAI: prefixes are cached automatically per `prompt_cache_key`; a request reads the longest
//!   prefix it shares with an earlier request of the same key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::collections::HashSet;

use agent::{Agent, Options};
use mock_model::MockModel;
use serde_json::{Value, json};

const TURNS: usize = 20;

fn report(name: &str, value: String, target: &str) {
    println!("{name:<60} {value:>10}   (target {target})");
}

/// Runs the session; returns every request body the model received.
fn session(api: &str) -> Vec<Value> {
    let mock = MockModel::start();
    let options = match api {
        "anthropic" => Options::default().anthropic(&mock.base()),
        _ => Options::default().openai(&mock.base_v1(), api == "openai-responses"),
    };
    let ws = tempfile::tempdir().unwrap();
    for i in 0..40 {
        std::fs::write(
            ws.path().join(format!("notes{i}.md")),
            format!("# Notes {i}\n\n{}\n", "Some notes. ".repeat(80)),
        )
        .unwrap();
    }
    let mut a = Agent::spawn(options.env("RUST_LOG", "warn"));
    a.initialize();
    let s = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    for turn in 0..TURNS {
        // Each turn: the model reads two files, then answers.
        let calls = [
            (format!("c{turn}a"), "read", json!({"path": format!("notes{}.md", 2 * turn)})),
            (format!("c{turn}b"), "read", json!({"path": format!("notes{}.md", 2 * turn + 1)})),
        ];
        let calls: Vec<script::Call<'_>> = calls.iter().map(|(id, n, a)| (id.as_str(), *n, a.clone())).collect();
        mock.push(script::calls(api, &calls));
        mock.push(script::text(api, &format!("Turn {turn}: both files are notes; nothing to change.")));
        let (_, response) = a.prompt(&s, &format!("Look at the next two notes files ({turn})."));
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    mock.requests().into_iter().map(|r| r.body).collect()
}

/// A request as the sequence of blocks a prompt cache sees (tools, system, then each message's
/// content blocks, each tagged with its message), and the indexes of its breakpoints.
fn anthropic_blocks(body: &Value) -> (Vec<String>, Vec<usize>) {
    let mut blocks = Vec::new();
    let mut breakpoints = Vec::new();
    let mut push = |tag: String, mut v: Value| {
        let cached = v.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
        if cached {
            breakpoints.push(blocks.len());
        }
        blocks.push(format!("{tag}{v}"));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool:".into(), t.clone());
    }
    for s in body["system"].as_array().into_iter().flatten() {
        push("system:".into(), s.clone());
    }
    for (i, m) in body["messages"].as_array().unwrap().iter().enumerate() {
        for c in m["content"].as_array().unwrap() {
            push(format!("{i}:{}:", m["role"]), c.clone());
        }
    }
    (blocks, breakpoints)
}

fn openai_blocks(body: &Value) -> Vec<String> {
    let mut blocks = vec![format!("tools:{}", body["tools"]), format!("instructions:{}", body["instructions"])];
    let items = body.get("messages").or_else(|| body.get("input")).and_then(Value::as_array).unwrap();
    blocks.extend(items.iter().map(Value::to_string));
    blocks
}

/// Prefix keys: `keys[i]` identifies `blocks[..=i]`.
fn prefix_keys(blocks: &[String]) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    blocks
        .iter()
        .map(|b| {
            b.hash(&mut h);
            h.finish()
        })
        .collect()
}

fn size(blocks: &[String], upto: Option<usize>) -> usize {
    upto.map_or(0, |i| blocks[..=i].iter().map(String::len).sum())
}

/// `system_only`: count only the breakpoint on the system prompt (what was sent before the
/// conversation had breakpoints of its own), for comparison.
fn anthropic_share(bodies: &[Value], system_only: bool) -> (f64, f64) {
    let mut cache: HashSet<u64> = HashSet::new();
    let (mut total, mut read, mut behind) = (0usize, 0usize, 0usize);
    for body in bodies {
        let (blocks, mut breakpoints) = anthropic_blocks(body);
        if system_only {
            breakpoints.retain(|&b| blocks[b].starts_with("system:"));
        }
        let keys = prefix_keys(&blocks);
        let hit = breakpoints
            .iter()
            .flat_map(|&bp| (bp.saturating_sub(20)..=bp).rev())
            .filter(|&p| cache.contains(&keys[p]))
            .max();
        total += size(&blocks, blocks.len().checked_sub(1));
        read += size(&blocks, hit);
        behind += size(&blocks, breakpoints.iter().max().copied());
        cache.extend(breakpoints.iter().map(|&bp| keys[bp]));
    }
    (read as f64 / total as f64, behind as f64 / total as f64)
}

fn openai_share(bodies: &[Value]) -> (f64, usize) {
    let mut cache: HashSet<u64> = HashSet::new();
    let (mut total, mut read) = (0usize, 0usize);
    let keys_seen: HashSet<String> = bodies.iter().map(|b| b["prompt_cache_key"].to_string()).collect();
    for body in bodies {
        let blocks = openai_blocks(body);
        let keys = prefix_keys(&blocks);
        let hit = (0..blocks.len()).rev().find(|&p| cache.contains(&keys[p]));
        total += size(&blocks, blocks.len().checked_sub(1));
        read += size(&blocks, hit);
        cache.extend(keys);
    }
    (read as f64 / total as f64, keys_seen.len())
}

fn main() {
    println!("prompt caching over a {TURNS}-turn tool-using session ({} model requests)", TURNS * 2);
    let bodies = session("anthropic");
    let (read, behind) = anthropic_share(&bodies, false);
    let (before, _) = anthropic_share(&bodies, true);
    report("anthropic: input behind a cache breakpoint", format!("{:.1} %", behind * 100.0), "—");
    report("anthropic: input served from the cache", format!("{:.1} %", read * 100.0), "≥ 90 %");
    report("  … with the system prompt as the only breakpoint", format!("{:.1} %", before * 100.0), "—");
    let most = bodies.iter().map(|b| anthropic_blocks(b).1.len()).max().unwrap();
    report("anthropic: breakpoints per request, at most", most.to_string(), "≤ 4");
    // What every uncached first turn pays: the system prompt and the tool schemas (counted in
    // tokens by tools/openlang-ratio from the file kept here; tests/bench/run prints it).
    let first = &bodies[0];
    let fixed = json!({"system": first["system"], "tools": first["tools"]});
    let tools = first["tools"].as_array().map_or(0, Vec::len);
    report(
        &format!("first request: system prompt + {tools} tool schemas"),
        format!("{} B", fixed.to_string().len()),
        "—",
    );
    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-first-request.json");
    std::fs::write(&kept, fixed.to_string()).unwrap();
    for api in ["openai-chat", "openai-responses"] {
        let bodies = session(api);
        let (read, keys) = openai_share(&bodies);
        report(
            &format!("{api}: input served from the cache (one key: {})", keys == 1),
            format!("{:.1} %", read * 100.0),
            "≥ 90 %",
        );
    }
}
