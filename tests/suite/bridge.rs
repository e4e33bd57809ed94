//! `acp serve --gateway URL` against a real `acp gateway` (real WebSockets, the mock model behind
//! it): a prompt streamed through, ids stable across new/list/load, a cancel that touches only its
//! own run, a gateway restart mid-prompt, a gateway never reachable, and the bad-input properties
//! of `acp serve`.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, Options, text_of};
use crate::support::gateway::{Gateway, TOKEN};
use crate::support::mock_model::MockModel;
use crate::support::openclaw::OpenClawGateway;
use crate::support::script::{chat_words, endless_chat_text, endless_text, text};

fn bridge(gw: &Gateway) -> Agent {
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let mut agent = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", TOKEN]));
    agent.initialize();
    agent
}

fn new_session(agent: &mut Agent, cwd: &std::path::Path, meta: Value) -> String {
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": meta}));
    r["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("session/new: {r}\n{}", agent.stderr())).to_owned()
}

/// Waits for the first reply chunk of a prompt sent with `send_request`.
fn first_chunk(agent: &mut Agent) -> Value {
    loop {
        let m = agent.recv();
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            return m;
        }
        assert!(m.get("id").is_none() || m.get("method").is_some(), "answered before any text: {m}");
    }
}

#[test]
fn a_prompt_streams_through_and_the_session_id_is_the_same_everywhere() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from the gateway, through the bridge."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut editor = bridge(&gw);
    let cwd = gw.workspace.path();
    let id = new_session(&mut editor, cwd, json!({}));
    assert!(id.starts_with("agent:main:acp-bridge:"), "{id}");
    let (updates, response) = editor.prompt(&id, "Say hello.");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}\n{}", editor.stderr());
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello from the gateway, through the bridge.");
    let sent = mock.requests()[0].body.to_string();
    assert!(sent.contains(&format!("[Working directory: {}]\\n\\nSay hello.", cwd.display())), "{sent}");

    let listed = editor.request("session/list", json!({}));
    let ids: Vec<&str> =
        listed["result"]["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str()], "the id session/new handed out");

    // Another editor process loads it by that id: the history, without the working-directory line.
    let mut other = bridge(&gw);
    let r = other.request("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []}));
    assert_eq!(r["result"]["configOptions"][0]["currentValue"], "anthropic/claude-sonnet-4-5", "{r}");
    let replayed: Vec<(String, String)> = other
        .seen
        .iter()
        .filter(|m| m["params"]["sessionId"] == id.as_str() && m["params"]["update"]["content"]["text"].is_string())
        .map(|m| {
            let u = &m["params"]["update"];
            (u["sessionUpdate"].as_str().unwrap().to_owned(), u["content"]["text"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        replayed,
        [
            ("user_message_chunk".to_owned(), "Say hello.".to_owned()),
            ("agent_message_chunk".to_owned(), "Hello from the gateway, through the bridge.".to_owned())
        ]
    );
    let missing = other.request("session/load", json!({"sessionId": "agent:main:nope", "cwd": cwd, "mcpServers": []}));
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
}

#[test]
fn cancel_stops_only_its_own_run() {
    let mock = MockModel::start();
    mock.push(endless_text("Theirs: "));
    let gw = Gateway::start(&mock.base(), &[]);
    // Another client runs on the same gateway session.
    let mut theirs = gw.client(&["operator.admin"]);
    let r = theirs.request("chat.send", json!({"sessionKey": "shared", "message": "count", "idempotencyKey": "t1"}));
    assert_eq!(r["payload"]["status"], "started");
    theirs.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "delta");
    let mut editor = bridge(&gw);
    let id = new_session(&mut editor, gw.workspace.path(), json!({"sessionKey": "shared"}));
    assert_eq!(id, "agent:main:shared");
    let prompt =
        editor.send_request("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "mine"}]}));
    // Ours waits behind theirs on the gateway (its run has started there); cancelling it leaves
    // theirs running.
    theirs.until_event(|e| {
        e["event"] == "agent" && e["payload"]["stream"] == "lifecycle" && e["payload"]["runId"] != "t1"
    });
    editor.notify("session/cancel", json!({"sessionId": id}));
    let (_, answer) = editor.until_response(prompt);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let aborted = theirs.request("chat.abort", json!({"sessionKey": "shared", "runId": "t1"}));
    assert_eq!(aborted["payload"], json!({"ok": true, "aborted": true, "runIds": ["t1"]}), "theirs was still running");
    assert_eq!(mock.requests().len(), 1, "ours never reached the model");
}

#[test]
fn a_gateway_restart_mid_prompt_ends_it_clearly_and_the_next_prompt_works() {
    let mock = MockModel::start();
    mock.push(endless_text("Counting: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut editor = bridge(&gw);
    let id = new_session(&mut editor, gw.workspace.path(), json!({"sessionKey": "restart"}));
    let prompt =
        editor.send_request("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "count"}]}));
    first_chunk(&mut editor);
    let gw = gw.restart(&mock.base());
    let (_, answer) = editor.until_response(prompt);
    let message = answer["error"]["message"].as_str().unwrap_or_else(|| panic!("{answer}"));
    assert!(message.contains("the gateway stopped during the run"), "{message}");
    mock.push(text("anthropic", "Back again."));
    let (updates, response) = editor.prompt(&id, "still there?");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}\n{}", editor.stderr());
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Back again.");
    drop(gw);
}

#[test]
fn a_gateway_that_never_answers_fails_prompts_clearly() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("ws://127.0.0.1:{port}");
    let mut editor = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", TOKEN]));
    // Initialize and session/new need no gateway.
    editor.initialize();
    let cwd = editor.home.path().to_path_buf();
    let id = new_session(&mut editor, &cwd, json!({}));
    let (_, response) = editor.prompt(&id, "anyone?");
    let message = response["error"]["message"].as_str().unwrap_or_else(|| panic!("{response}"));
    assert!(message.contains(&format!("the gateway at {url} is not reachable")), "{message}");
    assert!(message.contains("refused"), "says why: {message}");
}

#[test]
fn a_refused_token_is_said_at_once() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let mut editor = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", "wrong"]));
    editor.initialize();
    let cwd = editor.home.path().to_path_buf();
    let id = new_session(&mut editor, &cwd, json!({}));
    let (_, response) = editor.prompt(&id, "hello?");
    let message = response["error"]["message"].as_str().unwrap_or_else(|| panic!("{response}"));
    assert!(message.contains("refused the connection") && message.contains("token mismatch"), "{message}");
}

#[test]
fn bad_input_gets_the_same_answers_as_acp_serve_and_a_prompt_before_eof_is_answered() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Answered after EOF."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut editor = bridge(&gw);
    editor.send_raw(b"[1,2]\n");
    assert_eq!(editor.recv()["error"]["code"], -32600);
    editor.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\xff\"}\n");
    assert_eq!(editor.recv()["error"]["code"], -32700, "invalid UTF-8");
    editor.send_raw(b"{not json\n");
    assert_eq!(editor.recv()["error"]["code"], -32700);
    let r = editor.request("session/set_mode", json!({"sessionId": "x", "modeId": "ask"}));
    assert_eq!(r["error"]["code"], -32002, "no such session");
    let r = editor.request("session/fork", json!({"sessionId": "x"}));
    assert_eq!(r["error"]["code"], -32601);
    let r = editor.request("session/prompt", json!({"sessionId": "nope", "prompt": []}));
    assert_eq!(r["error"]["code"], -32002);
    let r = editor.request("session/new", json!({"cwd": "relative", "mcpServers": []}));
    assert_eq!(r["error"]["code"], -32602);
    let id = new_session(&mut editor, gw.workspace.path(), json!({}));
    let r = editor.request(
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}]}),
    );
    assert!(r["error"]["message"].as_str().unwrap().contains("only text, images"), "{r}");
    let r = editor.request(
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "image", "data": "", "mimeType": "image/png"}]}),
    );
    assert!(r["error"]["message"].as_str().unwrap().contains("the image is empty"), "{r}");
    let r = editor.request(
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "image", "data": "%%%", "mimeType": "image/png"}]}),
    );
    assert!(r["error"]["message"].as_str().unwrap().contains("not base64"), "{r}");
    // A prompt, then the end of input: answered, then the bridge exits.
    let prompt =
        editor.send_request("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]}));
    editor.close_stdin();
    let (before, answer) = editor.until_response(prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let updates: Vec<Value> = before.iter().map(|m| m["params"]["update"].clone()).collect();
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Answered after EOF.");
    assert!(editor.wait_exit(Duration::from_secs(10)).is_some_and(|s| s.success()), "exits after EOF");
}

/// Runs tests/conformance/bridge.mjs (the official TypeScript SDK as the editor) against `agent`;
/// returns its report.
pub fn sdk_editor(cwd: &std::path::Path, agent: &[String], env: &[(&str, &str)]) -> Value {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    assert!(dir.join("node_modules/@agentclientprotocol/sdk").exists(), "run tests/run: it installs the SDK");
    let out = std::process::Command::new("node")
        .arg(dir.join("bridge.mjs"))
        .arg(cwd)
        .args(agent)
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("REPORT ")).unwrap_or_else(|| panic!("no report:\n{stdout}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_typescript_sdk_drives_the_bridge_end_to_end() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from acp gateway, through the bridge, to the SDK."));
    mock.push(endless_text("Counting: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let home = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let agent: Vec<String> = [env!("CARGO_BIN_EXE_acp"), "serve", "--gateway", &url, "--token", TOKEN]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let home_dir = home.path().display().to_string();
    let report = sdk_editor(gw.workspace.path(), &agent, &[("ACP_HOME", &home_dir), ("HOME", &home_dir)]);
    assert_eq!(report["failures"], json!([]), "{report:#}\n{}", gw.stderr());
    assert_eq!(report["hello"]["stopReason"], "end_turn");
    assert_eq!(report["hello"]["text"], "Hello from acp gateway, through the bridge, to the SDK.");
    assert_eq!((&report["cancel"]["stopReason"], &report["cancel"]["sawText"]), (&json!("cancelled"), &json!(true)));
    let id = report["sessionId"].as_str().unwrap();
    assert!(report["listed"].as_array().unwrap().iter().any(|l| l == id), "{report:#}");
    let loaded = &report["loaded"];
    assert_eq!(loaded[0], json!(["user_message_chunk", "Say hello."]), "{report:#}");
    assert_eq!(loaded[1], json!(["agent_message_chunk", "Hello from acp gateway, through the bridge, to the SDK."]));
    assert!(report["validated"].as_u64().unwrap() > 10);
}

#[test]
fn the_bridge_works_against_the_real_openclaw_gateway() {
    let mock = MockModel::start();
    // Word by word, fast: the reference gateway merges such deltas, and its final carries the tail.
    let reply = "Hello from a mock model, through the OpenClaw gateway and the acp bridge, every word of it.";
    mock.push(chat_words(reply));
    mock.push(endless_chat_text("Counting:"));
    let openclaw = OpenClawGateway::start(&mock.base_v1());
    let home = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", openclaw.port);
    let agent: Vec<String> =
        [env!("CARGO_BIN_EXE_acp"), "serve", "--gateway", &url, "--token", crate::support::openclaw::TOKEN]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
    let home_dir = home.path().display().to_string();
    let report = sdk_editor(openclaw.workspace.path(), &agent, &[("ACP_HOME", &home_dir), ("HOME", &home_dir)]);
    assert_eq!(report["failures"], json!([]), "{report:#}\n{}", openclaw.log());
    assert_eq!(report["hello"], json!({"stopReason": "end_turn", "text": reply}), "no lost tail");
    assert_eq!((&report["cancel"]["stopReason"], &report["cancel"]["sawText"]), (&json!("cancelled"), &json!(true)));
    let id = report["sessionId"].as_str().unwrap();
    assert!(id.starts_with("agent:main:acp-bridge:"), "{id}");
    assert!(report["listed"].as_array().unwrap().iter().any(|l| l == id), "the id session/new gave: {report:#}");
    assert_eq!(report["loaded"][0], json!(["user_message_chunk", "Say hello."]), "{report:#}");
    assert_eq!(report["loaded"][1], json!(["agent_message_chunk", reply]));
    // It signed in as a device, and kept the device token the gateway gave it.
    let tokens = std::fs::read_to_string(home.path().join("identity/device-tokens.json")).unwrap();
    assert!(tokens.contains(&url), "{tokens}");
}

#[test]
fn the_real_openclaw_acp_bridge_works_against_acp_gateway() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello from acp gateway, through openclaw acp."));
    mock.push(endless_text("Counting: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let state = tempfile::tempdir().unwrap();
    let token_file = state.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let agent =
        crate::support::openclaw::command_line(&["acp", "--url", &url, "--token-file", token_file.to_str().unwrap()]);
    let env = crate::support::openclaw::env(state.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let report = sdk_editor(gw.workspace.path(), &agent, &env);
    assert_eq!(report["failures"], json!([]), "{report:#}\n{}", gw.stderr());
    assert_eq!(
        report["hello"],
        json!({"stopReason": "end_turn", "text": "Hello from acp gateway, through openclaw acp."})
    );
    assert_eq!((&report["cancel"]["stopReason"], &report["cancel"]["sawText"]), (&json!("cancelled"), &json!(true)));
    // Its own list shows the gateway key of the session it made (its ids differ: its defect).
    let id = report["sessionId"].as_str().unwrap();
    let key = format!("agent:main:acp-bridge:{id}");
    assert!(report["listed"].as_array().unwrap().iter().any(|l| *l == key), "{report:#}");
    assert_eq!(report["loaded"].as_array().unwrap().iter().filter(|u| u[0] == "user_message_chunk").count(), 2);
}

#[test]
fn acp_client_works_on_the_bridge_and_answers_the_gateways_question() {
    let mock = MockModel::start();
    mock.push(crate::support::script::calls(
        "anthropic",
        &[("call_w", "write", json!({"path": "NOTES.md", "content": "add() adds.\n"}))],
    ));
    mock.push(text("anthropic", "Wrote **NOTES.md** for you."));
    let gw = Gateway::start(&mock.base(), &[]);
    // The gateway session asks before changes.
    let r = gw.client(&["operator.admin"]).request("sessions.patch", json!({"key": "notes", "mode": "ask"}));
    assert_eq!(r["ok"], true, "{r}");
    let home = tempfile::tempdir().unwrap();
    let agent = format!(
        "{} serve --gateway ws://127.0.0.1:{} --token {TOKEN} --session notes",
        env!("CARGO_BIN_EXE_acp"),
        gw.port
    );
    let env = [("ACP_HOME", home.path().display().to_string()), ("HOME", home.path().display().to_string())];
    let mut pty = crate::support::pty::Pty::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_acp")),
        &["client", "--agent", &agent],
        &env,
        gw.workspace.path(),
    );
    pty.wait_for("/help for commands");
    pty.wait_for_prompt();
    pty.send("Write the notes\r");
    // The gateway's question, relayed by the bridge: what will be written, then the choices.
    let screen = pty.wait_for("Allow Create NOTES.md?");
    assert!(screen.contains("+add() adds."), "the diff is shown before the question:\n{screen}");
    pty.wait_for("1. Allow");
    pty.send("\r");
    pty.wait_for("Wrote NOTES.md for you.");
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("NOTES.md")).unwrap(), "add() adds.\n");
    pty.wait_for_prompt();
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0);
}

#[test]
fn labels_required_keys_and_resets_choose_the_gateway_session() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "First answer."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    admin.request("chat.send", json!({"sessionKey": "labeled", "message": "first", "idempotencyKey": "l1"}));
    admin.until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final");
    let r = admin.request("sessions.patch", json!({"key": "labeled", "label": "My project"}));
    assert_eq!(r["ok"], true, "{r}");
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let cwd = gw.workspace.path();
    let mut editor = Agent::spawn(Options::default().args(&[
        "serve",
        "--gateway",
        &url,
        "--token",
        TOKEN,
        "--session-label",
        "My project",
    ]));
    editor.initialize();
    assert_eq!(new_session(&mut editor, cwd, json!({})), "agent:main:labeled", "the label, resolved by the gateway");
    let unknown = editor.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"label": "Nope"}}));
    assert!(unknown["error"]["message"].as_str().unwrap().contains("Nope"), "{unknown}");
    let ghost = editor.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [], "_meta": {"sessionKey": "ghost", "requireExisting": true}}),
    );
    assert_eq!(ghost["error"]["code"], -32002, "{ghost}");
    assert!(ghost["error"]["message"].as_str().unwrap().contains("`ghost` does not exist"), "{ghost}");
    // A reset before first use: the model sees none of the earlier conversation.
    let mut fresh = bridge(&gw);
    let id = new_session(&mut fresh, cwd, json!({"sessionKey": "labeled", "reset": true}));
    mock.push(text("anthropic", "A clean slate."));
    let (_, response) = fresh.prompt(&id, "again");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let body = mock.requests()[1].body.to_string();
    assert!(!body.contains("First answer.") && body.contains("again"), "{body}");
}

#[test]
fn thoughts_tools_and_the_thinking_level_go_through() {
    let mock = MockModel::start();
    mock.push(crate::support::script::anthropic_thinking(
        "Let me look.",
        None,
        &[("r1", "read", json!({"path": "notes.txt"}))],
    ));
    mock.push(text("anthropic", "It says hi."));
    let gw = Gateway::start(&mock.base(), &[]);
    std::fs::write(gw.workspace.path().join("notes.txt"), "hi\n").unwrap();
    let mut editor = bridge(&gw);
    let id = new_session(&mut editor, gw.workspace.path(), json!({}));
    let prompt = editor.send_request(
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "read it"}], "_meta": {"thinking": "high"}}),
    );
    let (before, answer) = editor.until_response(prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let updates: Vec<Value> = before.iter().map(|m| m["params"]["update"].clone()).collect();
    assert_eq!(text_of(&updates, "agent_thought_chunk"), "Let me look.");
    assert_eq!(text_of(&updates, "agent_message_chunk"), "It says hi.");
    let call = updates.iter().find(|u| u["sessionUpdate"] == "tool_call").expect("the tool call");
    assert_eq!((&call["toolCallId"], &call["kind"]), (&json!("r1"), &json!("read")), "{call}");
    let done = updates.iter().rfind(|u| u["sessionUpdate"] == "tool_call_update").unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    // The run asked for high reasoning: the model request carries it.
    assert_eq!(mock.requests()[0].body["thinking"]["type"], "enabled", "{}", mock.requests()[0].body);
    // Loaded elsewhere, the turn replays in order: the prompt, the thought, the call, the text.
    let mut other = bridge(&gw);
    let r = other.request("session/load", json!({"sessionId": id, "cwd": gw.workspace.path(), "mcpServers": []}));
    let thought = r["result"]["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "thought_level").cloned();
    assert_eq!(thought.unwrap()["currentValue"], "high", "the level the run asked for: {r}");
    let replayed: Vec<String> = other
        .seen
        .iter()
        .map(|m| {
            let u = &m["params"]["update"];
            let detail =
                u["content"]["text"].as_str().map_or_else(|| format!("{} {}", u["kind"], u["status"]), str::to_owned);
            format!("{} {detail}", u["sessionUpdate"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        replayed,
        [
            "user_message_chunk read it",
            "agent_thought_chunk Let me look.",
            "tool_call \"read\" \"completed\"",
            "agent_message_chunk It says hi."
        ]
    );
}

/// A gateway stand-in that speaks just enough of the protocol to misbehave on cue: its first
/// connection promises ticks every 100 ms and then falls silent; its second takes one `chat.send`,
/// then the gateway goes away for good. Reports each connection it accepts.
fn misbehaving_gateway(connections: std::sync::mpsc::Sender<u32>) -> u16 {
    use tokio_tungstenite::tungstenite::{Message, accept};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for n in 1..=2u32 {
            let (stream, _) = listener.accept().unwrap();
            let mut ws = accept(stream).unwrap();
            let challenge = json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 0}});
            ws.send(Message::Text(challenge.to_string().into())).unwrap();
            let connect: Value = serde_json::from_str(&ws.read().unwrap().into_text().unwrap()).unwrap();
            let tick = if n == 1 { 100 } else { 30_000 };
            let hello = json!({"type": "res", "id": connect["id"], "ok": true, "payload": {"type": "hello-ok",
                "protocol": 4, "policy": {"tickIntervalMs": tick}, "auth": {"role": "operator", "scopes": []}}});
            ws.send(Message::Text(hello.to_string().into())).unwrap();
            connections.send(n).unwrap();
            loop {
                let Ok(Message::Text(text)) = ws.read() else { break };
                let frame: Value = serde_json::from_str(&text).unwrap();
                if frame["method"] == "chat.send" {
                    let run = &frame["params"]["idempotencyKey"];
                    let ack = json!({"type": "res", "id": frame["id"], "ok": true, "payload": {"runId": run, "status": "started"}});
                    ws.send(Message::Text(ack.to_string().into())).unwrap();
                    break;
                }
            }
        }
        // Gone: the listener closes with this thread.
    });
    port
}

#[test]
fn a_silent_gateway_is_dropped_and_one_gone_for_good_fails_the_prompt_after_the_grace_period() {
    let (tx, connections) = std::sync::mpsc::channel();
    let port = misbehaving_gateway(tx);
    let url = format!("ws://127.0.0.1:{port}");
    let mut editor = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", TOKEN]));
    editor.initialize();
    // No tick for two intervals: the bridge drops the first connection and makes another.
    assert_eq!(connections.recv_timeout(Duration::from_secs(30)).unwrap(), 1);
    assert_eq!(connections.recv_timeout(Duration::from_secs(30)).unwrap(), 2, "{}", editor.stderr());
    let cwd = editor.home.path().to_path_buf();
    let id = new_session(&mut editor, &cwd, json!({}));
    let (_, response) = editor.prompt(&id, "hello?");
    let message = response["error"]["message"].as_str().unwrap_or_else(|| panic!("{response}"));
    assert!(message.contains("did not come back within 10 s") && message.contains("outcome is unknown"), "{message}");
    assert!(editor.stderr().contains("no tick from the gateway"), "{}", editor.stderr());
}

/// Whether `connect`'s device proof is a valid signature over the `version` payload.
fn signed_as(connect: &Value, version: &str) -> bool {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let p = &connect["params"];
    let d = &p["device"];
    let scopes: Vec<&str> = p["scopes"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let mut payload = format!(
        "{version}|{}|{}|{}|{}|{}|{}|{}|{}",
        d["id"].as_str().unwrap(),
        p["client"]["id"].as_str().unwrap(),
        p["client"]["mode"].as_str().unwrap(),
        p["role"].as_str().unwrap(),
        scopes.join(","),
        d["signedAt"],
        p["auth"]["token"].as_str().unwrap_or_default(),
        d["nonce"].as_str().unwrap()
    );
    if version == "v3" {
        let lower = |k: &str| p["client"][k].as_str().unwrap_or_default().to_lowercase();
        payload.push_str(&format!("|{}|{}", lower("platform"), lower("deviceFamily")));
    }
    let key = b64.decode(d["publicKey"].as_str().unwrap()).unwrap();
    let signature = b64.decode(d["signature"].as_str().unwrap()).unwrap();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key)
        .verify(payload.as_bytes(), &signature)
        .is_ok()
}

#[test]
fn a_gateway_that_refuses_proof_v3_gets_v2() {
    use tokio_tungstenite::tungstenite::{Message, accept};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, connects) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for n in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let mut ws = accept(stream).unwrap();
            let challenge =
                json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": format!("n{n}"), "ts": 0}});
            ws.send(Message::Text(challenge.to_string().into())).unwrap();
            let connect: Value = serde_json::from_str(&ws.read().unwrap().into_text().unwrap()).unwrap();
            tx.send(connect.clone()).unwrap();
            let answer = if n == 0 {
                json!({"type": "res", "id": connect["id"], "ok": false, "error": {"code": "NOT_PAIRED",
                    "message": "device identity rejected", "details": {"code": "DEVICE_AUTH_INVALID"}}})
            } else {
                json!({"type": "res", "id": connect["id"], "ok": true, "payload": {"type": "hello-ok", "protocol": 4,
                    "policy": {"tickIntervalMs": 30000}}})
            };
            ws.send(Message::Text(answer.to_string().into())).unwrap();
            while ws.read().is_ok() {}
        }
    });
    let url = format!("ws://127.0.0.1:{port}");
    let mut editor = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", TOKEN]));
    editor.initialize();
    let first = connects.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(signed_as(&first, "v3"), "{first}");
    let second = connects.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(signed_as(&second, "v2") && !signed_as(&second, "v3"), "{second}");
    assert_eq!(first["params"]["device"]["id"], second["params"]["device"]["id"], "one identity");
}

#[test]
fn a_session_answers_to_its_key_in_either_spelling_and_slash_commands_reach_the_gateway() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "One."));
    mock.push(text("anthropic", "Two."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut editor = bridge(&gw);
    let cwd = gw.workspace.path();
    assert_eq!(new_session(&mut editor, cwd, json!({"sessionKey": "spelled"})), "agent:main:spelled");
    // Scripts that name the key as they gave it.
    let (updates, response) = editor.prompt("spelled", "first");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(updates.is_empty(), "updates go to the id the editor was given, not this spelling");
    // Loaded by its short key, prompted by its full one: the same session.
    let mut other = bridge(&gw);
    let r = other.request("session/load", json!({"sessionId": "spelled", "cwd": cwd, "mcpServers": []}));
    assert!(r["result"]["configOptions"].is_array(), "{r}");
    let (updates, response) = other.prompt("agent:main:spelled", "second");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(updates.is_empty(), "updates carry the spelling the editor loaded it by");
    assert!(
        other
            .seen
            .iter()
            .any(|m| m["params"]["sessionId"] == "spelled" && m["params"]["update"]["content"]["text"] == "Two.")
    );
    // A slash command is sent as typed: the gateway answers it without the model.
    let (updates, response) = other.prompt("spelled", "/status");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(mock.requests().len(), 2, "no model request for /status");
    let _ = updates;
    let status: String = other
        .seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(status.contains("agent:main:spelled"), "{status}");
}

#[test]
fn bad_bridge_flags_are_refused_at_start() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["serve", "--gateway", "http://127.0.0.1:1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a ws:// or wss:// URL"), "{err}");
    let empty = tempfile::NamedTempFile::new().unwrap();
    let (code, err) = run(&["serve", "--gateway", "ws://127.0.0.1:1", "--token-file", empty.path().to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("the file is empty"), "{err}");
    let (code, _) = run(&["serve", "--gateway", "ws://127.0.0.1:1", "--session", "a", "--session-label", "b"]);
    assert_eq!(code, Some(2), "a key and a label at once");
}

#[test]
fn events_framed_for_another_session_or_text_that_does_not_extend_the_reply_never_reach_the_editor() {
    use tokio_tungstenite::tungstenite::{Message, accept};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A gateway that frames events its own way: for our run, one of another session, a delta that
    // is not an extension of the reply, then the reply.
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ws = accept(stream).unwrap();
        let mut send = |v: Value| ws.send(Message::Text(v.to_string().into())).unwrap();
        send(json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 0}}));
        let mut seq = 0;
        loop {
            let Ok(Message::Text(text)) = ws.read() else { break };
            let frame: Value = serde_json::from_str(&text).unwrap();
            let ok = |payload: Value| json!({"type": "res", "id": frame["id"], "ok": true, "payload": payload});
            let reply = match frame["method"].as_str() {
                Some("connect") => ok(json!({"type": "hello-ok", "protocol": 4, "policy": {"tickIntervalMs": 30000}})),
                Some("chat.send") => {
                    let (run, key) = (frame["params"]["idempotencyKey"].clone(), frame["params"]["sessionKey"].clone());
                    ws.send(Message::Text(ok(json!({"runId": run, "status": "started"})).to_string().into())).unwrap();
                    let chat = |key: &Value, text: &str, state: &str| {
                        json!({"type": "event", "event": "chat", "payload": {"runId": run, "sessionKey": key,
                            "state": state, "stopReason": "stop",
                            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}})
                    };
                    let other = json!("agent:main:someone-else");
                    for event in [
                        chat(&other, "FOREIGN text of another session", "delta"),
                        json!({"type": "event", "event": "agent", "payload": {"runId": run, "sessionKey": other,
                            "stream": "tool", "data": {"phase": "start", "toolCallId": "t-foreign", "name": "exec",
                            "args": {"command": "rm -rf ~"}}}}),
                        chat(&key, "Hello", "delta"),
                        chat(&key, "Hxxxx, FOREIGN", "delta"),
                        chat(&key, "Hello world", "delta"),
                        chat(&key, "Hello world.", "final"),
                    ] {
                        seq += 1;
                        let mut event = event;
                        event["seq"] = json!(seq);
                        ws.send(Message::Text(event.to_string().into())).unwrap();
                    }
                    continue;
                }
                _ => ok(json!({})),
            };
            ws.send(Message::Text(reply.to_string().into())).unwrap();
        }
    });
    let url = format!("ws://127.0.0.1:{port}");
    let mut editor = Agent::spawn(Options::default().args(&["serve", "--gateway", &url, "--token", TOKEN]));
    editor.initialize();
    let cwd = editor.home.path().to_path_buf();
    let id = new_session(&mut editor, &cwd, json!({}));
    let (updates, response) = editor.prompt(&id, "hello?");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}\n{}", editor.stderr());
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello world.", "{updates:#?}");
    let shown = serde_json::to_string(&updates).unwrap();
    assert!(!shown.contains("FOREIGN") && !shown.contains("t-foreign"), "{shown}");
}

/// An editor on `acp gateway` has what it has on `acp serve`: the slash commands, the model, mode
/// and thinking options (changed on the gateway), and images in prompts.
#[test]
fn an_editor_on_the_gateway_gets_commands_options_and_images() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "A red square."));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut editor = bridge(&gw);
    let cwd = gw.workspace.path();
    let r = editor.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let id = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let options = r["result"]["configOptions"].as_array().unwrap().clone();
    let ids: Vec<&str> = options.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["model", "mode", "thought_level"], "{r}");
    assert_eq!(options[0]["currentValue"], "anthropic/claude-sonnet-4-5");
    assert_eq!((&options[1]["currentValue"], &options[2]["currentValue"]), (&json!("code"), &json!("default")));
    assert_eq!(r["result"]["modes"]["currentModeId"], "code");
    // The slash commands follow the answer.
    let commands = loop {
        let m = editor.recv();
        if m["params"]["update"]["sessionUpdate"] == "available_commands_update" {
            break m["params"]["update"]["availableCommands"].as_array().unwrap().clone();
        }
    };
    let names: Vec<&str> = commands.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for name in ["help", "status", "model", "think", "compact", "new"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    // Options are changed on the gateway: its own clients see them.
    let r = editor.request(
        "session/set_config_option",
        json!({"sessionId": id, "configId": "model", "value": "anthropic/claude-opus-4-6"}),
    );
    assert_eq!(r["result"]["configOptions"][0]["currentValue"], "anthropic/claude-opus-4-6", "{r}");
    let r = editor
        .request("session/set_config_option", json!({"sessionId": id, "configId": "thought_level", "value": "low"}));
    assert_eq!(r["result"]["configOptions"][2]["currentValue"], "low", "{r}");
    let r = editor.request("session/set_mode", json!({"sessionId": id, "modeId": "ask"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r =
        editor.request("session/set_config_option", json!({"sessionId": id, "configId": "model", "value": "nope/x"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown provider `nope`"), "{r}");
    // An image goes as an attachment and reaches the model as an image, with the new settings.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let prompt = json!({"sessionId": id, "prompt": [{"type": "text", "text": "What is this?"},
        {"type": "image", "mimeType": "image/png", "data": png}]});
    let r = editor.request("session/prompt", prompt);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}\n{}", editor.stderr());
    let body = &mock.requests()[0].body;
    assert_eq!(body["model"], "claude-opus-4-6", "{body}");
    assert_eq!(body["thinking"]["budget_tokens"], 2048, "low: {body}");
    let content = body["messages"][0]["content"].as_array().unwrap();
    let image = content.iter().find(|b| b["type"] == "image").unwrap_or_else(|| panic!("{body}"));
    assert_eq!((&image["source"]["media_type"], &image["source"]["data"]), (&json!("image/png"), &json!(png)));
    // A gateway session opened later starts with what was chosen.
    let mut other = bridge(&gw);
    let r = other.request("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []}));
    let current: Vec<&Value> =
        r["result"]["configOptions"].as_array().unwrap().iter().map(|o| &o["currentValue"]).collect();
    assert_eq!(current, [&json!("anthropic/claude-opus-4-6"), &json!("ask"), &json!("low")], "{r}");
}
