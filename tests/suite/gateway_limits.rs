//! What an authenticated client (or a crash) can do to the gateway's memory and data, on the real
//! binary: a session killed during its first run, retries across a restart, queues and their
//! caps, aborts, the concurrency lane, idle sessions closed, and MCP results too big to hold.

use serde_json::{Value, json};

use crate::support::gateway::{Client, Gateway};
use crate::support::mock_model::MockModel;
use crate::support::script::endless_text;

/// config.toml lines for a model whose context holds messages of tens of megabytes (so a big
/// message runs as it is, rather than being compacted first).
const BIG_CONTEXT: &str = "model = \"anthropic/claude-huge\"\n\
    [providers.anthropic]\nmodels = [{ id = \"claude-huge\", context_window = 100000000 }]\n";

/// A reply that begins with `first` and then never goes on (nor ends).
fn stalled(first: &str) -> crate::support::mock_model::Reply {
    crate::support::script::text("anthropic", first).stall_after(3)
}

fn keys(listed: &Value) -> Vec<String> {
    listed["payload"]["sessions"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap().to_owned()).collect()
}

/// Sends `message` on `key`; the run's id.
fn send(client: &mut Client, key: &str, message: &str, run: &str) -> Value {
    client.request("chat.send", json!({"sessionKey": key, "message": message, "idempotencyKey": run}))
}

#[test]
fn a_session_killed_during_its_first_run_is_listed_after_the_restart() {
    let mock = MockModel::start();
    mock.push(endless_text("Working on it: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let started = send(&mut client, "crashy", "keep this prompt", "r1");
    assert_eq!(started["payload"]["status"], "started", "{started}");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    // kill -9 mid-run, and a new gateway on the same home.
    let gw = gw.restart(&mock.base());
    let mut client = gw.client(&["operator.admin"]);
    let listed = client.request("sessions.list", json!({}));
    assert!(keys(&listed).contains(&"agent:main:crashy".to_owned()), "{listed}");
    let history = client.request("chat.history", json!({"sessionKey": "crashy"}));
    assert_eq!(history["payload"]["messages"][0]["content"], "keep this prompt", "{history}");
    // And from the command line.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["sessions", "list", "--json"])
        .env_clear()
        .env("ACP_HOME", gw.home.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("agent:main:crashy"), "{out:?}");
}

#[test]
fn a_server_answering_30_mb_reaches_neither_clients_nor_the_transcript_whole() {
    use crate::support::script::{calls, result_for, text};
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("f1", "mcp__stub__flood", json!({}))]));
    mock.push(text("anthropic", "Done."));
    let home = tempfile::tempdir().unwrap();
    let stub = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/stub_server.py");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[mcp_servers.stub]\ncommand = \"python3\"\nargs = [{}, \"tools\"]\n",
            json!(stub.display().to_string())
        ),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let started = send(&mut client, "flood", "call the flood tool", "f-run");
    assert_eq!(started["payload"]["status"], "started", "{started}");
    let events = client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    let result = events
        .iter()
        .find(|e| e["event"] == "agent" && e["payload"]["data"]["phase"] == "result")
        .unwrap_or_else(|| panic!("no tool result among {} events\n{}", events.len(), gw.stderr()));
    let shown = result["payload"]["data"]["result"].as_str().unwrap();
    assert!(shown.len() < 17 << 10, "clients were sent {} bytes", shown.len());
    assert!(shown.contains("omitted"), "the cut says so");
    let biggest = events.iter().map(|e| e.to_string().len()).max().unwrap();
    assert!(biggest < 64 << 10, "an event of {biggest} bytes");
    // The model got its own budget's worth.
    let for_model = result_for("anthropic", &mock.requests()[1].body, "f1");
    assert!((20_000..31_000).contains(&for_model.len()), "{}", for_model.len());
    // And the transcript keeps no more than that.
    let sessions = gw.home.path().join("sessions");
    let largest = std::fs::read_dir(&sessions).unwrap().flatten().map(|e| e.metadata().unwrap().len()).max().unwrap();
    assert!(largest < 256 << 10, "a transcript of {largest} bytes");
}

#[test]
fn a_retry_after_a_restart_runs_nothing_and_sends_nothing_again() {
    use crate::support::script::text;
    use crate::support::telegram::FakeTelegram;
    let mock = MockModel::start();
    mock.push(text("anthropic", "Once only."));
    let fake = FakeTelegram::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\n",
            fake.base
        ),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    assert_eq!(send(&mut client, "retried", "hello", "key-1")["payload"]["status"], "started");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    let delivery = json!({"to": "777", "message": "a notice", "idempotencyKey": "send-1"});
    assert_eq!(client.request("send", delivery.clone())["ok"], true);
    assert_eq!(fake.wait_sent(777, 1), ["a notice"]);
    // kill -9 and start again: the same keys again.
    let gw = gw.restart(&mock.base());
    let mut client = gw.client(&["operator.admin"]);
    let again = send(&mut client, "retried", "hello", "key-1");
    assert_eq!(again["payload"], json!({"runId": "key-1", "status": "ok"}), "{again}");
    let waited = client.request("agent.wait", json!({"runId": "key-1", "timeoutMs": 1000}));
    assert_eq!(waited["payload"]["status"], "ok", "{waited}");
    assert_eq!(waited["payload"]["terminalReply"]["text"], "Once only.", "{waited}");
    let resent = client.request("send", delivery);
    assert_eq!(resent["ok"], true, "{resent}");
    assert_eq!(mock.requests().len(), 1, "the run did not run again");
    let to_777 = fake.sent().iter().filter(|m| m["chat_id"] == 777 || m["chat_id"] == "777").count();
    assert_eq!(to_777, 1, "nothing was sent again: {:?}", fake.sent());
}

/// The gateway's `status`.
fn status(client: &mut Client) -> Value {
    client.request("status", json!({}))["payload"].clone()
}

#[test]
fn queues_are_capped_an_abort_is_one_cancel_and_runs_wait_in_the_lane() {
    use crate::support::script::text;
    let mock = MockModel::start();
    mock.push(stalled("Busy: "));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("{BIG_CONTEXT}[gateway]\nmax_concurrent_runs = 1\nmax_queued_runs = 5\n"),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    assert_eq!(send(&mut client, "busy", "go on forever", "b0")["payload"]["status"], "started");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    // Four more wait behind it; the sixth is refused, saying why.
    for n in 1..5 {
        assert_eq!(send(&mut client, "busy", "later", &format!("b{n}"))["payload"]["status"], "started");
    }
    let refused = send(&mut client, "busy", "one too many", "b5");
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "UNAVAILABLE");
    assert_eq!(refused["error"]["retryable"], true);
    assert!(refused["error"]["message"].as_str().unwrap().contains("5 runs waiting or going"), "{refused}");
    // So are messages past the bytes a session holds (32 MiB), however few.
    let big = "x".repeat(20 << 20);
    let mut other = gw.client(&["operator.admin"]);
    assert_eq!(send(&mut other, "big", &big, "g1")["payload"]["status"], "started");
    let too_much = send(&mut other, "big", &big, "g2");
    assert!(too_much["error"]["message"].as_str().unwrap().contains("MiB"), "{too_much}");
    // One run at a time: the other session's run waits in the lane, not at the model.
    let mut waiting = status(&mut client);
    for _ in 0..3000 {
        if waiting["runs"]["waiting"] == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        waiting = status(&mut client);
    }
    assert_eq!(waiting["runs"]["waiting"], 1, "{waiting}");
    assert_eq!(waiting["runs"]["running"], 1, "{waiting}");
    assert_eq!(mock.requests().len(), 1, "only the running one reached the model");
    // An abort: one cancellation for all five; every one ends aborted, and the session works again.
    mock.push(text("anthropic", "Big one done."));
    let aborted = client.request("chat.abort", json!({"sessionKey": "busy"}));
    let ids: Vec<&str> = aborted["payload"]["runIds"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(ids.len(), 5, "{aborted}");
    // The lane goes on: the big session's run gets its place and its answer.
    let done = other.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    assert_eq!(done.last().unwrap()["payload"]["runId"], "g1");
    mock.push(text("anthropic", "Back."));
    assert_eq!(send(&mut client, "busy", "again", "b6")["payload"]["status"], "started");
    let back = client
        .until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final" && e["payload"]["runId"] == "b6");
    assert_eq!(back.last().unwrap()["payload"]["message"]["content"][0]["text"], "Back.");
}

#[test]
fn idle_sessions_are_closed_and_their_memory_given_back() {
    use crate::support::script::text;
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    // Closed after 1.2 s idle; at most 3 open.
    std::fs::write(
        home.path().join("config.toml"),
        format!("{BIG_CONTEXT}[gateway]\nidle_session_minutes = 0.02\nmax_open_sessions = 3\n"),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let rss = |client: &mut Client| status(client)["processMemory"]["rssBytes"].as_u64().unwrap();
    let before = rss(&mut client);
    let big = "y".repeat(16 << 20);
    // Read right after each run ends, while its session is surely open (on a loaded machine the
    // first ones may be closed as idle before the last one ends).
    let mut held = 0;
    for n in 0..4 {
        // Sent on a connection of its own, closed before the figure is read (its buffers are the
        // connection's, not the sessions').
        let mut sender = gw.client(&["operator.admin"]);
        mock.push(text("anthropic", "Noted."));
        assert_eq!(send(&mut sender, &format!("big-{n}"), &big, &format!("i{n}"))["payload"]["status"], "started");
        let seen = sender.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
        for e in &seen {
            let size = e.to_string().len();
            assert!(size < 1 << 20, "an event of {size} bytes: {}", &e.to_string()[..300]);
        }
        let open = status(&mut client)["sessions"]["count"].as_u64().unwrap();
        assert!(open <= 3, "at most 3 open: {open}");
        drop(sender);
        held = held.max(rss(&mut client));
    }
    // Closed once idle (the check gives up after a minute: they never were).
    let mut open = status(&mut client)["sessions"]["count"].as_u64().unwrap();
    for _ in 0..1200 {
        if open == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        open = status(&mut client)["sessions"]["count"].as_u64().unwrap();
    }
    assert_eq!(open, 0, "idle sessions are closed");
    let after = rss(&mut client);
    println!("RSS: {} MiB before, {} MiB held, {} MiB after", before >> 20, held >> 20, after >> 20);
    assert!(
        after < held - (held - before) * 2 / 5,
        "idle sessions closed, memory returned: {} MiB before, {} MiB with 4 sessions of 16 MiB, {} MiB after",
        before >> 20,
        held >> 20,
        after >> 20
    );
    // A closed session opens again as it was.
    mock.push(text("anthropic", "Still here."));
    assert_eq!(send(&mut client, "big-0", "still there?", "i9")["payload"]["status"], "started");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    let history = client.request("chat.history", json!({"sessionKey": "big-0"}));
    assert_eq!(history["payload"]["messages"].as_array().unwrap().len(), 4, "{}", history.to_string().len());
}

#[test]
fn a_client_holds_at_most_256_requests_in_flight() {
    let mock = MockModel::start();
    mock.push(stalled("Going: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    assert_eq!(send(&mut client, "long", "go on", "w0")["payload"]["status"], "started");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    // Waits on the run that never ends: each holds a request open.
    let ids: Vec<String> =
        (0..300).map(|_| client.send_request("agent.wait", json!({"runId": "w0", "timeoutMs": 600_000}))).collect();
    let mut refused = 0;
    while refused < 300 - 256 {
        let frame = client.recv();
        if frame["type"] == "res" && ids.iter().any(|id| *id == frame["id"]) {
            assert_eq!(frame["error"]["code"], "UNAVAILABLE", "{frame}");
            assert!(frame["error"]["message"].as_str().unwrap().contains("256 requests"), "{frame}");
            refused += 1;
        }
    }
    // The run ends: the waits are answered, and the connection takes requests again.
    let mut other = gw.client(&["operator.admin"]);
    other.request("chat.abort", json!({"sessionKey": "long"}));
    let mut answered = 0;
    while answered < 256 {
        let frame = client.recv();
        if frame["type"] == "res" {
            assert_eq!(frame["payload"]["status"], "aborted", "{frame}");
            answered += 1;
        }
    }
    assert_eq!(client.request("health", json!({}))["ok"], true);
}
