//! Drives the real `acp` binary over its stdin/stdout like an editor would: a private `$ACP_HOME`,
//! a clean environment, line-by-line JSON in and out with timeouts, and the captured stderr in every
//! failure message. [`Agent::in_process`] drives the same server without a process — `rpc::start`
//! over in-memory pipes and `acp::serve` on a thread of its own, its logs captured as stderr — for
//! protocol-level tests that need no exit code, signal or sandboxed command, and so cost no spawn.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
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
    /// Read stdout by spinning on a non-blocking pipe instead of sleeping in `read` (benchmarks:
    /// timestamps then say when a line left the agent, not when this process woke up).
    pub spin: bool,
    /// Use this `$ACP_HOME` (shared with other processes) instead of a private one.
    pub home: Option<std::path::PathBuf>,
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

    pub fn spin(mut self) -> Self {
        self.spin = true;
        self
    }

    /// Shares `$ACP_HOME` with other agents (a restart, a second process).
    pub fn home(mut self, dir: &std::path::Path) -> Self {
        self.home = Some(dir.to_path_buf());
        self
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Point the built-in `anthropic` provider at a mock server.
    pub fn anthropic(self, base: &str) -> Self {
        self.env("ANTHROPIC_API_KEY", "test-key").env("ANTHROPIC_BASE_URL", base)
    }

    /// Point the built-in `gemini` provider at a mock server.
    pub fn gemini(self, base: &str) -> Self {
        self.env("GEMINI_API_KEY", "test-key")
            .env("GEMINI_BASE_URL", &format!("{base}/v1beta"))
            .env("ACP_MODEL", "gemini/gemini-2.5-flash")
    }

    /// Point the built-in `openai` / `openai-responses` providers at a mock server.
    pub fn openai(self, base_v1: &str, responses: bool) -> Self {
        let model = if responses { "openai-responses/gpt-5-codex" } else { "openai/gpt-4.1" };
        self.env("OPENAI_API_KEY", "test-key").env("OPENAI_BASE_URL", base_v1).env("ACP_MODEL", model)
    }
}

pub struct Agent {
    /// The agent's process; `None` in process.
    child: Option<Child>,
    /// In process: ends the server as a signal would.
    shutdown: Option<tokio_util::sync::CancellationToken>,
    stdin: Option<Box<dyn Write + Send>>,
    lines: Receiver<(Instant, String)>,
    stderr: Arc<Mutex<String>>,
    pub home: tempfile::TempDir,
    next_id: i64,
    /// Notifications and agent requests seen while waiting for responses.
    pub seen: Vec<Value>,
    /// Just before the process was spawned.
    pub spawned_at: Instant,
}

impl Agent {
    pub fn spawn(options: Options) -> Self {
        let home = tempfile::tempdir().unwrap();
        let acp_home = options.home.clone().unwrap_or_else(|| home.path().to_path_buf());
        if let Some(config) = &options.config {
            std::fs::write(acp_home.join("config.toml"), config).unwrap();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_acp"));
        cmd.args(&options.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", &acp_home)
            .env("RUST_LOG", "acp=debug,warn")
            .env("HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        let spawned_at = Instant::now();
        let mut child = cmd.spawn().expect("spawn acp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        if options.spin {
            std::thread::spawn(move || spin_lines(stdout, tx));
        } else {
            std::thread::spawn(move || read_lines(stdout, tx));
        }
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
        let stdin = child.stdin.take().map(|s| Box::new(s) as Box<dyn Write + Send>);
        Self::with(Some(child), None, stdin, lines, stderr, home, spawned_at)
    }

    fn with(
        child: Option<Child>,
        shutdown: Option<tokio_util::sync::CancellationToken>,
        stdin: Option<Box<dyn Write + Send>>,
        lines: Receiver<(Instant, String)>,
        stderr: Arc<Mutex<String>>,
        home: tempfile::TempDir,
        spawned_at: Instant,
    ) -> Self {
        Self { child, shutdown, stdin, lines, stderr, home, next_id: 0, seen: Vec::new(), spawned_at }
    }

    /// The server in this process: its configuration from `options` (environment, `config.toml`,
    /// `--max-line-bytes`) as the binary would read it, the connection over two in-memory pipes.
    pub fn in_process(options: Options) -> Self {
        let home = tempfile::tempdir().unwrap();
        let acp_home = options.home.clone().unwrap_or_else(|| home.path().to_path_buf());
        if let Some(config) = &options.config {
            std::fs::write(acp_home.join("config.toml"), config).unwrap();
        }
        let mut env: std::collections::HashMap<String, String> = options.env.iter().cloned().collect();
        env.insert("ACP_HOME".into(), acp_home.display().to_string());
        env.insert("HOME".into(), home.path().display().to_string());
        let mut config = acp::config::Config::load_with(&|name| env.get(name).cloned().filter(|v| !v.is_empty()));
        let args = match options.args.as_slice() {
            [serve, rest @ ..] if serve == "serve" => rest,
            all => all,
        };
        match args {
            [] => {}
            [flag, n] if flag == "--max-line-bytes" => config.max_line_bytes = n.parse().unwrap(),
            other => panic!("arguments {other:?} need the process (Agent::spawn)"),
        }
        let (agent_in, to_agent) = std::io::pipe().unwrap();
        let (from_agent, agent_out) = std::io::pipe().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let logs = stderr.clone();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        let spawned_at = Instant::now();
        std::thread::Builder::new()
            .name("agent".into())
            .spawn(move || {
                let subscriber = tracing_subscriber::fmt()
                    .with_env_filter(tracing_subscriber::EnvFilter::new("acp=debug,warn"))
                    .with_writer(move || Capture(logs.clone()))
                    .with_ansi(false)
                    .finish();
                let _logs = tracing::subscriber::set_default(subscriber);
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let max_line = config.max_line_bytes;
                runtime.block_on(async move {
                    let rpc = acp::rpc::start(agent_in, agent_out, max_line).unwrap();
                    acp::acp::serve(rpc, config, "acp", stop.cancelled_owned()).await;
                });
                runtime.shutdown_background();
            })
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || read_lines(from_agent, tx));
        let stdin = Some(Box::new(to_agent) as Box<dyn Write + Send>);
        Self::with(None, Some(shutdown), stdin, lines, stderr, home, spawned_at)
    }

    fn process(&mut self) -> &mut Child {
        self.child.as_mut().expect("this needs the agent's process (Agent::spawn)")
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("this needs the agent's process (Agent::spawn)").id()
    }

    /// Kills the agent's process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let child = self.process();
        child.kill().unwrap();
        child.wait().unwrap();
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
        self.recv_timed(timeout).map(|(_, v)| v)
    }

    /// The next line from stdout as the agent wrote it; `None` after the timeout or once stdout
    /// has closed.
    pub fn recv_line_within(&mut self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok().map(|(_, line)| line)
    }

    /// The next message with the moment its line was read from stdout.
    pub fn recv_timed(&mut self, timeout: Duration) -> Option<(Instant, Value)> {
        match self.lines.recv_timeout(timeout) {
            Ok((at, line)) => Some((
                at,
                serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("stdout carried a non-JSON line ({e}): {line:?}\nstderr:\n{}", self.stderr())
                }),
            )),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
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
        self.expect_setup(&id);
        id
    }

    /// The setup updates that follow a `session/new` response: the slash commands, then the
    /// context's fill.
    pub fn expect_setup(&mut self, id: &str) {
        let commands = self.recv();
        assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update", "{commands}");
        assert_eq!(commands["params"]["sessionId"], id);
        let usage = self.recv();
        assert_eq!(usage["params"]["update"]["sessionUpdate"], "usage_update", "{usage}");
        assert_eq!(usage["params"]["sessionId"], id);
    }

    /// `session/new` in `cwd` with extra params (e.g. `_meta`, `additionalDirectories`); returns the id.
    pub fn new_session_in(&mut self, cwd: &std::path::Path, extra: Value) -> String {
        let mut params = json!({"cwd": cwd, "mcpServers": []});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let r = self.request("session/new", params);
        let id = r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {r}\n{}", self.stderr()))
            .to_owned();
        self.expect_setup(&id);
        id
    }

    /// Answers a request the agent sent.
    pub fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Prompts, answering the agent's own requests with `answer`; returns every message received
    /// before the response (updates and agent requests) and the response.
    pub fn prompt_answering(
        &mut self,
        session: &str,
        text: &str,
        mut answer: impl FnMut(&Value) -> Value,
    ) -> (Vec<Value>, Value) {
        let id = self
            .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}));
        let mut before = Vec::new();
        loop {
            let msg = self.recv();
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return (before, msg);
            }
            if msg.get("method").is_some() && msg.get("id").is_some() {
                let result = answer(&msg);
                let req_id = msg["id"].clone();
                self.respond(&req_id, result);
            }
            before.push(msg);
        }
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

    /// Waits until stderr holds `needle` at least `times` times (a log line saying the agent got
    /// somewhere); panics after the timeout.
    pub fn wait_for_stderr(&self, needle: &str, times: usize) {
        let deadline = Instant::now() + TIMEOUT;
        while self.stderr().matches(needle).count() < times {
            assert!(Instant::now() < deadline, "stderr never said {needle:?} {times} times:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process().try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        // In process: the server ends as on a signal (running turns cancelled), and its input closes.
        if let Some(shutdown) = &self.shutdown {
            shutdown.cancel();
        }
        self.stdin.take();
    }
}

/// The in-process server's logs, kept as its stderr.
struct Capture(Arc<Mutex<String>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().push_str(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends each line as it is read, with the moment it was.
fn read_lines(from: impl Read, tx: std::sync::mpsc::Sender<(Instant, String)>) {
    for line in BufReader::new(from).lines() {
        let Ok(line) = line else { break };
        if tx.send((Instant::now(), line)).is_err() {
            break;
        }
    }
}

/// Reads lines by polling a non-blocking pipe in a loop, stamping each as soon as its bytes arrive.
fn spin_lines(stdout: std::process::ChildStdout, tx: std::sync::mpsc::Sender<(Instant, String)>) {
    // tokio sets O_NONBLOCK for us; reads then go straight to the file descriptor.
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    let fd = rt.block_on(async {
        let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(stdout)).unwrap();
        rx.into_nonblocking_fd().unwrap()
    });
    let mut rx = std::fs::File::from(fd);
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match rx.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let at = Instant::now();
                pending.extend_from_slice(&buf[..n]);
                while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=i).collect();
                    let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                    if tx.send((at, line)).is_err() {
                        return;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(_) => return,
        }
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
