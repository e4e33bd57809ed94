//! Channel benchmarks (run by `tests/bench/run`), against the stand-ins of the tests (Telegram's
//! Bot API, Discord's Gateway and REST API, Slack's Socket Mode and Web API), a real Synapse, and
//! the mock model: inbound message → first outbound message, beyond the model's own time to its
//! first text, on each channel; and 1,000 inbound messages from 100 peers taken in through dedupe,
//! admission and routing, every one reaching the model; and routing a message among 10,000
//! bindings (`[[bindings]]`), per lookup. Figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/discord.rs"]
mod discord;
mod gw;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/slack.rs"]
mod slack;
mod stream;
#[path = "../support/stub_http.rs"]
mod stub_http;
#[path = "../support/synapse.rs"]
mod synapse;
#[path = "../support/telegram.rs"]
mod telegram;

use std::time::{Duration, Instant};

use mock_model::{Chunking, MockModel, Reply};

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn report(name: &str, value: String, note: &str) {
    println!("{name:<58} {value:>12}   ({note})");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn config(fake: &telegram::FakeTelegram, more: &str) -> String {
    format!(
        "[channels.telegram]\nbot_token = \"1:B\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\nchunk_min_chars = 1\n{more}",
        fake.base
    )
}

/// Routing among 10,000 bindings: peers, guilds, teams, accounts and channels on four channels.
fn routing() {
    use acp_gateway::gateway::channels::routing::{Binding, Bindings, Envelope, PeerKind, Routing};
    let channels = ["telegram", "discord", "slack", "matrix"];
    let mut list = Vec::new();
    for i in 0..10_000usize {
        let channel = channels[i % 4];
        let mut b = Binding { agent: format!("agent{}", i % 50), channel: Some(channel.into()), ..Binding::default() };
        match i % 10 {
            0..=6 => b.peer = Some(format!("peer{i}")),
            7 => b.guild = Some(format!("guild{i}")),
            8 => b.team = Some(format!("team{i}")),
            _ => b.account = Some(format!("account{i}")),
        }
        list.push(b);
    }
    let routing = Routing { bindings: Bindings::new(list), default_agent: Some("main".into()), ..Routing::default() };
    let envelope = |channel: &str, peer: String, guild: Option<String>| Envelope {
        channel: channel.into(),
        account: "default".into(),
        peer: peer.clone(),
        kind: PeerKind::Direct,
        sender: peer,
        sender_name: String::new(),
        message_id: "1".into(),
        text: String::new(),
        attachments: Vec::new(),
        reply_to: None,
        thread: None,
        mentioned: true,
        guild,
        team: None,
    };
    // A peer that has a binding, one in a bound guild, and one that matches nothing.
    let cases = [
        ("a bound peer", envelope("telegram", "peer4000".into(), None)),
        ("a peer in a bound guild", envelope("discord", "nobody".into(), Some("guild9997".into()))),
        ("a message no binding matches", envelope("matrix", "nobody".into(), Some("g".into()))),
    ];
    for (name, env) in &cases {
        let mut times = Vec::new();
        let mut agent = String::new();
        for _ in 0..21 {
            let t = Instant::now();
            for _ in 0..10_000 {
                agent = std::hint::black_box(routing.agent_for(std::hint::black_box(env))).to_owned();
            }
            times.push(t.elapsed() / 10_000);
        }
        report(
            &format!("routing among 10,000 bindings: {name}"),
            format!("{:.2} µs", median(times).as_secs_f64() * 1e6),
            &format!("→ {agent}; target ≤ 10 µs"),
        );
    }
}

/// A TCP relay between the gateway and the homeserver that notes when each piece passes, each
/// way (`true`: from the homeserver), so acp's own part of a round can be told from Synapse's.
struct Relay {
    addr: std::net::SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Piece>>>,
}

/// A piece of a connection: when it passed, whether from the homeserver, its bytes.
type Piece = (Instant, bool, Vec<u8>);

impl Relay {
    fn start(upstream: &str) -> Self {
        use std::io::{Read as _, Write as _};
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(&upstream) else { continue };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                for (mut from, mut to, down) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap(), false), (server, client, true)]
                {
                    let log = log.clone();
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 1 << 16];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            log.lock().unwrap().push((Instant::now(), down, buf[..n].to_vec()));
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Self { addr, seen }
    }

    /// When a piece going `down` (or up) that contains `needle` first passed, after `after`.
    fn first(&self, down: bool, needle: &str, after: Instant) -> Option<Instant> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .find(|(at, d, bytes)| *at >= after && *d == down && String::from_utf8_lossy(bytes).contains(needle))
            .map(|(at, _, _)| *at)
    }
}

/// Matrix, on a real Synapse: a message → the bot's first message seen by the sender's own
/// `/sync`, beyond the model's time to its first text (the homeserver's two hops included); and
/// acp's own part: from the sync that brings the message to acp sending its first piece.
fn matrix() {
    let synapse = synapse::Synapse::start();
    let (bot, ada) = (synapse.register("acp"), synapse.register("ada"));
    let mock = MockModel::start();
    let relay = Relay::start(&synapse.base);
    let config = format!(
        "[channels.matrix]\nhomeserver = \"http://{}\"\naccess_token = \"{}\"\nallow_from = [\"{}\"]\nchunk_min_chars = 1\n",
        relay.addr, bot.token, ada.id
    );
    let _gateway = gw::start_with(&mock, &config);
    let dm = ada.dm(&bot.id);
    ada.wait_joined(&dm, &bot.id);
    // The channel's first sync is history; one message through makes sure it is live.
    mock.push(Reply::sse(stream::deltas(1)).chunking(Chunking::Whole));
    ada.say(&dm, "warm up");
    ada.wait_texts(&dm, &bot.id, 1);
    let mut since = ada.sync(None, 0)["next_batch"].as_str().unwrap().to_owned();
    let (mut overhead, mut total, mut own) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..20 {
        mock.push(Reply::sse(stream::deltas(20)).chunking(Chunking::PerEvent));
        let sent_at = Instant::now();
        ada.say(&dm, &format!("go {i}"));
        // The sender's own client sees the bot's first message.
        let first_out = loop {
            let batch = ada.sync(Some(&since), 10_000);
            since = batch["next_batch"].as_str().unwrap().to_owned();
            let from_bot = batch["rooms"]["join"][dm.as_str()]["timeline"]["events"].as_array().is_some_and(|events| {
                events.iter().any(|e| e["sender"] == bot.id.as_str() && e["type"] == "m.room.message")
            });
            if from_bot {
                break Instant::now();
            }
        };
        let r = mock.wait_done(i + 1);
        let first_piece = r.piece_times[2];
        total.push(first_out - sent_at);
        overhead.push((first_out - sent_at).saturating_sub(first_piece - r.at));
        // acp's part: the sync carrying "go {i}" reaching it → its first send leaving it.
        if let Some(came) = relay.first(true, &format!("\"go {i}\""), sent_at)
            && let Some(left) = relay.first(false, "/send/m.room.message/", came)
        {
            own.push((left - came).saturating_sub(first_piece - r.at));
        }
        // Let the rest of the reply go out before the next message.
        let n = 2 + i;
        while ada.events_from(&dm, &bot.id).len() < n || mock.requests()[i + 1].finished_at.is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(1200));
        since = ada.sync(Some(&since), 0)["next_batch"].as_str().unwrap().to_owned();
    }
    report("Matrix: message → the bot's first message at the sender", ms(median(total)), "median of 20, real Synapse");
    report("  beyond the model's own time to its first text", ms(median(overhead)), "Synapse's two hops included");
    let seen = own.len();
    report(
        "  acp's own part: the message's sync in → first send out",
        ms(median(own)),
        &format!("beyond the model; target ≤ 20 ms; {seen} of 20 rounds seen"),
    );
}

/// Inbound → first outbound on a channel whose stand-in records when each message arrived:
/// `send` delivers message `i`, `sent` gives the arrival times so far. Median of 20: total, and
/// beyond the model's own time to its first text.
fn first_out(mock: &MockModel, send: impl Fn(usize), sent: impl Fn() -> Vec<Instant>) -> (Duration, Duration) {
    let mut overhead = Vec::new();
    let mut total = Vec::new();
    for i in 0..20 {
        let before = sent().len();
        mock.push(Reply::sse(stream::deltas(20)).chunking(Chunking::PerEvent));
        let sent_at = Instant::now();
        send(i);
        let r = mock.wait_done(i);
        let first_piece = r.piece_times[2];
        let deadline = Instant::now() + Duration::from_secs(20);
        let first_out = loop {
            if let Some(at) = sent().get(before) {
                break *at;
            }
            assert!(Instant::now() < deadline, "no reply");
            std::thread::sleep(Duration::from_micros(200));
        };
        // Let the rest of the reply go out before the next message.
        std::thread::sleep(Duration::from_millis(150));
        total.push(first_out - sent_at);
        overhead.push((first_out - sent_at).saturating_sub(first_piece - r.at));
    }
    (median(total), median(overhead))
}

fn discord() {
    let mock = MockModel::start();
    let fake = discord::FakeDiscord::start();
    let _gateway = gw::start_with(&mock, &fake.config("chunk_min_chars = 1\n"));
    fake.wait_connected();
    let dm = fake.dm_channel_of(discord::ADA);
    let sent =
        || fake.sent_timed().into_iter().filter(|(_, m)| m["channel_id"] == dm.as_str()).map(|(at, _)| at).collect();
    let (total, overhead) = first_out(&mock, |i| drop(fake.dm(discord::ADA, &format!("go {i}"))), sent);
    report("Discord: inbound (Gateway) → first outbound (REST)", ms(total), "median of 20, stand-in");
    report("  beyond the model's own time to its first text", ms(overhead), "target ≤ 20 ms");
}

fn slack() {
    let mock = MockModel::start();
    let fake = slack::FakeSlack::start();
    let _gateway = gw::start_with(&mock, &fake.config("chunk_min_chars = 1\n"));
    discord::wait(|| fake.connected().then_some(()), "the Slack channel to connect");
    let dm = slack::FakeSlack::dm_channel(slack::ADA);
    let sent =
        || fake.sent_timed().into_iter().filter(|(_, m)| m["channel"] == dm.as_str()).map(|(at, _)| at).collect();
    let (total, overhead) = first_out(&mock, |i| drop(fake.dm(slack::ADA, &format!("go {i}"))), sent);
    report("Slack: inbound (Socket Mode) → first outbound (Web API)", ms(total), "median of 20, stand-in");
    report("  beyond the model's own time to its first text", ms(overhead), "target ≤ 20 ms");
}

fn main() {
    routing();
    discord();
    slack();
    matrix();
    let mock = MockModel::start();
    let fake = telegram::FakeTelegram::start();
    let _gateway = gw::start_with(&mock, &config(&fake, ""));
    println!("Telegram channel benchmarks ({})", env!("CARGO_BIN_EXE_acp"));

    // Inbound → first outbound chunk, beyond the model's first text.
    let mut overhead = Vec::new();
    let mut total = Vec::new();
    for i in 0..20 {
        let before = fake.sent().len();
        mock.push(Reply::sse(stream::deltas(20)).chunking(Chunking::PerEvent));
        let sent_at = Instant::now();
        fake.message(500, "private", 500, &format!("go {i}"));
        let r = mock.wait_done(i);
        let first_piece = r.piece_times[2];
        let deadline = Instant::now() + Duration::from_secs(20);
        let first_out = loop {
            if let Some((at, _)) = fake.sent_timed().get(before) {
                break *at;
            }
            assert!(Instant::now() < deadline, "no reply");
            std::thread::sleep(Duration::from_micros(200));
        };
        // Let the rest of the reply go out before the next message.
        while fake.sent().len() < before + 1 || mock.requests().len() < i + 1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        total.push(first_out - sent_at);
        overhead.push((first_out - sent_at).saturating_sub(first_piece - r.at));
    }
    report("inbound → first outbound message", ms(median(total)), "median of 20");
    report("  beyond the model's own time to its first text", ms(median(overhead)), "target ≤ 20 ms");

    // 1,000 messages from 100 peers, as fast as they come. The queue's quiet time before collected
    // messages run (`debounce_ms`, 1 s by default) is a deliberate wait, set to 0 here so the
    // figure is the intake's own.
    let fake2 = telegram::FakeTelegram::start();
    let mock2 = MockModel::start();
    for _ in 0..1000 {
        mock2.push(Reply::sse(stream::deltas(1)).chunking(Chunking::Whole));
    }
    let _g2 = gw::start_with(
        &mock2,
        &config(&fake2, "[session]\ndm_scope = \"per-peer\"\n[messages.queue]\ndebounce_ms = 0\n"),
    );
    let t = Instant::now();
    for i in 0..1000 {
        let peer = 10_000 + i64::from(i % 100);
        fake2.message(peer, "private", peer, &format!("message-{i}"));
    }
    // Every message reaches the model (alone, or collected with others of its peer).
    let deadline = Instant::now() + Duration::from_secs(120);
    let seen = loop {
        let bodies: String = mock2.requests().iter().map(|r| r.body.to_string()).collect();
        let seen = (0..1000)
            .filter(|i| bodies.contains(&format!("message-{i}\\n")) || bodies.contains(&format!("message-{i}\"")))
            .count();
        if seen == 1000 || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t.elapsed();
    report(
        "1,000 messages from 100 peers → all at the model",
        ms(took),
        &format!(
            "{seen}/1000 arrived; {:.0} messages/s; {} model requests",
            1000.0 / took.as_secs_f64(),
            mock2.requests().len()
        ),
    );
}
