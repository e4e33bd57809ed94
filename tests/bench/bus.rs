//! Three gateways on one PostgreSQL store and one NATS bus (run by `tests/bench/run`; private
//! PostgreSQL and NATS servers are started, as the tests do), beside one gateway alone: one run
//! watched by 100 clients spread over the three (from the model's write of each delta to each
//! client's receipt), 1,000 runs at once across the three, and `kill -9` of the gateway holding
//! a session mid-run to the next run of it streaming on another (asked there at once: the bus
//! makes it wait for the lease, no retries) and to the cut run's end reaching a client of a third
//! that watched it. Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

mod gw;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/nats.rs"]
mod nats;
#[path = "../support/postgres.rs"]
mod postgres;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use mock_model::{Chunking, MockModel, Reply};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use gw::{Gw, Ws, connect, next, start_in_with};

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, note: &str) {
    println!("{name:<56} {value:>14}   ({note})");
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// An Anthropic stream of `n` text deltas, one word each.
fn words(n: usize) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut s = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_b", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    s.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for i in 0..n {
        s.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("word{i} ")}}),
        ));
    }
    s.push_str(&event("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    s.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": n}}),
    ));
    s.push_str(&event("message_stop", json!({"type": "message_stop"})));
    s
}

/// A gateway with `config`, on `store` and `bus` when given.
fn gateway(mock: &MockModel, config: &str, store: Option<&str>, bus: Option<&str>) -> Gw {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut extra = Vec::new();
    if let Some(store) = store {
        extra.extend(["--store", store]);
    }
    if let Some(bus) = bus {
        extra.extend(["--bus", bus]);
    }
    start_in_with(home, mock, &extra)
}

async fn send(ws: &mut Ws, key: &str, run: &str) {
    let frame = json!({"type": "req", "id": run, "method": "chat.send",
        "params": {"sessionKey": key, "message": "go", "idempotencyKey": run}});
    ws.send(Message::Text(frame.to_string().into())).await.unwrap();
}

/// One run of 40 words, 15 ms apart, watched by 100 clients spread over the gateways on `ports`
/// (the first sends it): from the model's write of each delta to its receipt by each client,
/// per gateway.
fn fan_out(mock: &MockModel, ports: &[u16], run: &str) -> Vec<Vec<Duration>> {
    mock.push(Reply::sse(words(40)).chunking(Chunking::PerEvent).delay(Duration::from_millis(15)));
    let before = mock.requests().len();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let receipts: Vec<(usize, Vec<Instant>)> = rt.block_on(async {
        let mut watchers = Vec::new();
        for i in 0..100 {
            let at = i % ports.len();
            watchers.push((at, connect(ports[at]).await));
        }
        // The others take the bus's events once someone is connected to them.
        tokio::time::sleep(Duration::from_millis(300)).await;
        send(&mut watchers[0].1, "fan", run).await;
        let tasks: Vec<_> = watchers
            .into_iter()
            .map(|(at, mut ws)| {
                let run = run.to_owned();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Some(Ok(message)) = ws.next().await {
                        let Message::Text(text) = message else { continue };
                        let when = Instant::now();
                        let frame: Value = serde_json::from_str(&text).unwrap();
                        if frame["event"] == "chat" && frame["payload"]["runId"] == run.as_str() {
                            match frame["payload"]["state"].as_str() {
                                Some("delta") => got.push(when),
                                _ => break,
                            }
                        }
                    }
                    (at, got)
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        all
    });
    let request = mock.wait_done(before);
    let n = request.piece_times.len();
    let written = &request.piece_times[2..n.saturating_sub(3)];
    let mut by_gateway = vec![Vec::new(); ports.len()];
    for (at, got) in receipts {
        for (i, when) in got.iter().enumerate() {
            if let Some(w) = written.get(i) {
                by_gateway[at].push(when.saturating_duration_since(*w));
            }
        }
    }
    by_gateway
}

/// `RUNS` runs at once, each of its own session, sent to the gateways on `ports` in turn over
/// ten connections each: (wall time from the first send to the last end, each run's send → end).
fn many_runs(mock: &MockModel, ports: &[u16]) -> (Duration, Vec<Duration>) {
    const RUNS: usize = 1000;
    const PER_GATEWAY: usize = 10;
    for _ in 0..RUNS {
        mock.push(Reply::sse(words(3)));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let mut conns = Vec::new();
        for port in ports {
            for _ in 0..PER_GATEWAY {
                conns.push(connect(*port).await);
            }
        }
        let mut runs: Vec<Vec<String>> = vec![Vec::new(); conns.len()];
        for i in 0..RUNS {
            // Gateway i % 3, one of its connections.
            let g = i % ports.len();
            let c = g * PER_GATEWAY + (i / ports.len()) % PER_GATEWAY;
            runs[c].push(format!("many-{i}"));
        }
        let started = Instant::now();
        let tasks: Vec<_> = conns
            .into_iter()
            .zip(runs)
            .map(|(mut ws, mine)| {
                tokio::spawn(async move {
                    let mut sent = HashMap::new();
                    for run in &mine {
                        sent.insert(run.clone(), Instant::now());
                        send(&mut ws, run, run).await;
                    }
                    let mut took = Vec::new();
                    while !sent.is_empty() {
                        let frame = next(&mut ws).await;
                        if frame["type"] == "res" && frame["ok"] == false {
                            panic!("refused: {frame}");
                        }
                        let run = frame["payload"]["runId"].as_str().unwrap_or_default();
                        if frame["event"] == "chat"
                            && frame["payload"]["state"] != "delta"
                            && let Some(at) = sent.remove(run)
                        {
                            assert_eq!(frame["payload"]["state"], "final", "{frame}");
                            took.push(at.elapsed());
                        }
                    }
                    took
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        (started.elapsed(), all)
    })
}

/// An Anthropic reply that streams a word every 20 ms and never ends (a run cut by a kill).
fn endless() -> Reply {
    let whole = words(1);
    let opening = whole.split("event: content_block_delta").next().unwrap().to_owned();
    let word = format!(
        "event: content_block_delta\ndata: {}\n\n",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "on "}})
    );
    Reply::sse(opening).forever(word).delay(Duration::from_millis(20))
}

/// `kill -9` of the gateway holding a session mid-run: the time to the first event of that
/// session's next run, asked of another gateway at once, and to the cut run's end reaching a
/// client of a third gateway that watched it.
fn failover(mock: &MockModel, store: &str, bus: &str) -> (Duration, Duration) {
    let a = gateway(mock, "", Some(store), Some(bus));
    let b = gateway(mock, "", Some(store), Some(bus));
    let c = gateway(mock, "", Some(store), Some(bus));
    mock.push(endless());
    mock.push(Reply::sse(words(2)));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut on_a = connect(a.port).await;
        let mut on_b = connect(b.port).await;
        let mut on_c = connect(c.port).await;
        send(&mut on_a, "moving", "f1").await;
        loop {
            let frame = next(&mut on_c).await;
            if frame["event"] == "chat" && frame["payload"]["runId"] == "f1" {
                break;
            }
        }
        let mut a = a;
        let killed = Instant::now();
        let _ = a.child.kill();
        let _ = a.child.wait();
        drop(on_a);
        send(&mut on_b, "moving", "f2").await;
        let next_run = async {
            loop {
                let frame = next(&mut on_b).await;
                assert!(frame["ok"] != false, "{frame}");
                if frame["event"] == "chat" && frame["payload"]["runId"] == "f2" {
                    return killed.elapsed();
                }
            }
        };
        let cut_end = async {
            loop {
                let frame = next(&mut on_c).await;
                if frame["event"] == "chat" && frame["payload"]["runId"] == "f1" && frame["payload"]["state"] != "delta"
                {
                    assert_eq!(frame["payload"]["state"], "error", "{frame}");
                    return killed.elapsed();
                }
            }
        };
        tokio::join!(next_run, cut_end)
    })
}

fn main() {
    let pg = postgres::Postgres::start();
    let nats = nats::Nats::start();
    let mock = MockModel::start();
    let config = "[gateway]\nmax_concurrent_runs = 400\nmax_open_sessions = 1200\n";

    // One gateway alone (SQLite, no bus).
    let alone = gateway(&mock, config, None, None);
    let single: Vec<Duration> = fan_out(&mock, &[alone.port], "alone").concat();
    let (single_wall, single_runs) = many_runs(&mock, &[alone.port]);
    drop(alone);
    // One gateway on PostgreSQL, no bus: what the store costs, apart from the bus.
    let store = pg.create_db("alone");
    let alone = gateway(&mock, config, Some(&store), None);
    let (pg_wall, pg_runs) = many_runs(&mock, &[alone.port]);
    drop(alone);

    let store = pg.create_db("bench");
    let three: Vec<Gw> = (0..3).map(|_| gateway(&mock, config, Some(&store), Some(&nats.url()))).collect();
    let ports: Vec<u16> = three.iter().map(|g| g.port).collect();
    let spread = fan_out(&mock, &ports, "spread");
    let local = spread[0].clone();
    let remote: Vec<Duration> = spread[1..].concat();
    let all = spread.concat();
    let (p99_single, p99_all) = (percentile(single.clone(), 0.99), percentile(all.clone(), 0.99));
    report("one run → 100 clients on one gateway, p50", ms(percentile(single, 0.5)), "single host, SQLite");
    report("  p99", ms(p99_single), "single host");
    report("one run → 100 clients over 3 gateways, p50", ms(percentile(all, 0.5)), "PostgreSQL + NATS");
    report(
        "  p99",
        ms(p99_all),
        &format!("{} above single host; target ≤ 2 ms above", ms(p99_all.saturating_sub(p99_single))),
    );
    report("  p99 on the gateway running it", ms(percentile(local, 0.99)), "34 clients");
    report("  p99 on the other two (through NATS)", ms(percentile(remote, 0.99)), "66 clients");

    let (wall, runs) = many_runs(&mock, &ports);
    report(
        "1,000 runs at once over 3 gateways: all ended",
        ms(wall),
        &format!(
            "{:.0} runs/s; one gateway alone: {} ({:.0} runs/s)",
            1000.0 / wall.as_secs_f64(),
            ms(single_wall),
            1000.0 / single_wall.as_secs_f64()
        ),
    );
    report(
        "  chat.send → final, p50",
        ms(percentile(runs.clone(), 0.5)),
        &format!("one gateway alone: {}", ms(percentile(single_runs.clone(), 0.5))),
    );
    report(
        "  chat.send → final, p99",
        ms(percentile(runs, 0.99)),
        &format!("one gateway alone: {}", ms(percentile(single_runs, 0.99))),
    );
    report(
        "1,000 runs at once, one gateway on PostgreSQL: all ended",
        ms(pg_wall),
        &format!(
            "{:.0} runs/s; p50 {}, p99 {}",
            1000.0 / pg_wall.as_secs_f64(),
            ms(percentile(pg_runs.clone(), 0.5)),
            ms(percentile(pg_runs, 0.99))
        ),
    );
    drop(three);

    let store = pg.create_db("failover");
    let (took, told) = failover(&mock, &store, &nats.url());
    report(
        "kill -9 mid-run → next run streaming on another gateway (bus)",
        ms(took),
        "target ≤ lease (15 s) + 1 s; asked once",
    );
    report("kill -9 mid-run → its watchers elsewhere told it was cut", ms(told), "from the store; lease 15 s");
}
