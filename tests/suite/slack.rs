//! The Slack channel on a real `acp gateway` against the Slack stand-in (Socket Mode and the Web
//! API) and the mock model: the owner's direct messages get replies in chunks, in mrkdwn; a
//! stranger gets a pairing code the owner approves; a channel answers only when the app is
//! addressed (a mention — one run for its `message` and `app_mention` events — or a message in a
//! thread it is in), in the thread; a permission question is answered in the chat; an envelope
//! sent again runs once, also after a restart; a dropped connection and a `disconnect` get a new
//! connection that loses nothing; a 429 is waited out; refused tokens and `link_disabled` stop
//! the channel with the reason in its status.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::discord::wait;
use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{asked, calls, text, words};
use crate::support::slack::{ADA, BOB, BOT_USER, FakeSlack, GENERAL, TEAM};

fn start(mock: &MockModel, home: tempfile::TempDir, config: &str) -> Gateway {
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while account(&gw)["state"] != "connected" {
        assert!(
            std::time::Instant::now() < deadline,
            "the Slack channel did not connect: {}\n{}",
            account(&gw),
            gw.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    gw
}

fn account(gw: &Gateway) -> Value {
    let mut admin = gw.client(&["operator.admin"]);
    admin.request("channels.status", json!({}))["payload"]["channelAccounts"]["slack"][0].clone()
}

#[test]
fn pairing_chunked_mrkdwn_replies_channels_answered_when_addressed_threads_and_a_question_answered_in_the_chat() {
    let mock = MockModel::start();
    let slack = FakeSlack::start();
    let gw = start(&mock, tempfile::tempdir().unwrap(), &slack.config("chunk_min_chars = 40\nchunk_max_chars = 120\n"));
    let ada_dm = FakeSlack::dm_channel(ADA);

    // The owner writes: a long reply comes in chunks of at most 120 characters, in mrkdwn, every
    // word in order; nothing in it can become a mention.
    let reply = "First paragraph of a **reply** that is long enough to be cut into pieces.\n\n\
                 Second paragraph, which says more things, in more words, than fit in one message here.\n\n\
                 A third one, telling <!channel> & friends.";
    mock.push(text("anthropic", reply));
    slack.dm(ADA, "hello there");
    let sent = slack.wait_texts(&ada_dm, 3);
    assert!(sent.iter().all(|m| m.chars().count() <= 120), "{sent:?}");
    assert!(sent[0].contains("*reply*") && !sent[0].contains("**"), "{sent:?}");
    assert!(sent[2].contains("&lt;!channel&gt; &amp; friends"), "{sent:?}");
    assert_eq!(words(&sent.join(" ").replace("*reply*", "**reply**")).len(), words(reply).len());
    assert_eq!(asked(&mock), ["hello there"]);

    // A stranger is given a code; nothing reaches the model until the owner approves it.
    let bob_dm = FakeSlack::dm_channel(BOB);
    slack.dm(BOB, "hi, who are you?");
    let told = slack.wait_texts(&bob_dm, 1).remove(0);
    assert!(told.contains("I don't know you yet"), "{told}");
    let code = told.split("approve slack ").nth(1).unwrap()[..8].to_owned();
    assert_eq!(mock.requests().len(), 1);
    let (ok, out) = gw.cli(&["pairing", "approve", "slack", &code]);
    assert!(ok, "{out}");
    mock.push(text("anthropic", "Hello Bob."));
    slack.dm(BOB, "hi again");
    assert_eq!(slack.wait_texts(&bob_dm, 2)[1], "Hello Bob.");

    // A channel: unaddressed messages are not answered; a mention is, once (Slack sends it as
    // both `message` and `app_mention`), where it was said.
    slack.say(GENERAL, BOB, "just chatting among ourselves", None);
    mock.push(text("anthropic", "Here to help."));
    let asking = slack.say(GENERAL, BOB, &format!("<@{BOT_USER}> are you there?"), None);
    assert_eq!(slack.wait_texts(GENERAL, 1), ["Here to help."]);
    // In a thread: the first message mentions the app; the next one in it needs no mention.
    mock.push(text("anthropic", "In the thread."));
    slack.say(GENERAL, BOB, &format!("<@{BOT_USER}> and here?"), Some(&asking));
    wait(|| (slack.texts(GENERAL).len() == 2).then_some(()), "the thread's reply");
    let in_thread = slack.sent().last().unwrap().clone();
    assert_eq!(
        (in_thread["text"].as_str(), in_thread["thread_ts"].as_str()),
        (Some("In the thread."), Some(asking.as_str()))
    );
    mock.push(text("anthropic", "Still in the thread."));
    slack.say(GENERAL, BOB, "and one more", Some(&asking));
    assert_eq!(slack.wait_texts(GENERAL, 3)[2], "Still in the thread.");
    let all = asked(&mock);
    assert_eq!(all[2..], ["are you there?", "and here?", "and one more"], "{all:?}");
    // The channel has its session, the thread one of its own.
    let mut admin = gw.client(&["operator.admin"]);
    let keys: Vec<String> = admin.request("sessions.list", json!({}))["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert!(keys.contains(&format!("agent:main:slack:group:{GENERAL}")), "{keys:?}");
    assert!(keys.iter().any(|k| k.contains(&asking.replace('.', "_")) || k.contains(&asking)), "{keys:?}");

    // A permission question in the owner's chat, answered there by number.
    assert_eq!(
        admin.request("sessions.patch", json!({"key": "agent:main:main", "mode": "ask"}))["payload"]["ok"],
        true
    );
    mock.push(calls("anthropic", &[("w1", "write", json!({"path": "notes.txt", "content": "from slack"}))]));
    mock.push(text("anthropic", "Written."));
    let n = slack.texts(&ada_dm).len();
    slack.dm(ADA, "write the notes");
    let question = slack.wait_texts(&ada_dm, n + 1).remove(n);
    assert!(question.starts_with("Permission needed: ") && question.contains("notes.txt"), "{question}");
    slack.dm(ADA, "1");
    assert_eq!(slack.wait_texts(&ada_dm, n + 3)[n + 1..], ["Allow once.", "Written."]);
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("notes.txt")).unwrap(), "from slack");

    // Every envelope was acknowledged; the status names the app and its workspace.
    wait(|| (slack.unacked() == 0).then_some(()), "every envelope acknowledged");
    let status = account(&gw);
    assert_eq!((status["user"].as_str(), status["team"].as_str()), (Some("acp"), Some(TEAM)), "{status}");
    let (ok, out) = gw.cli(&["channels", "status"]);
    assert!(ok && out.contains("slack: connected · dm policy pairing"), "{out}");
}

#[test]
fn envelopes_sent_again_run_once_and_drops_disconnects_and_restarts_lose_nothing() {
    let mock = MockModel::start();
    let slack = FakeSlack::start();
    let config = slack.config("");
    let gw = start(&mock, tempfile::tempdir().unwrap(), &config);
    let ada_dm = FakeSlack::dm_channel(ADA);

    // An envelope sent again (retry_attempt 1) runs once.
    mock.push(text("anthropic", "One."));
    let first = slack.dm(ADA, "first");
    assert_eq!(slack.wait_texts(&ada_dm, 1), ["One."]);
    let envelope = slack.envelope_of(&first);
    slack.resend_envelope(&envelope);
    mock.push(text("anthropic", "Two."));
    slack.dm(ADA, "marker");
    assert_eq!(slack.wait_texts(&ada_dm, 2), ["One.", "Two."]);
    assert!(slack.deliveries().contains(&(envelope.clone(), 1)), "{:?}", slack.deliveries());
    assert_eq!(asked(&mock), ["first", "marker"]);

    // The connection drops; two messages come meanwhile; a new connection brings both.
    slack.drop_connection();
    slack.dm(ADA, "second");
    slack.dm(ADA, "third");
    mock.push(text("anthropic", "Later."));
    mock.push(text("anthropic", "Later."));
    wait(|| asked(&mock).join(" ").contains("third").then_some(()), "the messages sent while down");
    assert_eq!(slack.opened(), 2);
    // Slack asks for a new connection: opened at once, and messages flow on it.
    slack.disconnect("refresh_requested");
    wait(|| (slack.opened() == 3 && slack.connected()).then_some(()), "a new connection");
    mock.push(text("anthropic", "Four."));
    slack.dm(ADA, "fourth");
    wait(|| slack.texts(&ada_dm).contains(&"Four.".to_owned()).then_some(()), "the fourth reply");

    // Killed; while it is down Slack sends "fourth" again (as it does for an envelope whose
    // acknowledgement it did not see) and "fifth" comes. After the restart "fifth" runs, once,
    // and "fourth" does not run again.
    let home = gw.kill();
    slack.resend_envelope(&slack.envelope_of(&slack.ts_of("fourth")));
    slack.dm(ADA, "fifth");
    mock.push(text("anthropic", "Five."));
    let gw = start(&mock, home, &config);
    wait(|| slack.texts(&ada_dm).contains(&"Five.".to_owned()).then_some(()), "the fifth reply");
    wait(|| (slack.unacked() == 0).then_some(()), "every envelope acknowledged");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let all = asked(&mock).join("\n");
    for word in ["first", "second", "third", "fourth", "fifth"] {
        assert_eq!(all.matches(word).count(), 1, "{word} in {all}");
    }
    assert_eq!(slack.texts(&ada_dm).len(), 6, "{:?}", slack.texts(&ada_dm));
    drop(gw);
}

#[test]
fn a_429_is_waited_out_and_refused_tokens_and_link_disabled_stop_the_channel() {
    let mock = MockModel::start();
    let slack = FakeSlack::start();
    let gw = start(&mock, tempfile::tempdir().unwrap(), &slack.config(""));
    let ada_dm = FakeSlack::dm_channel(ADA);
    slack.throttle_next(1);
    mock.push(text("anthropic", "After the wait."));
    slack.dm(ADA, "hello");
    assert_eq!(slack.wait_texts(&ada_dm, 1), ["After the wait."]);
    let waited = slack.sent_timed()[0].0 - slack.throttled_at()[0];
    assert!(waited >= std::time::Duration::from_secs(1), "retried after {waited:?}, not as Retry-After said");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(slack.texts(&ada_dm).len(), 1);
    // Socket Mode turned off for the app: the channel stops and says why.
    slack.disconnect("link_disabled");
    wait(|| (account(&gw)["running"] == false).then_some(()), "the channel to stop");
    assert!(account(&gw)["lastError"].as_str().unwrap().contains("link_disabled"));
    drop(gw);

    // An app token Slack refuses.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), slack.config("").replace("xapp-test-app-token", "xapp-wrong"))
        .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    wait(|| (account(&gw)["running"] == false).then_some(()), "the channel to stop");
    let status = account(&gw);
    assert!(status["lastError"].as_str().unwrap().contains("invalid_auth"), "{status}");
}
