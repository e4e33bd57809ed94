//! What a chat can do on a channel, on a real `acp gateway` against the Bot API stand-in and the
//! mock model: permission questions asked and answered in the chat (by number, `/deny`, or not at
//! all), only by the person who started the run; messages steered into a running turn; the send
//! policy and `/send`; `/pair`; the queue's cap and summary; the inbound debounce; a pause in the
//! reply sending what gathered; webhook mode, its secret, and the way back to polling.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, result_for, text, text_then_calls};
use crate::support::telegram::{BOT, FakeTelegram};

/// The gateway with Telegram; guests (senders not in `allow_from`) get what the session's mode
/// says and answer their own runs' questions (`guest_mode = "code"`): these tests are about what
/// a chat can do, tests/suite/channels_guard.rs about the default that restricts guests.
fn gateway(mock: &MockModel, fake: &FakeTelegram, telegram: &str, rest: &str) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\nchunk_min_chars = 40\nchunk_max_chars = 120\nguest_mode = \"code\"\n{telegram}\n{rest}",
            fake.base
        ),
    )
    .unwrap();
    Gateway::start_in(home, &mock.base(), &[])
}

/// Sets session `key`'s mode to `ask` (every write asks).
fn ask_mode(gw: &Gateway, key: &str) {
    let mut admin = gw.client(&["operator.admin"]);
    let r = admin.request("sessions.patch", json!({"key": key, "mode": "ask"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
}

fn write(id: &str, path: &str, content: &str) -> (String, String, serde_json::Value) {
    (id.into(), "write".into(), json!({"path": path, "content": content}))
}

fn push_calls(mock: &MockModel, list: &[(String, String, serde_json::Value)]) {
    let list: Vec<(&str, &str, serde_json::Value)> =
        list.iter().map(|(id, name, args)| (id.as_str(), name.as_str(), args.clone())).collect();
    mock.push(calls("anthropic", &list));
}

#[test]
fn questions_are_answered_in_the_chat_and_a_message_meanwhile_steers_the_turn() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "[messages.queue]\nmode = \"steer\"\n");
    ask_mode(&gw, "agent:main:main");
    let user = 501;
    let ws = gw.workspace.path();

    // A write asks; a message sent while the question waits is steered into the turn; the
    // answer "1" allows the write, the second call is skipped so the model reads the message.
    push_calls(&mock, &[write("w1", "notes.txt", "one"), write("w2", "other.txt", "two")]);
    mock.push(text("anthropic", "Done, and kept it short."));
    fake.message(user, "private", user, "please write the notes");
    let question = fake.wait_sent(user, 1).remove(0);
    assert!(question.starts_with("Permission needed: ") && question.contains("notes.txt"), "{question}");
    assert!(question.contains("\n1. ") && question.contains("\n2. "), "numbered options: {question}");
    assert!(question.contains("Reply with the number"), "{question}");
    fake.message(user, "private", user, "also, keep it short");
    fake.message(user, "private", user, "1");
    let sent = fake.wait_sent(user, 3);
    assert!(sent[1].ends_with('.') && !sent[1].contains("no longer"), "the choice is confirmed: {sent:?}");
    assert_eq!(sent[2], "Done, and kept it short.");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "one");
    assert!(!ws.join("other.txt").exists(), "the call after the steered message was not run");
    let second = mock.requests()[1].body.clone();
    assert!(second.to_string().contains("also, keep it short"), "{second}");
    assert!(result_for("anthropic", &second, "w2").contains("the user sent a new message"), "{second}");
    assert_eq!(mock.requests().len(), 2, "a steered message starts no run of its own");

    // A message steered while the model only writes text is not lost: it runs next.
    mock.push(text("anthropic", "First.").delay(std::time::Duration::from_millis(200)));
    mock.push(text("anthropic", "Then this."));
    fake.message(user, "private", user, "tell me something");
    mock.wait_requests(3);
    fake.message(user, "private", user, "and something else");
    assert_eq!(fake.wait_sent(user, 5)[3..], ["First.", "Then this."]);
    assert!(mock.requests()[3].body.to_string().contains("and something else"));

    // /deny refuses; the model is told.
    push_calls(&mock, &[write("w3", "notes.txt", "three")]);
    mock.push(text("anthropic", "Not written."));
    fake.message(user, "private", user, "write three");
    assert!(fake.wait_sent(user, 6)[5].starts_with("Permission needed: "));
    let options = fake.wait_sent(user, 6)[5].lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).count();
    fake.message(user, "private", user, "/approve 7");
    assert_eq!(fake.wait_sent(user, 7)[6], format!("Answer with a number from 1 to {options}, or /deny."));
    fake.message(user, "private", user, "/deny");
    let sent = fake.wait_sent(user, 9);
    assert_eq!(sent[8], "Not written.");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "one");
    fake.message(user, "private", user, "/approve");
    assert_eq!(fake.wait_sent(user, 10)[9], "No question is waiting.");
    drop(gw);
}

#[test]
fn an_unanswered_question_expires_and_the_chat_is_told() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "[gateway]\napproval_timeout_secs = 1\n");
    ask_mode(&gw, "agent:main:main");
    push_calls(&mock, &[write("e1", "late.txt", "x")]);
    mock.push(text("anthropic", "It was not allowed."));
    fake.message(601, "private", 601, "write late");
    let sent = fake.wait_sent(601, 3);
    assert!(sent[0].starts_with("Permission needed: ") && sent[0].contains("Without an answer in 1 s"), "{sent:?}");
    assert_eq!(sent[1..], ["No answer in time, so it was not run.", "It was not allowed."]);
    assert!(!gw.workspace.path().join("late.txt").exists());
    fake.message(601, "private", 601, "1");
    mock.push(text("anthropic", "A late number is just a message."));
    assert_eq!(fake.wait_sent(601, 4)[3], "A late number is just a message.");
    drop(gw);
}

#[test]
fn in_a_group_only_the_person_who_started_the_run_answers() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"\ngroup_policy = \"open\"", "");
    let group = -100_777;
    ask_mode(&gw, "agent:main:telegram:group:-100777");
    push_calls(&mock, &[write("g1", "group.txt", "ours")]);
    mock.push(text("anthropic", "Written for the group."));
    fake.message(group, "supergroup", 602, &format!("@{BOT} write for the group"));
    assert!(fake.wait_sent(group, 1)[0].starts_with("Permission needed: "));
    // Another member: a stray number is ignored, an addressed one refused.
    fake.message(group, "supergroup", 603, "1");
    fake.message(group, "supergroup", 603, &format!("@{BOT} 1"));
    assert_eq!(fake.wait_sent(group, 2)[1], "Only the person whose message started this can answer it.");
    // The starter's answer needs no mention.
    fake.message(group, "supergroup", 602, "1");
    let sent = fake.wait_sent(group, 4);
    assert_eq!(sent[3], "Written for the group.");
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("group.txt")).unwrap(), "ours");
    drop(gw);
}

#[test]
fn the_send_policy_and_send_decide_where_replies_go_and_owners_manage_pairing() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(
        &mock,
        &fake,
        "allow_from = [\"900\"]",
        "[session.send_policy]\ndefault = \"allow\"\nrules = [{ action = \"deny\", match = { chat_type = \"group\" } }]\n",
    );
    let (owner, stranger, group) = (900, 901, -100_900);

    fake.message(owner, "private", owner, "/pair");
    assert_eq!(fake.wait_sent(owner, 1)[0], "Pairing (pairing): no requests waiting; 0 approved.");
    fake.message(stranger, "private", stranger, "hi");
    let code = fake.wait_sent(stranger, 1)[0].split("approve telegram ").nth(1).unwrap()[..8].to_owned();
    // The owner is told of the request.
    let told = fake.wait_sent(owner, 2)[1].clone();
    assert!(told.starts_with("New pairing request on telegram from User901 (901)") && told.contains(&code), "{told}");
    fake.message(owner, "private", owner, "/pair");
    let listed = fake.wait_sent(owner, 3)[2].clone();
    assert!(listed.contains(&code) && listed.contains("User901 (901)") && listed.contains("min left"), "{listed}");
    fake.message(owner, "private", owner, &format!("/pair approve {}", code.to_lowercase()));
    assert_eq!(fake.wait_sent(owner, 4)[3], "Approved User901 (901).");
    fake.message(stranger, "private", stranger, "/pair");
    assert!(fake.wait_sent(stranger, 2)[1].starts_with("Only the owner can manage pairing"));

    // In groups only those let in to direct chats are heard (group_policy allowlist, the default).
    fake.message(group, "group", 905, &format!("@{BOT} I am nobody here"));

    // A group reply is run but not delivered; the owner turns it on for that group.
    mock.push(text("anthropic", "Never shown in the group."));
    let mut watcher = gw.client(&["operator.read"]);
    fake.message(group, "group", stranger, &format!("@{BOT} hello group"));
    watcher.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    fake.message(group, "group", stranger, &format!("@{BOT} /send off"));
    assert_eq!(fake.wait_sent(group, 1), ["Only the owner can change where replies go."]);
    fake.message(group, "group", owner, &format!("@{BOT} /send"));
    assert_eq!(fake.wait_sent(group, 2)[1], "Replies here: off (from the send policy).");
    fake.message(group, "group", owner, &format!("@{BOT} /send on"));
    assert_eq!(fake.wait_sent(group, 3)[2], "Replies here: on (set for this chat).");
    mock.push(text("anthropic", "Now the group hears me."));
    fake.message(group, "group", stranger, &format!("@{BOT} again"));
    let sent = fake.wait_sent(group, 4);
    assert_eq!(sent[3], "Now the group hears me.");
    assert!(!sent.join("|").contains("Never shown"), "{sent:?}");
    assert_eq!(mock.requests().len(), 2, "the unknown member's message ran nothing");
    assert!(!mock.requests().iter().any(|r| r.body.to_string().contains("I am nobody")));
    drop(gw);
}

#[test]
fn the_inbound_debounce_joins_a_burst() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "[messages.inbound]\nby_channel = { telegram = 1500 }\n");
    let user = 701;
    mock.push(text("anthropic", "One answer."));
    for part in ["first part", "second part", "third part"] {
        fake.message(user, "private", user, part);
    }
    assert_eq!(fake.wait_sent(user, 1), ["One answer."]);
    assert!(mock.requests()[0].body.to_string().contains("first part\\nsecond part\\nthird part"));
    // Commands are not held back by it.
    fake.message(user, "private", user, "/queue");
    assert!(fake.wait_sent(user, 2)[1].starts_with("Queue: collect"));
    assert_eq!(mock.requests().len(), 1);
    drop(gw);
}

#[test]
fn the_queue_cap_summarizes_what_it_drops() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "");
    ask_mode(&gw, "agent:main:main");
    let user = 702;
    // The run waits on a question while five messages arrive: with cap 2 the oldest three are
    // summarized, and everything runs together after the run.
    fake.message(user, "private", user, "/queue collect cap:2 debounce:0");
    assert_eq!(fake.wait_sent(user, 1)[0], "Queue: collect (debounce 0 ms, cap 2, drop summarize).");
    push_calls(&mock, &[write("c1", "cap.txt", "x")]);
    mock.push(text("anthropic", "Written."));
    mock.push(text("anthropic", "Read them all."));
    fake.message(user, "private", user, "write it");
    assert!(fake.wait_sent(user, 2)[1].starts_with("Permission needed: "));
    for n in 1..=5 {
        fake.message(user, "private", user, &format!("note {n}"));
    }
    fake.message(user, "private", user, "1");
    let sent = fake.wait_sent(user, 5);
    assert_eq!(sent[3..], ["Written.", "Read them all."]);
    let last = mock.requests()[2].body.to_string();
    assert!(
        last.contains("[3 earlier messages did not fit in the queue; in short:]\\n- note 1\\n- note 2\\n- note 3\\n\\nnote 4\\n\\nnote 5"),
        "{last}"
    );
    // The setting stays with the session across a restart; `/queue default` clears it.
    let gw = gw.restart(&mock.base());
    fake.message(user, "private", user, "/queue");
    assert!(fake.wait_sent(user, 6)[5].starts_with("Queue: collect (debounce 0 ms, cap 2"), "{:?}", fake.sent());
    fake.message(user, "private", user, "/queue default");
    assert_eq!(fake.wait_sent(user, 7)[6], "Queue: collect (debounce 1000 ms, cap 20, drop summarize) (the default).");
    drop(gw);
}

#[test]
fn a_pause_in_the_reply_sends_what_gathered_and_stop_answers_at_once() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"\ncoalesce_idle_ms = 100", "");
    let user = 801;
    std::fs::write(gw.workspace.path().join("notes.txt"), "the notes").unwrap();

    // The model says a short line and reads a file; the next reply never ends. The short line
    // (under the 40-character minimum) arrives during the pause.
    mock.push(text_then_calls(
        "anthropic",
        "Let me check the notes.\n",
        &[("r1", "read", json!({"path": "notes.txt"}))],
    ));
    mock.push(text("anthropic", "They say things").stall_after(1));
    fake.message(user, "private", user, "what do the notes say?");
    assert_eq!(fake.wait_sent(user, 1), ["Let me check the notes."]);
    mock.wait_requests(2);
    fake.message(user, "private", user, "/stop");
    assert_eq!(fake.wait_sent(user, 2)[1], "Stopped.");
    assert!(mock.wait_done(1).client_left, "the stalled request was dropped");
    fake.message(user, "private", user, "/stop");
    assert_eq!(fake.wait_sent(user, 3)[2], "Nothing is running.");
    drop(gw);
}

#[test]
fn block_streaming_off_sends_the_reply_when_it_ends() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"\nblock_streaming = false\ncoalesce_idle_ms = 50", "");
    let user = 802;
    let long = "A first paragraph long enough to pass the minimum.\n\nA second one, also long enough to be sent.\n\n";
    mock.push(text("anthropic", long).stall_after(4));
    fake.message(user, "private", user, "talk");
    mock.wait_requests(1);
    // A channel command answers while the reply stalls: nothing of the reply has gone out.
    fake.message(user, "private", user, "/queue");
    assert!(fake.wait_sent(user, 1)[0].starts_with("Queue: collect"));
    assert_eq!(fake.sent().len(), 1, "{:?}", fake.sent());
    fake.message(user, "private", user, "/stop");
    assert_eq!(fake.wait_sent(user, 2)[1], "Stopped.");
    drop(gw);
}

#[test]
fn webhook_mode_takes_updates_with_the_secret_only_and_polling_takes_over_again() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let home = tempfile::tempdir().unwrap();
    let hook = format!("http://127.0.0.1:{port}/tg-hook");
    let config = |webhook: bool| {
        let mut c = format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\n",
            fake.base
        );
        if webhook {
            c.push_str(&format!(
                "webhook_url = \"{hook}\"\nwebhook_secret = \"s3cret_-x\"\nwebhook_path = \"/tg-hook\"\n"
            ));
        }
        c
    };
    std::fs::write(home.path().join("config.toml"), config(true)).unwrap();
    let gw = Gateway::start_on(home, port, &mock.base(), &[]);
    assert_eq!(fake.wait_webhook(), (hook.clone(), "s3cret_-x".to_owned()));

    mock.push(text("anthropic", "Hello over the webhook."));
    fake.message(901, "private", 901, "hi");
    assert_eq!(fake.wait_sent(901, 1), ["Hello over the webhook."]);
    assert!(fake.deliveries().iter().all(|(_, status)| *status == 200), "{:?}", fake.deliveries());

    // Calls without the secret, with a wrong one, or with a body that is not an update.
    let post = |secret: Option<&str>, body: &str| -> u16 {
        use std::io::{Read as _, Write as _};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let header = secret.map(|s| format!("x-telegram-bot-api-secret-token: {s}\r\n")).unwrap_or_default();
        write!(
            c,
            "POST /tg-hook HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{header}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let forged = r#"{"update_id": 1, "message": {"message_id": 1, "chat": {"id": 5, "type": "private"}, "from": {"id": 5}, "text": "forged"}}"#;
    assert_eq!(post(None, forged), 401);
    assert_eq!(post(Some("wrong"), forged), 401);
    assert_eq!(post(Some("s3cret_-x"), "{not json"), 400);
    assert_eq!(post(Some("s3cret_-x"), &format!("\"{}\"", "x".repeat(2 << 20))), 413);
    assert_eq!(mock.requests().len(), 1, "nothing forged ran");

    // Back to polling with the webhook still set: it is removed and polling works.
    std::fs::write(gw.home.path().join("config.toml"), config(false)).unwrap();
    let gw = gw.restart(&mock.base());
    mock.push(text("anthropic", "Hello by polling."));
    fake.message(902, "private", 902, "hi again");
    assert_eq!(fake.wait_sent(902, 1), ["Hello by polling."]);
    assert_eq!(fake.webhook(), None);
    drop(gw);
}

#[test]
fn the_agent_and_operators_send_messages_to_chats_within_the_send_policy() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(
        &mock,
        &fake,
        "dm_policy = \"open\"",
        "[session.send_policy]\nrules = [{ action = \"deny\", match = { chat_type = \"group\", key_prefix = \"telegram:group:-100999\" } }]\n",
    );
    ask_mode(&gw, "agent:main:main");
    let (user, other, closed) = (1001, -100_555, "-100999");
    fake.add_chat(other, "supergroup");
    fake.add_chat(-100_999, "supergroup");

    // To its own chat the tool sends at once (even in ask mode); to another chat it asks, and
    // the question shows the very text.
    mock.push(calls("anthropic", &[("m1", "message", json!({"text": "Working on it…"}))]));
    mock.push(calls(
        "anthropic",
        &[("m2", "message", json!({"text": "Hello, group!", "to": other.to_string(), "channel": "telegram"}))],
    ));
    mock.push(text("anthropic", "Told them."));
    fake.message(user, "private", user, "tell the group hello");
    let sent = fake.wait_sent(user, 2);
    assert_eq!(sent[0], "Working on it…");
    assert!(sent[1].starts_with("Permission needed: Message telegram chat -100555"), "{sent:?}");
    assert!(sent[1].contains("<pre><code>Hello, group!</code></pre>"), "the text to be sent is shown: {sent:?}");
    assert!(fake.sent().iter().all(|m| m["chat_id"] != json!(other.to_string())), "nothing sent before the answer");
    fake.message(user, "private", user, "1");
    assert_eq!(fake.wait_sent(other, 1), ["Hello, group!"]);
    assert_eq!(fake.wait_sent(user, 4)[3], "Told them.");
    let first = &mock.requests()[0].body;
    assert!(crate::support::script::offered_tools("anthropic", first).contains(&"message".to_owned()));
    assert_eq!(result_for("anthropic", &mock.requests()[1].body, "m1"), "Sent to telegram chat 1001.");

    // An operator's `send`: delivered once per idempotency key; the policy refuses a denied chat.
    let mut operator = gw.client(&["operator.write"]);
    for _ in 0..2 {
        let r = operator
            .request("send", json!({"to": user.to_string(), "message": "From the operator", "idempotencyKey": "s1"}));
        assert_eq!(r["payload"]["ok"], true, "{r}");
    }
    let r = operator.request("send", json!({"to": user.to_string(), "message": "Second", "idempotencyKey": "s2"}));
    assert_eq!(r["payload"]["channel"], "telegram", "{r}");
    let sent = fake.wait_sent(user, 6);
    assert_eq!(sent[4..], ["From the operator", "Second"]);
    let r = operator.request("send", json!({"to": closed, "message": "No", "idempotencyKey": "s3"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("send policy does not allow"), "{r}");
    // A group Telegram does not know (or does not answer about): its kind is unknown, so the
    // policy cannot be applied, and nothing is sent.
    let r = operator.request("send", json!({"to": "-100123", "message": "Who?", "idempotencyKey": "s3b"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("did not say what kind of chat `-100123`"), "{r}");
    let r = operator
        .request("send", json!({"to": user.to_string(), "message": "x", "channel": "slack", "idempotencyKey": "s4"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("no channel `slack`"), "{r}");
    let mut reader = gw.client(&["operator.read"]);
    let r = reader.request("send", json!({"to": user.to_string(), "message": "x", "idempotencyKey": "s5"}));
    assert_eq!(r["error"]["details"]["code"], "MISSING_SCOPE", "{r}");
    assert_eq!(fake.wait_sent(user, 6).len(), 6);

    // `sessions.patch sendPolicy` sets a session's own choice; null inherits again.
    let mut admin = gw.client(&["operator.admin"]);
    let patch = |admin: &mut crate::support::gateway::Client, value: serde_json::Value| {
        admin.request("sessions.patch", json!({"key": "agent:main:main", "sendPolicy": value}))
    };
    assert_eq!(patch(&mut admin, json!("deny"))["payload"]["ok"], true);
    let r = operator.request("send", json!({"to": user.to_string(), "message": "x", "idempotencyKey": "s6"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("send policy does not allow"), "{r}");
    assert!(patch(&mut admin, json!("sometimes"))["error"]["message"].as_str().unwrap().contains("/sendPolicy"));
    assert_eq!(patch(&mut admin, json!(null))["payload"]["ok"], true);
    let r = operator.request("send", json!({"to": user.to_string(), "message": "Back", "idempotencyKey": "s7"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    assert_eq!(fake.wait_sent(user, 7)[6], "Back");
    drop(gw);
}

#[test]
fn photos_and_text_files_reach_the_model_and_other_files_are_named() {
    use base64::Engine as _;
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "");
    let user = 1101;
    let png = b"\x89PNG\r\n\x1a\n fake image bytes";
    for reply in ["A photo.", "A text file.", "A PDF."] {
        mock.push(text("anthropic", reply));
    }
    fake.photo(user, user, "what is this?", png);
    assert_eq!(fake.wait_sent(user, 1), ["A photo."]);
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("what is this?"), "{body}");
    assert!(body.contains(&base64::engine::general_purpose::STANDARD.encode(png)), "the image itself: {body}");
    assert!(body.contains("image/jpeg"), "{body}");

    fake.document(user, user, "notes.md", "text/markdown", b"# Notes\nship on Friday\n");
    assert_eq!(fake.wait_sent(user, 2)[1], "A text file.");
    let body = mock.requests()[1].body.to_string();
    assert!(body.contains("ship on Friday") && body.contains("notes.md"), "{body}");

    fake.document(user, user, "report.pdf", "application/pdf", b"%PDF-1.7");
    assert_eq!(fake.wait_sent(user, 3)[2], "A PDF.");
    let body = mock.requests()[2].body.to_string();
    assert!(
        body.contains(
            "[The user attached document `report.pdf` (application/pdf, 8 bytes); it cannot be opened here.]"
        ),
        "{body}"
    );
    drop(gw);
}

#[test]
fn a_question_goes_to_the_chat_of_the_run_it_belongs_to_not_the_latest_writer() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    // dm_scope main (the default): both people's direct chats share one session.
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "");
    ask_mode(&gw, "agent:main:main");
    let (ada, bob) = (1201, 1202);
    mock.push(
        calls("anthropic", &[("q1", "write", json!({"path": "ada.txt", "content": "ada"}))])
            .delay(std::time::Duration::from_millis(300)),
    );
    mock.push(text("anthropic", "Written for Ada."));
    mock.push(text("anthropic", "Hello Bob."));
    fake.message(ada, "private", ada, "write my file");
    mock.wait_requests(1);
    fake.message(bob, "private", bob, "hi, me too");
    let asked = fake.wait_sent(ada, 1);
    assert!(asked[0].starts_with("Permission needed: "), "{asked:?}");
    fake.message(bob, "private", bob, "1");
    assert_eq!(fake.wait_sent(bob, 1)[0], "Only the person whose message started this can answer it.");
    fake.message(ada, "private", ada, "1");
    assert_eq!(fake.wait_sent(ada, 3)[2], "Written for Ada.");
    assert_eq!(fake.wait_sent(bob, 2)[1], "Hello Bob.");
    drop(gw);
}

#[test]
fn under_a_shared_session_each_queued_follow_up_is_answered_in_its_own_chat() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    // dm_scope main (the default): both people's direct chats share one session.
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "[messages.queue]\nmode = \"followup\"\ndebounce_ms = 0\n");
    ask_mode(&gw, "agent:main:main");
    let (ada, bob) = (1301, 1302);
    mock.push(calls("anthropic", &[("q1", "write", json!({"path": "ada.txt", "content": "ada"}))]));
    mock.push(text("anthropic", "Written for Ada."));
    mock.push(text("anthropic", "Hello Bob.").when("bob's question"));
    mock.push(text("anthropic", "Noted, Ada.").when("ada's note"));
    fake.message(ada, "private", ada, "write my file");
    let asked = fake.wait_sent(ada, 1);
    assert!(asked[0].starts_with("Permission needed: "), "{asked:?}");
    // While Ada's run waits on her, Bob and then Ada write: each waits for its own run.
    fake.message(bob, "private", bob, "bob's question");
    fake.message(ada, "private", ada, "ada's note");
    fake.message(ada, "private", ada, "1");
    let to_ada = fake.wait_sent(ada, 4);
    assert_eq!(to_ada[1..], ["Allow once.", "Written for Ada.", "Noted, Ada."], "{to_ada:?}");
    assert_eq!(fake.wait_sent(bob, 1), ["Hello Bob."]);
    drop(gw);
}

#[test]
fn two_questions_of_one_reply_are_asked_in_the_chat_one_after_the_other() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "dm_policy = \"open\"", "");
    ask_mode(&gw, "agent:main:main");
    let user = 1401;
    push_calls(&mock, &[write("q1", "one.txt", "1"), write("q2", "two.txt", "2")]);
    mock.push(text("anthropic", "One of two."));
    fake.message(user, "private", user, "write both");
    let sent = fake.wait_sent(user, 1);
    assert!(sent[0].starts_with("Permission needed: Create one.txt"), "{sent:?}");
    fake.message(user, "private", user, "1");
    let sent = fake.wait_sent(user, 3);
    assert_eq!(sent[1], "Allow once.");
    assert!(
        sent[2].starts_with("Permission needed: Create two.txt"),
        "the second, once the first is answered: {sent:?}"
    );
    fake.message(user, "private", user, "/deny");
    let sent = fake.wait_sent(user, 5);
    assert_eq!(sent[4], "One of two.", "{sent:?}");
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("one.txt")).unwrap(), "1");
    assert!(!gw.workspace.path().join("two.txt").exists());
    let told = result_for("anthropic", &mock.requests()[1].body, "q2");
    assert!(told.contains("rejected"), "{told}");
    drop(gw);
}

#[test]
fn a_send_policy_rule_on_broadcast_channels_holds_for_chats_known_only_to_telegram() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(
        &mock,
        &fake,
        "dm_policy = \"open\"",
        "[session.send_policy]\nrules = [{ action = \"deny\", match = { chat_type = \"channel\" } }]\n",
    );
    // Both ids are negative; only Telegram knows which is a broadcast channel.
    let (news, team) = (-100_777, -100_888);
    fake.add_chat(news, "channel");
    fake.add_chat(team, "supergroup");
    let mut operator = gw.client(&["operator.write"]);
    let r = operator.request("send", json!({"to": news.to_string(), "message": "Release!", "idempotencyKey": "n1"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("send policy does not allow"), "{r}");
    let r = operator.request("send", json!({"to": team.to_string(), "message": "Release!", "idempotencyKey": "t1"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    assert_eq!(fake.wait_sent(team, 1), ["Release!"]);
    assert!(fake.sent().iter().all(|m| m["chat_id"] != json!(news.to_string())), "{:?}", fake.sent());
    drop(gw);
}

#[test]
fn verbose_and_reasoning_show_tool_calls_and_thinking_and_directives_among_words_hold_for_one_message() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "allow_from = [\"700\"]\ngroup_policy = \"open\"\nblock_streaming = false", "");
    let (owner, stranger, group) = (700, 701, -100_700);
    let sent_to = |chat: i64, n: usize| fake.wait_sent(chat, n);

    fake.message(owner, "private", owner, "/verbose");
    assert_eq!(sent_to(owner, 1)[0], "Verbose: off. Reasoning: off.");
    fake.message(owner, "private", owner, "/verbose on /reasoning on");
    assert_eq!(sent_to(owner, 2)[1], "Verbose: on. Reasoning: on.");
    fake.message(owner, "private", owner, "/verbose loud");
    let sent = sent_to(owner, 3);
    assert!(sent[2].starts_with("Unknown setting <code>loud</code>"), "{sent:?}");

    // Reasoning, the text before a tool call, the call and the answer, in the order they came.
    let write_a = [("w1", "write", json!({"path": "a.txt", "content": "x"}))];
    mock.push(crate::support::script::anthropic_thinking("I will write the file.", Some("Writing it now."), &write_a));
    mock.push(text("anthropic", "Done."));
    fake.message(owner, "private", owner, "write a.txt");
    let sent = sent_to(owner, 7);
    assert_eq!(sent[3..], ["Reasoning: I will write the file.", "Writing it now.", "🔧 Create a.txt", "Done."]);

    // Directives among the words: this message only, and the model never reads them.
    push_calls(&mock, &[write("w2", "b.txt", "y")]);
    mock.push(text("anthropic", "Done again."));
    fake.message(owner, "private", owner, "/verbose off please write b.txt /think high");
    assert_eq!(sent_to(owner, 8)[7], "Done again.");
    let asked = mock.requests()[2].body.clone();
    assert!(!asked.to_string().contains("/verbose") && !asked.to_string().contains("/think"), "{asked}");
    assert!(asked.to_string().contains("please write b.txt"), "{asked}");
    assert_eq!(asked["thinking"]["budget_tokens"], 24576, "{asked}");
    fake.message(owner, "private", owner, "/reasoning");
    assert_eq!(sent_to(owner, 9)[8], "Verbose: on. Reasoning: on.", "the chat's own choice is unchanged");

    // The choice is the session's: listed, patched by an operator, kept on disk.
    let mut admin = gw.client(&["operator.admin"]);
    let row = |admin: &mut crate::support::gateway::Client| {
        let r = admin.request("sessions.list", json!({}));
        r["payload"]["sessions"].as_array().unwrap().iter().find(|s| s["key"] == "agent:main:main").unwrap().clone()
    };
    assert_eq!(
        (row(&mut admin)["verboseLevel"].clone(), row(&mut admin)["reasoningLevel"].clone()),
        (json!("on"), json!("on"))
    );
    let r = admin
        .request("sessions.patch", json!({"key": "agent:main:main", "verboseLevel": "full", "reasoningLevel": null}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let r = admin.request("sessions.patch", json!({"key": "agent:main:main", "verboseLevel": "loud"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("at /verboseLevel"), "{r}");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(gw.home.path().join("channels/sessions.json")).unwrap()).unwrap();
    assert_eq!(kept["agent:main:main"], json!({"verbose": "full"}));

    // Full: each call with its output.
    push_calls(&mock, &[write("w3", "c.txt", "z")]);
    mock.push(text("anthropic", "Third."));
    fake.message(owner, "private", owner, "write c.txt");
    let sent = sent_to(owner, 11);
    let diff = "🔧 Create c.txt\n<pre><code class=\"language-diff\">--- ";
    assert!(sent[9].starts_with(diff) && sent[9].contains("\n+z\n"), "{sent:?}");
    assert_eq!(sent[10], "Third.");

    // In a group only an owner changes what the chat is shown, and a guest's directive is ignored.
    fake.message(group, "group", stranger, &format!("@{BOT} /verbose full"));
    assert_eq!(sent_to(group, 1)[0], "Only the owner can change what this chat is shown.");
    push_calls(&mock, &[write("w4", "d.txt", "w")]);
    mock.push(text("anthropic", "Quiet."));
    fake.message(group, "group", stranger, &format!("@{BOT} /verbose on write d.txt"));
    assert_eq!(sent_to(group, 2)[1], "Quiet.", "no tool line for a guest's directive");
    assert!(!mock.requests().last().unwrap().body.to_string().contains("/verbose"));
    drop(gw);
}
