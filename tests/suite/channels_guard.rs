//! Who may make the agent act from a chat, on a real gateway with the Telegram stand-in: a guest
//! (approved by pairing, not an owner) gets no command run without an owner's answer, while the
//! owner's own run goes on as the session's mode says; strangers cannot lock pairing for others,
//! and the owner is told of each request.

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, text};
use crate::support::telegram::FakeTelegram;

const OWNER: i64 = 1001;

fn gateway(mock: &MockModel, fake: &FakeTelegram, more: &str) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[gateway]\napproval_timeout_secs = 600\n\n[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\n\
             dm_policy = \"pairing\"\nallow_from = [\"{OWNER}\"]\n{more}\n[session]\ndm_scope = \"per-peer\"\n",
            fake.base
        ),
    )
    .unwrap();
    Gateway::start_in(home, &mock.base(), &[])
}

/// The pairing code in the bot's answer to a stranger.
fn code_in(text: &str) -> String {
    text.split("approve telegram ").nth(1).unwrap_or_else(|| panic!("no code in {text}"))[..8].to_owned()
}

#[test]
fn a_guests_run_asks_an_owner_before_any_command_and_the_owners_run_does_not() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = gateway(&mock, &fake, "");
    let guest = 2002;
    // The guest pairs; the owner is told, and approves from their own chat.
    fake.message(guest, "private", guest, "hello");
    let code = code_in(&fake.wait_sent(guest, 1)[0]);
    let told = fake.wait_sent(OWNER, 1);
    assert!(told[0].contains("New pairing request") && told[0].contains(&code), "{told:?}");
    fake.message(OWNER, "private", OWNER, &format!("/pair approve {code}"));
    assert!(fake.wait_sent(OWNER, 2)[1].starts_with("Approved"), "{:?}", fake.sent());

    // The guest asks for a command: it is not run without a question, which the guest may not
    // answer, and which an owner (here a gateway approver) does.
    let mut approver = gw.client(&["operator.admin"]);
    mock.push(calls("anthropic", &[("e1", "exec", json!({"command": "echo ran-for-the-guest > guest.txt"}))]));
    mock.push(text("anthropic", "Done for you."));
    fake.message(guest, "private", guest, "please run it");
    let asked = approver.until_event(|e| e["event"] == "exec.approval.requested");
    let question = &asked.last().unwrap()["payload"];
    assert!(question["request"]["command"].as_str().unwrap().contains("ran-for-the-guest"), "{question}");
    let in_chat = fake.wait_sent(guest, 2);
    assert!(in_chat[1].contains("Permission needed") && in_chat[1].contains("An owner replies"), "{in_chat:?}");
    assert!(!gw.workspace.path().join("guest.txt").exists(), "nothing ran before the answer");
    fake.message(guest, "private", guest, "1");
    let refused = fake.wait_sent(guest, 3);
    assert!(refused[2].contains("Only an owner can answer"), "{refused:?}");
    let id = question["id"].as_str().unwrap();
    let resolved = approver.request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
    assert_eq!(resolved["ok"], true, "{resolved}");
    let after = fake.wait_sent(guest, 5);
    assert_eq!(after[3], "Answered by cli: Allow once.");
    assert_eq!(after[4], "Done for you.");
    assert!(gw.workspace.path().join("guest.txt").exists());

    // The owner's own run: a sandboxed command runs as the session's mode (code) says.
    mock.push(calls("anthropic", &[("e2", "exec", json!({"command": "echo ran-for-the-owner > owner.txt"}))]));
    mock.push(text("anthropic", "Done."));
    fake.message(OWNER, "private", OWNER, "run it for me");
    assert_eq!(fake.wait_sent(OWNER, 3).last().unwrap(), "Done.");
    assert!(gw.workspace.path().join("owner.txt").exists());
}

#[test]
fn strangers_cannot_lock_pairing_for_others_and_the_owner_hears_of_each() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let _gw = gateway(&mock, &fake, "");
    // Once three waiting codes turned every new sender away for an hour.
    for stranger in 3001..3005 {
        fake.message(stranger, "private", stranger, "let me in");
        let answer = &fake.wait_sent(stranger, 1)[0];
        assert!(answer.contains("approve telegram "), "stranger {stranger}: {answer}");
    }
    assert_eq!(fake.wait_sent(OWNER, 4).len(), 4, "the owner is told of each");
    // A rejected sender does not get a fresh code at once.
    let code = code_in(&fake.wait_sent(3001, 1)[0]);
    fake.message(OWNER, "private", OWNER, &format!("/pair reject {code}"));
    assert!(fake.wait_sent(OWNER, 5)[4].starts_with("Rejected"));
    fake.message(3001, "private", 3001, "again?");
    assert!(fake.wait_sent(3001, 2)[1].contains("turned down"), "{:?}", fake.sent());
    assert!(mock.requests().is_empty());
}
