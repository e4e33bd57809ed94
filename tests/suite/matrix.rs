//! The Matrix channel on a real `acp gateway` against a real homeserver (Synapse on loopback) and
//! the mock model: the owner's direct chat gets a reply in chunks; a stranger gets a pairing code
//! the owner approves from the command line; a room answers only when the bot is addressed; a
//! permission question is answered in the chat; a batch synced again (a restart from an older
//! token) starts no second run; messages sent while the gateway is down are answered once it is
//! back, none lost or repeated; a Matrix room bound to another agent reaches that agent.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, TOKEN};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, last_user_text, text, words};
use crate::support::synapse::{Synapse, User};

struct Setup {
    synapse: Synapse,
    bot: User,
    ada: User,
    bob: User,
}

fn setup() -> Setup {
    let synapse = Synapse::start();
    let bot = synapse.register("acp");
    let ada = synapse.register("ada");
    let bob = synapse.register("bob");
    Setup { synapse, bot, ada, bob }
}

fn config(s: &Setup, more: &str) -> String {
    format!(
        "[channels.matrix]\nhomeserver = \"{}\"\naccess_token = \"{}\"\nallow_from = [\"{}\"]\nchunk_min_chars = 40\nchunk_max_chars = 120\n{more}",
        s.synapse.base, s.bot.token, s.ada.id
    )
}

fn start(mock: &MockModel, home: tempfile::TempDir, config: &str) -> Gateway {
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    wait_syncing(&gw);
    gw
}

/// Waits until the channel has synced once (messages before that are history).
fn wait_syncing(gw: &Gateway) {
    let mut admin = gw.client(&["operator.admin"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = admin.request("channels.status", json!({}));
        if status["payload"]["channelAccounts"]["matrix"][0]["state"] == "syncing" {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the Matrix channel did not sync: {status}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn pairing_chunked_replies_rooms_answered_when_addressed_and_a_question_answered_in_the_chat() {
    let mock = MockModel::start();
    let s = setup();
    let gw = start(&mock, tempfile::tempdir().unwrap(), &config(&s, ""));
    let bot = s.bot.id.clone();

    // The owner opens a direct chat: the bot joins, and a long reply arrives in chunks of at most
    // 120 characters, every word in order.
    let dm = s.ada.dm(&bot);
    s.ada.wait_joined(&dm, &bot);
    let reply = "First paragraph of a reply that is long enough to be cut into pieces.\n\n\
                 Second paragraph, which says more things, in more words, than fit in one message here.\n\n\
                 A third, shorter one.";
    mock.push(text("anthropic", reply));
    s.ada.say(&dm, "hello there");
    let sent = s.ada.wait_texts(&dm, &bot, 3);
    assert!(sent.iter().all(|m| m.chars().count() <= 120), "{sent:?}");
    assert_eq!(words(&sent.join(" ")), words(reply));
    let request = mock.requests().remove(0);
    assert!(request.body["messages"].to_string().contains("hello there"));
    // Sent as Matrix HTML too.
    let first = &s.ada.events_from(&dm, &bot)[0];
    assert_eq!(first["content"]["format"], "org.matrix.custom.html", "{first}");

    // A stranger is given a code; nothing reaches the model until the owner approves it.
    let before = mock.requests().len();
    let bob_dm = s.bob.dm(&bot);
    s.bob.wait_joined(&bob_dm, &bot);
    s.bob.say(&bob_dm, "hi, who are you?");
    let told = s.bob.wait_texts(&bob_dm, &bot, 1).remove(0);
    assert!(told.contains("I don't know you yet"), "{told}");
    let code = told.split("approve matrix ").nth(1).unwrap()[..8].to_owned();
    assert_eq!(mock.requests().len(), before);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["pairing", "approve", "matrix", &code])
        .args(["--gateway", &format!("ws://127.0.0.1:{}", gw.port), "--token", TOKEN])
        .env("ACP_HOME", gw.home.path())
        .env("HOME", gw.home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    mock.push(text("anthropic", "Hello Bob."));
    s.bob.say(&bob_dm, "hi again");
    assert_eq!(s.bob.wait_texts(&bob_dm, &bot, 2)[1], "Hello Bob.");

    // A room: the owner invites the bot and Bob. Unaddressed messages are not answered; a
    // mention is, in the room.
    let room = s.ada.room("team", &[&bot, &s.bob.id]);
    s.bob.join(&room);
    s.ada.wait_joined(&room, &bot);
    let before = mock.requests().len();
    s.bob.say(&room, "just chatting among ourselves");
    mock.push(text("anthropic", "Here to help."));
    s.bob.say(&room, "acp: are you there?");
    assert_eq!(s.ada.wait_texts(&room, &bot, 1), ["Here to help."]);
    let requests = mock.requests();
    assert_eq!(requests.len(), before + 1, "only the mention ran");
    let asked = requests[before].body["messages"].to_string();
    assert!(asked.contains("are you there?") && !asked.contains("among ourselves"), "{asked}");

    // A permission question in the owner's chat, answered there by number.
    let mut admin = gw.client(&["operator.admin"]);
    let key = "agent:main:main";
    assert_eq!(admin.request("sessions.patch", json!({"key": key, "mode": "ask"}))["payload"]["ok"], true);
    mock.push(calls("anthropic", &[("w1", "write", json!({"path": "notes.txt", "content": "from matrix"}))]));
    mock.push(text("anthropic", "Written."));
    s.ada.say(&dm, "write the notes");
    let question = s.ada.wait_texts(&dm, &bot, 4).remove(3);
    assert!(question.starts_with("Permission needed: ") && question.contains("notes.txt"), "{question}");
    s.ada.say(&dm, "1");
    let sent = s.ada.wait_texts(&dm, &bot, 6);
    assert_eq!(sent[5], "Written.", "{sent:?}");
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("notes.txt")).unwrap(), "from matrix");

    // channels.status reports the account.
    let status = admin.request("channels.status", json!({}));
    let account = &status["payload"]["channelAccounts"]["matrix"][0];
    assert_eq!(account["user"], bot.as_str(), "{status}");
    assert_eq!(account["dmPolicy"], "pairing");
}

#[test]
fn a_batch_synced_again_repeats_nothing_and_messages_sent_while_down_are_answered_once() {
    let mock = MockModel::start();
    let s = setup();
    let config = config(&s, "");
    let gw = start(&mock, tempfile::tempdir().unwrap(), &config);
    let bot = s.bot.id.clone();
    let dm = s.ada.dm(&bot);
    s.ada.wait_joined(&dm, &bot);
    let state = gw.home.path().join("channels/matrix.sync.json");
    let before: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();

    mock.push(text("anthropic", "One."));
    s.ada.say(&dm, "first");
    assert_eq!(s.ada.wait_texts(&dm, &bot, 1), ["One."]);
    // The token kept once the message was taken in.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let since = |v: &Value| v["since"].as_str().unwrap_or_default().to_owned();
    while since(&serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap()) == since(&before) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // Down: the sync token is set back to before that message (as a crash before the token was
    // kept would leave it), and two messages come meanwhile.
    let home = gw.kill();
    let mut kept: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    kept["since"] = before["since"].clone();
    std::fs::write(&state, kept.to_string()).unwrap();
    s.ada.say(&dm, "second");
    s.ada.say(&dm, "third");
    mock.push(text("anthropic", "Later."));
    mock.push(text("anthropic", "Later."));
    let gw = start(&mock, home, &config);
    // "first" is not run again; "second" and "third" are, once each (alone, or "third" collected
    // while "second" ran).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let asked = loop {
        let asked: Vec<String> = mock.requests().iter().skip(1).map(|r| last_user_text(&r.body)).collect();
        if asked.join(" ").contains("third") || std::time::Instant::now() > deadline {
            break asked;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let all = asked.join("\n");
    assert_eq!(
        (all.matches("first").count(), all.matches("second").count(), all.matches("third").count()),
        (0, 1, 1),
        "{asked:?}"
    );
    let replies = s.ada.wait_texts(&dm, &bot, 1 + asked.len());
    assert_eq!(replies.len(), 1 + asked.len(), "{replies:?}");
    // Nothing more comes.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(mock.requests().len(), 1 + asked.len());
    drop(gw);
}

#[test]
fn a_room_bound_to_an_agent_reaches_that_agent_with_its_workspace_and_model() {
    let mock = MockModel::start();
    let s = setup();
    let home_ws = tempfile::tempdir().unwrap();
    let room_id_placeholder = "ROOM";
    // The room must exist before its binding can name it.
    let room = s.ada.room("family", &[&s.bot.id]);
    let more = format!(
        "[[agents]]\nid = \"work\"\ndefault = true\nmodel = \"anthropic/claude-haiku-4-5\"\n\
         [[agents]]\nid = \"home\"\nworkspace = \"{}\"\nmodel = \"anthropic/claude-opus-4-6\"\n\
         [[bindings]]\nagent = \"home\"\nchannel = \"matrix\"\npeer = \"{room_id_placeholder}\"\n",
        home_ws.path().display()
    )
    .replace(room_id_placeholder, &room);
    let gw = start(&mock, tempfile::tempdir().unwrap(), &config(&s, &more));
    let bot = s.bot.id.clone();
    s.ada.wait_joined(&room, &bot);
    let dm = s.ada.dm(&bot);
    s.ada.wait_joined(&dm, &bot);
    mock.push(text("anthropic", "From home.").when("ROOM-MSG"));
    mock.push(text("anthropic", "From work.").when("DM-MSG"));
    s.ada.say(&room, "acp: ROOM-MSG");
    s.ada.say(&dm, "DM-MSG");
    assert_eq!(s.ada.wait_texts(&room, &bot, 1), ["From home."]);
    assert_eq!(s.ada.wait_texts(&dm, &bot, 1), ["From work."]);
    let find = |m: &str| mock.requests().into_iter().find(|r| r.body["messages"].to_string().contains(m)).unwrap();
    let (home, work) = (find("ROOM-MSG"), find("DM-MSG"));
    assert_eq!(home.body["model"], "claude-opus-4-6");
    assert_eq!(work.body["model"], "claude-haiku-4-5");
    assert!(home.body["system"].to_string().contains(&format!("Working directory: {}", home_ws.path().display())));
    let mut admin = gw.client(&["operator.read"]);
    let keys: Vec<String> = admin.request("sessions.list", json!({}))["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert!(keys.contains(&format!("agent:home:matrix:group:{}", room.replace(':', "_"))), "{keys:?}");
    assert!(keys.contains(&"agent:work:main".to_owned()), "{keys:?}");
}
