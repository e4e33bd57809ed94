//! One language server for one project root: its process (in the sandbox, in its own process
//! group), the `initialize` handshake, requests with their answers, the server's own requests
//! answered, the documents it holds and the diagnostics it published. A server that stops is
//! started again after a growing pause, and told the open documents again; dropping the last
//! handle kills it with its group.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use lsp_types::Diagnostic;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{text, wire};
use crate::config::lsp::LspServer;
use crate::sandbox::child::Process;
use crate::sync::lock;

/// How long `initialize` may take.
const INITIALIZE_LIMIT: Duration = Duration::from_secs(60);
/// Starts that fail in a row before the server is left alone until it is next wanted.
const MAX_FAILURES: u32 = 5;
/// A run this long forgives the failures before it.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Not started yet (nothing asked for it).
    Idle,
    Starting,
    Ready,
    /// It could not start or it stopped; `retry_at`: when it is started again (`None`: when it
    /// is next needed).
    Failed {
        error: String,
        retry_at: Option<Instant>,
    },
}

/// A document as the server holds it.
#[derive(Debug, Clone)]
struct Doc {
    version: i32,
    text: Arc<str>,
    /// The publish count when it was last sent (a server that gives no versions answers a change
    /// with the first publish after it).
    sent_at: u64,
    /// The server has it (it is re-sent to a restarted server).
    sent: bool,
}

#[derive(Debug, Clone)]
struct Published {
    version: Option<i32>,
    seq: u64,
    /// When it came.
    at: Instant,
    diagnostics: Arc<Vec<Diagnostic>>,
}

/// Bytes waiting for a server that does not read its input, at most (then messages are dropped:
/// memory stays bounded, and what waits on the server ends with its time limit).
const MAX_QUEUED: usize = 64 << 20;

struct Conn {
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes handed to the writer and not yet written.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    _process: Process,
    stderr: Arc<Mutex<std::collections::VecDeque<String>>>,
    capabilities: Value,
    /// `initialize` was answered: documents may be sent.
    initialized: bool,
}

impl Conn {
    /// Queues a message; false when the server is gone or not reading.
    fn send(&self, message: &Value) -> bool {
        let frame = wire::frame(message);
        let len = frame.len();
        if self.queued.fetch_add(len, Ordering::Relaxed) + len > MAX_QUEUED {
            self.queued.fetch_sub(len, Ordering::Relaxed);
            tracing::warn!(target: "lsp", "a language server does not read what it is sent; a message was dropped");
            return false;
        }
        self.out.send(frame).is_ok()
    }
}

#[derive(Default)]
struct Inner {
    conn: Option<Conn>,
    generation: u64,
    docs: HashMap<PathBuf, Doc>,
    published: HashMap<PathBuf, Published>,
    seq: u64,
    pending: HashMap<i64, oneshot::Sender<Result<Value, String>>>,
    failures: u32,
    ready_at: Option<Instant>,
    /// The next version a newly opened document gets.
    versions: i32,
    restarts: u32,
}

/// How a server is started: its command line (through the sandbox's launcher) and environment.
#[derive(Debug, Clone)]
pub struct Launch {
    pub argv: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

pub struct Server {
    pub spec: LspServer,
    pub root: PathBuf,
    launch: Result<Launch, String>,
    state: watch::Sender<State>,
    /// Bumped on every publish (and when the server is lost), for those waiting on diagnostics.
    publishes: watch::Sender<u64>,
    inner: Mutex<Inner>,
    next_id: AtomicI64,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.spec.name).field("root", &self.root).finish()
    }
}

impl Server {
    pub fn new(spec: LspServer, root: PathBuf, launch: Result<Launch, String>) -> Arc<Self> {
        let stop = CancellationToken::new();
        Arc::new(Self {
            spec,
            root,
            launch,
            state: watch::channel(State::Idle).0,
            publishes: watch::channel(0).0,
            inner: Mutex::default(),
            next_id: AtomicI64::new(1),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        })
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Times it was started again after it stopped.
    pub fn restarts(&self) -> u32 {
        lock(&self.inner).restarts
    }

    /// Documents it holds.
    pub fn open_documents(&self) -> usize {
        lock(&self.inner).docs.len()
    }

    /// Starts it unless it runs, is starting, or waits to be started again.
    pub fn ensure(self: &Arc<Self>) {
        // Checked and set at once: two sessions on two threads start it once.
        let start = self.state.send_if_modified(|state| {
            let idle = matches!(state, State::Idle | State::Failed { retry_at: None, .. });
            if idle {
                *state = State::Starting;
            }
            idle
        });
        if start {
            tokio::spawn(start_task(Arc::downgrade(self)));
        }
    }

    /// Waits until it is ready (or failed, or `limit` passed); whether it is ready.
    pub async fn ready(self: &Arc<Self>, limit: Duration, cancel: &CancellationToken) -> bool {
        self.ensure();
        let mut states = self.state.subscribe();
        let wait = states.wait_for(|s| matches!(s, State::Ready | State::Failed { .. }));
        tokio::select! {
            r = tokio::time::timeout(limit, wait) => matches!(r, Ok(Ok(s)) if *s == State::Ready),
            () = cancel.cancelled() => false,
        }
    }

    /// Gives the server `text` as the content of `path` (opened, or changed when it differs from
    /// what the server has); the version it now has.
    pub fn sync(self: &Arc<Self>, path: &Path, content: &str) -> i32 {
        self.ensure();
        let mut inner = lock(&self.inner);
        let seq = inner.seq;
        // Before `initialize` is answered nothing is sent: the documents go when it is.
        let ready = inner.conn.as_ref().is_some_and(|c| c.initialized);
        let (version, message) = match inner.docs.get_mut(path) {
            Some(doc) if &*doc.text == content => return doc.version,
            Some(doc) => {
                doc.version += 1;
                doc.text = content.into();
                doc.sent_at = seq;
                let message = doc.sent.then(|| change(path, doc));
                doc.sent |= ready;
                (doc.version, message.or_else(|| ready.then(|| open(path, doc))))
            }
            None => {
                // Above every version this server saw, so a late publish for a file closed and
                // made again never passes for the new one.
                let version = inner.versions.max(1);
                let doc = Doc { version, text: content.into(), sent_at: seq, sent: ready };
                let message = ready.then(|| open(path, &doc));
                inner.docs.insert(path.to_owned(), doc);
                (version, message)
            }
        };
        inner.versions = inner.versions.max(version + 1);
        if let (Some(message), Some(conn)) = (message, inner.conn.as_ref().filter(|c| c.initialized)) {
            let changed = message["method"] == "textDocument/didChange";
            let _ = conn.send(&message);
            if !changed {
                return version;
            }
            let saved = json!({"jsonrpc": "2.0", "method": "textDocument/didSave",
                "params": {"textDocument": {"uri": text::uri(path)}}});
            let _ = conn.send(&saved);
        }
        version
    }

    /// The file is gone: the server forgets it.
    pub fn close(&self, path: &Path) {
        let mut inner = lock(&self.inner);
        if inner.docs.remove(path).is_some_and(|d| d.sent)
            && let Some(conn) = inner.conn.as_ref().filter(|c| c.initialized)
        {
            let message = json!({"jsonrpc": "2.0", "method": "textDocument/didClose",
                "params": {"textDocument": {"uri": text::uri(path)}}});
            let _ = conn.send(&message);
        }
        inner.published.remove(path);
    }

    /// The version of `path` the server holds, if it holds it.
    pub fn version(&self, path: &Path) -> Option<i32> {
        lock(&self.inner).docs.get(path).map(|d| d.version)
    }

    /// The text of `path` as the server holds it.
    pub fn content(&self, path: &Path) -> Option<Arc<str>> {
        lock(&self.inner).docs.get(path).map(|d| d.text.clone())
    }

    /// The diagnostics published for `path` at `version` (or later), if they came.
    pub fn diagnostics(&self, path: &Path, version: i32) -> Option<Arc<Vec<Diagnostic>>> {
        let inner = lock(&self.inner);
        let doc = inner.docs.get(path)?;
        let published = inner.published.get(path)?;
        let current = match published.version {
            Some(v) => v >= version,
            None => doc.version == version && published.seq > doc.sent_at,
        };
        current.then(|| published.diagnostics.clone())
    }

    /// When the last diagnostics of `path` came.
    pub fn published_at(&self, path: &Path) -> Option<Instant> {
        lock(&self.inner).published.get(path).map(|p| p.at)
    }

    /// Every diagnostic it published, by file.
    pub fn all_diagnostics(&self) -> Vec<(PathBuf, Arc<Vec<Diagnostic>>)> {
        let inner = lock(&self.inner);
        let mut all: Vec<_> = inner.published.iter().map(|(p, d)| (p.clone(), d.diagnostics.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Waits (until `deadline`) for the diagnostics of `path` at `version`.
    pub async fn wait_diagnostics(
        &self,
        path: &Path,
        version: i32,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Option<Arc<Vec<Diagnostic>>> {
        let mut publishes = self.publishes.subscribe();
        loop {
            if let Some(found) = self.diagnostics(path, version) {
                return Some(found);
            }
            if self.version(path) != Some(version) || self.is_failed() {
                return None;
            }
            tokio::select! {
                changed = publishes.changed() => changed.ok()?,
                () = tokio::time::sleep_until(deadline) => return None,
                () = cancel.cancelled() => return None,
            }
        }
    }

    /// Whether the server offers a request (its `…Provider` capability).
    pub fn offers(&self, capability: &str) -> bool {
        lock(&self.inner)
            .conn
            .as_ref()
            .and_then(|c| c.capabilities.get(capability))
            .is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false)))
    }

    /// Sends a request and waits for its answer (at most `limit`; a request given up on is
    /// cancelled at the server).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        let (id, rx) = self.send_request(method, params)?;
        let outcome = tokio::select! {
            r = tokio::time::timeout(limit, rx) => match r {
                Ok(Ok(answer)) => return answer,
                Ok(Err(_)) => Err(format!("{} stopped before answering", self.spec.name)),
                Err(_) => Err(format!("{} did not answer {method} within {} s", self.spec.name, limit.as_secs())),
            },
            () = cancel.cancelled() => Err("cancelled".to_owned()),
        };
        let mut inner = lock(&self.inner);
        inner.pending.remove(&id);
        if let Some(conn) = &inner.conn {
            let message = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}});
            let _ = conn.send(&message);
        }
        outcome
    }

    /// Sends a request; its answer comes on the receiver. Only `initialize` goes before the
    /// server answered it.
    fn send_request(
        &self,
        method: &str,
        params: Value,
    ) -> Result<(i64, oneshot::Receiver<Result<Value, String>>), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut inner = lock(&self.inner);
        let Some(conn) = inner.conn.as_ref().filter(|c| c.initialized || method == "initialize") else {
            return Err(format!("{} is not running", self.spec.name));
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !conn.send(&message) {
            return Err(format!("{} is not running", self.spec.name));
        }
        inner.pending.insert(id, tx);
        Ok((id, rx))
    }

    /// Whether it failed (and is not starting again).
    fn is_failed(&self) -> bool {
        matches!(*self.state.borrow(), State::Failed { .. })
    }

    /// The reader saw the connection of `generation` end.
    fn lost(self: &Arc<Self>, generation: u64, why: &str) {
        let mut inner = lock(&self.inner);
        if inner.generation != generation || inner.conn.is_none() {
            return;
        }
        let tail = inner.conn.as_ref().map(|c| Process::stderr_tail(&c.stderr)).unwrap_or_default();
        inner.conn = None;
        for (_, waiter) in inner.pending.drain() {
            let _ = waiter.send(Err(format!("{} stopped", self.spec.name)));
        }
        inner.published.clear();
        for doc in inner.docs.values_mut() {
            doc.sent = false;
        }
        // A long healthy run forgives the failures before it (once: a crash while starting
        // again counts).
        if inner.ready_at.take().is_some_and(|at| at.elapsed() >= HEALTHY_RUN) {
            inner.failures = 0;
        }
        let error = format!("it stopped: {why}{tail}");
        tracing::warn!(target: "lsp", server = %self.spec.name, root = %self.root.display(), "{error}");
        self.failed(&mut inner, error);
        drop(inner);
        self.publishes.send_modify(|n| *n += 1);
    }

    /// Marks it failed and plans the next start.
    fn failed(self: &Arc<Self>, inner: &mut Inner, error: String) {
        inner.failures += 1;
        let retry = (inner.failures < MAX_FAILURES).then(|| Duration::from_secs(1 << (inner.failures - 1).min(5)));
        let retry_at = retry.map(|d| Instant::now() + d);
        self.state.send_replace(State::Failed { error, retry_at });
        if let Some(pause) = retry {
            let server = Arc::downgrade(self);
            let stop = self.stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stop.cancelled() => return,
                }
                if let Some(server) = server.upgrade() {
                    lock(&server.inner).restarts += 1;
                    server.state.send_replace(State::Starting);
                }
                // Holding only a weak handle: a server no session wants any more is not kept.
                start_task(server).await;
            });
        }
    }

    /// Answers what the server asks of the client.
    fn answer(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "workspace/configuration" => {
                let settings: Value =
                    self.spec.settings.as_deref().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
                let items = params.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|item| match item.get("section").and_then(Value::as_str) {
                            Some(section) => {
                                section.split('.').try_fold(&settings, |v, k| v.get(k)).cloned().unwrap_or(Value::Null)
                            }
                            None => settings.clone(),
                        })
                        .collect(),
                ))
            }
            "workspace/workspaceFolders" => Ok(json!([folder(&self.root)])),
            "client/registerCapability"
            | "client/unregisterCapability"
            | "window/workDoneProgress/create"
            | "window/showMessageRequest"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            "workspace/applyEdit" => {
                Ok(json!({"applied": false, "failureReason": "this client only reads; it makes no edits"}))
            }
            _ => Err((-32601, format!("{method} is not supported by this client"))),
        }
    }

    /// A message from the server.
    fn handle(&self, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned().filter(|id| !id.is_null());
        match (method, id) {
            (Some(method), Some(id)) => {
                let reply = match self.answer(method, message.get("params").unwrap_or(&Value::Null)) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, text)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}),
                };
                if let Some(conn) = &lock(&self.inner).conn {
                    let _ = conn.send(&reply);
                }
            }
            (Some("textDocument/publishDiagnostics"), None) => {
                let Some(params) = message
                    .get("params")
                    .cloned()
                    .and_then(|p| serde_json::from_value::<lsp_types::PublishDiagnosticsParams>(p).ok())
                else {
                    return;
                };
                let Some(path) = text::path(&params.uri) else { return };
                {
                    let mut inner = lock(&self.inner);
                    inner.seq += 1;
                    let seq = inner.seq;
                    let published = Published {
                        version: params.version,
                        seq,
                        at: Instant::now(),
                        diagnostics: Arc::new(params.diagnostics),
                    };
                    inner.published.insert(path, published);
                }
                self.publishes.send_modify(|n| *n += 1);
            }
            (Some(method), None) => tracing::debug!(target: "lsp", server = %self.spec.name, "{method}"),
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { return };
                let Some(waiter) = lock(&self.inner).pending.remove(&id) else { return };
                let answer = match message.get("error") {
                    Some(e) => Err(e.get("message").and_then(Value::as_str).unwrap_or("an error").to_owned()),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = waiter.send(answer);
            }
            (None, None) => {}
        }
    }
}

fn folder(root: &Path) -> Value {
    let name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "/".into());
    json!({"uri": text::uri(root), "name": name})
}

fn open(path: &Path, doc: &Doc) -> Value {
    json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": text::uri(path), "languageId": crate::config::lsp::language_id(path),
        "version": doc.version, "text": &*doc.text}}})
}

fn change(path: &Path, doc: &Doc) -> Value {
    json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": text::uri(path), "version": doc.version},
        "contentChanges": [{"text": &*doc.text}]}})
}

/// What the client tells the server it understands.
fn capabilities() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-16"]},
        "textDocument": {
            "synchronization": {"didSave": true, "dynamicRegistration": false},
            "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
            "definition": {"linkSupport": true},
            "references": {},
            "hover": {"contentFormat": ["plaintext", "markdown"]},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
        },
        "workspace": {"configuration": true, "workspaceFolders": true, "symbol": {}},
        "window": {"workDoneProgress": true},
    })
}

/// Starts the process and shakes hands; on failure the server is marked failed (and started
/// again later).
async fn start_task(server: Weak<Server>) {
    let Some(this) = server.upgrade() else { return };
    let launch = match &this.launch {
        Ok(launch) => launch.clone(),
        Err(why) => {
            let mut inner = lock(&this.inner);
            inner.failures = MAX_FAILURES;
            this.failed(&mut inner, why.clone());
            return;
        }
    };
    let mut cmd = tokio::process::Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..]).env_clear().envs(launch.env.iter().map(|(k, v)| (k, v))).current_dir(&this.root);
    let name = this.spec.name.clone();
    let log = move |line: &str| tracing::info!(target: "lsp", server = %name, "{line}");
    let (process, mut stdin, stdout) = match Process::spawn(cmd, &this.spec.command, log) {
        Ok(started) => started,
        Err(e) => {
            let mut inner = lock(&this.inner);
            this.failed(&mut inner, e);
            return;
        }
    };
    let stderr = process.stderr.clone();
    let (out, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let written = queued.clone();
    tokio::spawn(async move {
        while let Some(frame) = outgoing.recv().await {
            if stdin.write_all(&frame).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
            written.fetch_sub(frame.len(), Ordering::Relaxed);
        }
    });
    let generation = {
        let mut inner = lock(&this.inner);
        inner.generation += 1;
        let generation = inner.generation;
        inner.conn =
            Some(Conn { out, queued, _process: process, stderr, capabilities: Value::Null, initialized: false });
        generation
    };
    let reader = server.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(stdout);
        let why = loop {
            match wire::read(&mut input).await {
                Ok(Some(message)) => match reader.upgrade() {
                    Some(server) => server.handle(message),
                    None => return,
                },
                Ok(None) => break "it closed its output".to_owned(),
                Err(e) => break e,
            }
        };
        if let Some(server) = reader.upgrade() {
            server.lost(generation, &why);
        }
    });
    let params = json!({
        // None: in the sandbox's PID namespace the agent's pid names no process (or another one),
        // and servers that watch it would exit; the kernel ends them with the agent instead.
        "processId": Value::Null,
        "clientInfo": {"name": "acp", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": text::uri(&this.root),
        "rootPath": this.root,
        "workspaceFolders": [folder(&this.root)],
        "capabilities": capabilities(),
        "initializationOptions": this.spec.initialization_options.as_deref()
            .and_then(|s| serde_json::from_str::<Value>(s).ok()),
    });
    // Waited for holding only a weak handle: a server whose sessions all ended meanwhile goes.
    let answer = match this.send_request("initialize", params) {
        Ok((_, answer)) => {
            drop(this);
            match tokio::time::timeout(INITIALIZE_LIMIT, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err("it stopped before answering".to_owned()),
                Err(_) => Err(format!("no answer within {} s", INITIALIZE_LIMIT.as_secs())),
            }
        }
        Err(e) => Err(e),
    };
    let Some(this) = server.upgrade() else { return };
    let mut inner = lock(&this.inner);
    if inner.generation != generation || inner.conn.is_none() {
        // Lost meanwhile: already marked.
        return;
    }
    match answer {
        Ok(result) => {
            let seq = inner.seq;
            let Inner { docs, conn, .. } = &mut *inner;
            let Some(conn) = conn.as_mut() else { return };
            conn.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
            conn.initialized = true;
            let _ = conn.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
            for (path, doc) in docs.iter_mut() {
                doc.sent = true;
                doc.sent_at = seq;
                let _ = conn.send(&open(path, doc));
            }
            inner.ready_at = Some(Instant::now());
            tracing::info!(target: "lsp", server = %this.spec.name, root = %this.root.display(), "ready");
            this.state.send_replace(State::Ready);
        }
        Err(e) => {
            let tail = inner.conn.take().map(|c| Process::stderr_tail(&c.stderr)).unwrap_or_default();
            for (_, waiter) in inner.pending.drain() {
                let _ = waiter.send(Err(format!("{} did not start", this.spec.name)));
            }
            this.failed(&mut inner, format!("initialize failed: {e}{tail}"));
        }
    }
}
