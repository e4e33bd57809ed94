//! Bad input, line by line, against the real binary: each gets the right JSON-RPC error and the
//! connection lives on (proven by a good request after each).

use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};

fn ping(agent: &mut Agent) {
    let r = agent.request("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1, "the connection must still work: {r}");
}

fn answer_to_raw(agent: &mut Agent, raw: &[u8]) -> Value {
    agent.send_raw(raw);
    agent.recv()
}

#[test]
fn every_bad_line_gets_its_error_and_the_connection_lives() {
    let mut agent = Agent::spawn(Options::default());
    let cases: &[(&[u8], i64, Value, &str)] = &[
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\"\n", -32700, Value::Null, "parse error"),
        (b"hello\n", -32700, Value::Null, "parse error"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n", -32700, Value::Null, "UTF-8"),
        (b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n", -32600, Value::Null, "batch"),
        (b"[]\n", -32600, Value::Null, "batch"),
        (b"\"just a string\"\n", -32600, Value::Null, "object"),
        (b"{\"id\":5,\"method\":\"initialize\"}\n", -32600, json!(5), "jsonrpc"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}\n", -32600, Value::Null, "`id`"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":[]}\n", -32600, json!(6), "`method`"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":\"p\"}\n", -32600, json!(7), "`params`"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"no/such/method\"}\n", -32601, json!("s"), "no/such/method"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"_vendor/ext\",\"params\":{}}\n", -32601, json!(8), "_vendor/ext"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session/load\",\"params\":{}}\n",
            -32602,
            json!(9),
            "missing field",
        ),
    ];
    for (raw, code, id, words) in cases {
        let r = answer_to_raw(&mut agent, raw);
        let shown = String::from_utf8_lossy(raw);
        assert_eq!(r["error"]["code"], *code, "{shown}: {r}");
        assert_eq!(r["id"], *id, "{shown}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(words), "{shown}: {r}");
        ping(&mut agent);
    }
}

#[test]
fn bad_params_name_the_field() {
    let mut agent = Agent::spawn(Options::default().env("ANTHROPIC_API_KEY", "k"));
    let cases = [
        ("initialize", json!({}), "protocolVersion"),
        ("initialize", json!({"protocolVersion": {}}), "protocolVersion"),
        ("session/new", json!({"mcpServers": []}), "`cwd`"),
        ("session/new", json!({"cwd": 5, "mcpServers": []}), "`cwd`"),
        ("session/new", json!({"cwd": "relative/dir", "mcpServers": []}), "absolute"),
        ("session/new", json!({"cwd": "/tmp"}), "`mcpServers`"),
        ("session/prompt", json!({"sessionId": "s"}), "`prompt`"),
        ("session/prompt", json!({"sessionId": "s", "prompt": [{"type": "text", "text": 5}]}), "prompt[0]"),
        ("session/set_mode", json!({"sessionId": 1, "modeId": "ask"}), "`sessionId`"),
        ("authenticate", json!({}), "methodId"),
        ("authenticate", json!({"methodId": "carrier-pigeon"}), "carrier-pigeon"),
    ];
    for (method, params, words) in cases {
        let r = agent.request(method, params.clone());
        assert_eq!(r["error"]["code"], -32602, "{method} {params}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{method} {params}: {message}");
    }
    ping(&mut agent);
}

#[test]
fn oversized_lines_are_refused_without_killing_the_connection() {
    let mut agent = Agent::spawn(Options::default().arg("serve").arg("--max-line-bytes").arg("1024"));
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}\n",
        "x".repeat(5000)
    );
    let r = answer_to_raw(&mut agent, big.as_bytes());
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["error"]["data"]["maxLineBytes"], 1024);
    ping(&mut agent);
    // Also when the line arrives in pieces.
    for piece in big.as_bytes().chunks(700) {
        agent.send_raw(piece);
    }
    assert_eq!(agent.recv()["error"]["code"], -32600);
    ping(&mut agent);

    // The default limit is 16 MiB: a 1 MiB line is fine.
    let mut agent = Agent::spawn(Options::default());
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":1,\"_meta\":{{\"pad\":\"{}\"}}}}}}\n",
        "x".repeat(1 << 20)
    );
    assert_eq!(answer_to_raw(&mut agent, big.as_bytes())["result"]["protocolVersion"], 1);
}

#[test]
fn notifications_never_get_answers() {
    let mut agent = Agent::spawn(Options::default());
    agent.notify("some/unknown_notification", json!({"x": 1}));
    agent.notify("session/cancel", json!({"sessionId": "nope"}));
    agent.notify("session/cancel", json!({"wrong": true}));
    agent.notify("$/cancel_request", json!({"requestId": 12345}));
    agent.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n"); // an answer to nothing
    agent.send_raw(b"\n\r\n   \n"); // blank lines
    let id = agent.send_request("initialize", json!({"protocolVersion": 1}));
    let first = agent.recv();
    assert_eq!(first["id"], id, "nothing was sent for the notifications: {first}");
}

#[test]
fn crlf_line_ends_are_accepted() {
    let mut agent = Agent::spawn(Options::default());
    let r = answer_to_raw(
        &mut agent,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\r\n",
    );
    assert_eq!(r["result"]["protocolVersion"], 1);
}
