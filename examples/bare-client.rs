//! The floor for `acp run` as a process (tests/bench/coldstart.rs): a bare program that posts the
//! same request to the mock model at the address it is given and reads the streamed reply to the
//! end — what any separate process pays to start, stream and exit, before doing anything of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};

fn main() {
    let addr = std::env::args().nth(1).expect("the mock's host:port");
    let reply = exchange(&addr);
    assert!(reply.windows(12).any(|w| w == b"message_stop"));
}

/// Posts the request to the mock at `addr` and reads the reply to the end (the benchmark's plain
/// client does the same in its own process).
pub fn exchange(addr: &str) -> Vec<u8> {
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}"#;
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    write!(
        socket,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = Vec::new();
    socket.read_to_end(&mut reply).unwrap();
    reply
}
