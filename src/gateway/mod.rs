//! `acp gateway`: a long-lived headless gateway speaking OpenClaw's gateway protocol (v4) over
//! WebSocket, with the web chat on the same port. It owns one runtime and its sessions (the same
//! `$ACP_HOME` store `acp serve` uses); control clients, the web chat, and later channels and the
//! ACP bridge reach them through it. `server.rs` serves the port, `conn.rs` one connection,
//! `handshake.rs` `connect`, `methods.rs` the methods, `hub.rs` the connections and the runtime's
//! events as the gateway's.

mod approvals;
pub mod channels;
mod chat;
mod conn;
pub mod discovery;
pub mod guard;
pub mod handshake;
pub mod hub;
pub mod limits;
mod methods;
mod server;
mod sessions;
mod webchat;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_protocol::gateway::{ErrorShape, PROTOCOL_VERSION, code};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::config::{Config, ConfigCell};
use crate::runtime::{Mode, Op, Runtime, SessionHandle};
use crate::sync::lock;
use handshake::Client;
use hub::{Hub, HubSink};

/// The largest frame accepted (`policy.maxPayload`).
pub const MAX_PAYLOAD: usize = 25 << 20;
/// `policy.tickIntervalMs`.
pub const TICK_INTERVAL_MS: i64 = 30_000;
/// How long a finished run's idempotency key is remembered, and how many are.
const DEDUPE_TTL: Duration = Duration::from_secs(10 * 60);
const DEDUPE_MAX: usize = 10_000;

/// How the gateway runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// The shared token clients must present; required off loopback.
    pub token: Option<String>,
    /// The directory sessions work in.
    pub workspace: PathBuf,
    /// How long an approval question waits for a client's answer.
    pub approval_timeout: Duration,
    /// Host names it answers to besides loopback ones, when it has no token (`[gateway]
    /// allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// How many connections it holds at once.
    pub connections: guard::ConnLimits,
    /// What it holds for runs and sessions.
    pub runs: limits::RunLimits,
}

pub use acp_protocol::gateway::canonical_key;

/// Runs by idempotency key: in flight (watched until they end) or finished (kept for retries and
/// `agent.wait`, 10 minutes and at most 10,000).
#[derive(Default)]
pub struct Runs(Mutex<HashMap<String, RunRecord>>);

/// How a run ends, as it is watched.
type EndWatch = tokio::sync::watch::Receiver<Option<hub::RunEnd>>;

#[derive(Default)]
struct RunRecord {
    end: Option<EndWatch>,
    /// When it finished: for expiry, and `endedAt`.
    finished: Option<(Instant, i64)>,
}

impl Runs {
    /// The run finished now.
    pub fn finish(&self, id: &str) {
        if let Some(record) = lock(&self.0).get_mut(id) {
            record.finished = Some((Instant::now(), now_ms()));
        }
    }

    fn attach(&self, id: &str, end: EndWatch) {
        if let Some(record) = lock(&self.0).get_mut(id) {
            record.end = Some(end);
        }
    }

    /// How run `id` ends (or ended), and when it did; `None` for a run never seen.
    fn watch(&self, id: &str) -> Option<(Option<EndWatch>, Option<i64>)> {
        lock(&self.0).get(id).map(|r| (r.end.clone(), r.finished.map(|(_, at)| at)))
    }
}

pub struct Gateway {
    pub runtime: Runtime,
    pub hub: Arc<Hub>,
    approvals: Arc<approvals::Approvals>,
    /// Who may talk to the agent through channels.
    pub pairings: Arc<channels::access::Pairings>,
    /// The channels served, to send through.
    pub outbox: Arc<channels::Outbox>,
    /// What chats chose for their sessions (`/queue`, `/send`, `sessions.patch sendPolicy`).
    pub prefs: Arc<channels::policy::SessionPrefs>,
    /// `send` answers by idempotency key (a retried call sends nothing twice).
    sent: Mutex<std::collections::VecDeque<(String, Value)>>,
    /// Each channel's state, as `channels.status` shows it.
    pub channel_status: Mutex<std::collections::BTreeMap<String, Value>>,
    /// Webhook paths a channel receives on: the secret the caller must present, and where the
    /// updates go.
    webhooks: Mutex<HashMap<String, (String, tokio::sync::mpsc::UnboundedSender<Value>)>>,
    token: Option<String>,
    /// What browsers present when there is no shared token (see `guard::browser_token`).
    browser_token: Option<String>,
    /// This run's owner token, for local clients (see `discovery`): as good as the shared token.
    owner_token: Option<String>,
    /// The `Host` names requests may carry.
    pub hosts: guard::Hosts,
    /// Connection slots.
    pub slots: guard::Slots,
    workspace: PathBuf,
    started: Instant,
    boot_id: String,
    /// Open sessions, and when each was last used.
    sessions: Mutex<HashMap<String, (SessionHandle, Instant)>>,
    /// Sessions being closed as idle (reopening one waits for it to be closed).
    closing: Mutex<HashMap<String, SessionHandle>>,
    /// Runs not yet ended, per session: capped.
    admission: Arc<limits::Admission>,
    /// Runs going at once.
    lane: Arc<crate::runtime::Lane>,
    run_limits: limits::RunLimits,
    opening: tokio::sync::Mutex<()>,
    runs: Arc<Runs>,
    /// Connected clients other than CLIs, by connection id, as `presence` lists them.
    present: Mutex<Vec<(String, Value)>>,
    /// `stateVersion`: bumped when the presence list, or what `health` reports, changes.
    presence_version: std::sync::atomic::AtomicU64,
    health_version: std::sync::atomic::AtomicU64,
}

impl Gateway {
    pub fn new(
        config: Config,
        options: &Options,
        browser_token: Option<String>,
        owner_token: Option<String>,
        pairings: Arc<channels::access::Pairings>,
        prefs: Arc<channels::policy::SessionPrefs>,
    ) -> Arc<Self> {
        let hub = Arc::new(Hub::default());
        let sink = Arc::new(HubSink(hub.clone()));
        let approvals = Arc::new(approvals::Approvals::new(options.approval_timeout));
        let outbox = Arc::new(channels::Outbox::default());
        let host = Arc::new(GatewayHost { hub: hub.clone(), approvals: approvals.clone(), outbox: outbox.clone() });
        let runtime = Runtime::new(ConfigCell::new(config), sink, host).with_origin("gateway");
        let gateway = Arc::new(Self {
            runtime,
            hub,
            approvals,
            pairings,
            outbox,
            prefs,
            sent: Mutex::default(),
            channel_status: Mutex::default(),
            webhooks: Mutex::default(),
            token: options.token.clone(),
            browser_token,
            owner_token,
            hosts: guard::Hosts {
                any: options.token.is_some(),
                extra: options.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            },
            slots: guard::Slots::new(options.connections),
            workspace: options.workspace.clone(),
            started: Instant::now(),
            boot_id: uuid::Uuid::new_v4().to_string(),
            sessions: Mutex::default(),
            closing: Mutex::default(),
            admission: limits::Admission::new(options.runs),
            lane: Arc::new(crate::runtime::Lane::new(options.runs.concurrent)),
            run_limits: options.runs,
            opening: tokio::sync::Mutex::new(()),
            runs: Arc::default(),
            present: Mutex::default(),
            presence_version: 1.into(),
            health_version: 1.into(),
        });
        let weak = Arc::downgrade(&gateway);
        let waker = move |key: &str, text: &str| weak.upgrade().is_some_and(|gw| gw.wake(key, text));
        let _ = gateway.hub.waker.set(Box::new(waker));
        gateway
    }

    /// A run begins on open session `key`: the hub numbers its events (and sends its text,
    /// reasoning and tool calls to `listener`), subscribers see the user's message, the prompt
    /// goes in. Every run starts here (`chat.send`, `agent`, channels, announcements); returns its
    /// turn, how it ends, and the prompt's outcome.
    fn begin_run(
        &self,
        handle: &SessionHandle,
        key: &str,
        run_id: &str,
        blocks: Vec<crate::runtime::UserBlock>,
        options: crate::runtime::TurnOptions,
        listener: Option<tokio::sync::mpsc::UnboundedSender<hub::Heard>>,
    ) -> (
        crate::runtime::TurnId,
        EndWatch,
        impl std::future::Future<Output = Option<crate::runtime::TurnOutcome>> + Send + 'static,
    ) {
        let turn = self.runtime.next_turn_id();
        let ended = self.hub.start_run_to(turn, run_id, key, listener);
        let text = crate::runtime::plain_text(&blocks);
        self.hub.to_subscribers(
            "session.message",
            &json!({"sessionKey": key, "runId": run_id, "message": {"role": "user", "content": text, "timestamp": now_ms()}}),
        );
        (turn, ended, handle.prompt_with(turn, blocks, options))
    }

    /// Runs `text` on idle session `key` though no client asked (a subagent's announcement): in
    /// the chat the session talks in, if a channel's; else as a run every client sees.
    fn wake(&self, key: &str, text: &str) -> bool {
        if self.outbox.wake(key, text) {
            return true;
        }
        let Some(handle) = self.open_handle(key) else { return false };
        let Ok(ticket) = self.admit(key, text.len()) else { return false };
        let run_id = uuid::Uuid::new_v4().to_string();
        let prompt = vec![crate::runtime::UserBlock::Text { text: text.to_owned() }];
        let options = crate::runtime::TurnOptions { from_agent: true, ..self.run_options() };
        let (_, _, outcome) = self.begin_run(&handle, key, &run_id, prompt, options, None);
        tokio::spawn(async move {
            outcome.await;
            drop(ticket);
        });
        true
    }

    fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn state_version(&self) -> Value {
        let get = |v: &std::sync::atomic::AtomicU64| v.load(std::sync::atomic::Ordering::Relaxed);
        json!({"presence": get(&self.presence_version), "health": get(&self.health_version)})
    }

    /// What `health` reports changed (connections, open sessions).
    fn health_changed(&self) {
        self.health_version.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The gateway itself, then every connected client but CLIs.
    pub fn presence(&self) -> Vec<Value> {
        let mut list = vec![json!({"version": env!("CARGO_PKG_VERSION"), "platform": std::env::consts::OS,
            "mode": "gateway", "reason": "self", "instanceId": self.boot_id,
            "text": format!("Gateway: acp {}", env!("CARGO_PKG_VERSION")), "ts": now_ms()})];
        list.extend(lock(&self.present).iter().map(|(_, entry)| entry.clone()));
        list
    }

    /// A client connected: it is present (unless a CLI, as the reference has it), and everyone is
    /// told.
    pub fn joined(&self, conn: &hub::Conn, client: &Client, peer: SocketAddr) {
        self.health_changed();
        if conn.approver.load(std::sync::atomic::Ordering::Relaxed) {
            // Questions asked before it came.
            for question in self.approvals.waiting() {
                conn.event("exec.approval.requested", &question, false, None);
            }
        }
        if client.mode == "cli" {
            return;
        }
        let info = |k: &str| client.info.get(k).cloned().unwrap_or(Value::Null);
        let name = client.info.get("displayName").and_then(Value::as_str).unwrap_or(&client.client_id);
        let entry = json!({"ip": peer.ip().to_string(), "version": info("version"), "platform": info("platform"),
            "deviceFamily": info("deviceFamily"), "mode": client.mode, "reason": "connect",
            "text": format!("{name} ({})", client.mode), "ts": now_ms(), "deviceId": client.device_id,
            "roles": [client.role], "scopes": client.scopes,
            "instanceId": client.info.get("instanceId").and_then(Value::as_str).unwrap_or(&client.conn_id)});
        lock(&self.present).push((client.conn_id.clone(), entry));
        self.presence_changed();
    }

    /// A client left.
    pub fn left(&self, client: &Client) {
        self.health_changed();
        let mut present = lock(&self.present);
        let before = present.len();
        present.retain(|(id, _)| *id != client.conn_id);
        let changed = present.len() != before;
        drop(present);
        if changed {
            self.presence_changed();
        }
    }

    fn presence_changed(&self) {
        self.presence_version.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.hub.broadcast_versioned("presence", &json!({"presence": self.presence()}), &self.state_version());
    }

    fn session_counts(&self) -> Value {
        let open = lock(&self.sessions).len();
        json!({"count": open, "recent": []})
    }

    pub fn health(&self) -> Value {
        json!({"ok": true, "ts": now_ms(), "durationMs": 0, "channels": {}, "channelOrder": [], "channelLabels": {},
            "heartbeatSeconds": 0, "defaultAgentId": "main",
            "agents": [{"agentId": "main", "isDefault": true, "sessions": self.session_counts()}],
            "sessions": self.session_counts(), "connections": self.hub.count()})
    }

    pub fn status(&self) -> Value {
        let config = self.runtime.config();
        let model = config.default_model_ref().map(|m| m.to_string()).ok();
        json!({"runtimeVersion": env!("CARGO_PKG_VERSION"), "uptimeMs": self.uptime_ms(),
            "sessions": {"count": lock(&self.sessions).len(), "defaults": {"model": model}, "recent": []},
            "runs": {"running": self.lane.running(), "waiting": self.lane.waiting(),
                "maxConcurrent": self.run_limits.concurrent},
            "connections": self.hub.count(), "channelSummary": [],
            "processMemory": {"rssBytes": rss_bytes()}})
    }

    pub fn models(&self) -> Value {
        let config = self.runtime.config();
        let models: Vec<Value> = config
            .model_choices()
            .into_iter()
            .map(|(m, name)| {
                let window = config.provider(&m.provider).map(|p| p.model(&m.model).context_window);
                json!({"id": m.to_string(), "name": name, "provider": m.provider, "model": m.model,
                    "contextWindow": window})
            })
            .collect();
        // What a new session starts with (the reference's clients ignore it).
        let defaults = json!({"model": config.default_model_ref().map(|m| m.to_string()).ok(),
            "mode": config.default_mode.id(), "thinkingLevel": config.reasoning.map_or("off", |r| r.as_str())});
        json!({"models": models, "defaults": defaults})
    }

    /// The configuration, with every secret replaced.
    pub fn config_view(&self) -> Value {
        let config = self.runtime.config();
        let providers: Map<String, Value> = config
            .providers
            .iter()
            .map(|p| {
                let key = p.api_key.as_ref().map(|_| "__OPENCLAW_REDACTED__");
                (p.id.clone(), json!({"baseUrl": p.base_url, "apiKey": key, "apiKeyEnv": p.api_key_env}))
            })
            .collect();
        json!({"path": config.config_path(), "config": {"providers": providers,
            "gateway": {"auth": {"mode": if self.token.is_some() { "token" } else { "none" }, "token": "__OPENCLAW_REDACTED__"}},
            "agents": {"defaults": {"model": config.default_model_ref().map(|m| m.to_string()).ok(),
                "workspace": self.workspace}}}})
    }

    pub fn hello(&self, client: &Client) -> Value {
        let config = self.runtime.config();
        let methods: Vec<&str> = methods::METHODS.iter().map(|(m, _)| *m).collect();
        let auth_mode = if self.token.is_some() { "token" } else { "none" };
        json!({
            "type": "hello-ok",
            "protocol": PROTOCOL_VERSION,
            "server": {"version": env!("CARGO_PKG_VERSION"), "buildId": concat!("acp-", env!("CARGO_PKG_VERSION")),
                "bootId": self.boot_id, "controlUiBuildSource": "bundled", "connId": client.conn_id},
            "features": {"methods": methods, "events": methods::EVENTS, "capabilities": []},
            "snapshot": {
                "presence": self.presence(),
                "health": self.health(),
                "stateVersion": self.state_version(),
                "uptimeMs": self.uptime_ms(),
                "sessionDefaults": {"defaultAgentId": "main", "modelConfigured": config.default_model_ref().is_ok(),
                    "ownership": "sole", "selectionRequired": false, "mainKey": "main",
                    "mainSessionKey": "agent:main:main", "scope": "per-sender"},
                "suspension": {"phase": "accepting"},
                "authMode": auth_mode,
                "configPath": config.config_path(),
                "stateDir": config.home,
            },
            "auth": self.auth_info(client, auth_mode),
            "policy": {"maxPayload": MAX_PAYLOAD, "maxBufferedBytes": hub::MAX_BUFFERED,
                "tickIntervalMs": TICK_INTERVAL_MS},
        })
    }

    /// `hello-ok.auth`: a signed device on a gateway with a token also gets its device token.
    fn auth_info(&self, client: &Client, mode: &str) -> Value {
        let mut auth = json!({"method": mode, "role": client.role, "scopes": client.scopes});
        if let (Some(shared), Some(device), Some(scopes)) = (&self.token, &client.device_id, &client.token_scopes) {
            auth["deviceToken"] = json!(handshake::device_token_for(shared, device, &client.role, scopes));
            auth["deviceTokenScopes"] = json!(scopes);
            auth["issuedAtMs"] = json!(now_ms());
            auth["recoveryMigrationAllowed"] = json!(true);
        }
        auth
    }

    /// Whether run `id` was seen: `in_flight` or `ok`; a new one is recorded as in flight.
    fn runs_seen(&self, id: &str) -> Option<&'static str> {
        let mut runs = lock(&self.runs.0);
        runs.retain(|_, r| r.finished.is_none_or(|(at, _)| at.elapsed() < DEDUPE_TTL));
        match runs.get(id) {
            Some(RunRecord { finished: None, .. }) => Some("in_flight"),
            Some(_) => Some("ok"),
            None => {
                if runs.len() >= DEDUPE_MAX
                    && let Some(oldest) = runs
                        .iter()
                        .filter_map(|(k, r)| r.finished.map(|(at, _)| (k.clone(), at)))
                        .min_by_key(|(_, at)| *at)
                {
                    runs.remove(&oldest.0);
                }
                runs.insert(id.to_owned(), RunRecord::default());
                None
            }
        }
    }

    /// Forgets a run that never started.
    fn run_done(&self, id: &str) {
        lock(&self.runs.0).remove(id);
    }

    fn runs_handle(&self) -> Arc<Runs> {
        self.runs.clone()
    }

    /// Runs `text` on session `key` for a channel: the reply's text streams to the returned
    /// receiver, and the watch says how the run ended. Clients see the run as any other.
    /// `mode_cap`: the most its tool calls get (a sender who is not an owner: `ask`).
    pub async fn channel_run(
        &self,
        key: &str,
        prompt: Vec<crate::runtime::UserBlock>,
        mode_cap: Option<Mode>,
        from_agent: bool,
    ) -> Result<(tokio::sync::mpsc::UnboundedReceiver<hub::Heard>, EndWatch), String> {
        let bytes = prompt.iter().map(crate::runtime::UserBlock::size).sum();
        let ticket = self.admit(key, bytes).map_err(|e| e.message.clone())?;
        let handle = self.open(key).await?;
        let run_id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let options = crate::runtime::TurnOptions { mode_cap, from_agent, ..self.run_options() };
        let (_, ended, outcome) = self.begin_run(&handle, key, &run_id, prompt, options, Some(tx));
        tokio::spawn(async move {
            outcome.await;
            drop(ticket);
        });
        Ok((rx, ended))
    }

    /// Steers `text` into session `key`'s running turn (a channel's `steer` queue mode);
    /// resolves to whether the turn took it.
    pub fn steer(&self, key: &str, text: &str) -> impl std::future::Future<Output = bool> + Send + 'static {
        // Sent now, so it reaches the session before anything that arrives after it.
        let steered = self.open_handle(key).map(|handle| handle.steer(text.to_owned()));
        let text = text.to_owned();
        let key = key.to_owned();
        let hub = self.hub.clone();
        async move {
            let Some(steered) = steered else { return false };
            let taken = steered.await;
            if taken {
                hub.to_subscribers(
                    "session.message",
                    &json!({"sessionKey": key, "message": {"role": "user", "content": text, "timestamp": now_ms(), "steered": true}}),
                );
            }
            taken
        }
    }

    /// Session `key`'s permission questions are also asked in `chat`.
    pub fn route_questions(&self, key: &str, chat: Arc<dyn approvals::ChatAsker>) {
        self.approvals.route_to_chat(key, chat);
    }

    /// A question answered from a chat with option `option`; the option's label.
    pub fn answer_question(&self, id: &str, option: &str, by: &str) -> Result<String, String> {
        let label = self.approvals.label_of(id, option);
        self.approvals.resolve(&self.hub, id, option, by).map_err(|e| e.message.clone())?;
        Ok(label.unwrap_or_else(|| option.to_owned()))
    }

    /// A channel receives updates posted to `path` with `secret` (webhook mode).
    pub fn add_webhook(&self, path: &str, secret: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        lock(&self.webhooks).insert(path.to_owned(), (secret.to_owned(), tx));
        rx
    }

    /// Whether `secret` is the one a webhook at `path` takes: `None` if no channel receives there.
    pub fn webhook_secret_ok(&self, path: &str, secret: Option<&str>) -> Option<bool> {
        let hooks = lock(&self.webhooks);
        let (want, _) = hooks.get(path)?;
        Some(secret.is_some_and(|s| handshake::same(s, want)))
    }

    /// An update posted to `path` (its secret checked already); false if no channel receives
    /// there.
    pub fn webhook(&self, path: &str, update: Value) -> bool {
        lock(&self.webhooks).get(path).is_some_and(|(_, tx)| tx.send(update).is_ok())
    }

    pub fn has_webhook(&self, path: &str) -> bool {
        lock(&self.webhooks).contains_key(path)
    }

    /// `send {to, message, channel?, sessionKey?, threadId?, idempotencyKey}`: delivers a message
    /// to a chat (the send policy applies); a retry with the same key sends nothing again.
    pub async fn send(&self, params: &serde_json::Map<String, Value>) -> Result<Value, ErrorShape> {
        let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        let idempotency = text("idempotencyKey").unwrap_or_default().to_owned();
        if let Some((_, done)) = lock(&self.sent).iter().find(|(k, _)| *k == idempotency) {
            return Ok(done.clone());
        }
        let message = text("message").ok_or_else(|| ErrorShape::invalid("invalid send params: `message` is empty"))?;
        let own = text("sessionKey").and_then(|k| self.outbox.own_chat(&canonical_key(k)));
        let channel = match (text("channel"), &own, self.outbox.ids().as_slice()) {
            (Some(c), _, _) => c.to_owned(),
            (None, Some(own), _) => own.channel.clone(),
            (None, None, [only]) => (*only).to_owned(),
            (None, None, []) => return Err(ErrorShape::new(code::UNAVAILABLE, "no messaging channel is configured")),
            (None, None, many) => {
                return Err(ErrorShape::invalid(format!("invalid send params: give `channel` ({})", many.join(", "))));
            }
        };
        let to = text("to").ok_or_else(|| ErrorShape::invalid("invalid send params: `to` is empty"))?.to_owned();
        let target = crate::runtime::host::ChatTarget { channel, to, thread: text("threadId").map(str::to_owned) };
        // Kept in the store too, so a retry after a restart sends nothing again.
        let stored = format!("send:{idempotency}");
        match self.runtime.claim_key(&stored, "").await {
            Ok(None) => {}
            Ok(Some(record)) => {
                return Ok(record.outcome.as_deref().and_then(|o| serde_json::from_str(o).ok()).unwrap_or_else(
                    || json!({"ok": true, "channel": target.channel, "to": target.to, "runId": idempotency}),
                ));
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not record an idempotency key; a retry after a restart would send again")
            }
        }
        if let Err(e) = self.outbox.send(&target, message).await {
            // Not sent: a retry may try again.
            let _ = self.runtime.forget_key(&stored).await;
            return Err(ErrorShape::new(code::UNAVAILABLE, e));
        }
        let done = json!({"ok": true, "channel": target.channel, "to": target.to, "runId": idempotency});
        if let Err(e) = self.runtime.end_key(&stored, &done).await {
            tracing::warn!(error = %e, "could not record a delivery");
        }
        let mut sent = lock(&self.sent);
        sent.push_back((idempotency, done.clone()));
        if sent.len() > 1000 {
            sent.pop_front();
        }
        Ok(done)
    }

    /// Cancels the runs going on session `key` (a channel's `interrupt` queue mode): one
    /// cancellation for all of them.
    pub fn abort_runs(&self, key: &str) {
        if let Some(handle) = self.open_handle(key) {
            handle.send(Op::Cancel);
        }
    }

    /// Stops: clients are told (`shutdown`), running turns are cancelled and end `cancelled`
    /// (saved as such), sessions close.
    pub async fn shut_down(&self) {
        self.hub.broadcast("shutdown", &json!({"reason": "gateway stopping", "restartExpectedMs": null}), false);
        let handles: Vec<SessionHandle> = lock(&self.sessions).drain().map(|(_, (h, _))| h).collect();
        for handle in &handles {
            handle.send(Op::Shutdown);
        }
        let all = futures_util::future::join_all(handles.iter().map(SessionHandle::closed));
        if tokio::time::timeout(Duration::from_secs(10), all).await.is_err() {
            tracing::warn!("some sessions did not close in time");
        }
        self.hub.close_all(acp_protocol::gateway::close::GOING_AWAY, "gateway stopping");
        // Let the close frames go out (each connection leaves the hub once its client answers).
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.hub.count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Files on disk; approval questions go to the connected clients that may answer them (with none
/// connected, a call that needs one is refused with a message that says what to change).
struct GatewayHost {
    hub: Arc<Hub>,
    approvals: Arc<approvals::Approvals>,
    outbox: Arc<channels::Outbox>,
}

pub use approvals::{DEFAULT_TIMEOUT as DEFAULT_APPROVAL_TIMEOUT, UNASKABLE};

impl crate::runtime::host::Host for GatewayHost {
    async fn read_text_file(
        &self,
        session: &str,
        path: &std::path::Path,
        range: Option<crate::runtime::host::LineRange>,
        cancel: &CancellationToken,
    ) -> Result<String, crate::runtime::host::FsError> {
        crate::runtime::host::Host::read_text_file(&crate::runtime::host::LocalHost, session, path, range, cancel).await
    }

    async fn write_text_file(
        &self,
        session: &str,
        path: &std::path::Path,
        content: &str,
        cancel: &CancellationToken,
    ) -> Result<(), crate::runtime::host::FsError> {
        crate::runtime::host::Host::write_text_file(&crate::runtime::host::LocalHost, session, path, content, cancel)
            .await
    }

    async fn request_permission(
        &self,
        session: &str,
        request: &crate::runtime::host::PermissionRequest,
        cancel: &CancellationToken,
    ) -> crate::runtime::host::PermissionAnswer {
        self.approvals.ask(&self.hub, session, request, cancel).await
    }

    fn can_message(&self) -> bool {
        !self.outbox.is_empty()
    }

    fn own_chat(&self, session: &str) -> Option<crate::runtime::host::ChatTarget> {
        self.outbox.own_chat(session)
    }

    async fn send_message(
        &self,
        _session: &str,
        target: &crate::runtime::host::ChatTarget,
        text: &str,
    ) -> Result<(), String> {
        self.outbox.send(target, text).await
    }
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Runs the gateway until `stop`: binds, says where it listens (stderr), serves.
pub async fn run(config: Config, mut options: Options, stop: CancellationToken) -> Result<(), String> {
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        return Err(format!(
            "refusing to listen on {} without a token: anyone who can reach it could run the agent. \
             Give --token-file, ACP_GATEWAY_TOKEN or [gateway] token in config.toml, or listen on 127.0.0.1",
            options.listen
        ));
    }
    if let Some(token) = &options.token {
        guard::check_token(token, "the gateway token")?;
    }
    // Without a shared token, browsers still need one (loopback is not only the user's: any
    // web page can make the browser connect there).
    let browser_token = match options.token {
        Some(_) => None,
        None => Some(guard::browser_token(&config.home)?),
    };
    options.connections = guard::fit_to_open_files(options.connections, 512);
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| format!("could not listen on {}: {e}", options.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let pairings = Arc::new(channels::access::Pairings::load(&config.home)?);
    let prefs = Arc::new(channels::policy::SessionPrefs::load(&config.home)?);
    let channel_config = config.clone();
    // Local clients find it, and authenticate as its owner, through a file only its user reads.
    let owner_token = guard::random_token();
    let home = config.home.clone();
    let gateway = Gateway::new(
        config,
        &options,
        browser_token.clone(),
        Some(owner_token.clone()),
        pairings.clone(),
        prefs.clone(),
    );
    let found = discovery::Found { url: discovery::local_url(local), pid: std::process::id(), token: owner_token };
    // Another gateway already serves this $ACP_HOME: local clients keep finding that one.
    let _beacon = match discovery::find(&home) {
        Some(other) if other.pid != found.pid => {
            tracing::warn!(pid = other.pid, url = %other.url,
                "another acp gateway serves this $ACP_HOME; local clients find that one (give them --gateway for this one)");
            None
        }
        _ => match discovery::Beacon::write(&home, &found) {
            Ok(beacon) => Some(beacon),
            Err(e) => {
                tracing::warn!(error = %e, "could not leave the gateway's address for local clients");
                None
            }
        },
    };
    gateway.runtime.prewarm();
    if channel_config.channels.telegram.is_some() {
        let http = gateway.runtime.http_client().await?;
        if let Some(telegram) = channels::telegram::start(&channel_config, gateway.clone(), pairings, prefs, http)? {
            let updates = telegram.webhook().map(|(path, secret)| gateway.add_webhook(&path, &secret));
            gateway.outbox.add("telegram", telegram.inbox.clone());
            tokio::spawn(telegram.run(stop.clone(), updates));
        }
    }
    tracing::info!(listen = %local, auth = if options.token.is_some() { "token" } else { "none (loopback; browsers need the web chat's token)" },
        max_connections = options.connections.total, "gateway listening");
    // Scripts and tests read the address from this line. Without a shared token, the web chat's
    // link carries the browsers' token (in the fragment, which browsers never send to a server).
    let web = match &browser_token {
        Some(token) => format!("http://{local}/#token={token}"),
        None => format!("http://{local}/"),
    };
    #[allow(clippy::print_stderr)]
    {
        eprintln!("acp gateway listening on ws://{local}/ (web chat: {web})");
    }
    let serving = tokio::spawn(server::serve(listener, gateway.clone(), stop.clone()));
    // Idle sessions are closed as they pass the idle time (checked at a quarter of it, at least
    // every minute).
    let sweeper = {
        let gateway = Arc::downgrade(&gateway);
        let every = (options.runs.idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(gateway) = gateway.upgrade() else { return };
                let keep = gateway.run_limits.open_sessions;
                gateway.close_idle(keep).await;
            }
        })
    };
    stop.cancelled().await;
    tracing::info!("gateway stopping");
    sweeper.abort();
    gateway.shut_down().await;
    serving.abort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_canonical() {
        assert_eq!(canonical_key("wire-demo"), "agent:main:wire-demo");
        assert_eq!(canonical_key("main"), "agent:main:main");
        assert_eq!(canonical_key("agent:ops:x"), "agent:ops:x");
    }
}
