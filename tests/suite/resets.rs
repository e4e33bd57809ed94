//! Chat sessions that start afresh (`[session.reset]`) on a real `acp gateway` with Telegram (the
//! Bot API stand-in) and the mock model, the clock driven through configuration: a direct chat
//! used before the day's reset time starts a new transcript at its next message (the old one kept
//! and listed), a group idle past its idle time too, one still in use does not; a session a
//! control client drives is never reset.

use std::time::Duration;

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::text;
use crate::support::telegram::{BOT, FakeTelegram};

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn wait_until(ms: i64) {
    while now_ms() < ms {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_chat_starts_afresh_after_the_daily_reset_time_or_its_idle_time_and_the_old_transcript_stays_listed() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let user = 4242;
    // The day's reset a few seconds from now (local time, as the gateway reads it).
    let reset_at = jiff::Zoned::now().checked_add(jiff::SignedDuration::from_secs(4)).unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\nallow_from = [\"{user}\"]\n\
             [session.reset]\nat = \"{}\"\n\
             [session.reset_by_type.group]\nmode = \"idle\"\nidle_minutes = 0.05\n",
            fake.base,
            reset_at.strftime("%H:%M:%S")
        ),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let asked = |n: usize| mock.wait_requests(n + 1)[n].body.to_string();

    mock.push(text("anthropic", "Hi Ada."));
    fake.message(user, "private", user, "My name is Ada.");
    assert_eq!(fake.wait_sent(user, 1), ["Hi Ada."]);
    mock.push(text("anthropic", "Noted."));
    admin.request("chat.send", json!({"sessionKey": "desk", "message": "Remember: blue.", "idempotencyKey": "d1"}));
    asked(1);
    mock.push(text("anthropic", "Hello group."));
    fake.message(-300, "supergroup", user, &format!("@{BOT} group plan: picnic"));
    assert_eq!(fake.wait_sent(-300, 1), ["Hello group."]);
    let group_start = now_ms();
    // Still in use within its idle time: the group goes on.
    mock.push(text("anthropic", "Still here."));
    fake.message(-300, "supergroup", user, &format!("@{BOT} and games"));
    assert_eq!(fake.wait_sent(-300, 2)[1], "Still here.");
    assert!(asked(3).contains("group plan: picnic"), "the group's context is kept while in use");

    wait_until(reset_at.timestamp().as_millisecond().max(group_start + 3_500) + 300);
    mock.push(text("anthropic", "I don't know your name yet."));
    fake.message(user, "private", user, "What is my name?");
    assert_eq!(fake.wait_sent(user, 2)[1], "I don't know your name yet.");
    let fresh = asked(4);
    assert!(fresh.contains("What is my name?") && !fresh.contains("My name is Ada."), "a new transcript: {fresh}");
    mock.push(text("anthropic", "A new group day."));
    fake.message(-300, "supergroup", user, &format!("@{BOT} anything new?"));
    assert_eq!(fake.wait_sent(-300, 3)[2], "A new group day.");
    let fresh = asked(5);
    assert!(!fresh.contains("group plan: picnic"), "the idle group starts afresh: {fresh}");
    // A control client's session is not a chat's: it goes on.
    mock.push(text("anthropic", "Blue."));
    admin.request("chat.send", json!({"sessionKey": "desk", "message": "What color?", "idempotencyKey": "d2"}));
    assert!(asked(6).contains("Remember: blue."));

    // The old transcripts stay listed, under their own keys, with what they said.
    let listed = admin.request("sessions.list", json!({"limit": 100}));
    let keys: Vec<String> = listed["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_owned())
        .collect();
    let old_dm = keys.iter().find(|k| k.starts_with("agent:main:main:reset:")).unwrap_or_else(|| panic!("{keys:#?}"));
    assert!(keys.iter().any(|k| k.starts_with("agent:main:telegram:group:-300:reset:")), "{keys:#?}");
    assert!(keys.iter().any(|k| k == "agent:main:main") && keys.iter().any(|k| k == "agent:main:desk"), "{keys:#?}");
    let history = admin.request("chat.history", json!({"sessionKey": old_dm}));
    assert_eq!(history["payload"]["messages"][0]["content"], "My name is Ada.", "{history}");
    let history = admin.request("chat.history", json!({"sessionKey": "agent:main:main"}));
    assert_eq!(history["payload"]["messages"][0]["content"], "What is my name?", "{history}");
    assert!(gw.stderr().contains("session reset"), "said so in the log");
}
