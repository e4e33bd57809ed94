//! Tests of the JSON-RPC core over in-memory pipes: framing errors, both directions of requests,
//! `$/cancel_request` both ways, and what end of input does to pending requests.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use acp_protocol::jsonrpc::ErrorObject;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;

struct Peer {
    to_server: std::io::PipeWriter,
    from_server: BufReader<std::io::PipeReader>,
}

impl Peer {
    fn send(&mut self, line: &str) {
        self.to_server.write_all(line.as_bytes()).unwrap();
        self.to_server.write_all(b"\n").unwrap();
        self.to_server.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.from_server.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"))
    }
}

fn setup(max_line: usize) -> (Rpc, Peer) {
    let (server_in, to_server) = std::io::pipe().unwrap();
    let (from_server, server_out) = std::io::pipe().unwrap();
    let rpc = start(server_in, server_out, max_line).unwrap();
    (rpc, Peer { to_server, from_server: BufReader::new(from_server) })
}

async fn next_request(rpc: &mut Rpc) -> IncomingRequest {
    match tokio::time::timeout(Duration::from_secs(5), rpc.incoming.recv()).await.unwrap() {
        Some(Incoming::Request(r)) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_are_answered_in_order_and_the_connection_lives_on() {
    let (mut rpc, mut peer) = setup(64);
    peer.send("{oops");
    peer.send(&format!("{{\"pad\":\"{}\"}}", "x".repeat(100)));
    peer.send(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#);
    peer.send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    let req = next_request(&mut rpc).await;
    assert_eq!(req.method, "ping");
    let parse = peer.recv();
    assert_eq!((parse["id"].clone(), parse["error"]["code"].clone()), (Value::Null, json!(-32700)));
    let too_long = peer.recv();
    assert_eq!(too_long["error"]["code"], -32600);
    assert_eq!(too_long["error"]["data"]["maxLineBytes"], 64);
    let batch = peer.recv();
    assert_eq!(batch["error"]["code"], -32600);
    assert_eq!(batch["id"], Value::Null);
    req.responder.respond(Ok(json!({"pong": true})));
    assert_eq!(peer.recv(), json!({"jsonrpc":"2.0","id":9,"result":{"pong":true}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_responder_still_answers() {
    let (mut rpc, mut peer) = setup(1024);
    peer.send(r#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
    drop(next_request(&mut rpc).await);
    let answer = peer.recv();
    assert_eq!(answer["id"], "x");
    assert_eq!(answer["error"]["code"], -32603);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_in_flight_ids_are_refused() {
    let (mut rpc, mut peer) = setup(1024);
    peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#);
    let first = next_request(&mut rpc).await;
    peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"again"}"#);
    peer.send(r#"{"jsonrpc":"2.0","id":2,"method":"other"}"#);
    assert_eq!(next_request(&mut rpc).await.method, "other");
    let dup = peer.recv();
    assert_eq!(dup["error"]["code"], -32600);
    assert!(dup["error"]["message"].as_str().unwrap().contains("already in use"));
    assert_eq!(peer.recv()["id"], 2, "the dropped `other` request is answered");
    first.responder.respond(Ok(json!({})));
    assert_eq!(peer.recv()["result"], json!({}));
    // Once answered, the id may be used again.
    peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"again"}"#);
    assert_eq!(next_request(&mut rpc).await.method, "again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_requests_get_their_answers() {
    let (rpc, mut peer) = setup(1024);
    let conn = rpc.conn.clone();
    let call = tokio::spawn(async move {
        conn.request("fs/read_text_file", &json!({"path": "/a"}), &CancellationToken::new()).await
    });
    let req = peer.recv();
    assert_eq!(req["method"], "fs/read_text_file");
    let id = req["id"].clone();
    peer.send(&json!({"jsonrpc":"2.0","id":id,"result":{"content":"hi"}}).to_string());
    assert_eq!(call.await.unwrap().unwrap(), json!({"content":"hi"}));

    let conn = rpc.conn.clone();
    let call = tokio::spawn(async move { conn.request("x", &json!({}), &CancellationToken::new()).await });
    let id = peer.recv()["id"].clone();
    peer.send(&json!({"jsonrpc":"2.0","id":id,"error":{"code":-32002,"message":"not found"}}).to_string());
    match call.await.unwrap() {
        Err(RequestError::Remote(e)) => assert_eq!(e.code, -32002),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_our_request_tells_the_peer() {
    let (rpc, mut peer) = setup(1024);
    let cancel = CancellationToken::new();
    let conn = rpc.conn.clone();
    let token = cancel.clone();
    let call = tokio::spawn(async move { conn.request("session/request_permission", &json!({}), &token).await });
    let id = peer.recv()["id"].clone();
    cancel.cancel();
    assert_eq!(call.await.unwrap(), Err(RequestError::Cancelled));
    assert_eq!(peer.recv(), json!({"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":id}}));
    // A late answer is ignored without harm.
    peer.send(&json!({"jsonrpc":"2.0","id":id,"result":{}}).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_cancel_request_fires_the_responder_token() {
    let (mut rpc, mut peer) = setup(1024);
    peer.send(r#"{"jsonrpc":"2.0","id":"p1","method":"session/prompt"}"#);
    let req = next_request(&mut rpc).await;
    assert!(!req.responder.cancel_token().is_cancelled());
    peer.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p1"}}"#);
    tokio::time::timeout(Duration::from_secs(5), req.responder.cancel_token().cancelled()).await.unwrap();
    req.responder.respond_error(ErrorObject::cancelled());
    assert_eq!(peer.recv()["error"]["code"], -32800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_of_input_cancels_pending_and_new_requests() {
    let (mut rpc, peer) = setup(1024);
    let conn = rpc.conn.clone();
    let call =
        tokio::spawn(async move { conn.request("terminal/create", &json!({}), &CancellationToken::new()).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(peer.to_server);
    assert_eq!(call.await.unwrap(), Err(RequestError::Cancelled));
    assert!(tokio::time::timeout(Duration::from_secs(5), rpc.incoming.recv()).await.unwrap().is_none());
    assert!(rpc.conn.input_closed());
    let late = rpc.conn.request("terminal/create", &json!({}), &CancellationToken::new()).await;
    assert_eq!(late, Err(RequestError::Cancelled));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_the_dispatcher_and_sends_arrive() {
    let (mut rpc, mut peer) = setup(1024);
    peer.send(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#);
    match rpc.incoming.recv().await {
        Some(Incoming::Notification { method, params }) => {
            assert_eq!(method, "session/cancel");
            assert_eq!(params, Some(json!({"sessionId":"s"})));
        }
        other => panic!("{other:?}"),
    }
    rpc.conn.notify("session/update", &json!({"n": 1}));
    rpc.conn.notify("session/update", &json!({"n": 2}));
    assert_eq!(peer.recv()["params"]["n"], 1);
    assert_eq!(peer.recv()["params"]["n"], 2);
}

/// What waits for the first input runs once, as it arrives — or at once when registered late.
#[test]
fn the_first_input_hook_runs_once_as_input_arrives() {
    let (rpc, mut peer) = setup(1024);
    let (tx, rx) = std::sync::mpsc::channel();
    let hook_tx = tx.clone();
    rpc.conn.after_first_input(move || hook_tx.send("early").unwrap());
    assert!(rx.try_recv().is_err(), "no input yet");
    peer.send(r#"{"jsonrpc":"2.0","method":"one"}"#);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("early"));
    peer.send(r#"{"jsonrpc":"2.0","method":"two"}"#);
    rpc.conn.after_first_input(move || tx.send("late").unwrap());
    assert_eq!(rx.try_recv(), Ok("late"), "registered late, it runs at once (and the first hook once only)");
}

/// A peer in this process writes to the connection's [`Input`] from a thread of its own: its lines
/// are read as they are written (one split over two writes included), its answers reach our
/// requests, protocol errors are answered in turn, and dropping the input ends it as the end of a
/// byte stream would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_in_this_process_is_read_as_it_writes_and_dropping_its_input_ends_it() {
    let (from_server, server_out) = std::io::pipe().unwrap();
    let (mut rpc, mut input) = start_in_process(server_out, 1024);
    let mut from_server = BufReader::new(from_server);
    let mut read = move || {
        let mut line = String::new();
        tokio::task::block_in_place(|| from_server.read_line(&mut line)).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"))
    };
    let conn = rpc.conn.clone();
    let asked =
        tokio::spawn(async move { conn.request("fs/read_text_file", &json!({}), &CancellationToken::new()).await });
    let sent = read();
    assert_eq!(sent["method"], "fs/read_text_file");
    let id = sent["id"].clone();
    let peer = std::thread::spawn(move || {
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": "hi"}});
        input.write_all(format!("{answer}\n").as_bytes()).unwrap();
        input.write_all(br#"{"jsonrpc":"2.0","id":1,"me"#).unwrap();
        input.write_all(b"thod\":\"ping\"}\n{oops\n").unwrap();
        input
    });
    assert_eq!(asked.await.unwrap(), Ok(json!({"content": "hi"})));
    let ping = next_request(&mut rpc).await;
    assert_eq!(ping.method, "ping");
    ping.responder.respond(Ok(json!({"pong": true})));
    assert_eq!(read(), json!({"jsonrpc": "2.0", "id": 1, "result": {"pong": true}}));

    let input = peer.join().unwrap();
    let conn = rpc.conn.clone();
    let unanswered =
        tokio::spawn(async move { conn.request("terminal/create", &json!({}), &CancellationToken::new()).await });
    assert_eq!(read()["method"], "terminal/create");
    // Dropped where a peer would drop it: off the runtime (ending the input hands on what is left).
    tokio::task::block_in_place(|| std::thread::spawn(move || drop(input)).join().unwrap());
    let unanswered = tokio::time::timeout(Duration::from_secs(5), unanswered).await.expect("input ended");
    assert_eq!(unanswered.unwrap(), Err(RequestError::Cancelled));
    assert!(tokio::time::timeout(Duration::from_secs(5), rpc.incoming.recv()).await.unwrap().is_none());
    assert_eq!(read()["error"]["code"], -32700, "the line that is not JSON is answered in its turn");
    assert!(rpc.conn.input_closed());
}
