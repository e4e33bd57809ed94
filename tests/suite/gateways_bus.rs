//! Three `acp gateway` processes on one PostgreSQL store and one NATS bus (private servers:
//! tests/support/postgres.rs, tests/support/nats.rs): a client of any gateway watches a run
//! another executes, delta for delta; a request for a session another gateway holds runs there;
//! a killed gateway's run ends for those watching it elsewhere and its session moves without a
//! refusal; a restarted bus loses no run's end; the real OpenClaw CLI works against each.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::gateway::{Client, Gateway};
use crate::support::mock_model::MockModel;
use crate::support::nats::Nats;
use crate::support::postgres::Postgres;
use crate::support::script::{calls, endless_text_slowly, result_for, text, words_slowly};

/// A gateway on store `store` and bus `bus`, with leases of `lease` seconds.
fn gateway(mock: &MockModel, store: &str, bus: &str, lease: u32) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), format!("[gateway]\nstore_lease_secs = {lease}\n")).unwrap();
    Gateway::start_in(home, &mock.base(), &["--store", store, "--bus", bus])
}

/// The `chat` events of run `run` until its end: (seq, state, deltaText) each, and the last.
fn chat_of(client: &mut Client, run: &str) -> (Vec<(u64, String, String)>, Value) {
    let frames = client
        .until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == run && e["payload"]["state"] != "delta");
    let chat: Vec<&Value> =
        frames.iter().filter(|f| f["event"] == "chat" && f["payload"]["runId"] == run).map(|f| &f["payload"]).collect();
    let seen = chat
        .iter()
        .map(|p| {
            (
                p["seq"].as_u64().unwrap_or_default(),
                p["state"].as_str().unwrap_or_default().to_owned(),
                p["deltaText"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (seen, chat.last().map(|p| (*p).clone()).unwrap_or_default())
}

fn text_of(payload: &Value) -> String {
    payload["message"]["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default()
}

/// The sessions a gateway has open.
fn open_sessions(client: &mut Client) -> u64 {
    let status = client.request("status", json!({}));
    status["payload"]["sessions"]["count"].as_u64().unwrap_or_else(|| panic!("{status}"))
}

fn owner_of(pg: &Postgres, key: &str) -> String {
    pg.psql("acp", &format!("SELECT coalesce(owner, '') FROM acp_sessions WHERE id = '{key}'"))
}

#[test]
fn a_run_on_one_gateway_is_watched_and_driven_from_the_others() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    let words = ["Watched ", "from ", "every ", "gateway, ", "word ", "by ", "word."];
    mock.push(text("anthropic", "Warm."));
    mock.push(words_slowly(&words, Duration::from_millis(20)));
    mock.push(text("anthropic", "Run on A, asked on B."));
    mock.push(endless_text_slowly("Going on ", Duration::from_millis(20)));
    mock.push(text("anthropic", "Asked through C."));
    mock.push(endless_text_slowly("Waited for ", Duration::from_millis(20)));
    let a = gateway(&mock, &store, &nats.url(), 15);
    let b = gateway(&mock, &store, &nats.url(), 15);
    let c = gateway(&mock, &store, &nats.url(), 15);
    let mut on_a = a.client(&["operator.admin"]);
    let mut on_b = b.client(&["operator.admin"]);
    let mut on_c = c.client(&["operator.admin"]);
    let key = "agent:main:watched";
    // A first run, seen everywhere: B and C take the bus's events by now.
    on_a.request("chat.send", json!({"sessionKey": "watched", "message": "Hi.", "idempotencyKey": "w-0"}));
    for client in [&mut on_a, &mut on_b, &mut on_c] {
        assert_eq!(chat_of(client, "w-0").1["state"], "final");
    }

    // A runs it; B and C watch it, delta for delta, numbered as A numbers them.
    let r = on_a.request("chat.send", json!({"sessionKey": "watched", "message": "Go.", "idempotencyKey": "w-1"}));
    assert_eq!(r["payload"]["status"], "started", "{r}");
    let (seen_a, end_a) = chat_of(&mut on_a, "w-1");
    let (seen_b, end_b) = chat_of(&mut on_b, "w-1");
    let (seen_c, end_c) = chat_of(&mut on_c, "w-1");
    assert_eq!(end_a["state"], "final", "{end_a}");
    assert_eq!(text_of(&end_a), words.concat());
    let deltas: Vec<&str> = seen_a.iter().filter(|(_, s, _)| s == "delta").map(|(_, _, d)| d.as_str()).collect();
    assert_eq!(deltas.concat(), words.concat(), "the reply streamed in deltas: {seen_a:?}");
    assert!(deltas.len() > 1, "{seen_a:?}");
    assert_eq!(seen_b, seen_a, "B saw what A's own client saw\n{}", b.stderr());
    assert_eq!(seen_c, seen_a, "C saw what A's own client saw\n{}", c.stderr());
    assert_eq!((end_b.clone(), end_c.clone()), (end_a.clone(), end_a.clone()));
    let a_owner = owner_of(&pg, key);
    assert!(!a_owner.is_empty());

    // `chat.send` to B for the session A holds: it runs on A, and B's client is answered and
    // sees it run.
    let r = on_b.request("chat.send", json!({"sessionKey": "watched", "message": "Again.", "idempotencyKey": "w-2"}));
    assert_eq!(r["payload"], json!({"runId": "w-2", "status": "started"}), "{r}");
    let (_, end) = chat_of(&mut on_b, "w-2");
    assert_eq!(text_of(&end), "Run on A, asked on B.", "{end}");
    assert_eq!(owner_of(&pg, key), a_owner, "the session stayed on A");
    assert_eq!((open_sessions(&mut on_a), open_sessions(&mut on_b)), (1, 0), "only A opened it");
    // The same key again, on C: A's answer, no second run.
    let again =
        on_c.request("chat.send", json!({"sessionKey": "watched", "message": "Again.", "idempotencyKey": "w-2"}));
    assert_eq!(again["payload"]["status"], "ok", "{again}");
    assert_eq!(mock.requests().len(), 3);

    // A run started through B is aborted through C.
    on_b.request("chat.send", json!({"sessionKey": "watched", "message": "Go on.", "idempotencyKey": "w-3"}));
    on_c.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "w-3" && e["payload"]["state"] == "delta");
    let aborted = on_c.request("chat.abort", json!({"sessionKey": "watched"}));
    assert_eq!(aborted["payload"]["aborted"], true, "{aborted}");
    assert_eq!(aborted["payload"]["runIds"], json!(["w-3"]));
    let (_, end) = chat_of(&mut on_b, "w-3");
    assert_eq!(end["state"], "aborted", "{end}");

    // `agent` through C: both its answers come back through C.
    let id =
        on_c.send_request("agent", json!({"sessionKey": "watched", "message": "And you?", "idempotencyKey": "w-4"}));
    let (_, accepted) = on_c.until_response(&id);
    assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
    let (_, done) = on_c.until_response(&id);
    assert_eq!(done["payload"]["status"], "ok", "{done}");
    assert_eq!(done["payload"]["result"]["payloads"][0]["text"], "Asked through C.");
    // And `agent.wait` on B for it: as A has it.
    let waited = on_b.request("agent.wait", json!({"runId": "w-4", "timeoutMs": 10_000}));
    assert_eq!(waited["payload"]["status"], "ok", "{waited}");
    // `agent.wait` on B for a run going on A is A's to answer: still running, so `timeout`.
    on_c.request("chat.send", json!({"sessionKey": "watched", "message": "Wait.", "idempotencyKey": "w-5"}));
    on_b.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "w-5" && e["payload"]["state"] == "delta");
    let waited = on_b.request("agent.wait", json!({"runId": "w-5", "timeoutMs": 300}));
    assert_eq!(waited["payload"]["status"], "timeout", "{waited}");
    on_b.request("chat.abort", json!({"sessionKey": "watched", "runId": "w-5"}));
    assert_eq!(chat_of(&mut on_c, "w-5").1["state"], "aborted");
    assert_eq!(mock.requests().len(), 6);
    assert_eq!(owner_of(&pg, key), a_owner, "every run was A's");
}

#[test]
fn a_killed_gateways_run_ends_for_its_watchers_and_its_session_moves_without_a_refusal() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    mock.push(endless_text_slowly("Working on it ", Duration::from_millis(10)));
    mock.push(text("anthropic", "Answered on C."));
    let a = gateway(&mock, &store, &nats.url(), 2);
    let b = gateway(&mock, &store, &nats.url(), 2);
    let c = gateway(&mock, &store, &nats.url(), 2);
    let mut on_a = a.client(&["operator.admin"]);
    let mut on_b = b.client(&["operator.admin"]);
    let mut on_c = c.client(&["operator.admin"]);
    on_a.request("chat.send", json!({"sessionKey": "moving", "message": "one", "idempotencyKey": "k-1"}));
    on_b.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "k-1" && e["payload"]["state"] == "delta");
    let saved =
        "SELECT count(*) FROM acp_records WHERE session_id = 'agent:main:moving' AND record LIKE '{\"t\":\"text\"%'";
    while pg.psql("acp", saved) == "0" {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(on_a);
    let _home = a.kill();
    // A client that comes to B after the run went quiet never saw it, and is not told its end.
    let mut late = b.client(&["operator.admin"]);
    // C is asked at once: it waits for A's lease to lapse, then runs it — no refusal.
    let r = on_c.request("chat.send", json!({"sessionKey": "moving", "message": "two", "idempotencyKey": "k-2"}));
    assert_eq!(r["payload"]["status"], "started", "{r}\n{}", c.stderr());
    let (_, end) = chat_of(&mut on_c, "k-2");
    assert_eq!(text_of(&end), "Answered on C.", "{end}");
    // B's client, which watched A's run, is told it ended: from the store, as interrupted.
    let (_, cut) = chat_of(&mut on_b, "k-1");
    assert_eq!(cut["state"], "error", "{cut}");
    assert!(cut["errorMessage"].as_str().unwrap_or_default().contains("interrupted"), "{cut}");
    let asked = late.send_request("health", json!({}));
    let (before, _) = late.until_response(&asked);
    let of_k1: Vec<&Value> = before.iter().filter(|f| f["payload"]["runId"] == "k-1").collect();
    assert!(
        of_k1.iter().all(|f| f["payload"]["state"] == "delta")
            || of_k1.first().is_some_and(|f| f["payload"]["state"] == "delta"),
        "told the end of a run it never saw: {of_k1:?}"
    );
    // The cut run's key, retried on B: not run again.
    let retried = on_b.request("chat.send", json!({"sessionKey": "moving", "message": "one", "idempotencyKey": "k-1"}));
    assert_ne!(retried["payload"]["status"], "started", "{retried}");
    assert_eq!(mock.requests().len(), 2, "one request per run, none again");
    // Every gateway shows every saved turn, once.
    for client in [&mut on_b, &mut on_c] {
        let history = client.request("chat.history", json!({"sessionKey": "moving", "limit": 100}));
        let messages = history["payload"]["messages"].as_array().unwrap().clone();
        let said: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().map(str::to_owned).unwrap_or_else(|| text_of(&json!({"message": m}))))
            .collect();
        assert_eq!(said, ["one", "two"], "{history}");
    }
    // The cut turn was closed as interrupted, once, and no record is missing or doubled.
    pg.assert_cut_once_and_gapless("acp", "agent:main:moving");
}

#[test]
fn a_restarted_bus_loses_no_runs_end_and_later_runs_stream_again() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let mut nats = Nats::start();
    let mock = MockModel::start();
    let words: Vec<String> = (0..30).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    mock.push(words_slowly(&words, Duration::from_millis(30)));
    mock.push(words_slowly(&["Streaming ", "again."], Duration::from_millis(30)));
    let a = gateway(&mock, &store, &nats.url(), 15);
    let b = gateway(&mock, &store, &nats.url(), 15);
    let mut on_a = a.client(&["operator.admin"]);
    let mut on_b = b.client(&["operator.admin"]);
    on_a.request("chat.send", json!({"sessionKey": "restart", "message": "Count.", "idempotencyKey": "n-1"}));
    on_b.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "n-1" && e["payload"]["state"] == "delta");
    // The bus goes away mid-run; the run ends on A meanwhile.
    nats.stop();
    let (_, end_a) = chat_of(&mut on_a, "n-1");
    assert_eq!(text_of(&end_a), words.concat());
    // Off the bus, a request for A's session is refused at once, saying why and what to do.
    b.wait_stderr("lost the bus");
    let r = on_b.request("chat.send", json!({"sessionKey": "restart", "message": "More.", "idempotencyKey": "n-2"}));
    assert_eq!(r["error"]["retryable"], true, "{r}");
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("lost the bus") && said.contains("retry with the same idempotency key"), "{r}");
    nats.run();
    b.wait_stderr("back on the bus");
    // B's client sees the run's end, whole: read from the store (what A sent while off the bus is
    // not queued), or — when A had not yet noticed the bus gone — as A sent it once back.
    let (_, end_b) = chat_of(&mut on_b, "n-1");
    assert_eq!(end_b["state"], "final", "{end_b}\n{}", b.stderr());
    assert_eq!(text_of(&end_b), words.concat(), "{end_b}");
    // Later runs stream to B again, once both are back on the bus: asked on B, run on A.
    let r = loop {
        let r =
            on_b.request("chat.send", json!({"sessionKey": "restart", "message": "More.", "idempotencyKey": "n-2"}));
        if r["ok"] == true {
            break r;
        }
        assert_eq!(r["error"]["retryable"], true, "{r}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r["payload"]["status"], "started", "{r}");
    let (seen, end) = chat_of(&mut on_b, "n-2");
    assert!(seen.iter().any(|(_, state, _)| state == "delta"), "it streamed: {seen:?}");
    assert_eq!(text_of(&end), "Streaming again.");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_bus_not_there_is_said_its_return_too_and_a_bad_bus_url_is_refused() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let mut nats = Nats::start();
    nats.stop();
    let mock = MockModel::start();
    // It starts, says it cannot reach the bus and why, and says so again once it can.
    let a = gateway(&mock, &store, &nats.url(), 15);
    a.wait_stderr("cannot reach the bus");
    assert!(a.stderr().contains("onnection refused"), "{}", a.stderr());
    nats.run();
    a.wait_stderr("back on the bus");
    // A URL that names no server is refused before anything starts.
    for (bus, said) in [
        ("nats://", "names no host"),
        (&format!("{},", nats.url()), "empty URL in its list"),
        ("nats://acp:secret@", "names no host"),
        ("http://127.0.0.1:4222", "is not a nats://"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(["gateway", "--listen", "127.0.0.1:0", "--store", &store, "--bus", bus])
            .env_clear()
            .env("ACP_HOME", a.home.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bus}: {err}");
        assert!(err.contains(said) && !err.contains("secret"), "{bus}: {err}");
    }
}

#[test]
fn an_approver_on_one_gateway_answers_the_question_of_a_run_on_another() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    for n in 1..=3 {
        let write = json!({"path": "notes.txt", "content": format!("version {n}")});
        mock.push(calls("anthropic", &[(&format!("r{n}"), "write", write)]));
        mock.push(text("anthropic", &format!("done {n}")));
    }
    let a = gateway(&mock, &store, &nats.url(), 15);
    let b = gateway(&mock, &store, &nats.url(), 15);
    let c = gateway(&mock, &store, &nats.url(), 15);
    let notes = a.workspace.path().join("notes.txt");
    let mut sender = a.client(&["operator.write"]);
    let r = sender.request("sessions.patch", json!({"key": "asked", "mode": "ask"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let send = |sender: &mut Client, run: &str| {
        let r = sender.request("chat.send", json!({"sessionKey": "asked", "message": "write", "idempotencyKey": run}));
        assert_eq!(r["payload"]["status"], "started", "{r}");
    };
    // No one on any gateway may answer: the run is told so at once, and the call is not run.
    send(&mut sender, "q1");
    assert_eq!(chat_of(&mut sender, "q1").1["state"], "final");
    let result = result_for("anthropic", &mock.requests()[1].body, "r1");
    assert!(result.contains("no one who can answer approval questions"), "{result}");
    assert!(!notes.exists());

    // An approver on B is asked about A's run, and its answer goes to A.
    let mut on_b = b.client(&["operator.read", "operator.approvals"]);
    b.wait_stderr("taking from the bus subject=acp.approvers");
    send(&mut sender, "q2");
    let frames = on_b.until_event(|e| e["event"] == "exec.approval.requested");
    let question = frames.last().unwrap()["payload"].clone();
    assert_eq!(
        (&question["request"]["sessionKey"], &question["request"]["runId"]),
        (&json!("agent:main:asked"), &json!("q2"))
    );
    let id = question["id"].as_str().unwrap().to_owned();
    // The same question again on the bus, from elsewhere and saying something else: the first
    // one heard is the one shown.
    let forged = format!(
        r#"{{"type":"event","event":"exec.approval.requested","payload":{{"id":"{id}","expiresAtMs":99999999999999,"request":{{"command":"forged","title":"forged","sessionKey":"agent:main:asked"}}}}"#
    );
    let headers = "NATS/1.0\r\nAcp-From: elsewhere\r\nAcp-Session: agent:main:asked\r\n\r\n";
    let frame = format!("HPUB acp.ap.x {} {}\r\n{headers}{forged}\r\n", headers.len(), headers.len() + forged.len());
    publish_raw(nats.port, &frame);
    // An approver coming to C while it waits is shown it, and may read it.
    let mut on_c = c.client(&["operator.read", "operator.approvals"]);
    let shown = on_c.until_event(|e| e["event"] == "exec.approval.requested");
    assert_eq!(shown.last().unwrap()["payload"], question, "shown as asked");
    assert_eq!(on_c.request("exec.approval.get", json!({"id": id}))["payload"]["id"], id.as_str());
    // A reader may not answer, here or there.
    let mut reader = b.client(&["operator.read"]);
    let refused = reader.request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
    assert_eq!(refused["error"]["details"]["code"], "MISSING_SCOPE", "{refused}");
    let r = on_b.request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
    assert_eq!(r["payload"], json!({"ok": true, "id": id, "decision": "allow-once"}), "{r}");
    assert_eq!(chat_of(&mut sender, "q2").1["state"], "final");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "version 2");
    // Everyone hears it was answered; answered once.
    let resolved = on_c.until_event(|e| e["event"] == "exec.approval.resolved");
    assert_eq!(resolved.last().unwrap()["payload"]["decision"], "allow-once");
    let again = on_c.request("exec.approval.resolve", json!({"id": id, "decision": "deny"}));
    assert_eq!(again["error"]["message"], "unknown or expired approval id", "{again}");
    assert_eq!(mock.requests().len(), 4);

    // The gateway that asked dies while its question waits: answering it says so, and the
    // approvers are told it was withdrawn.
    send(&mut sender, "q3");
    let frames = on_b.until_event(|e| e["event"] == "exec.approval.requested");
    let id = frames.last().unwrap()["payload"]["id"].as_str().unwrap().to_owned();
    drop(sender);
    let _home = a.kill();
    // (Until NATS has seen it go, the answer may wait for it in vain: retryable.)
    let (before, r) = loop {
        let sent = on_b.send_request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
        let (before, r) = on_b.until_response(&sent);
        if r["error"]["retryable"] != true {
            break (before, r);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("has stopped"), "{r}");
    let withdrawn = before
        .iter()
        .find(|e| e["event"] == "exec.approval.resolved" && e["payload"]["id"] == id.as_str())
        .unwrap_or_else(|| panic!("not withdrawn: {before:?}"));
    assert!(withdrawn["payload"]["reason"].as_str().unwrap_or_default().contains("stopped"), "{withdrawn}");
}

#[test]
fn the_real_openclaw_cli_works_against_each_of_three_gateways() {
    use crate::support::gateway::TOKEN;
    use crate::support::openclaw::{cli, json_in};
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    for reply in ["First, on A.", "Second, through B.", "Third, through C."] {
        mock.push(text("anthropic", reply));
    }
    let gateways: Vec<Gateway> = (0..3).map(|_| gateway(&mock, &store, &nats.url(), 15)).collect();
    let state = tempfile::tempdir().unwrap();
    for (gw, reply) in gateways.iter().zip(["First, on A.", "Second, through B.", "Third, through C."]) {
        let url = format!("ws://127.0.0.1:{}", gw.port);
        std::fs::write(
            state.path().join("openclaw.json"),
            json!({"gateway": {"mode": "remote", "remote": {"url": url, "token": TOKEN}}}).to_string(),
        )
        .unwrap();
        let (ok, out) = cli(state.path(), &["gateway", "call", "health", "--url", &url, "--token", TOKEN]);
        assert!(ok, "openclaw gateway call health:\n{out}\n{}", gw.stderr());
        assert_eq!(json_in(&out)["ok"], true);
        let (ok, out) =
            cli(state.path(), &["agent", "--message", "Say hello.", "--session-key", "agent:main:openclaw", "--json"]);
        assert!(ok, "openclaw agent:\n{out}\n{}", gw.stderr());
        assert!(out.contains(reply), "{out}");
        let (ok, out) = cli(state.path(), &["gateway", "call", "sessions.list", "--url", &url, "--token", TOKEN]);
        assert!(ok, "{out}");
        assert_eq!(json_in(&out)["sessions"][0]["key"], "agent:main:openclaw");
    }
    assert_eq!(mock.requests().len(), 3);
    // All three ran on the gateway that opened the session first.
    let open: Vec<u64> = gateways.iter().map(|g| open_sessions(&mut g.client(&["operator.admin"]))).collect();
    assert_eq!(open, [1, 0, 0]);
}

#[test]
fn one_gateway_of_several_polls_a_telegram_bot_and_another_takes_over_when_it_dies() {
    use crate::support::telegram::FakeTelegram;
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let start = || {
        let home = tempfile::tempdir().unwrap();
        let config = format!(
            "[gateway]\nstore_lease_secs = 2\n\n[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\n",
            fake.base
        );
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        Gateway::start_in(home, &mock.base(), &["--store", &store, "--bus", &nats.url()])
    };
    let gateways = [start(), start()];
    // One of them holds the bot's lease and polls; the other stands by.
    let leader_pid = loop {
        let owner = pg.psql("acp", "SELECT coalesce(max(owner), '') FROM acp_leases WHERE name = 'telegram:123'");
        if let Some(pid) = owner.split('/').nth(1) {
            break pid.parse::<u32>().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (leader, other): (Vec<Gateway>, Vec<Gateway>) = gateways.into_iter().partition(|g| g.child.id() == leader_pid);
    let (leader, other) = (leader.into_iter().next().unwrap(), other.into_iter().next().unwrap());
    let state = |gw: &Gateway| {
        let status = gw.client(&["operator.admin"]).request("channels.status", json!({}));
        status["payload"]["channelAccounts"]["telegram"][0]["state"].as_str().unwrap_or_default().to_owned()
    };
    let mut standing_by = state(&other);
    while standing_by == "connecting" {
        std::thread::sleep(Duration::from_millis(50));
        standing_by = state(&other);
    }
    assert_eq!(standing_by, "standby");
    mock.push(text("anthropic", "Answered by the one polling."));
    fake.message(7, "private", 7, "Hello?");
    assert_eq!(fake.wait_sent(7, 1), ["Answered by the one polling."]);
    assert_eq!(fake.conflicts(), 0, "never two pollers at once");
    // The poller dies: the other takes the bot over once its lease lapsed, and the chat's next
    // message is answered there, once.
    let _home = leader.kill();
    mock.push(text("anthropic", "Answered by the other."));
    fake.message(7, "private", 7, "Still there?");
    assert_eq!(fake.wait_sent(7, 2)[1], "Answered by the other.", "{}", other.stderr());
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(state(&other), "polling");
    // At most the dead one's last poll was ended by the other's first.
    assert!(fake.conflicts() <= 1, "{}", fake.conflicts());
}

/// Publishes `frames` (the NATS client protocol, as is) on the bus at `port`.
fn publish_raw(port: u16, frames: &str) {
    use std::io::{Read as _, Write as _};
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut info = [0u8; 4096];
    let _ = socket.read(&mut info).unwrap();
    socket.write_all(b"CONNECT {\"verbose\":false,\"headers\":true}\r\n").unwrap();
    socket.write_all(frames.as_bytes()).unwrap();
    socket.write_all(b"PING\r\n").unwrap();
    let mut pong = Vec::new();
    while !String::from_utf8_lossy(&pong).contains("PONG") {
        let mut buf = [0u8; 512];
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "the bus closed: {}", String::from_utf8_lossy(&pong));
        pong.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn what_a_client_may_not_ask_is_not_forwarded_and_garbage_on_the_bus_harms_nothing() {
    let pg = Postgres::start();
    let store = pg.create_db("acp");
    let nats = Nats::start();
    let mock = MockModel::start();
    mock.push(text("anthropic", "Held by A."));
    mock.push(text("anthropic", "Still fine."));
    let a = gateway(&mock, &store, &nats.url(), 15);
    let b = gateway(&mock, &store, &nats.url(), 15);
    let mut on_a = a.client(&["operator.admin"]);
    let mut on_b = b.client(&["operator.admin"]);
    // A run key with a line break in it, as a client may send one: relayed like any other.
    let evil = "evil\r\nkey";
    on_a.request("chat.send", json!({"sessionKey": "guarded", "message": "Hi.", "idempotencyKey": evil}));
    assert_eq!(chat_of(&mut on_b, evil).1["state"], "final", "{}", a.stderr());
    // A reader on B may not send: refused on B, never forwarded to A.
    let mut reader = b.client(&["operator.read"]);
    let refused =
        reader.request("chat.send", json!({"sessionKey": "guarded", "message": "Let me.", "idempotencyKey": "r-1"}));
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("operator.write"), "{refused}");
    // Garbage on every subject the gateways take: nothing breaks.
    let owner = owner_of(&pg, "agent:main:guarded");
    let a_token: String =
        owner.chars().map(|c| if c.is_ascii_alphanumeric() || "-_:".contains(c) { c } else { '_' }).collect();
    let forged = json!({"reply": "elsewhere.x", "deadline": i64::MAX, "role": "operator", "scopes": ["operator.admin"],
        "clientId": "x", "mode": "cli", "id": "1", "method": "sessions.delete", "params": {"key": "guarded"}})
    .to_string();
    let headers = "NATS/1.0\r\nAcp-Run: %zz\r\nAcp-Seq: many\r\nAcp-Session: %41%\r\n\r\n";
    let frames = [
        format!("PUB acp.gw.{a_token} _INBOX.t1 9\r\nnot json!\r\n"),
        format!("PUB acp.gw.{a_token} _INBOX.t2 {}\r\n{forged}\r\n", forged.len()),
        "PUB acp.ev.x 5\r\nhello\r\n".to_owned(),
        format!("HPUB acp.ev.y {} {}\r\n{headers}{{}}\r\n", headers.len(), headers.len() + 2),
        "PUB acp.conn.nobody.notanumber 2\r\nhi\r\n".to_owned(),
        "PUB acp.ap.z 3\r\nbad\r\n".to_owned(),
        format!("HPUB acp.ap.z {} {}\r\n{headers}{{}}\r\n", headers.len(), headers.len() + 2),
    ];
    publish_raw(nats.port, &frames.concat());
    // The session is still there (the forged delete was not for a gateway to send), and the
    // next run streams from A to B as before.
    let r = on_b.request("chat.send", json!({"sessionKey": "guarded", "message": "Again.", "idempotencyKey": "g-2"}));
    assert_eq!(r["payload"]["status"], "started", "{r}");
    assert_eq!(text_of(&chat_of(&mut on_b, "g-2").1), "Still fine.");
    assert_eq!(owner_of(&pg, "agent:main:guarded"), owner);
    assert!(a.stderr().contains("a request on the bus no gateway sends"), "{}", a.stderr());
}
