//! `acp gateway` benchmarks (run by `tests/bench/run`): start → listening, idle RSS, 1,000
//! concurrent authenticated WebSocket clients (handshakes per second, peak RSS), one run watched
//! by 100 clients (from the model's write of each delta to each client's receipt), and
//! `chat.send` → first delta beyond the model's own time. Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

mod gw;
#[path = "../support/mock_model.rs"]
mod mock_model;

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use mock_model::{Chunking, MockModel};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use gw::{connect, start};

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, note: &str) {
    println!("{name:<52} {value:>14}   ({note})");
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
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

fn bench_start_and_idle() {
    let mock = MockModel::start();
    let mut starts = Vec::new();
    let mut idle = 0;
    for i in 0..20 {
        let gw = start(&mock);
        starts.push(gw.started);
        if i == 0 {
            std::thread::sleep(Duration::from_secs(1));
            idle = kib(gw.child.id(), "VmRSS:");
        }
    }
    report(
        "start → listening",
        ms(percentile(starts, 0.5)),
        "target ≤ 50 ms; median of 20; OpenClaw 12.7–16.7 s to ready",
    );
    report("idle RSS", format!("{:.1} MiB", idle as f64 / 1024.0), "target ≤ 25 MB; OpenClaw ≈ 800 MB");
}

fn bench_many_clients(rt: &tokio::runtime::Runtime) {
    let mock = MockModel::start();
    let gw = start(&mock);
    let port = gw.port;
    const N: usize = 1000;
    let t = Instant::now();
    let sockets = rt.block_on(async {
        let tasks: Vec<_> = (0..N).map(|_| tokio::spawn(connect(port))).collect();
        let mut all = Vec::with_capacity(N);
        for t in tasks {
            all.push(t.await.unwrap());
        }
        all
    });
    let took = t.elapsed();
    let peak = kib(gw.child.id(), "VmHWM:");
    let now = kib(gw.child.id(), "VmRSS:");
    report(
        "1,000 clients connected and authenticated",
        ms(took),
        &format!("{:.0} handshakes/s", N as f64 / took.as_secs_f64()),
    );
    report(
        "  peak RSS of the gateway",
        format!("{:.1} MiB", peak as f64 / 1024.0),
        &format!("target ≤ 150 MB; now {:.1} MiB", now as f64 / 1024.0),
    );
    drop(sockets);
}

fn bench_fan_out(rt: &tokio::runtime::Runtime) {
    let mock = MockModel::start();
    let reply =
        mock_model::Reply::sse(anthropic_words(40)).chunking(Chunking::PerEvent).delay(Duration::from_millis(15));
    mock.push(reply);
    let gw = start(&mock);
    let port = gw.port;
    const WATCHERS: usize = 100;
    mock.push(mock_model::Reply::sse(anthropic_words(5)));
    mock.push(mock_model::Reply::sse(anthropic_words(5)));
    let (receipts, sent_at, warm, fresh) = rt.block_on(async {
        let mut watchers = Vec::new();
        for _ in 0..WATCHERS {
            watchers.push(connect(port).await);
        }
        let mut sender = watchers.pop().unwrap();
        let sent_at = Instant::now();
        let send = json!({"type": "req", "id": "s", "method": "chat.send",
            "params": {"sessionKey": "bench", "message": "go", "idempotencyKey": "b1"}});
        sender.send(Message::Text(send.to_string().into())).await.unwrap();
        watchers.push(sender);
        let tasks: Vec<_> = watchers
            .into_iter()
            .map(|mut ws| {
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Some(Ok(message)) = ws.next().await {
                        let Message::Text(text) = message else { continue };
                        let at = Instant::now();
                        let frame: Value = serde_json::from_str(&text).unwrap();
                        if frame["event"] == "chat" {
                            match frame["payload"]["state"].as_str() {
                                Some("delta") => {
                                    got.push((frame["payload"]["deltaText"].as_str().unwrap().to_owned(), at))
                                }
                                Some("final") => break,
                                _ => {}
                            }
                        }
                    }
                    got
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        // A second run on the same session, then the first run of another session: chat.send →
        // its first delta.
        let mut ws = connect(port).await;
        let mut timed = Vec::new();
        for (key, run) in [("bench", "b2"), ("bench-new", "b3")] {
            let sent = Instant::now();
            let send = json!({"type": "req", "id": run, "method": "chat.send",
                "params": {"sessionKey": key, "message": "again", "idempotencyKey": run}});
            ws.send(Message::Text(send.to_string().into())).await.unwrap();
            let mut first = None;
            while let Some(Ok(message)) = ws.next().await {
                let Message::Text(text) = message else { continue };
                let frame: Value = serde_json::from_str(&text).unwrap();
                let (state, of) = (&frame["payload"]["state"], &frame["payload"]["runId"]);
                if frame["event"] == "chat" && of == run && state == "delta" && first.is_none() {
                    first = Some(Instant::now());
                }
                if frame["event"] == "chat" && of == run && state == "final" {
                    break;
                }
            }
            timed.push((sent, first.unwrap()));
        }
        (all, sent_at, timed[0], timed[1])
    });
    let request = mock.wait_done(0);
    // The model's text pieces, in order, with when each was written.
    let text_pieces: Vec<Instant> = piece_texts(&request);
    let mut latencies = Vec::new();
    for got in &receipts {
        for (i, (_, at)) in got.iter().enumerate() {
            if let Some(written) = text_pieces.get(i) {
                latencies.push(at.saturating_duration_since(*written));
            }
        }
    }
    report(
        "delta: model write → each of 100 clients, p50",
        ms(percentile(latencies.clone(), 0.5)),
        &format!("{} receipts", latencies.len()),
    );
    report("delta: model write → each of 100 clients, p99", ms(percentile(latencies, 0.99)), "target ≤ 5 ms");
    // chat.send → first delta, beyond the model's own time to its first text.
    let first = receipts.iter().filter_map(|g| g.first().map(|(_, at)| *at)).min().unwrap();
    let model_first = *text_pieces.first().unwrap() - request.at;
    let total = first - sent_at;
    report("chat.send → first delta", ms(total), &format!("the model's own: {}", ms(model_first)));
    report(
        "  overhead beyond the model",
        ms(total.saturating_sub(model_first)),
        "target ≤ 5 ms; the process's first run",
    );
    let second = mock.wait_done(1);
    let model_first = second.piece_times[2] - second.at;
    let total = warm.1 - warm.0;
    report("chat.send → first delta, a later run", ms(total), &format!("the model's own: {}", ms(model_first)));
    report("  overhead beyond the model", ms(total.saturating_sub(model_first)), "target ≤ 5 ms");
    let third = mock.wait_done(2);
    let model_first = third.piece_times[2] - third.at;
    let total = fresh.1 - fresh.0;
    report("chat.send → first delta, a new session", ms(total), &format!("the model's own: {}", ms(model_first)));
    report("  overhead beyond the model", ms(total.saturating_sub(model_first)), "target ≤ 5 ms");
}

/// An Anthropic stream of `n` text deltas, one word each.
fn anthropic_words(n: usize) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut s = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_b", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    s.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
    ));
    for i in 0..n {
        s.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": format!("word{i} ")}}),
        ));
    }
    s.push_str(&event("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    s.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
        "stop_sequence": null}, "usage": {"output_tokens": n}}),
    ));
    s.push_str(&event("message_stop", json!({"type": "message_stop"})));
    s
}

/// When each text delta of an Anthropic reply was written (pieces are one SSE event each).
fn piece_texts(r: &mock_model::Recorded) -> Vec<Instant> {
    // Event order of a scripted text reply: message_start, content_block_start, the deltas,
    // content_block_stop, message_delta, message_stop.
    let n = r.piece_times.len();
    r.piece_times[2..n.saturating_sub(3)].to_vec()
}

fn main() {
    println!("acp gateway benchmarks ({})", env!("CARGO_BIN_EXE_acp"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let run = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    if run("start") {
        bench_start_and_idle();
    }
    if run("clients") {
        bench_many_clients(&rt);
    }
    if run("fanout") {
        bench_fan_out(&rt);
    }
}
