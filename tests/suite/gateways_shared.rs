//! Several `acp gateway` processes on one PostgreSQL store (a private server, tests/support/
//! postgres.rs): a session run on one is read on another, a retried idempotency key never runs
//! twice whichever gateway it lands on, and when a gateway is killed mid-run its sessions move to
//! another once its lease lapses — the interrupted turn closed, nothing lost, nothing doubled.

use serde_json::{Value, json};

use crate::support::gateway::{Client, Gateway};
use crate::support::mock_model::MockModel;
use crate::support::postgres::Postgres;
use crate::support::script::{endless_text_slowly, text};

/// A gateway on `url` with leases of `lease` seconds.
fn gateway(mock: &MockModel, url: &str, lease: u32) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), format!("[gateway]\nstore_lease_secs = {lease}\n")).unwrap();
    Gateway::start_in(home, &mock.base(), &["--store", url])
}

fn history(client: &mut Client, key: &str) -> Vec<(String, String)> {
    let r = client.request("chat.history", json!({"sessionKey": key, "limit": 100}));
    let messages = r["payload"]["messages"].as_array().unwrap_or_else(|| panic!("{r}")).clone();
    messages
        .iter()
        .map(|m| {
            let text: String = match &m["content"] {
                Value::String(text) => text.clone(),
                content => content
                    .as_array()
                    .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect())
                    .unwrap_or_default(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect()
}

fn final_of(client: &mut Client, run: &str) -> Value {
    let frames = client
        .until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == run && e["payload"]["state"] != "delta");
    frames.last().unwrap()["payload"].clone()
}

#[test]
fn gateways_on_one_store_share_sessions_and_idempotency_keys() {
    let pg = Postgres::start();
    let url = pg.create_db("acp");
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from gateway A."));
    let a = gateway(&mock, &url, 15);
    let b = gateway(&mock, &url, 15);
    let mut on_a = a.client(&["operator.admin"]);
    let mut on_b = b.client(&["operator.admin"]);
    let send = json!({"sessionKey": "shared", "message": "Say hello.", "idempotencyKey": "k-1"});
    assert_eq!(on_a.request("chat.send", send.clone())["payload"]["status"], "started");
    assert_eq!(final_of(&mut on_a, "k-1")["state"], "final");
    // B reads what A ran, from the store.
    assert_eq!(
        history(&mut on_b, "agent:main:shared"),
        [("user".to_owned(), "Say hello.".to_owned()), ("assistant".to_owned(), "Hello from gateway A.".to_owned())]
    );
    let listed = on_b.request("sessions.list", json!({"limit": 10}));
    let keys: Vec<&str> =
        listed["payload"]["sessions"].as_array().unwrap().iter().filter_map(|s| s["key"].as_str()).collect();
    assert_eq!(keys, ["agent:main:shared"]);
    // The same key retried on B: the run A finished, not a second one.
    let again = on_b.request("chat.send", send);
    assert_eq!(again["payload"], json!({"runId": "k-1", "status": "ok"}), "{again}");
    assert_eq!(mock.requests().len(), 1);
    // Each row holds what SQLite's would: the session is listed, its title and tokens kept.
    let row =
        pg.psql("acp", "SELECT prompted, title, input_tokens > 0 FROM acp_sessions WHERE id = 'agent:main:shared'");
    assert_eq!(row, "t|Say hello.|t");
    // `acp sessions` reads the same store, and takes the key as the gateways do (`shared` is the
    // default agent's `agent:main:shared`).
    let sessions = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(["sessions", "--store", &url])
            .args(args)
            .env_clear()
            .env("ACP_HOME", a.home.path())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, shown, err) = sessions(&["show", "shared"]);
    assert!(ok, "{err}");
    assert!(shown.starts_with("# Say hello.\n") && shown.contains("Hello from gateway A."), "{shown}");
    let (ok, _, err) = sessions(&["show", "agent:other:shared"]);
    assert!(!ok && err.contains("no session `agent:other:shared`"), "{err}");
}

#[test]
fn a_killed_gateways_sessions_move_to_another_once_its_lease_lapses() {
    let pg = Postgres::start();
    let url = pg.create_db("acp");
    let mock = MockModel::start();
    mock.push(text("anthropic", "First answer."));
    mock.push(endless_text_slowly("Working on it ", std::time::Duration::from_millis(10)));
    mock.push(text("anthropic", "Answered on B."));
    let a = gateway(&mock, &url, 2);
    let b = gateway(&mock, &url, 2);
    let mut on_a = a.client(&["operator.admin"]);
    on_a.request("chat.send", json!({"sessionKey": "moving", "message": "one", "idempotencyKey": "m-1"}));
    assert_eq!(final_of(&mut on_a, "m-1")["state"], "final");
    on_a.request("chat.send", json!({"sessionKey": "moving", "message": "two", "idempotencyKey": "m-2"}));
    on_a.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "m-2" && e["payload"]["state"] == "delta");
    // Once A has saved some of the reply (text is written as it streams, a burst at a time), A
    // is killed mid-run: its lease on the session is no longer renewed.
    let saved =
        "SELECT count(*) FROM acp_records WHERE session_id = 'agent:main:moving' AND record LIKE '{\"t\":\"text\"%'";
    while pg.psql("acp", saved) == "1" {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(on_a);
    let _home = a.kill();
    let mut on_b = b.client(&["operator.admin"]);
    // B takes the session once the lease lapsed (refused, and told why, until then).
    let three = json!({"sessionKey": "moving", "message": "three", "idempotencyKey": "m-3"});
    let mut refusals = 0;
    loop {
        let r = on_b.request("chat.send", three.clone());
        if r["ok"] == true {
            break;
        }
        let message = r["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("another gateway"), "{r}");
        refusals += 1;
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let three = final_of(&mut on_b, "m-3");
    assert_eq!(three["state"], "final", "{three}\n{}", b.stderr());
    // The key of the run A never finished, retried on B: not run again.
    let retried = on_b.request("chat.send", json!({"sessionKey": "moving", "message": "two", "idempotencyKey": "m-2"}));
    assert_ne!(retried["payload"]["status"], "started", "{retried}");
    assert_eq!(mock.requests().len(), 3, "one request per run, none again");
    let shown = history(&mut on_b, "agent:main:moving");
    let said: Vec<&str> = shown.iter().filter(|(role, _)| role == "user").map(|(_, t)| t.as_str()).collect();
    assert_eq!(said, ["one", "two", "three"], "every prompt once: {shown:?}");
    let answers: Vec<&str> = shown.iter().filter(|(role, _)| role == "assistant").map(|(_, t)| t.as_str()).collect();
    assert_eq!(answers.first(), Some(&"First answer."));
    assert_eq!(answers.last(), Some(&"Answered on B."));
    assert!(
        answers.iter().any(|a| a.starts_with("Working on it")),
        "what A saved of the cut turn is kept: {answers:?}"
    );
    // The cut turn is closed as interrupted, once.
    pg.assert_cut_once_and_gapless("acp", "agent:main:moving");
    eprintln!("B was refused {refusals} times before A's lease lapsed");
}
