//! Drives a real `acp gateway` process over real WebSockets: start it on a free loopback port
//! (read from its stderr), connect clients, send requests, read frames with timeouts.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, WebSocket};

use super::agent::TIMEOUT;

pub const TOKEN: &str = "test-token-0123456789";

pub struct Gateway {
    pub child: Child,
    pub port: u16,
    /// The web chat's link, as printed.
    pub web: String,
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    /// Starts `acp gateway` with a token, the model at `mock_base` (Anthropic wire API).
    pub fn start(mock_base: &str, extra: &[&str]) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), mock_base, extra)
    }

    pub fn start_in(home: tempfile::TempDir, mock_base: &str, extra: &[&str]) -> Self {
        Self::start_on(home, 0, mock_base, extra)
    }

    /// Starts it on `port` (0: any free one) with `home` as `$ACP_HOME`.
    pub fn start_on(home: tempfile::TempDir, port: u16, mock_base: &str, extra: &[&str]) -> Self {
        Self::start_with(home, port, mock_base, extra, Some(TOKEN))
    }

    /// Starts it on loopback without a shared token.
    pub fn start_without_token(mock_base: &str, extra: &[&str]) -> Self {
        Self::start_with(tempfile::tempdir().unwrap(), 0, mock_base, extra, None)
    }

    pub fn start_with(
        home: tempfile::TempDir,
        port: u16,
        mock_base: &str,
        extra: &[&str],
        token: Option<&str>,
    ) -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{port}");
        let token_file = home.path().join("test-gateway.token");
        let mut command = Command::new(env!("CARGO_BIN_EXE_acp"));
        command.args(["gateway", "--listen", &listen]);
        if let Some(token) = token {
            std::fs::write(&token_file, token).unwrap();
            command.arg("--token-file").arg(&token_file);
        }
        let mut child = command
            .arg("--workspace")
            .arg(workspace.path())
            .args(extra)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("ACP_HOME", home.path())
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock_base)
            .env("RUST_LOG", "acp=debug,warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut told = false;
            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                if !told && let Some(rest) = line.trim().strip_prefix("acp gateway listening on ws://127.0.0.1:") {
                    let port = rest.split('/').next().unwrap().parse::<u16>().unwrap();
                    let web = rest.split("(web chat: ").nth(1).unwrap_or_default().trim_end_matches(')').to_owned();
                    let _ = tx.send((port, web));
                    told = true;
                }
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let (port, web) = rx
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|_| panic!("the gateway did not start:\n{}", stderr.lock().unwrap()));
        Self { child, port, web, home, workspace, stderr }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until its log holds `needle` (the log is read on a thread of its own, so a line can
    /// come after the frame that followed it); panics after the timeout.
    pub fn wait_stderr(&self, needle: &str) {
        let deadline = std::time::Instant::now() + TIMEOUT;
        while !self.stderr().contains(needle) {
            assert!(std::time::Instant::now() < deadline, "the log never said {needle:?}:\n{}", self.stderr());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A WebSocket to it, the challenge already read.
    pub fn socket(&self) -> (Client, Value) {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        // Up to the gateway's own limit (25 MiB), as its clients are told in `hello-ok`.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(25 << 20))
            .max_frame_size(Some(25 << 20));
        let (ws, _) = tokio_tungstenite::tungstenite::client::client_with_config(
            format!("ws://127.0.0.1:{}/", self.port),
            stream,
            Some(config),
        )
        .unwrap_or_else(|e| panic!("WebSocket handshake failed: {e}"));
        let mut client = Client { ws, next: 0 };
        let challenge = client.recv();
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        (client, challenge)
    }

    /// A connected operator (`scopes` as given).
    /// Runs `acp ARGS` against this gateway's home (`channels` and `pairing` through the gateway
    /// itself): whether it succeeded, and its output.
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_acp"));
        command.args(args).env("ACP_HOME", self.home.path()).env("HOME", self.home.path());
        if args[0] == "channels" || args[0] == "pairing" {
            command.args(["--gateway", &format!("ws://127.0.0.1:{}", self.port), "--token", TOKEN]);
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    }

    pub fn client(&self, scopes: &[&str]) -> Client {
        let (mut client, _) = self.socket();
        let hello = client.request("connect", connect_params(Some(TOKEN), scopes));
        assert_eq!(hello["ok"], true, "{hello}");
        client
    }

    pub fn signal(&self, sig: &str) {
        Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status().unwrap();
    }

    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Gateway {
    /// Stops it (SIGKILL); its home, to start another on.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.home, tempfile::tempdir().unwrap())
    }

    /// Stops it (SIGKILL) and starts another on the same port and home.
    pub fn restart(mut self, mock_base: &str) -> Self {
        let home = std::mem::replace(&mut self.home, tempfile::tempdir().unwrap());
        let port = self.port;
        drop(self);
        Self::start_on(home, port, mock_base, &[])
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `connect` params as the stock CLI sends them.
pub fn connect_params(token: Option<&str>, scopes: &[&str]) -> Value {
    let mut params = json!({"minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "cli", "version": "test", "platform": "linux", "mode": "cli"},
        "caps": [], "role": "operator", "scopes": scopes});
    if let Some(token) = token {
        params["auth"] = json!({"token": token});
    }
    params
}

pub struct Client {
    pub ws: WebSocket<TcpStream>,
    next: u64,
}

/// What reading a socket came to.
#[derive(Debug, PartialEq)]
pub enum Read_ {
    Frame(Value),
    Closed(Option<(u16, String)>),
}

impl Client {
    pub fn from_socket(ws: WebSocket<TcpStream>) -> Self {
        Self { ws, next: 0 }
    }

    pub fn send_text(&mut self, text: &str) {
        self.ws.send(Message::Text(text.into())).unwrap();
    }

    pub fn send(&mut self, frame: &Value) {
        self.send_text(&frame.to_string());
    }

    /// Sends a request; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> String {
        self.next += 1;
        let id = format!("{}:{method}", self.next);
        self.send(&json!({"type": "req", "id": id, "method": method, "params": params}));
        id
    }

    /// The next frame or the close.
    pub fn read(&mut self) -> Read_ {
        loop {
            match self.ws.read() {
                Ok(Message::Text(text)) => return Read_::Frame(serde_json::from_str(&text).unwrap()),
                Ok(Message::Close(frame)) => {
                    return Read_::Closed(
                        frame.map(|CloseFrame { code, reason }| (u16::from(code), reason.to_string())),
                    );
                }
                Ok(_) => continue,
                Err(tokio_tungstenite::tungstenite::Error::ConnectionClosed) => return Read_::Closed(None),
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    pub fn recv(&mut self) -> Value {
        match self.read() {
            Read_::Frame(v) => v,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Reads until the response to `id`; returns (what came before, the response).
    pub fn until_response(&mut self, id: &str) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let frame = self.recv();
            if frame["type"] == "res" && frame["id"] == id {
                return (before, frame);
            }
            before.push(frame);
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.until_response(&id).1
    }

    /// Reads events until `pred` holds for one; returns every event read, that one last.
    pub fn until_event(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let frame = self.recv();
            let done = frame["type"] == "event" && pred(&frame);
            seen.push(frame);
            if done {
                return seen;
            }
        }
    }

    /// Reads until the socket closes; returns the close code and reason, and the frames before.
    pub fn until_closed(&mut self) -> (Vec<Value>, Option<(u16, String)>) {
        let mut frames = Vec::new();
        loop {
            match self.read() {
                Read_::Frame(v) => frames.push(v),
                Read_::Closed(c) => return (frames, c),
            }
        }
    }
}

/// Reads the rest of a stream (for a raw HTTP exchange).
pub fn read_all(mut stream: TcpStream) -> String {
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

/// An ed25519 device identity, signing `connect` as the reference's clients do (proof v3).
pub struct Device {
    pair: ring::signature::Ed25519KeyPair,
    pub id: String,
}

impl Device {
    pub fn new() -> Self {
        use ring::signature::KeyPair as _;
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref());
        let id = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Self { pair, id }
    }

    /// `params` (from [`connect_params`]) signed for `challenge`, over `signed_token`.
    pub fn sign(&self, mut params: Value, challenge: &Value, signed_token: Option<&str>) -> Value {
        use base64::Engine as _;
        use ring::signature::KeyPair as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let nonce = challenge["payload"]["nonce"].as_str().unwrap();
        let signed_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let scopes: Vec<String> = params["scopes"].as_array().unwrap().iter().map(text).collect();
        let payload = format!(
            "v3|{}|{}|{}|{}|{}|{signed_at}|{}|{nonce}|{}|{}",
            self.id,
            text(&params["client"]["id"]),
            text(&params["client"]["mode"]),
            text(&params["role"]),
            scopes.join(","),
            signed_token.unwrap_or_default(),
            text(&params["client"]["platform"]).to_lowercase(),
            text(&params["client"]["deviceFamily"]).to_lowercase(),
        );
        params["device"] = json!({"id": self.id, "publicKey": b64.encode(self.pair.public_key().as_ref()),
            "signature": b64.encode(self.pair.sign(payload.as_bytes()).as_ref()), "signedAt": signed_at, "nonce": nonce});
        params
    }
}
