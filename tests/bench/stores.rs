//! Gateways on a shared PostgreSQL store against one on SQLite (run by `tests/bench/run`; a
//! private PostgreSQL server is started, as the tests do): what a turn costs the gateway with
//! each store, beyond the model (the same instant reply), and how long from `kill -9` of the
//! gateway holding a session to the next run of that session streaming on another gateway.
//! Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

mod gw;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/postgres.rs"]
mod postgres;

use std::time::{Duration, Instant};

use futures_util::SinkExt as _;
use mock_model::{MockModel, Reply};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use gw::{Ws, connect, next, start_in_with};

const TURNS: usize = 100;

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

/// An Anthropic reply of one short text, whole.
fn reply() -> Reply {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut s = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_b", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    s.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    s.push_str(&event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}),
    ));
    s.push_str(&event("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    s.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 2}}),
    ));
    s.push_str(&event("message_stop", json!({"type": "message_stop"})));
    Reply::sse(s)
}

/// Sends `chat.send`; the answer frame.
async fn send(ws: &mut Ws, key: &str, run: &str) -> Value {
    let frame = json!({"type": "req", "id": run, "method": "chat.send",
        "params": {"sessionKey": key, "message": "go", "idempotencyKey": run}});
    ws.send(Message::Text(frame.to_string().into())).await.unwrap();
    loop {
        let frame = next(ws).await;
        if frame["type"] == "res" && frame["id"] == run {
            return frame;
        }
    }
}

/// Waits for run `run`'s first delta (`first`) or its end.
async fn until(ws: &mut Ws, run: &str, first: bool) {
    loop {
        let frame = next(ws).await;
        let state = &frame["payload"]["state"];
        if frame["event"] == "chat" && frame["payload"]["runId"] == run && (first || state != "delta") {
            return;
        }
    }
}

/// `chat.send` → `final` of [`TURNS`] turns in one session, each with the same instant reply.
fn turns(mock: &MockModel, extra: &[&str]) -> Vec<Duration> {
    let home = tempfile::tempdir().unwrap();
    let gw = start_in_with(home, mock, extra);
    for _ in 0..=TURNS {
        mock.push(reply());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut ws = connect(gw.port).await;
        // The session's first turn (creating it) is left out.
        assert_eq!(send(&mut ws, "bench", "warm").await["ok"], true);
        until(&mut ws, "warm", false).await;
        let mut took = Vec::new();
        for i in 0..TURNS {
            let run = format!("t{i}");
            let t = Instant::now();
            assert_eq!(send(&mut ws, "bench", &run).await["ok"], true);
            until(&mut ws, &run, false).await;
            took.push(t.elapsed());
        }
        took
    })
}

/// From `kill -9` of the gateway holding a session to the first delta of that session's next
/// run on another gateway (which retries `chat.send` every 50 ms, as a client would).
fn failover(mock: &MockModel, url: &str) -> Duration {
    let extra = ["--store", url];
    let a = start_in_with(tempfile::tempdir().unwrap(), mock, &extra);
    let b = start_in_with(tempfile::tempdir().unwrap(), mock, &extra);
    mock.push(reply());
    mock.push(reply());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut on_a = connect(a.port).await;
        assert_eq!(send(&mut on_a, "moving", "f1").await["ok"], true);
        until(&mut on_a, "f1", false).await;
        let mut on_b = connect(b.port).await;
        let mut a = a;
        let killed = Instant::now();
        let _ = a.child.kill();
        let _ = a.child.wait();
        let mut tries = 0;
        loop {
            tries += 1;
            if send(&mut on_b, "moving", &format!("f2-{tries}")).await["ok"] == true {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        until(&mut on_b, &format!("f2-{tries}"), true).await;
        killed.elapsed()
    })
}

fn main() {
    let pg = postgres::Postgres::start();
    let mock = MockModel::start();
    let sqlite = turns(&mock, &[]);
    let url = pg.create_db("bench");
    let shared = turns(&mock, &["--store", &url]);
    let (s50, p50) = (percentile(sqlite.clone(), 0.5), percentile(shared.clone(), 0.5));
    report(
        "a turn, SQLite store (chat.send → final)",
        ms(s50),
        &format!("median of {TURNS}; p90 {}", ms(percentile(sqlite, 0.9))),
    );
    report("a turn, PostgreSQL store", ms(p50), &format!("median of {TURNS}; p90 {}", ms(percentile(shared, 0.9))));
    report("  PostgreSQL beyond SQLite", ms(p50.saturating_sub(s50)), "target ≤ 3 ms");
    let url = pg.create_db("failover");
    let took = failover(&mock, &url);
    report("kill -9 → next run streaming on another gateway", ms(took), "target ≤ lease (15 s) + 1 s");
}
