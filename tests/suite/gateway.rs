//! `acp gateway` over real WebSockets, checked against the reference gateway's captured wire
//! (the handshake and its failures, errors after connect, scopes, `chat.send` streaming to every
//! socket, idempotent retries, abort, sessions, shutdown).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::{Client, Device, Gateway, Read_, TOKEN, connect_params};
use crate::support::mock_model::MockModel;
use crate::support::openclaw::json_in;
use crate::support::script::{calls, endless_text, result_for, text};

fn names(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_handshake_as_captured() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let (mut client, challenge) = gw.socket();
    let payload = &challenge["payload"];
    assert!(payload["nonce"].as_str().is_some_and(|n| n.len() == 36), "{challenge}");
    assert!(payload["ts"].is_i64());
    assert_eq!(challenge.get("seq"), None, "the challenge has no seq");
    let hello = client.request("connect", connect_params(Some(TOKEN), &["operator.read"]));
    let ok = &hello["payload"];
    assert_eq!(hello["ok"], true);
    assert_eq!(ok["type"], "hello-ok");
    assert_eq!(ok["protocol"], 4);
    assert_eq!(
        names(&ok["features"]["methods"]),
        [
            "health",
            "status",
            "models.list",
            "agents.list",
            "agent.identity.get",
            "system-presence",
            "config.get",
            "sessions.list",
            "sessions.resolve",
            "sessions.subscribe",
            "sessions.unsubscribe",
            "sessions.reset",
            "sessions.patch",
            "sessions.delete",
            "chat.send",
            "chat.abort",
            "chat.history",
            "chat.inject",
            "agent",
            "agent.wait",
            "send",
            "channels.status",
            "pairing.list",
            "pairing.approve",
            "pairing.reject",
            "exec.approval.get",
            "exec.approval.resolve",
            "cron.status",
            "cron.list",
            "cron.get",
            "cron.runs",
            "cron.add",
            "cron.update",
            "cron.remove",
            "cron.run",
            "last-heartbeat",
            "set-heartbeats",
            "wake"
        ]
    );
    assert_eq!(ok["auth"], json!({"method": "token", "role": "operator", "scopes": ["operator.read"]}));
    assert_eq!(ok["policy"], json!({"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 30000}));
    let defaults = &ok["snapshot"]["sessionDefaults"];
    assert_eq!((&defaults["mainKey"], &defaults["mainSessionKey"]), (&json!("main"), &json!("agent:main:main")));
    assert!(ok["snapshot"]["uptimeMs"].is_u64() && ok["server"]["connId"].is_string());
    // Then a health push, the connection's first event.
    let health = client.recv();
    assert_eq!((&health["event"], &health["seq"]), (&json!("health"), &json!(1)), "{health}");
    assert_eq!(health["payload"]["ok"], true);
    assert!(health["stateVersion"].is_object());
}

/// Connects and sends `first`; returns what came back and the close.
fn first_frame(gw: &Gateway, first: &str) -> (Vec<Value>, Option<(u16, String)>) {
    let (mut client, _) = gw.socket();
    client.send_text(first);
    client.until_closed()
}

fn error_of(frames: &[Value]) -> Value {
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_eq!(frames[0]["ok"], false);
    frames[0]["error"].clone()
}

#[test]
fn every_bad_first_frame_as_captured() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let connect = |params: Value| json!({"type": "req", "id": "c1", "method": "connect", "params": params}).to_string();
    // A request that is not `connect`.
    let (frames, close) = first_frame(&gw, r#"{"type":"req","id":"h1","method":"health"}"#);
    let message = "invalid handshake: first request must be connect";
    assert_eq!(error_of(&frames), json!({"code": "INVALID_REQUEST", "message": message}));
    assert_eq!(frames[0]["id"], "h1");
    assert_eq!(close, Some((1008, message.into())));
    // Not JSON: closed normally, nothing said.
    assert_eq!(first_frame(&gw, "hello?"), (vec![], Some((1000, String::new()))));
    // Not a request, or one without an id.
    for frame in [r#"{"type":"event","event":"x"}"#, r#"{"type":"req","method":"connect"}"#] {
        assert_eq!(first_frame(&gw, frame), (vec![], Some((1008, "invalid request frame".into()))), "{frame}");
    }
    // Params.
    let mut bogus = connect_params(Some(TOKEN), &[]);
    bogus["bogus"] = json!(1);
    let mut bad_id = connect_params(Some(TOKEN), &[]);
    bad_id["client"]["id"] = json!("my-client");
    for (params, message) in [
        (json!({"minProtocol": 4, "maxProtocol": 4}), "invalid connect params: must have required property 'client'"),
        (bogus, "invalid connect params: at root: unexpected property 'bogus'"),
        (bad_id, "invalid connect params: at /client/id: must be equal to one of the allowed values"),
    ] {
        let (frames, close) = first_frame(&gw, &connect(params));
        assert_eq!(error_of(&frames), json!({"code": "INVALID_REQUEST", "message": message}));
        assert_eq!(close, Some((1008, message.into())));
    }
    // Versions that do not include 4.
    for version in [3, 5] {
        let mut params = connect_params(Some(TOKEN), &[]);
        params["minProtocol"] = json!(version);
        params["maxProtocol"] = json!(version);
        let (frames, close) = first_frame(&gw, &connect(params));
        assert_eq!(
            error_of(&frames),
            json!({"code": "INVALID_REQUEST", "message": "protocol mismatch", "details": {"code": "PROTOCOL_MISMATCH",
                "clientMinProtocol": version, "clientMaxProtocol": version, "expectedProtocol": 4, "minimumProbeProtocol": 3}})
        );
        assert_eq!(close, Some((1002, "protocol mismatch".into())));
    }
    let mut admin = connect_params(Some(TOKEN), &[]);
    admin["role"] = json!("admin");
    let (frames, close) = first_frame(&gw, &connect(admin));
    assert_eq!(error_of(&frames), json!({"code": "INVALID_REQUEST", "message": "invalid role"}));
    assert_eq!(close, Some((1008, "invalid role".into())));
    // Credentials.
    let mismatch = "unauthorized: gateway token mismatch (use this gateway's token: --token-file, ACP_GATEWAY_TOKEN or [gateway] token)";
    let mut password = connect_params(None, &[]);
    password["auth"] = json!({"password": TOKEN});
    for params in [connect_params(Some("wrong"), &[]), password] {
        let (frames, close) = first_frame(&gw, &connect(params));
        assert_eq!(
            error_of(&frames),
            json!({"code": "INVALID_REQUEST", "message": mismatch, "details": {"code": "AUTH_TOKEN_MISMATCH",
                "authReason": "token_mismatch", "canRetryWithDeviceToken": false, "recommendedNextStep": "update_auth_credentials"}})
        );
        assert_eq!(close, Some((1008, mismatch.into())));
    }
    let (frames, close) = first_frame(&gw, &connect(connect_params(None, &[])));
    assert_eq!(
        error_of(&frames),
        json!({"code": "NOT_PAIRED", "message": "device identity required", "details": {"code": "DEVICE_IDENTITY_REQUIRED"}})
    );
    assert_eq!(close, Some((1008, "device identity required".into())));
}

#[test]
fn errors_after_connect_leave_the_socket_open() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let error = |r: Value| {
        assert_eq!(r["ok"], false, "{r}");
        r["error"].clone()
    };
    assert_eq!(
        error(client.request("no.such.method", json!({}))),
        json!({"code": "INVALID_REQUEST", "message": "unknown method: no.such.method"})
    );
    assert_eq!(
        error(client.request("chat.send", json!({"sessionKey": "k", "message": "hi"}))),
        json!({"code": "INVALID_REQUEST", "message": "invalid chat.send params: must have required property 'idempotencyKey'"})
    );
    assert_eq!(
        error(client.request("sessions.list", json!({"limit": "ten"}))),
        json!({"code": "INVALID_REQUEST", "message": "invalid sessions.list params: at /limit: must be integer"})
    );
    assert_eq!(
        error(client.request("chat.abort", json!({"sessionKey": "k", "bogus": true}))),
        json!({"code": "INVALID_REQUEST", "message": "invalid chat.abort params: at root: unexpected property 'bogus'"})
    );
    // Not a request: answered under the id "invalid".
    client.send(&json!({"type": "event", "event": "x"}));
    let (_, r) = client.until_response("invalid");
    assert_eq!(error(r)["message"].as_str().unwrap().starts_with("invalid request frame: "), true);
    // Malformed JSON is ignored; the next request is answered.
    client.send_text("{not json");
    assert_eq!(client.request("health", json!({}))["ok"], true);
    assert_eq!(
        error(client.request("connect", connect_params(Some(TOKEN), &[]))),
        json!({"code": "INVALID_REQUEST", "message": "connect is only valid as the first request"})
    );
    // A read-only client reads, and is refused what writes.
    let mut reader = gw.client(&["operator.read"]);
    assert_eq!(reader.request("sessions.list", json!({}))["ok"], true);
    assert_eq!(
        error(reader.request("chat.send", json!({"sessionKey": "k", "message": "hi", "idempotencyKey": "r1"}))),
        json!({"code": "FORBIDDEN", "message": "missing scope: operator.write", "details": {"code": "MISSING_SCOPE",
            "missingScope": "operator.write", "requiredScopes": ["operator.write"]}})
    );
    assert_eq!(mock.requests().len(), 0);
}

fn chat_events(frames: &[Value], run: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["event"] == "chat" && f["payload"]["runId"] == run)
        .map(|f| f["payload"].clone())
        .collect()
}

#[test]
fn a_run_streams_to_every_socket_and_retries_never_start_a_second() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from the mock model, in pieces."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut sender = gw.client(&["operator.admin"]);
    let mut watcher = gw.client(&["operator.read"]);
    let send = json!({"sessionKey": "wire-demo", "message": "Say hello.", "idempotencyKey": "run-1"});
    let first = sender.send_request("chat.send", send.clone());
    let again = sender.send_request("chat.send", send.clone());
    // Back to back: one starts the run, the other is told it is in flight (in either order, as
    // requests are answered as they finish).
    let mut answers = std::collections::HashMap::new();
    let mut sender_frames = Vec::new();
    while answers.len() < 2 {
        let frame = sender.recv();
        if frame["type"] == "res" {
            answers.insert(frame["id"].as_str().unwrap().to_owned(), frame["payload"].clone());
        } else {
            sender_frames.push(frame);
        }
    }
    assert_eq!(answers[&first], json!({"runId": "run-1", "status": "started"}));
    assert_eq!(answers[&again], json!({"runId": "run-1", "status": "in_flight"}));
    for (n, client) in [&mut sender, &mut watcher].into_iter().enumerate() {
        let mut frames = if n == 0 { std::mem::take(&mut sender_frames) } else { Vec::new() };
        if !frames.iter().any(|e| e["event"] == "chat" && e["payload"]["state"] == "final") {
            frames.extend(client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final"));
        }
        let chat = chat_events(&frames, "run-1");
        let finale = chat.last().unwrap();
        assert_eq!(finale["state"], "final");
        assert_eq!(finale["sessionKey"], "agent:main:wire-demo");
        assert_eq!(finale["stopReason"], "stop");
        let full = finale["message"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(full, "Hello from the mock model, in pieces.");
        let deltas: Vec<&Value> = chat.iter().filter(|c| c["state"] == "delta").collect();
        assert!(!deltas.is_empty());
        let joined: String = deltas.iter().map(|d| d["deltaText"].as_str().unwrap()).collect();
        assert_eq!(joined, full, "the deltas add up to the reply");
        for d in &deltas {
            let cumulative = d["message"]["content"][0]["text"].as_str().unwrap();
            assert!(full.starts_with(cumulative));
        }
        // Each socket numbers its own events, without gaps; the run numbers its own.
        let seqs: Vec<u64> = frames.iter().filter_map(|f| f["seq"].as_u64()).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        let run_seqs: Vec<u64> = chat.iter().map(|c| c["seq"].as_u64().unwrap()).collect();
        assert!(run_seqs.windows(2).all(|w| w[1] > w[0]), "{run_seqs:?}");
        let lifecycle: Vec<&str> = frames
            .iter()
            .filter(|f| f["event"] == "agent" && f["payload"]["stream"] == "lifecycle")
            .map(|f| f["payload"]["data"]["phase"].as_str().unwrap())
            .collect();
        assert_eq!(lifecycle, ["start", "end"]);
    }
    // After it ended, the same key from either socket: `ok`, and no second run.
    for client in [&mut sender, &mut watcher] {
        let r = client.request("chat.send", send.clone());
        let r = if r["ok"] == true { r["payload"].clone() } else { r["error"].clone() };
        assert!(r == json!({"runId": "run-1", "status": "ok"}) || r["code"] == "FORBIDDEN", "{r}");
    }
    assert_eq!(mock.requests().len(), 1);
    let list = sender.request("sessions.list", json!({"limit": 20}));
    let keys: Vec<&str> =
        list["payload"]["sessions"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["agent:main:wire-demo"]);
    assert_eq!(
        sender.request("sessions.resolve", json!({"key": "wire-demo"}))["payload"]["key"],
        "agent:main:wire-demo"
    );
}

#[test]
fn abort_sends_aborted_before_its_answer() {
    let mock = MockModel::start();
    mock.push(endless_text("Counting: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let r = client.request("chat.abort", json!({"sessionKey": "wire-abort"}));
    assert_eq!(r["payload"], json!({"ok": true, "aborted": false, "runIds": []}), "nothing running");
    let r =
        client.request("chat.send", json!({"sessionKey": "wire-abort", "message": "count", "idempotencyKey": "a1"}));
    assert_eq!(r["payload"]["status"], "started");
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    let r = client.request("chat.abort", json!({"sessionKey": "wire-abort", "runId": "nope"}));
    assert_eq!(r["payload"], json!({"ok": true, "aborted": false, "runIds": []}), "an unknown run");
    let id = client.send_request("chat.abort", json!({"sessionKey": "wire-abort", "runId": "a1"}));
    let (before, answer) = client.until_response(&id);
    assert_eq!(answer["payload"], json!({"ok": true, "aborted": true, "runIds": ["a1"]}));
    let aborted =
        chat_events(&before, "a1").into_iter().find(|c| c["state"] == "aborted").expect("aborted before the answer");
    assert_eq!(aborted["stopReason"], "rpc");
    assert!(aborted["message"]["content"][0]["text"].as_str().unwrap().starts_with("Counting: "));
}

#[test]
fn sigterm_mid_run_tells_clients_and_exits() {
    let mock = MockModel::start();
    mock.push(endless_text("Going on "));
    let mut gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    client.request("chat.send", json!({"sessionKey": "wire-stop", "message": "go", "idempotencyKey": "s1"}));
    client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    gw.signal("TERM");
    let (frames, close) = client.until_closed();
    let events: Vec<&str> = frames.iter().filter_map(|f| f["event"].as_str()).collect();
    assert!(events.contains(&"shutdown"), "{events:?}");
    let aborted = chat_events(&frames, "s1").into_iter().find(|c| c["state"] == "aborted");
    assert!(aborted.is_some(), "the run ended cancelled: {frames:#?}");
    assert_eq!(close, Some((1001, "gateway stopping".into())));
    assert!(gw.wait_exit().success());
}

#[test]
fn off_loopback_without_a_token_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["gateway", "--listen", "0.0.0.0:0"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to listen on 0.0.0.0:0 without a token"), "{stderr}");
}

#[test]
fn a_configuration_that_cannot_be_read_or_used_stops_the_start() {
    let start = |config: &str| {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(["gateway", "--listen", "127.0.0.1:0"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("ACP_HOME", home.path())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for (config, says) in [
        ("[channels.telegram]\nbot_token = \"1:A\"\ndm_polcy = \"open\"\n", "unknown field `dm_polcy`"),
        (
            "[channels.telegram]\nbot_token = \"1:A\"\nallow_from = [111]\n",
            "config.toml:3:15: invalid type: integer `111`, expected a string",
        ),
        ("[gateway]\napproval_timeout_secs = 0\n", "approval_timeout_secs must be at least 1"),
        ("[gateway]\nworkspace = \"~/no-such-dir\"\n", "[gateway] workspace"),
        ("[channels.telegram]\nbot_token = \"1:A\"\nchunk_max_chars = 0\n", "chunk_max_chars 0"),
        ("[channels.telegram]\nbot_token = \"1:A\"\ngroup_policy = \"all\"\n", "group_policy `all`"),
        (
            "[channels.telegram]\nbot_token = \"1:A\"\nwebhook_secret = \"s\"\n",
            "webhook_secret is set without webhook_url",
        ),
    ] {
        let (code, stderr) = start(config);
        assert_eq!(code, Some(2), "{config}: {stderr}");
        assert!(stderr.contains(says), "{config}: {stderr}");
        assert!(!stderr.contains("listening"), "{config}: it must not start: {stderr}");
    }
    // `~` in [gateway] workspace is the home directory.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("project")).unwrap();
    std::fs::write(home.path().join("config.toml"), "[gateway]\nworkspace = \"~/project\"\n").unwrap();
    let gw = Gateway::start_in(home, "http://127.0.0.1:9", &[]);
    assert!(gw.port > 0);
}

#[test]
fn the_web_chat_page_is_served_with_a_strict_policy() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    std::io::Write::write_all(&mut stream, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let response = crate::support::gateway::read_all(stream);
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.contains("content-security-policy: default-src 'self'"), "{response}");
    assert!(response.contains("<title>acp</title>"), "{response}");
    // HEAD: the same headers, no body.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    std::io::Write::write_all(&mut stream, b"HEAD /app.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let response = crate::support::gateway::read_all(stream);
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n") && response.ends_with("\r\n\r\n"), "{response}");
    // A page from another site cannot open a socket with the user's browser.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: http://evil.example\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            gw.port
        )
        .as_bytes(),
    )
    .unwrap();
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut stream, &mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 403"), "{}", String::from_utf8_lossy(&head[..n]));
    let _: Option<Client> = None;
    let _ = Read_::Closed(None);
}

#[test]
fn the_agent_method_answers_twice_and_history_and_subscribers_see_the_run() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from the agent."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut client = gw.client(&["operator.admin"]);
    let mut subscriber = gw.client(&["operator.read"]);
    assert_eq!(subscriber.request("sessions.subscribe", json!({}))["ok"], true);
    let id = client.send_request(
        "agent",
        json!({"message": "Say hello.", "agentId": "main", "sessionKey": "wire-agent",
        "idempotencyKey": "g1"}),
    );
    let (_, accepted) = client.until_response(&id);
    let accepted = &accepted["payload"];
    assert_eq!((&accepted["runId"], &accepted["status"]), (&json!("g1"), &json!("accepted")));
    assert_eq!(accepted["sessionKey"], "agent:main:wire-agent");
    let (_, result) = client.until_response(&id);
    assert_eq!(
        result["payload"],
        json!({"runId": "g1", "status": "ok", "summary": "completed",
            "result": {"payloads": [{"text": "Hello from the agent.", "mediaUrl": null}], "meta": {}}})
    );
    let wait = client.request("agent.wait", json!({"runId": "g1", "timeoutMs": 1000}))["payload"].clone();
    assert_eq!((&wait["status"], &wait["stopReason"]), (&json!("ok"), &json!("stop")));
    assert_eq!(wait["terminalReply"], json!({"disposition": "visible", "text": "Hello from the agent."}));
    assert!(wait["endedAt"].is_i64());
    assert_eq!(client.request("agent.wait", json!({"runId": "nope"}))["error"]["code"], "NOT_FOUND");
    // The subscriber saw the session's messages; a plain socket does not get them.
    let seen =
        subscriber.until_event(|e| e["event"] == "session.message" && e["payload"]["message"]["role"] == "assistant");
    let messages: Vec<&Value> =
        seen.iter().filter(|e| e["event"] == "session.message").map(|e| &e["payload"]["message"]).collect();
    assert_eq!(messages[0]["content"], "Say hello.");
    assert_eq!(messages[1]["content"][0]["text"], "Hello from the agent.");
    assert!(seen.iter().any(|e| e["event"] == "sessions.changed"), "the session was created");
    let history = client.request("chat.history", json!({"sessionKey": "wire-agent", "limit": 10}))["payload"].clone();
    assert_eq!(history["sessionKey"], "agent:main:wire-agent");
    // The user's message carries when it was sent, as the reference's history does.
    let sent = history["messages"][0]["timestamp"].as_i64().unwrap_or_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!((now - 600_000..=now).contains(&sent), "{history}");
    assert_eq!(
        crate::support::expect::blank(&history["messages"], &["timestamp"]),
        json!([{"role": "user", "content": "Say hello.", "timestamp": crate::support::expect::BLANK},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello from the agent."}]}])
    );
    assert_eq!(client.request("chat.history", json!({"sessionKey": "nobody"}))["error"]["code"], "NOT_FOUND");
}

/// The real OpenClaw CLI (tests/openclaw, installed by tests/run) against `acp gateway`.
fn openclaw(_gw: &Gateway, state: &std::path::Path, args: &[&str]) -> (bool, String) {
    crate::support::openclaw::cli(state, args)
}

#[test]
fn the_real_openclaw_cli_works_against_it() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from acp, through OpenClaw."));
    let gw = Gateway::start(&mock.base(), &[]);
    let state = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    std::fs::write(
        state.path().join("openclaw.json"),
        json!({"gateway": {"mode": "remote", "remote": {"url": url, "token": TOKEN}}}).to_string(),
    )
    .unwrap();
    for method in ["health", "status", "sessions.list"] {
        let (ok, out) = openclaw(&gw, state.path(), &["gateway", "call", method, "--url", &url, "--token", TOKEN]);
        assert!(ok, "openclaw gateway call {method}:\n{out}\n{}", gw.stderr());
        let payload = json_in(&out);
        match method {
            "health" => assert_eq!(payload["ok"], true, "{payload}"),
            "status" => assert_eq!(payload["runtimeVersion"], env!("CARGO_PKG_VERSION")),
            _ => assert!(payload["sessions"].is_array(), "{payload}"),
        }
    }
    let (ok, out) = openclaw(
        &gw,
        state.path(),
        &["agent", "--message", "Say hello.", "--session-key", "agent:main:openclaw", "--json"],
    );
    assert!(ok, "openclaw agent:\n{out}\n{}", gw.stderr());
    assert!(out.contains("Hello from acp, through OpenClaw."), "{out}");
    assert_eq!(mock.requests().len(), 1);
    // The session it made is this gateway's, in the shared store.
    let (ok, out) = openclaw(&gw, state.path(), &["gateway", "call", "sessions.list", "--url", &url, "--token", TOKEN]);
    assert!(ok);
    assert_eq!(json_in(&out)["sessions"][0]["key"], "agent:main:openclaw");
    // A wrong token is refused as the reference refuses it.
    let (ok, out) = openclaw(&gw, state.path(), &["gateway", "call", "health", "--url", &url, "--token", "wrong"]);
    assert!(!ok);
    assert!(out.contains("gateway token mismatch"), "{out}");
}

#[test]
fn a_call_that_needs_a_question_is_refused_saying_why_and_patch_changes_the_mode() {
    let mock = MockModel::start();
    mock.push(calls("anthropic", &[("f1", "web_fetch", json!({"url": "https://example.org/"}))]));
    mock.push(text("anthropic", "I could not fetch it."));
    let gw = Gateway::start(&mock.base(), &[]);
    // Connected, but without the scope to answer approvals: no one can be asked.
    let mut client = gw.client(&["operator.write"]);
    client.request("chat.send", json!({"sessionKey": "wire-ask", "message": "fetch", "idempotencyKey": "q1"}));
    let frames = client.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    let result = result_for("anthropic", &mock.requests()[1].body, "f1");
    assert!(result.contains("no one who can answer approval questions is connected"), "{result}");
    let tool = frames
        .iter()
        .find(|f| {
            f["event"] == "agent" && f["payload"]["stream"] == "tool" && f["payload"]["data"]["phase"] == "result"
        })
        .expect("the tool's result event");
    assert_eq!(tool["payload"]["data"]["isError"], true);
    assert!(tool["payload"]["data"]["result"].as_str().unwrap().starts_with("Not run: no one who can answer approval"));
    // Ask mode, from the next run on.
    let r = client.request("sessions.patch", json!({"key": "wire-ask", "mode": "ask", "thinking": "high"}));
    assert_eq!(r["payload"], json!({"ok": true, "key": "agent:main:wire-ask"}), "{r}");
    let r = client.request("sessions.patch", json!({"key": "wire-ask", "model": "nope/nope"}));
    assert!(r["error"]["message"].as_str().unwrap().starts_with("invalid sessions.patch params: at /model: "), "{r}");
}

#[test]
fn a_client_that_stops_reading_loses_deltas_not_the_end_of_the_run() {
    let mock = MockModel::start();
    mock.push(endless_text(&"x".repeat(4000)));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut reader = gw.client(&["operator.admin"]);
    let mut slow = gw.client(&["operator.read"]);
    reader.request("chat.send", json!({"sessionKey": "wire-slow", "message": "go", "idempotencyKey": "w1"}));
    // Let several MiB stream while `slow` reads nothing.
    let mut streamed = 0usize;
    while streamed < 32 << 20 {
        let frame = reader.recv();
        streamed += frame.to_string().len();
    }
    let id = reader.send_request("chat.abort", json!({"sessionKey": "wire-slow"}));
    reader.until_response(&id);
    let frames = slow.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "aborted");
    let deltas = frames.iter().filter(|f| f["event"] == "chat" && f["payload"]["state"] == "delta").count();
    let aborted = &frames.last().unwrap()["payload"];
    let text = aborted["message"]["content"][0]["text"].as_str().unwrap();
    assert!(text.len() >= 4000, "the end carries the whole text");
    // Its own events stay numbered without gaps: what was dropped was never numbered.
    let seqs: Vec<u64> = frames.iter().filter_map(|f| f["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(deltas * 4000 < text.len(), "some deltas were dropped for the slow client ({deltas} kept)");
    assert_eq!(slow.request("health", json!({}))["ok"], true, "and it is still connected");
}

#[test]
fn a_client_that_floods_requests_and_never_reads_is_dropped_and_others_go_on() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let mut flood = gw.client(&["operator.admin"]);
    // Never read: each answer (the model list, a few KiB) piles up until the gateway gives up.
    flood.ws.get_ref().set_nonblocking(false).unwrap();
    let request = json!({"type": "req", "id": "x", "method": "models.list", "params": {}}).to_string();
    let mut sent = 0u64;
    // Only a guard against a hang: the flood ends when the gateway drops the client.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while std::time::Instant::now() < deadline {
        use tokio_tungstenite::tungstenite::Message;
        // Written without waiting for anything; a closed socket ends the flood.
        if flood.ws.write(Message::Text(request.clone().into())).is_err() || flood.ws.flush().is_err() {
            break;
        }
        sent += 1;
        if sent.is_multiple_of(1000) && gw.stderr().contains("a client fell too far behind; closing it") {
            break;
        }
    }
    assert!(gw.stderr().contains("a client fell too far behind; closing it"), "sent {sent}:\n{}", gw.stderr());
    // The gateway itself is fine.
    let mut other = gw.client(&["operator.read"]);
    assert_eq!(other.request("health", json!({}))["ok"], true);
    let rss_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", gw.child.id()))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rss_kib < 200 * 1024, "peak RSS {rss_kib} KiB after {sent} unread requests");
}

#[test]
fn an_injected_message_is_shown_saved_and_seen_by_the_model_next_run() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello."));
    mock.push(text("anthropic", "Noted: the build passed."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let mut writer = gw.client(&["operator.write"]);
    let inject = json!({"sessionKey": "wire-inject", "message": "Build 42 passed.", "label": "ci"});
    assert_eq!(admin.request("chat.inject", inject.clone())["error"]["code"], "NOT_FOUND", "no such session");
    let r = admin.request("chat.send", json!({"sessionKey": "wire-inject", "message": "Hi", "idempotencyKey": "i1"}));
    assert_eq!(r["payload"]["status"], "started");
    admin.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    writer.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    assert_eq!(writer.request("chat.inject", inject.clone())["error"]["code"], "FORBIDDEN", "admin only");
    let long = json!({"sessionKey": "wire-inject", "message": "x", "label": "l".repeat(101)});
    assert_eq!(admin.request("chat.inject", long)["error"]["code"], "INVALID_REQUEST");

    let r = admin.request("chat.inject", inject)["payload"].clone();
    assert_eq!(r["ok"], true);
    let run = r["runId"].as_str().unwrap().to_owned();
    assert!(run.starts_with("inject-"), "{run}");
    // Every socket sees it as a finished assistant message.
    let seen = writer.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == run.as_str());
    let shown = &seen.last().unwrap()["payload"];
    assert_eq!(
        (&shown["state"], &shown["seq"], &shown["stopReason"]),
        (&json!("final"), &json!(0), &json!("injected"))
    );
    assert_eq!(shown["message"]["content"][0]["text"], "[ci]\n\nBuild 42 passed.");

    // The next run's request carries it, as a note in the user's turn (roles still alternate).
    let r =
        admin.request("chat.send", json!({"sessionKey": "wire-inject", "message": "Did it?", "idempotencyKey": "i2"}));
    assert_eq!(r["payload"]["status"], "started");
    admin.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == "i2" && e["payload"]["state"] == "final");
    let body = &mock.requests()[1].body;
    let roles: Vec<&str> = body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    let last = body["messages"][2]["content"].to_string();
    assert!(last.contains("[ci]\\n\\nBuild 42 passed.") && last.contains("Did it?"), "{last}");

    // Saved: after a restart the history has it in its place.
    let gw = gw.restart(&mock.base());
    let mut client = gw.client(&["operator.read"]);
    let history = client.request("chat.history", json!({"sessionKey": "wire-inject"}))["payload"]["messages"].clone();
    let texts: Vec<String> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"].as_str().map_or_else(|| m["content"][0]["text"].as_str().unwrap().to_owned(), str::to_owned)
        })
        .collect();
    assert_eq!(texts, ["Hi", "Hello.", "[ci]\n\nBuild 42 passed.", "Did it?", "Noted: the build passed."]);
}

#[test]
fn a_signed_device_gets_a_device_token_that_stands_in_for_the_shared_one() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let device = Device::new();
    let (mut client, challenge) = gw.socket();
    let params = device.sign(connect_params(Some(TOKEN), &["operator.admin"]), &challenge, Some(TOKEN));
    let hello = client.request("connect", params)["payload"].clone();
    let auth = &hello["auth"];
    let token = auth["deviceToken"].as_str().expect("a device token for a signed device").to_owned();
    assert!(auth["issuedAtMs"].is_i64() && auth["recoveryMigrationAllowed"] == true, "{auth}");
    // A plain token connect gets none.
    let (mut plain, _) = gw.socket();
    assert_eq!(plain.request("connect", connect_params(Some(TOKEN), &[]))["payload"]["auth"].get("deviceToken"), None);

    let with_device_token = |device: &Device, sign: bool, shared: Option<&str>| {
        let (mut c, challenge) = gw.socket();
        let mut params = connect_params(shared, &["operator.admin"]);
        params["auth"]["deviceToken"] = json!(token);
        if sign {
            params = device.sign(params, &challenge, Some(shared.unwrap_or(&token)));
        }
        c.request("connect", params)
    };
    // The device alone, with its token and no shared token: in, with the same device token.
    let again = with_device_token(&device, true, None);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["payload"]["auth"]["deviceToken"], token.as_str());
    // The reference client's retry after a token mismatch: the wrong shared token plus the device token.
    assert_eq!(with_device_token(&device, true, Some("rotated-away"))["ok"], true);
    // Another device, or no proof at all, cannot use it.
    let other = with_device_token(&Device::new(), true, None);
    assert_eq!(other["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH", "{other}");
    let unsigned = with_device_token(&device, false, None);
    assert_eq!(unsigned["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH", "{unsigned}");
}

#[test]
fn presence_follows_clients_that_come_and_go() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let mut watcher = gw.client(&["operator.read"]);
    let before = watcher.request("system-presence", json!({}))["payload"].clone();
    assert_eq!(before.as_array().unwrap().len(), 1, "the gateway alone (CLIs are not listed): {before}");
    let (mut page, _) = gw.socket();
    let mut params = connect_params(Some(TOKEN), &["operator.read"]);
    params["client"] = json!({"id": "webchat-ui", "displayName": "Web chat", "version": "1", "platform": "web",
        "mode": "webchat", "instanceId": "tab-1"});
    let hello = page.request("connect", params);
    let versions = hello["payload"]["snapshot"]["stateVersion"].clone();
    let joined = watcher.until_event(|e| e["event"] == "presence");
    let joined = joined.last().unwrap();
    let list = joined["payload"]["presence"].as_array().unwrap();
    let entry = list.iter().find(|p| p["instanceId"] == "tab-1").expect("the page is present");
    assert_eq!((&entry["mode"], &entry["text"]), (&json!("webchat"), &json!("Web chat (webchat)")));
    assert_eq!(entry["ip"], "127.0.0.1");
    assert!(joined["stateVersion"]["presence"].as_u64() > versions["presence"].as_u64(), "{joined} {versions}");
    let listed = watcher.request("system-presence", json!({}))["payload"].clone();
    assert!(listed.as_array().unwrap().iter().any(|p| p["instanceId"] == "tab-1"));
    drop(page);
    let left = watcher.until_event(|e| e["event"] == "presence");
    let left = left.last().unwrap();
    assert!(!left["payload"]["presence"].as_array().unwrap().iter().any(|p| p["instanceId"] == "tab-1"));
    assert!(left["stateVersion"]["presence"].as_u64() > joined["stateVersion"]["presence"].as_u64());
    assert!(left["stateVersion"]["health"].as_u64() > versions["health"].as_u64(), "connections changed");
}
