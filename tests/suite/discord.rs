//! The Discord channel on a real `acp gateway` against the Discord stand-in (Gateway v10 and REST)
//! and the mock model: the owner's direct messages get replies in chunks that ping no one; a
//! stranger gets a pairing code the owner approves; a server channel answers only when the bot is
//! addressed (a mention, a reply to it), in threads too; a permission question is answered in the
//! chat; a message delivered twice runs once; a dropped connection, a requested reconnect and a
//! restart each resume the session and lose or repeat nothing; heartbeats that go unanswered
//! are noticed; rate limits are kept and a 429 is waited out.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::discord::{ADA, BOB, BOT_ID, FakeDiscord, GENERAL, wait};
use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{asked, calls, text, words};

fn start(mock: &MockModel, home: tempfile::TempDir, config: &str) -> Gateway {
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    wait_state(&gw, "connected");
    gw
}

fn account(gw: &Gateway) -> Value {
    let mut admin = gw.client(&["operator.admin"]);
    admin.request("channels.status", json!({}))["payload"]["channelAccounts"]["discord"][0].clone()
}

fn wait_state(gw: &Gateway, state: &str) {
    wait(|| (account(gw)["state"] == state).then_some(()), &format!("the Discord channel to be {state}"));
}

#[test]
fn pairing_chunked_replies_servers_answered_when_addressed_threads_and_a_question_answered_in_the_chat() {
    let mock = MockModel::start();
    let discord = FakeDiscord::start();
    let gw =
        start(&mock, tempfile::tempdir().unwrap(), &discord.config("chunk_min_chars = 40\nchunk_max_chars = 120\n"));
    // Identified with the intents the channel needs, on the version and encoding asked for.
    assert_eq!(discord.intents(), 1 | (1 << 9) | (1 << 12) | (1 << 15));
    assert!(discord.urls()[0].ends_with("/?v=10&encoding=json"), "{:?}", discord.urls());

    // The owner writes: a long reply comes in chunks of at most 120 characters, every word in
    // order, none able to ping anyone.
    let reply = "First paragraph of a reply that is long enough to be cut into pieces.\n\n\
                 Second paragraph, which says more things, in more words, than fit in one message here.\n\n\
                 A third, shorter one with @everyone in it.";
    mock.push(text("anthropic", reply));
    discord.dm(ADA, "hello there");
    let ada_dm = discord.dm_channel_of(ADA);
    let sent = discord.wait_texts(&ada_dm, 3);
    assert!(sent.iter().all(|m| m.chars().count() <= 120), "{sent:?}");
    assert_eq!(words(&sent.join(" ")), words(reply));
    assert!(discord.sent().iter().all(|m| m["allowed_mentions"] == json!({"parse": []})), "{:?}", discord.sent());
    assert_eq!(asked(&mock), ["hello there"]);

    // A stranger is given a code; nothing reaches the model until the owner approves it.
    discord.dm(BOB, "hi, who are you?");
    let bob_dm = discord.dm_channel_of(BOB);
    let told = discord.wait_texts(&bob_dm, 1).remove(0);
    assert!(told.contains("I don't know you yet"), "{told}");
    let code = told.split("approve discord ").nth(1).unwrap()[..8].to_owned();
    assert_eq!(mock.requests().len(), 1);
    let (ok, out) = gw.cli(&["pairing", "approve", "discord", &code]);
    assert!(ok, "{out}");
    mock.push(text("anthropic", "Hello Bob."));
    discord.dm(BOB, "hi again");
    assert_eq!(discord.wait_texts(&bob_dm, 2)[1], "Hello Bob.");

    // A server channel: unaddressed messages are not answered; a mention is, in the channel,
    // without the mention in the words the model reads; so is a reply to the bot.
    discord.say(GENERAL, BOB, "just chatting among ourselves");
    mock.push(text("anthropic", "Here to help."));
    discord.say(GENERAL, BOB, &format!("<@{BOT_ID}> are you there?"));
    assert_eq!(discord.wait_texts(GENERAL, 1), ["Here to help."]);
    let bots =
        discord.sent().iter().find(|m| m["content"] == "Here to help.").unwrap()["id"].as_str().unwrap().to_owned();
    mock.push(text("anthropic", "Yes, still here."));
    discord.reply(GENERAL, BOB, &bots, "still?");
    assert_eq!(discord.wait_texts(GENERAL, 2)[1], "Yes, still here.");
    let all = asked(&mock);
    assert_eq!(all[2..], ["are you there?", "still?"], "{all:?}");

    // A thread: answered in the thread, its own session beside the channel's.
    let thread = discord.thread(GENERAL, "planning");
    mock.push(text("anthropic", "In the thread."));
    discord.say(&thread, ADA, &format!("<@{BOT_ID}> plan it"));
    assert_eq!(discord.wait_texts(&thread, 1), ["In the thread."]);
    let mut admin = gw.client(&["operator.admin"]);
    let keys: Vec<String> = admin.request("sessions.list", json!({}))["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert!(keys.iter().any(|k| k.contains(&format!("discord:group:{GENERAL}")) && k.contains(&thread)), "{keys:?}");
    assert!(keys.contains(&format!("agent:main:discord:group:{GENERAL}")), "{keys:?}");

    // A permission question in the owner's chat, answered there by number.
    let key = "agent:main:main";
    assert_eq!(admin.request("sessions.patch", json!({"key": key, "mode": "ask"}))["payload"]["ok"], true);
    mock.push(calls("anthropic", &[("w1", "write", json!({"path": "notes.txt", "content": "from discord"}))]));
    mock.push(text("anthropic", "Written."));
    discord.dm(ADA, "write the notes");
    // (The owner was told of Bob's pairing request in this chat too.)
    let n = discord.texts(&ada_dm).len();
    let question = discord.wait_texts(&ada_dm, n + 1).remove(n);
    assert!(question.starts_with("Permission needed: ") && question.contains("notes.txt"), "{question}");
    discord.dm(ADA, "1");
    assert_eq!(discord.wait_texts(&ada_dm, n + 3)[n + 1..], ["Allow once.", "Written."]);
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("notes.txt")).unwrap(), "from discord");

    // The status names the bot; `acp channels status` prints the account.
    let status = account(&gw);
    assert_eq!((status["user"].as_str(), status["dmPolicy"].as_str()), (Some("acp"), Some("pairing")), "{status}");
    let (ok, out) = gw.cli(&["channels", "status"]);
    assert!(ok && out.contains("discord: connected · dm policy pairing"), "{out}");
}

#[test]
fn redelivery_runs_once_and_drops_reconnects_and_restarts_resume_without_losing_or_repeating() {
    let mock = MockModel::start();
    let discord = FakeDiscord::start();
    let config = discord.config("");
    let gw = start(&mock, tempfile::tempdir().unwrap(), &config);
    let ada_dm = discord.dm_channel_of(ADA);
    let kept = gw.home.path().join("channels/discord.json");

    // The same message delivered twice runs once.
    mock.push(text("anthropic", "One."));
    let first = discord.dm(ADA, "first");
    assert_eq!(discord.wait_texts(&ada_dm, 1), ["One."]);
    discord.redeliver(&first);
    mock.push(text("anthropic", "Two."));
    discord.dm(ADA, "marker");
    assert_eq!(discord.wait_texts(&ada_dm, 2), ["One.", "Two."]);
    assert_eq!(asked(&mock), ["first", "marker"]);

    // The connection drops; two messages come meanwhile. The session is resumed at the resume
    // URL READY gave, and Discord's replay brings both, run once each.
    discord.drop_connection();
    discord.dm(ADA, "second");
    discord.dm(ADA, "third");
    mock.push(text("anthropic", "Later."));
    mock.push(text("anthropic", "Later."));
    wait(|| asked(&mock).join(" ").contains("third").then_some(()), "the messages sent while down");
    assert_eq!(discord.identifies(), 1, "resumed, not identified anew");
    assert_eq!(discord.resumes()[0].0, "session-1");
    assert!(discord.urls()[1].starts_with("localhost:"), "{:?}", discord.urls());
    // The server asks for a reconnect: resumed again.
    discord.ask_reconnect();
    wait(|| (discord.resumes().len() == 2 && discord.connected()).then_some(()), "a second resume");
    mock.push(text("anthropic", "Four."));
    discord.dm(ADA, "fourth");
    wait(|| discord.texts(&ada_dm).contains(&"Four.".to_owned()).then_some(()), "the fourth reply");
    let before_kill: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();

    // Killed, and restarted from a sequence number before "fourth" (as a crash before it was
    // kept would leave it); "fifth" comes while it is down. The restart resumes the session:
    // "fourth" is not run again, "fifth" is, once.
    let home = gw.kill();
    let mut stale = before_kill.clone();
    stale["seq"] = json!(before_kill["seq"].as_u64().unwrap() - 3);
    std::fs::write(&kept, stale.to_string()).unwrap();
    discord.dm(ADA, "fifth");
    mock.push(text("anthropic", "Five."));
    let gw = start(&mock, home, &config);
    wait(|| discord.texts(&ada_dm).contains(&"Five.".to_owned()).then_some(()), "the fifth reply");
    assert_eq!(discord.identifies(), 1);
    let all = asked(&mock).join("\n");
    for word in ["first", "second", "third", "fourth", "fifth"] {
        assert_eq!(all.matches(word).count(), 1, "{word} in {all}");
    }

    // A session Discord no longer knows: identified anew, and messages flow again.
    discord.forget_sessions();
    discord.drop_connection();
    wait(|| (discord.identifies() == 2 && discord.connected()).then_some(()), "a new session");
    mock.push(text("anthropic", "Six."));
    discord.dm(ADA, "sixth");
    wait(|| discord.texts(&ada_dm).contains(&"Six.".to_owned()).then_some(()), "the sixth reply");
    // Nothing more comes.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let all = asked(&mock).join("\n");
    assert_eq!(all.matches("sixth").count(), 1, "{all}");
    assert_eq!(discord.texts(&ada_dm).len(), 7, "{:?}", discord.texts(&ada_dm));
    drop(gw);
}

#[test]
fn unanswered_heartbeats_rate_limits_a_429_and_a_refused_token() {
    let mock = MockModel::start();
    let discord = FakeDiscord::start();
    discord.set_heartbeat_interval(1000);
    let gw =
        start(&mock, tempfile::tempdir().unwrap(), &discord.config("chunk_min_chars = 40\nchunk_max_chars = 100\n"));
    let ada_dm = discord.dm_channel_of(ADA);

    // Heartbeats carry the last sequence number; unanswered, the connection is given up and
    // the session resumed.
    wait(
        || (discord.heartbeats().last() == Some(&json!(discord.seq()))).then_some(()),
        "a heartbeat with the last sequence number",
    );
    discord.ack_heartbeats(false);
    wait(|| (!discord.resumes().is_empty()).then_some(()), "a resume after unanswered heartbeats");
    discord.ack_heartbeats(true);
    wait(|| discord.connected().then_some(()), "the resumed connection");

    // Two messages a second in this channel: a four-piece reply waits as the headers say and
    // is never refused; then a 429 is waited out, and the message is sent once.
    discord.set_bucket(2, std::time::Duration::from_millis(600));
    let reply = "One piece of a reply, long enough for its own message here.\n\n\
                 Two pieces of a reply, long enough for its own message too.\n\n\
                 Three pieces of a reply, long enough for its own message also.\n\n\
                 Four pieces of a reply, and that is the end of the reply.";
    mock.push(text("anthropic", reply));
    discord.dm(ADA, "long one");
    let sent = discord.wait_texts(&ada_dm, 4);
    assert_eq!(words(&sent.join(" ")), words(reply));
    assert_eq!(discord.rate_limited(), 0, "the bot went past the bucket the headers described");
    // A 429 asking for 1.5 s: the retry comes no sooner, and the message is sent once.
    discord.throttle_next(1.5);
    mock.push(text("anthropic", "After the wait."));
    discord.dm(ADA, "again");
    assert_eq!(discord.wait_texts(&ada_dm, 5)[4], "After the wait.");
    let waited = discord.sent_timed().last().unwrap().0 - discord.throttled_at()[0];
    assert!(waited >= std::time::Duration::from_millis(1500), "retried after {waited:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(discord.texts(&ada_dm).len(), 5);

    // Past the 2,000 characters a message may have (`send`, which no chunker cut): in pieces.
    let long: String = (0..700).map(|i| format!("w{i} ")).collect();
    let mut admin = gw.client(&["operator.admin"]);
    let sent =
        admin.request("send", json!({"channel": "discord", "to": GENERAL, "message": long, "idempotencyKey": "k1"}));
    assert_eq!(sent["ok"], true, "{sent}");
    let pieces = discord.wait_texts(GENERAL, 2);
    assert!(
        pieces.iter().all(|p| p.chars().count() <= 2000),
        "{:?}",
        pieces.iter().map(|p| p.len()).collect::<Vec<_>>()
    );
    assert_eq!(words(&pieces.join(" ")), words(&long));

    // An attachment comes from the CDN (here the stand-in); one pointing elsewhere is not fetched.
    mock.push(text("anthropic", "Read it."));
    discord.dm_file(ADA, "notes.txt", "text/plain", b"ATTACHED-CONTENT-42", "read this");
    discord.wait_texts(&ada_dm, 6);
    let elsewhere_hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hits = elsewhere_hits.clone();
    let elsewhere =
        crate::support::stub_http::serve(std::sync::Arc::new(move |_r: &crate::support::stub_http::Request| {
            hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            crate::support::stub_http::Response { status: 200, headers: Vec::new(), body: b"INTERNAL".to_vec() }
        }));
    mock.push(text("anthropic", "Not that one."));
    let url = format!("{elsewhere}/secret.txt");
    discord.dm_with(
        ADA,
        "and this",
        vec![json!({"id": "78", "filename": "secret.txt", "size": 8, "url": url, "content_type": "text/plain"})],
    );
    discord.wait_texts(&ada_dm, 7);
    let bodies: Vec<String> = mock.requests().iter().map(|r| r.body["messages"].to_string()).collect();
    assert!(bodies.iter().any(|b| b.contains("ATTACHED-CONTENT-42")), "the CDN file reached the model");
    let last = bodies.last().unwrap();
    assert!(last.contains("could not be fetched") && !last.contains("INTERNAL"), "{last}");
    assert_eq!(elsewhere_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    drop(gw);

    // A token Discord refuses: the channel says so and stops trying.
    let bad = discord.config("").replace("discord-test-token", "wrong-token");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), bad).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    wait(|| (account(&gw)["running"] == false).then_some(()), "the channel to stop");
    let status = account(&gw);
    assert!(status["lastError"].as_str().unwrap().contains("token"), "{status}");
}
