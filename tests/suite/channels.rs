//! The Telegram channel on a real `acp gateway`, against a Bot API stand-in on loopback (no real
//! one runs offline) and the mock model: an unknown sender is given a pairing code, the owner
//! approves it, the reply arrives in chunks; a redelivered message never starts a second run;
//! groups answer only when addressed; `NO_REPLY` is not delivered; a 429 is waited out; a
//! restart resumes at the kept offset.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{text, words};
use crate::support::telegram::{BOT, FakeTelegram};

fn gateway(mock: &MockModel, fake: &FakeTelegram, home: tempfile::TempDir) -> Gateway {
    gateway_with(mock, fake, home, "")
}

fn gateway_with(mock: &MockModel, fake: &FakeTelegram, home: tempfile::TempDir, more: &str) -> Gateway {
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\nchunk_min_chars = 40\nchunk_max_chars = 120\n{more}",
            fake.base
        ),
    )
    .unwrap();
    Gateway::start_in(home, &mock.base(), &[])
}

#[test]
fn pairing_then_a_chunked_reply_redeliveries_groups_no_reply_and_a_restart() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let home = tempfile::tempdir().unwrap();
    let gw = gateway(&mock, &fake, home);
    let user = 111;

    // An unknown sender gets a code, and nothing reaches the model.
    fake.message(user, "private", user, "hello");
    let sent = fake.wait_sent(user, 1);
    let code = sent[0].split("approve telegram ").nth(1).unwrap()[..8].to_owned();
    assert!(sent[0].contains("I don't know you yet"), "{}", sent[0]);
    let mut admin = gw.client(&["operator.admin"]);
    let pending = admin.request("pairing.list", json!({}));
    assert_eq!(pending["payload"]["pending"][0]["code"], code.as_str(), "{pending}");
    // The owner approves it from the command line (which asks the running gateway).
    let cli_home = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(args)
            .args(["--gateway", &url, "--token", crate::support::gateway::TOKEN])
            .env("ACP_HOME", cli_home.path())
            .env("HOME", cli_home.path())
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let (ok, listed) = cli(&["pairing", "list"]);
    assert!(ok && listed.contains(&code) && listed.contains("telegram"), "{listed}");
    let (ok, approved) = cli(&["pairing", "approve", "telegram", &code]);
    assert!(ok, "{approved}");
    assert!(approved.contains(&format!("({user}) may talk to the agent on telegram")), "{approved}");
    let (ok, again) = cli(&["pairing", "approve", "telegram", &code]);
    assert!(!ok && again.contains("no pairing code"), "{again}");
    let (ok, status) = cli(&["channels", "status"]);
    assert!(ok && status.contains(&format!("telegram: polling · bot @{BOT} · dm policy pairing")), "{status}");
    assert!(mock.requests().is_empty());

    // Approved: a long reply arrives in chunks of at most 120 characters, every word in order.
    let reply = "First paragraph of a reply that is long enough to be cut into pieces.\n\n\
                 Second paragraph, which says more things, in more words, than fit in one message here.\n\n\
                 A third, shorter one.";
    mock.push(text("anthropic", reply));
    fake.throttle_next("sendMessage", 1);
    let asked = fake.message(user, "private", user, "Tell me things");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let chunks = loop {
        let got = fake.wait_sent(user, 2);
        let joined = got[1..].join(" ");
        if words(&joined) == words(reply) || std::time::Instant::now() > deadline {
            break got[1..].to_vec();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(chunks.len() >= 3, "{chunks:#?}");
    assert!(chunks.iter().all(|c| c.chars().count() <= 120), "{chunks:#?}");
    assert_eq!(words(&chunks.join(" ")), words(reply));
    assert!(mock.requests()[0].body.to_string().contains("Tell me things"));

    // The same message again (Telegram redelivers): no second run.
    fake.redeliver(user, "private", user, "Tell me things", asked);
    // A group: not addressed → ignored; addressed → answered there.
    fake.message(-100, "supergroup", user, "hello everyone");
    mock.push(text("anthropic", "Hi, group."));
    fake.message(-100, "supergroup", user, &format!("@{BOT} say hi"));
    assert_eq!(fake.wait_sent(-100, 1), ["Hi, group."]);
    assert_eq!(mock.requests().len(), 2, "the redelivery and the unaddressed group message ran nothing");
    assert!(mock.requests()[1].body.to_string().contains("say hi"));
    assert!(!mock.requests()[1].body.to_string().contains(BOT), "the mention is taken out");

    // NO_REPLY is not delivered.
    mock.push(text("anthropic", "NO_REPLY"));
    fake.message(user, "private", user, "just so you know");
    mock.push(text("anthropic", "Noted."));
    fake.message(user, "private", user, "anything?");
    let all = fake.wait_sent(user, 1 + chunks.len() + 1);
    assert_eq!(all.last().unwrap(), "Noted.");
    assert!(!all.iter().any(|t| t.contains("NO_REPLY")), "{all:#?}");
    assert_eq!(mock.requests().len(), 4);

    // A restart resumes at the kept offset: nothing is repeated, nothing lost.
    let before = fake.offsets().last().copied().unwrap();
    let polls_before = fake.offsets().len();
    let gw = gw.restart(&mock.base());
    mock.push(text("anthropic", "Still here."));
    fake.message(user, "private", user, "after the restart");
    let all = fake.wait_sent(user, 1 + chunks.len() + 2);
    assert_eq!(all.last().unwrap(), "Still here.");
    assert_eq!(mock.requests().len(), 5, "nothing before the restart ran again");
    // The new process's first poll: at the kept offset (all but the poll the old one was in when
    // it was killed are confirmed), not from the start.
    let first_after = fake.offsets()[polls_before..].iter().copied().find(|o| *o != before).unwrap_or(before);
    assert!(first_after >= before && before > 1000, "resumed at {first_after}, kept {before}");
    drop(gw);
}

/// A reply that takes a while: its pieces 300 ms apart.
fn slow(reply: &str) -> crate::support::mock_model::Reply {
    text("anthropic", reply).delay(std::time::Duration::from_millis(300))
}

#[test]
fn messages_during_a_run_are_collected_followed_up_or_interrupt_it() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway_with(&mock, &fake, tempfile::tempdir().unwrap(), "dm_policy = \"open\"\n");
    let user = 222;
    let burst = |words: &[&str]| {
        for w in words {
            fake.message(user, "private", user, w);
        }
    };

    // collect (the default): the burst runs as one prompt once the run ends.
    mock.push(slow("First."));
    mock.push(text("anthropic", "All three, together."));
    fake.message(user, "private", user, "start");
    mock.wait_requests(1);
    burst(&["alpha", "beta", "gamma"]);
    assert_eq!(fake.wait_sent(user, 2), ["First.", "All three, together."]);
    let collected = mock.requests()[1].body.to_string();
    assert!(collected.contains("alpha\\n\\nbeta\\n\\ngamma"), "{collected}");
    assert_eq!(mock.requests().len(), 2);

    // followup: each on its own, in order.
    fake.message(user, "private", user, "/queue followup");
    assert_eq!(fake.wait_sent(user, 3)[2], "Queue: followup (debounce 1000 ms, cap 20, drop summarize).");
    mock.push(slow("Second."));
    for reply in ["One.", "Two.", "Three."] {
        mock.push(text("anthropic", reply));
    }
    fake.message(user, "private", user, "again");
    mock.wait_requests(3);
    burst(&["one", "two", "three"]);
    let sent = fake.wait_sent(user, 7);
    assert_eq!(sent[3..], ["Second.", "One.", "Two.", "Three."]);
    assert_eq!(mock.requests().len(), 6);

    // interrupt: the run stops, and the newest message runs.
    fake.message(user, "private", user, "/queue interrupt");
    assert_eq!(fake.wait_sent(user, 8)[7], "Queue: interrupt (debounce 1000 ms, cap 20, drop summarize).");
    mock.push(text("anthropic", "This never ends").stall_after(3));
    mock.push(text("anthropic", "Interrupted, here I am."));
    fake.message(user, "private", user, "talk forever");
    mock.wait_requests(7);
    fake.message(user, "private", user, "stop that");
    let sent = fake.wait_sent(user, 9);
    assert_eq!(sent.last().unwrap(), "Interrupted, here I am.");
    assert!(mock.wait_done(6).client_left, "the running request was dropped");
    assert!(mock.requests()[7].body.to_string().contains("stop that"));
    let all = fake.wait_sent(user, 9).join("|");
    assert!(!all.contains("This never ends"), "a stopped run's unsent rest is not delivered: {all}");
    drop(gw);
}
