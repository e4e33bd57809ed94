//! The gateway's hook points on a real `acp gateway` with the Telegram stand-in and the mock
//! model: `MessageReceived` drops a message or adds context to it, `MessageSent` sees each message
//! sent, `/new` saves the ending conversation to the memory and tells the hooks (`clear`), and at
//! start `GatewayStart` runs and `BOOT.md` becomes a run of its own.

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::text;
use crate::support::telegram::FakeTelegram;

/// Waits (polling) until `path` holds `needle`; its text.
fn wait_for(path: &std::path::Path, needle: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "{} never held {needle:?}: {text}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn message_hooks_drop_or_add_to_what_arrives_see_what_is_sent_and_new_saves_the_gist() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("hooks.log");
    let user = 111;
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            r#"
[channels.telegram]
bot_token = "123:ABC"
api_base_url = "{base}"
allow_from = ["{user}"]
group_policy = "open"

[[hooks]]
event = "MessageReceived"
matcher = "telegram"
command = '''input=$(cat); case "$input" in *spam*) echo "looks like spam" >&2; exit 2;; esac; echo "The sender's local time is 09:00."'''

[[hooks]]
event = "MessageSent"
command = '''tr -d '\n' >> {log}; echo >> {log}'''

[[hooks]]
event = "SessionEnd"
command = '''grep -o '"reason":"[a-z]*"' >> {log}'''
"#,
            base = fake.base,
            log = log.display()
        ),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let home = gw.home.path().to_path_buf();

    // Dropped by the hook: the model never hears of it (the next message's run is the first).
    fake.message(user, "private", user, "buy spam now");
    mock.push(text("anthropic", "The launch is on Friday, noted."));
    fake.message(user, "private", user, "remember: the launch is on Friday");
    let sent = fake.wait_sent(user, 1);
    assert_eq!(sent, vec!["The launch is on Friday, noted.".to_owned()]);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(!body.contains("spam"), "{body}");
    assert!(body.contains("remember: the launch is on Friday\\n\\nThe sender's local time is 09:00."), "{body}");
    let logged = wait_for(&log, "The launch is on Friday, noted.");
    assert!(
        logged.contains(r#""hook_event_name":"MessageSent""#) && logged.contains(r#""channel":"telegram""#),
        "{logged}"
    );

    // `/new`: the conversation goes to the memory first, and the hooks hear `clear`.
    fake.message(user, "private", user, "/new");
    let sent = fake.wait_sent(user, 2);
    assert!(sent[1].contains("Started over"), "{sent:?}");
    wait_for(&log, r#""reason":"clear""#);
    let dir = home.join("workspace/memory");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-remember-the-launch-is-on-friday.md"), "{name}");
    let saved = std::fs::read_to_string(&files[0]).unwrap();
    assert!(saved.contains("**User:** remember: the launch is on Friday"), "{saved}");
    assert!(saved.contains("**Assistant:** The launch is on Friday, noted."), "{saved}");

    // A guest in a group may not see the hooks (they are the owner's commands), nor allow any.
    fake.message(-100, "supergroup", 222, &format!("@{} /hooks", crate::support::telegram::BOT));
    let said = fake.wait_sent(-100, 1);
    assert_eq!(said, vec!["Only the owner may see hooks or allow a workspace's.".to_owned()]);
    drop(gw);
}

#[test]
fn gateway_start_hooks_run_and_boot_md_becomes_a_run_of_its_own() {
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started.json");
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(home.path().join("workspace/BOOT.md"), "- Check that the backup ran last night.\n").unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[[hooks]]\nevent = \"GatewayStart\"\ncommand = \"cat > {}\"\n", marker.display()),
    )
    .unwrap();
    mock.push(text("anthropic", "NO_REPLY"));
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let started = wait_for(&marker, "GatewayStart");
    assert!(started.contains(r#""hook_event_name":"GatewayStart""#), "{started}");
    mock.wait_requests(1);
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("The gateway has just started") && body.contains("Check that the backup ran"), "{body}");
    // Its session is closed once it ends, and listed as the boot's.
    let mut admin = gw.client(&["operator.admin"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = admin.request("sessions.list", serde_json::json!({}));
        let keys = list["payload"]["sessions"].to_string();
        if keys.contains("agent:main:boot:") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{list}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
