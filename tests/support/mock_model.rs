//! A local mock model server: replays exact provider bytes from `fixtures/sse/` over HTTP/1.1 on
//! loopback, with control over chunking (whole body, one event per write, byte by byte), delays
//! between writes, and stalls. It records every request (headers, JSON body, arrival time) and
//! whether the client hung up early. Replies are served from a script, in order.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "embeddings.rs"]
pub mod embeddings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a body is cut into writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunking {
    Whole,
    /// One SSE event (up to and including its blank line) per write.
    PerEvent,
    /// `n` bytes per write.
    Bytes(usize),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub chunking: Chunking,
    /// Pause before each write after the first.
    pub delay: Duration,
    /// Write this many pieces, then hold the connection open without writing until the client leaves.
    pub stall_after: Option<usize>,
    /// After the body, write this piece over and over until the client leaves (a stream that
    /// never ends).
    pub forever: Option<Vec<u8>>,
    /// Served only to a request whose body contains this text (for sessions that run at once).
    pub when: Option<String>,
    /// Served only to a request whose body does not contain this text.
    pub unless: Option<String>,
}

impl Reply {
    /// `fixtures/sse/<api>/<name>.sse` (a 200 event stream) or `<name>.json` with its `<name>.head`.
    pub fn fixture(api: &str, name: &str) -> Self {
        let dir = fixtures_dir().join("sse").join(api);
        let sse = dir.join(format!("{name}.sse"));
        let (body, default_type) = if sse.exists() {
            (read(&sse), "text/event-stream")
        } else {
            (read(&dir.join(format!("{name}.json"))), "application/json")
        };
        let mut reply = Self::sse(body);
        reply.headers = vec![("content-type".into(), default_type.into())];
        let head = dir.join(format!("{name}.head"));
        if head.exists() {
            let text = String::from_utf8(read(&head)).unwrap();
            let mut lines = text.lines();
            let status_line = lines.next().unwrap();
            let (code, reason) = status_line.split_once(' ').unwrap();
            reply.status = code.parse().unwrap();
            reply.reason = reason.to_owned();
            reply.headers = lines
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (k, v) = l.split_once(':').unwrap();
                    (k.trim().to_owned(), v.trim().to_owned())
                })
                .collect();
        }
        reply
    }

    /// A 200 event stream with this body.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            reason: "OK".into(),
            headers: vec![("content-type".into(), "text/event-stream; charset=utf-8".into())],
            body: body.into(),
            chunking: Chunking::PerEvent,
            delay: Duration::ZERO,
            stall_after: None,
            forever: None,
            when: None,
            unless: None,
        }
    }

    /// Served only to a request whose body contains `text`; replies without one go to any.
    pub fn when(mut self, text: &str) -> Self {
        self.when = Some(text.to_owned());
        self
    }

    /// Served only to a request whose body does not contain `text`.
    pub fn unless(mut self, text: &str) -> Self {
        self.unless = Some(text.to_owned());
        self
    }

    /// After the body, `piece` is written again and again until the client hangs up.
    pub fn forever(mut self, piece: impl Into<Vec<u8>>) -> Self {
        self.forever = Some(piece.into());
        self
    }

    pub fn chunking(mut self, chunking: Chunking) -> Self {
        self.chunking = chunking;
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn stall_after(mut self, pieces: usize) -> Self {
        self.stall_after = Some(pieces);
        self
    }

    fn pieces(&self) -> Vec<&[u8]> {
        match self.chunking {
            Chunking::Whole => vec![&self.body[..]],
            Chunking::Bytes(n) => self.body.chunks(n.max(1)).collect(),
            Chunking::PerEvent => split_events(&self.body),
        }
    }
}

/// Splits after each blank line ("\n\n", "\r\n\r\n" or "\r\r").
fn split_events(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        let end = if body[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if body[i..].starts_with(b"\n\n") || body[i..].starts_with(b"\r\r") {
            Some(i + 2)
        } else {
            None
        };
        match end {
            Some(e) => {
                out.push(&body[start..e]);
                start = e;
                i = e;
            }
            None => i += 1,
        }
    }
    if start < body.len() {
        out.push(&body[start..]);
    }
    out
}

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub at: Instant,
    /// When the reply's last byte was written (None if the client left first).
    pub finished_at: Option<Instant>,
    /// The client closed the connection before the reply was complete.
    pub client_left: bool,
    /// When each piece of the body was written (after the flush).
    pub piece_times: Vec<Instant>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    requests: Vec<Recorded>,
    /// `POST …/embeddings` answers 503 (else the stand-in's vectors, `support::embeddings`).
    embeddings_down: bool,
}

/// The running server; it stops when dropped (its thread ends with the test process).
pub struct MockModel {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl MockModel {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((socket, _)) = listener.accept().await else { continue };
                    socket.set_nodelay(true).ok();
                    tokio::spawn(serve(socket, shared.clone()));
                }
            });
        });
        let addr = rx.recv().unwrap();
        Self { addr, state }
    }

    /// `http://127.0.0.1:PORT` — Anthropic-style base (the client appends `/v1/messages`).
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` — OpenAI-style base.
    pub fn base_v1(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, reply: Reply) -> &Self {
        self.state.lock().unwrap().script.push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Waits until `n` requests arrived (or panics after 10 s).
    pub fn wait_requests(&self, n: usize) -> Vec<Recorded> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reqs = self.requests();
            if reqs.len() >= n {
                return reqs;
            }
            assert!(Instant::now() < deadline, "mock model: expected {n} requests, got {}", reqs.len());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until request `index` has been answered completely or abandoned by the client.
    pub fn wait_done(&self, index: usize) -> Recorded {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(r) = self.requests().get(index)
                && (r.finished_at.is_some() || r.client_left)
            {
                return r.clone();
            }
            assert!(Instant::now() < deadline, "mock model: request {index} never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Makes `POST …/embeddings` fail with 503 (or answer again).
    pub fn set_embeddings_down(&self, down: bool) {
        self.state.lock().unwrap().embeddings_down = down;
    }

    /// The requests to `…/embeddings` so far.
    pub fn embedding_requests(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.path.ends_with("/embeddings")).collect()
    }

    pub fn remaining(&self) -> usize {
        self.state.lock().unwrap().script.len()
    }
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>) {
    // One request per connection: good enough for a mock, and it makes "client left" exact.
    let Some((method, path, headers, body)) = read_request(&mut socket).await else { return };
    if path_is_embeddings(&path) {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (index, down) = {
            let mut s = state.lock().unwrap();
            s.requests.push(Recorded {
                method,
                path,
                headers,
                body: body.clone(),
                at: Instant::now(),
                finished_at: None,
                client_left: false,
                piece_times: Vec::new(),
            });
            (s.requests.len() - 1, s.embeddings_down)
        };
        write_embeddings(&mut socket, &body, down).await;
        state.lock().unwrap().requests[index].finished_at = Some(Instant::now());
        return;
    }
    let index;
    let reply = {
        let mut s = state.lock().unwrap();
        index = s.requests.len();
        let text = String::from_utf8_lossy(&body).into_owned();
        s.requests.push(Recorded {
            method,
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            at: Instant::now(),
            finished_at: None,
            client_left: false,
            piece_times: Vec::new(),
        });
        let at = s.script.iter().position(|r| {
            r.when.as_ref().is_none_or(|w| text.contains(w.as_str()))
                && r.unless.as_ref().is_none_or(|u| !text.contains(u.as_str()))
        });
        at.and_then(|at| s.script.remove(at))
    };
    let reply = reply.unwrap_or_else(|| {
        let mut r = Reply::sse(b"mock model: no scripted reply left".to_vec());
        r.status = 500;
        r.reason = "Internal Server Error".into();
        r.headers = vec![("content-type".into(), "text/plain".into())];
        r
    });
    let mut piece_times = Vec::new();
    let completed = write_reply(&mut socket, &reply, &mut piece_times).await;
    let mut s = state.lock().unwrap();
    let rec = &mut s.requests[index];
    rec.piece_times = piece_times;
    if completed {
        rec.finished_at = Some(Instant::now());
    } else {
        rec.client_left = true;
    }
}

fn path_is_embeddings(path: &str) -> bool {
    path.ends_with("/embeddings")
}

/// Answers an OpenAI `POST /v1/embeddings` with the stand-in's vectors (or a 503).
async fn write_embeddings(socket: &mut TcpStream, body: &Value, down: bool) {
    let (status, answer) = if down {
        (
            "503 Service Unavailable",
            serde_json::json!({"error": {"message": "model is loading", "type": "server_error"}}),
        )
    } else {
        let inputs: Vec<String> = match &body["input"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items.iter().map(|i| i.as_str().unwrap_or_default().to_owned()).collect(),
            _ => Vec::new(),
        };
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, text)| serde_json::json!({"object": "embedding", "index": i, "embedding": embeddings::vector(text)}))
            .collect();
        (
            "200 OK",
            serde_json::json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    };
    let body = answer.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(body.as_bytes()).await;
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<(String, String, Vec<(String, String)>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned())))
        .collect();
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((method, path, headers, body))
}

/// Writes the reply with chunked transfer encoding; false if the client went away first.
async fn write_reply(socket: &mut TcpStream, reply: &Reply, piece_times: &mut Vec<Instant>) -> bool {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reply.reason);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for (i, piece) in reply.pieces().into_iter().enumerate() {
        if reply.stall_after == Some(i) {
            return wait_for_client_to_leave(socket).await;
        }
        if i > 0 && !reply.delay.is_zero() {
            // Notice a client that leaves while we wait.
            let mut probe = [0u8; 1];
            tokio::select! {
                () = tokio::time::sleep(reply.delay) => {}
                r = socket.read(&mut probe) => if matches!(r, Ok(0) | Err(_)) { return false },
            }
        }
        let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
        framed.extend_from_slice(piece);
        framed.extend_from_slice(b"\r\n");
        if socket.write_all(&framed).await.is_err() || socket.flush().await.is_err() {
            return false;
        }
        piece_times.push(Instant::now());
    }
    if reply.stall_after.is_some_and(|n| n >= reply.pieces().len()) {
        return wait_for_client_to_leave(socket).await;
    }
    if let Some(piece) = &reply.forever {
        let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
        framed.extend_from_slice(piece);
        framed.extend_from_slice(b"\r\n");
        loop {
            if socket.write_all(&framed).await.is_err() || socket.flush().await.is_err() {
                return false;
            }
            if !reply.delay.is_zero() {
                tokio::time::sleep(reply.delay).await;
            }
        }
    }
    socket.write_all(b"0\r\n\r\n").await.is_ok()
}

async fn wait_for_client_to_leave(socket: &mut TcpStream) -> bool {
    let mut probe = [0u8; 64];
    loop {
        match socket.read(&mut probe).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
