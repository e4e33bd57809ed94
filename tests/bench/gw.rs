//! Starts a release `acp gateway` for the benchmarks, on a free loopback port with a token and
//! the mock model, and says how long it took to listen.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::mock_model::MockModel;

pub const TOKEN: &str = "bench-token-0123456789";

pub struct Gw {
    pub child: Child,
    pub port: u16,
    _home: tempfile::TempDir,
    pub started: Duration,
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(mock: &MockModel) -> Gw {
    start_with(mock, "")
}

/// [`start`], with this `config.toml`.
pub fn start_with(mock: &MockModel, config: &str) -> Gw {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    start_in(home, mock)
}

impl Gw {
    /// Kills it (SIGKILL) and starts another on the same home.
    pub fn restart(mut self, mock: &MockModel) -> Gw {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let home = std::mem::replace(&mut self._home, tempfile::tempdir().unwrap());
        start_in(home, mock)
    }
}

/// Starts it with `home` as its `$ACP_HOME` (and workspace).
pub fn start_in(home: tempfile::TempDir, mock: &MockModel) -> Gw {
    start_in_with(home, mock, &[])
}

/// [`start_in`], with these arguments besides.
pub fn start_in_with(home: tempfile::TempDir, mock: &MockModel, extra: &[&str]) -> Gw {
    let t = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["gateway", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(home.path())
        .args(extra)
        .env_clear()
        .env("ACP_GATEWAY_TOKEN", TOKEN)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Reaped when dropped, whatever happens below.
    let mut gw = Gw { child, port: 0, _home: home, started: Duration::ZERO };
    let mut lines = BufReader::new(gw.child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(lines.read_line(&mut line).unwrap_or(0) > 0, "the gateway did not start");
        if let Some(rest) = line.trim().strip_prefix("acp gateway listening on ws://127.0.0.1:") {
            gw.started = t.elapsed();
            gw.port = rest.split('/').next().unwrap().parse().unwrap();
            std::thread::spawn(move || while lines.read_line(&mut String::new()).unwrap_or(0) > 0 {});
            return gw;
        }
    }
}

pub type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// An admin client of the gateway on `port`, past its handshake.
pub async fn connect(port: u16) -> Ws {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://127.0.0.1:{port}/"), stream).await.unwrap();
    let _challenge = ws.next().await.unwrap().unwrap();
    let connect = json!({"type": "req", "id": "c", "method": "connect", "params": {"minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "cli", "version": "bench", "platform": "linux", "mode": "cli"},
        "scopes": ["operator.admin"], "auth": {"token": TOKEN}}});
    ws.send(Message::Text(connect.to_string().into())).await.unwrap();
    loop {
        let frame = next(&mut ws).await;
        if frame["id"] == "c" {
            assert_eq!(frame["ok"], true, "{frame}");
            return ws;
        }
    }
}

/// The next text frame, as JSON.
pub async fn next(ws: &mut Ws) -> Value {
    loop {
        if let Message::Text(text) = ws.next().await.unwrap().unwrap() {
            return serde_json::from_str(&text).unwrap();
        }
    }
}
