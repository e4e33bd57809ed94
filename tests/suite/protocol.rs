//! Bad input, line by line, against the real binary: each gets the right JSON-RPC error and the
//! connection lives on (proven by a good request after each).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::expect::{error, error_with, initialize_result, result};

/// The connection still works: `initialize` gets its whole answer.
fn ping(agent: &mut Agent) {
    let id = agent.send_request("initialize", json!({"protocolVersion": 1}));
    let (_, r) = agent.until_response(id);
    assert_eq!(r, result(id, initialize_result(agent.home.path())), "the connection must still work");
}

fn answer_to_raw(agent: &mut Agent, raw: &[u8]) -> Value {
    agent.send_raw(raw);
    agent.recv()
}

#[test]
fn every_bad_line_gets_its_error_and_the_connection_lives() {
    let mut agent = Agent::in_process(Options::default());
    let cases: &[(&[u8], Value)] = &[
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\"\n",
            error(Value::Null, -32700, "parse error: EOF while parsing an object at line 1 column 32"),
        ),
        (b"hello\n", error(Value::Null, -32700, "parse error: expected value at line 1 column 1")),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n",
            error(Value::Null, -32700, "parse error: line is not valid UTF-8 (invalid byte at offset 34)"),
        ),
        (b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n", error(Value::Null, -32600, BATCH)),
        (b"[]\n", error(Value::Null, -32600, BATCH)),
        (b"\"just a string\"\n", error(Value::Null, -32600, "invalid request: expected a JSON object, got a string")),
        (b"{\"id\":5,\"method\":\"initialize\"}\n", error(5, -32600, "invalid request: missing `jsonrpc: \"2.0\"`")),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}\n",
            error(Value::Null, -32600, "invalid request: `id` must be an integer or a string, got a boolean"),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":[]}\n",
            error(6, -32600, "invalid request: `method` must be a string"),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":\"p\"}\n",
            error(7, -32600, "invalid request: `params` must be an object or an array, got a string"),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"no/such/method\"}\n",
            error_with("s", -32601, "method not found: no/such/method", json!({"method": "no/such/method"})),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"_vendor/ext\",\"params\":{}}\n",
            error_with(8, -32601, "method not found: _vendor/ext", json!({"method": "_vendor/ext"})),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session/load\",\"params\":{}}\n",
            error(9, -32602, "invalid params: missing field `mcpServers`"),
        ),
    ];
    for (raw, expected) in cases {
        let r = answer_to_raw(&mut agent, raw);
        assert_eq!(&r, expected, "{}", String::from_utf8_lossy(raw));
        ping(&mut agent);
    }
}

const BATCH: &str = "invalid request: batches are not supported; send one message per line";

#[test]
fn bad_params_name_the_field() {
    let mut agent = Agent::in_process(Options::default().env("ANTHROPIC_API_KEY", "k"));
    let cases = [
        ("initialize", json!({}), "missing field `protocolVersion`"),
        ("initialize", json!({"protocolVersion": {}}), "`protocolVersion`: expected an integer"),
        ("session/new", json!({"mcpServers": []}), "missing field `cwd`"),
        ("session/new", json!({"cwd": 5, "mcpServers": []}), "`cwd`: invalid type: integer `5`, expected path string"),
        (
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
            "`cwd` must be an absolute path, got `relative/dir`",
        ),
        ("session/new", json!({"cwd": "/tmp"}), "missing field `mcpServers`"),
        ("session/prompt", json!({"sessionId": "s"}), "missing field `prompt`"),
        (
            "session/prompt",
            json!({"sessionId": "s", "prompt": [{"type": "text", "text": 5}]}),
            "`prompt[0]`: invalid type: integer `5`, expected a string",
        ),
        (
            "session/set_mode",
            json!({"sessionId": 1, "modeId": "ask"}),
            "`sessionId`: invalid type: integer `1`, expected a string",
        ),
        ("authenticate", json!({}), "missing field `methodId`"),
        ("authenticate", json!({"methodId": "carrier-pigeon"}), "`methodId`: unknown auth method `carrier-pigeon`"),
    ];
    for (method, params, says) in cases {
        let id = agent.send_request(method, params.clone());
        let (_, r) = agent.until_response(id);
        assert_eq!(r, error(id, -32602, &format!("invalid params: {says}")), "{method} {params}");
    }
    ping(&mut agent);
}

#[test]
fn oversized_lines_are_refused_without_killing_the_connection() {
    let mut agent = Agent::in_process(Options::default().arg("serve").arg("--max-line-bytes").arg("1024"));
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}\n",
        "x".repeat(5000)
    );
    let refused = error_with(
        Value::Null,
        -32600,
        "invalid request: message exceeds the maximum line size of 1024 bytes; it was skipped",
        json!({"maxLineBytes": 1024}),
    );
    assert_eq!(answer_to_raw(&mut agent, big.as_bytes()), refused);
    ping(&mut agent);
    // Also when the line arrives in pieces.
    for piece in big.as_bytes().chunks(700) {
        agent.send_raw(piece);
    }
    assert_eq!(agent.recv(), refused);
    ping(&mut agent);

    // The default limit is 16 MiB: a 1 MiB line is fine.
    let mut agent = Agent::in_process(Options::default());
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":1,\"_meta\":{{\"pad\":\"{}\"}}}}}}\n",
        "x".repeat(1 << 20)
    );
    assert_eq!(answer_to_raw(&mut agent, big.as_bytes()), result(1, initialize_result(agent.home.path())));
}

#[test]
fn notifications_never_get_answers() {
    let mut agent = Agent::in_process(Options::default());
    agent.notify("some/unknown_notification", json!({"x": 1}));
    agent.notify("session/cancel", json!({"sessionId": "nope"}));
    agent.notify("session/cancel", json!({"wrong": true}));
    agent.notify("$/cancel_request", json!({"requestId": 12345}));
    agent.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n"); // an answer to nothing
    agent.send_raw(b"\n\r\n   \n"); // blank lines
    let id = agent.send_request("initialize", json!({"protocolVersion": 1}));
    let first = agent.recv();
    assert_eq!(first, result(id, initialize_result(agent.home.path())), "nothing was sent for the notifications");
}

#[test]
fn crlf_line_ends_are_accepted() {
    let mut agent = Agent::in_process(Options::default());
    let r = answer_to_raw(
        &mut agent,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\r\n",
    );
    assert_eq!(r, result(1, initialize_result(agent.home.path())));
}
