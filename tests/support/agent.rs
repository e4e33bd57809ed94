//! Drives the real `acp` binary over its stdin/stdout like an editor would: a private `$ACP_HOME`,
//! a clean environment, line-by-line JSON in and out with timeouts, and the captured stderr in every
//! failure message.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(15);

/// How to start the agent.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub env: Vec<(String, String)>,
    pub config: Option<String>,
    pub args: Vec<String>,
}

impl Options {
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn config(mut self, toml: &str) -> Self {
        self.config = Some(toml.into());
        self
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }

    /// Point the built-in `anthropic` provider at a mock server.
    pub fn anthropic(self, base: &str) -> Self {
        self.env("ANTHROPIC_API_KEY", "test-key").env("ANTHROPIC_BASE_URL", base)
    }

    /// Point the built-in `openai` / `openai-responses` providers at a mock server.
    pub fn openai(self, base_v1: &str, responses: bool) -> Self {
        let model = if responses { "openai-responses/gpt-5-codex" } else { "openai/gpt-4.1" };
        self.env("OPENAI_API_KEY", "test-key").env("OPENAI_BASE_URL", base_v1).env("ACP_MODEL", model)
    }
}

pub struct Agent {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    pub home: tempfile::TempDir,
    next_id: i64,
    /// Notifications and agent requests seen while waiting for responses.
    pub seen: Vec<Value>,
}

impl Agent {
    pub fn spawn(options: Options) -> Self {
        let home = tempfile::tempdir().unwrap();
        if let Some(config) = &options.config {
            std::fs::write(home.path().join("config.toml"), config).unwrap();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_acp"));
        cmd.args(&options.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", home.path())
            .env("RUST_LOG", "acp=debug,warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn acp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Self { child, stdin, lines, stderr, home, next_id: 0, seen: Vec::new() }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Sends a request with a fresh numeric id; returns the id.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next line from stdout, parsed; panics (with stderr) after the timeout.
    pub fn recv(&mut self) -> Value {
        self.recv_within(TIMEOUT).unwrap_or_else(|| panic!("no message within {TIMEOUT:?}\nstderr:\n{}", self.stderr()))
    }

    pub fn recv_within(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("stdout carried a non-JSON line ({e}): {line:?}\nstderr:\n{}", self.stderr())
            })),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Reads until the response to `id`; everything before it is returned (and kept in `seen`).
    pub fn until_response(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let msg = self.recv();
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return (before, msg);
            }
            self.seen.push(msg.clone());
            before.push(msg);
        }
    }

    /// Sends a request and returns its response, keeping what came before in `seen`.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.until_response(id).1
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        r["result"].clone()
    }

    /// `session/new` in a fresh temp directory; returns the session id.
    pub fn new_session(&mut self) -> String {
        let cwd = self.home.path().display().to_string();
        let r = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let id = r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {r}\n{}", self.stderr()))
            .to_owned();
        // The setup update that follows the response.
        let setup = self.recv();
        assert_eq!(setup["params"]["update"]["sessionUpdate"], "usage_update", "{setup}");
        assert_eq!(setup["params"]["sessionId"], id.as_str());
        id
    }

    /// Prompts and collects the turn: (updates of this session, the response).
    pub fn prompt(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        let id = self
            .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}));
        let (before, response) = self.until_response(id);
        let updates = before
            .into_iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"]["update"].clone())
            .collect();
        (updates, response)
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of all chunks of one kind, concatenated.
pub fn text_of(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// The update kinds in order.
pub fn kinds(updates: &[Value]) -> Vec<String> {
    updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap_or("?").to_owned()).collect()
}
