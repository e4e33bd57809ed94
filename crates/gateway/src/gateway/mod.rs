//! `acp gateway`: a long-lived headless gateway speaking OpenClaw's gateway protocol (v4) over
//! WebSocket, with the web chat on the same port. It owns one runtime and its sessions (the same
//! `$ACP_HOME` store `acp serve` uses); control clients, the web chat, channels and the ACP bridge
//! reach them through it. The wire is `acp_protocol::gateway`'s types. `server.rs` serves the
//! port, `conn.rs` one connection, `handshake.rs` `connect`, `methods.rs` the method table (the
//! longer handlers in `chat.rs` and `sessions.rs`), and the parts of [`Gateway`]: `hub.rs` the
//! connections and the runtime's events as the gateway's, `runs.rs` a run's start, idempotency and
//! end, `sessions.rs` the open sessions, `presence.rs` who is present, `guard.rs` who may connect,
//! `approvals.rs` permission questions, `channels/` the messaging channels.

mod agents;
mod approvals;
pub mod bus;
pub mod channels;
mod chat;
mod conn;
pub mod cron;
pub mod discovery;
pub mod guard;
pub mod handshake;
mod hooks;
pub mod hub;
pub mod limits;
mod methods;
mod presence;
pub mod resets;
mod runs;
mod server;
mod sessions;
mod webchat;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use acp_protocol::gateway::PROTOCOL_VERSION;
use acp_protocol::gateway::events::{self, ChatMessage, SessionMessage, name};
use acp_protocol::gateway::methods::{
    AgentDefaultsShown, AgentsShown, AuthShown, ConfigShown, GatewayShown, ProviderShown, REDACTED, SnapshotDefaults,
    Suspension,
};
use acp_protocol::gateway::methods::{
    ConfigView, Features, HealthInfo, HelloAuth, HelloOk, ModelEntry, Models, Policy, ProcessMemory, ServerInfo,
    SessionCounts, SessionDefaults, Snapshot, StatusInfo, StatusSessions,
};
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::config::{Config, ConfigCell};
use crate::runtime::{Mode, Op, Runtime, SessionHandle};
use handshake::Client;
use hub::{EndWatch, Hub};

/// The largest frame accepted (`policy.maxPayload`).
pub const MAX_PAYLOAD: usize = 25 << 20;
/// `policy.tickIntervalMs`.
pub const TICK_INTERVAL_MS: i64 = 30_000;

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
    /// The PostgreSQL store it shares with other gateways (`--store`); `None`: SQLite under
    /// `$ACP_HOME`.
    pub store: Option<String>,
    /// How long its hold on a session in that store lasts unless renewed.
    pub store_lease: Duration,
    /// The NATS server(s) it shares events and requests with the other gateways of that store
    /// through (`--bus`).
    pub bus: Option<String>,
}

pub use acp_protocol::gateway::canonical_key;

/// The gateway: one runtime, and parts with one job each.
pub struct Gateway {
    pub runtime: Runtime,
    /// Connections, and what they are sent.
    pub hub: Arc<Hub>,
    /// Runs: their start, idempotency, and how they end.
    runs: Arc<runs::Runs>,
    /// The sessions it has open.
    open: sessions::Open,
    /// Who is present, and the state version.
    pub presence: presence::Presence,
    /// Who may connect.
    pub access: guard::Access,
    /// Its channels.
    pub channels: Arc<channels::Channels>,
    /// Permission questions waiting for an answer.
    approvals: Arc<approvals::Approvals>,
    /// Cron jobs and the heartbeat.
    pub cron: Arc<cron::Cron>,
    /// The bus to the other gateways of a shared store, once connected.
    bus: std::sync::OnceLock<Arc<bus::Bus>>,
    /// Itself (what runs after a method has answered holds it).
    me: Weak<Gateway>,
}

/// What the runtime tells the gateway: its events (for the hub), and runs nobody asked for (a
/// subagent's announcement on an idle session).
struct Sink {
    hub: Arc<Hub>,
    gateway: Weak<Gateway>,
}

impl crate::runtime::EventSink for Sink {
    fn emit(&self, event: crate::runtime::Event) {
        self.hub.emit(&event);
    }

    fn wake(&self, session: &crate::runtime::SessionId, text: &str) -> bool {
        self.gateway.upgrade().is_some_and(|gw| gw.wake(session, text))
    }
}

impl Gateway {
    pub fn new(
        config: Config,
        options: &Options,
        browser_token: Option<String>,
        owner_token: Option<String>,
        channels: Arc<channels::Channels>,
        store: Option<Arc<dyn crate::runtime::store::SessionStore>>,
    ) -> Arc<Self> {
        let hub = Arc::new(Hub::default());
        let approvals = Arc::new(approvals::Approvals::new(options.approval_timeout));
        let cron = Arc::new(cron::Cron::new(&config));
        Arc::new_cyclic(|me| {
            let sink = Arc::new(Sink { hub: hub.clone(), gateway: me.clone() });
            let host = Arc::new(GatewayHost {
                hub: hub.clone(),
                approvals: approvals.clone(),
                channels: channels.clone(),
                gateway: me.clone(),
            });
            let mut runtime = Runtime::new(ConfigCell::new(config), sink, host).with_origin("gateway");
            if let Some(store) = store {
                runtime = runtime.with_store(store);
            }
            Self {
                runs: Arc::new(runs::Runs::new(runtime.clone(), hub.clone())),
                runtime,
                hub,
                open: sessions::Open::new(options),
                presence: presence::Presence::default(),
                access: guard::Access::new(
                    options.token.clone(),
                    browser_token,
                    owner_token,
                    &options.allowed_hosts,
                    options.connections,
                ),
                channels,
                approvals,
                cron,
                bus: std::sync::OnceLock::new(),
                me: me.clone(),
            }
        })
    }

    /// Runs `text` on idle session `key` though no client asked (a subagent's announcement): in
    /// the chat the session talks in, if a channel's; else as a run every client sees.
    fn wake(&self, key: &str, text: &str) -> bool {
        if self.channels.outbox.wake(key, text) {
            return true;
        }
        let Some(handle) = self.open.handle(key) else { return false };
        let Ok(ticket) = self.open.admit(key, text.len()) else { return false };
        let run_id = uuid::Uuid::new_v4().to_string();
        let prompt = vec![crate::runtime::UserBlock::Text { text: text.to_owned() }];
        let options = crate::runtime::TurnOptions { from_agent: true, ..self.open.run_options() };
        let (_, _, outcome) = self.runs.begin(&handle, key, &run_id, prompt, options, None);
        tokio::spawn(async move {
            outcome.await;
            drop(ticket);
        });
        true
    }

    /// A client connected: it is present (unless a CLI, as the reference has it), and everyone is
    /// told.
    pub fn joined(&self, conn: &hub::Conn, client: &Client, peer: SocketAddr) {
        if conn.approver.load(std::sync::atomic::Ordering::Relaxed) {
            // Questions asked before it came.
            let elsewhere = self.bus.get().map(|b| b.waiting_elsewhere()).unwrap_or_default();
            for question in self.approvals.waiting().into_iter().chain(elsewhere) {
                conn.event(name::APPROVAL_REQUESTED, &question, false, None);
            }
        }
        if self.presence.joined(client, peer) {
            self.presence_changed();
        }
    }

    /// A client left.
    pub fn left(&self, client: &Client) {
        if self.presence.left(client) {
            self.presence_changed();
        }
    }

    fn presence_changed(&self) {
        let list = events::Presence { presence: self.presence.list() };
        self.hub.broadcast_versioned(name::PRESENCE, &list, &self.presence.state_version());
    }

    fn session_counts(&self) -> SessionCounts {
        SessionCounts { count: self.open.count() as u64, recent: Vec::new() }
    }

    pub fn health(&self) -> HealthInfo {
        HealthInfo {
            ok: true,
            ts: now_ms(),
            default_agent_id: self.default_agent(),
            agents: self.agent_health(),
            sessions: self.session_counts(),
            connections: self.hub.count() as u64,
            ..HealthInfo::default()
        }
    }

    pub fn status(&self) -> StatusInfo {
        let config = self.runtime.config_for(&self.key("main"));
        let model = config.default_model_ref().map(|m| m.to_string()).ok();
        StatusInfo {
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            uptime_ms: self.presence.uptime_ms(),
            sessions: StatusSessions {
                count: self.open.count() as u64,
                defaults: SessionDefaults { model, ..SessionDefaults::default() },
                recent: Vec::new(),
            },
            runs: self.open.run_counts(),
            connections: self.hub.count() as u64,
            channel_summary: Vec::new(),
            process_memory: ProcessMemory { rss_bytes: rss_bytes() },
        }
    }

    pub fn models(&self) -> Models {
        let config = self.runtime.config();
        let models = config
            .model_choices()
            .into_iter()
            .map(|(m, name)| ModelEntry {
                id: m.to_string(),
                name: Some(name),
                context_window: config.provider(&m.provider).map(|p| p.model(&m.model).context_window),
                provider: m.provider,
                model: m.model,
            })
            .collect();
        let defaults = SessionDefaults {
            model: config.default_model_ref().map(|m| m.to_string()).ok(),
            mode: Some(config.default_mode.id().into()),
            thinking_level: Some(config.reasoning.map_or("off", |r| r.as_str()).into()),
        };
        Models { models, defaults }
    }

    /// The configuration, with every secret replaced.
    pub fn config_view(&self) -> ConfigView {
        let config = self.runtime.config();
        let providers = config
            .providers
            .iter()
            .map(|p| {
                let shown = ProviderShown {
                    base_url: p.base_url.clone(),
                    api_key: p.api_key.as_ref().map(|_| REDACTED.into()),
                    api_key_env: p.api_key_env.clone(),
                };
                (p.id.clone(), shown)
            })
            .collect();
        let shown = ConfigShown {
            providers,
            gateway: GatewayShown { auth: AuthShown { mode: self.access.mode().into(), token: REDACTED.into() } },
            agents: AgentsShown {
                defaults: AgentDefaultsShown {
                    model: config.default_model_ref().map(|m| m.to_string()).ok(),
                    workspace: self.workspace_of(&self.runtime.config_for(&self.key("main"))).display().to_string(),
                },
            },
        };
        ConfigView {
            path: config.config_path().display().to_string(),
            config: serde_json::to_value(shown).unwrap_or_default(),
        }
    }

    pub fn hello(&self, client: &Client) -> HelloOk {
        let config = self.runtime.config();
        let version = env!("CARGO_PKG_VERSION");
        let auth_mode = self.access.mode();
        let snapshot = Snapshot {
            presence: self.presence.list(),
            health: self.health(),
            state_version: self.presence.state_version(),
            uptime_ms: self.presence.uptime_ms(),
            session_defaults: SnapshotDefaults {
                default_agent_id: config.default_agent().into(),
                model_configured: self.runtime.config_for(&config.agent_key("main")).default_model_ref().is_ok(),
                ownership: "sole".into(),
                selection_required: false,
                main_key: "main".into(),
                main_session_key: config.agent_key("main"),
                scope: "per-sender".into(),
            },
            suspension: Suspension { phase: "accepting".into() },
            auth_mode: auth_mode.into(),
            config_path: config.config_path().display().to_string(),
            state_dir: config.home.display().to_string(),
        };
        HelloOk {
            kind: "hello-ok".into(),
            protocol: PROTOCOL_VERSION,
            server: ServerInfo {
                version: version.into(),
                build_id: format!("acp-{version}"),
                boot_id: self.presence.boot_id().into(),
                control_ui_build_source: "bundled".into(),
                conn_id: client.conn_id.clone(),
            },
            features: Features {
                methods: methods::METHODS.iter().map(|(m, _)| (*m).to_owned()).collect(),
                events: events::EVENTS.iter().map(|e| (*e).to_owned()).collect(),
                capabilities: Vec::new(),
            },
            snapshot: serde_json::to_value(snapshot).unwrap_or_default(),
            auth: self.auth_info(client, auth_mode),
            policy: Policy {
                max_payload: MAX_PAYLOAD as u64,
                max_buffered_bytes: hub::MAX_BUFFERED as u64,
                tick_interval_ms: TICK_INTERVAL_MS as u64,
            },
        }
    }

    /// `hello-ok.auth`: a signed device on a gateway with a token also gets its device token.
    fn auth_info(&self, client: &Client, mode: &str) -> HelloAuth {
        let mut auth = HelloAuth {
            method: mode.into(),
            role: client.role.clone(),
            scopes: client.scopes.clone(),
            ..Default::default()
        };
        if let (Some(shared), Some(device), Some(scopes)) =
            (&self.access.token, &client.device_id, &client.token_scopes)
        {
            auth.device_token = Some(handshake::device_token_for(shared, device, &client.role, scopes));
            auth.device_token_scopes = Some(scopes.clone());
            auth.issued_at_ms = Some(now_ms());
            auth.recovery_migration_allowed = Some(true);
        }
        auth
    }

    /// Steers `text` into session `key`'s running turn (a channel's `steer` queue mode);
    /// resolves to whether the turn took it.
    pub fn steer(&self, key: &str, text: &str) -> impl std::future::Future<Output = bool> + Send + 'static {
        // Sent now, so it reaches the session before anything that arrives after it.
        let steered = self.open.handle(key).map(|handle| handle.steer(text.to_owned()));
        let text = text.to_owned();
        let key = key.to_owned();
        let hub = self.hub.clone();
        async move {
            let Some(steered) = steered else { return false };
            let taken = steered.await;
            if taken {
                let message = ChatMessage { steered: Some(true), ..ChatMessage::user(text, Some(now_ms())) };
                let said = SessionMessage { session_key: key.clone(), run_id: None, message };
                hub.to_subscribers(&key, name::SESSION_MESSAGE, &said);
            }
            taken
        }
    }

    /// Cancels the runs going on session `key` (a channel's `interrupt` queue mode): one
    /// cancellation for all of them.
    pub fn abort_runs(&self, key: &str) {
        if let Some(handle) = self.open.handle(key) {
            handle.send(Op::Cancel);
        }
    }

    /// Stops: clients are told (`shutdown`), running turns are cancelled and end `cancelled`
    /// (saved as such), sessions close.
    pub async fn shut_down(&self) {
        let shutdown = events::Shutdown { reason: "gateway stopping".into(), restart_expected_ms: None };
        self.hub.broadcast(name::SHUTDOWN, &shutdown, false);
        let handles = self.open.take_all();
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

/// What channels ask of the gateway.
impl channels::Host for Gateway {
    fn run(
        &self,
        key: &str,
        prompt: Vec<crate::runtime::UserBlock>,
        mode_cap: Option<Mode>,
        from_agent: bool,
    ) -> futures_util::future::BoxFuture<'_, Result<(tokio::sync::mpsc::UnboundedReceiver<hub::Heard>, EndWatch), String>>
    {
        let key = key.to_owned();
        Box::pin(async move {
            // A chat's own message (not an agent's): its session may be due to start afresh.
            if !from_agent {
                self.reset_if_stale(&key).await;
            }
            let bytes = prompt.iter().map(crate::runtime::UserBlock::size).sum();
            let ticket = self.open.admit(&key, bytes).map_err(|e| e.message.clone())?;
            let handle = self.open(&key).await?;
            let run_id = uuid::Uuid::new_v4().to_string();
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let options = crate::runtime::TurnOptions { mode_cap, from_agent, ..self.open.run_options() };
            let (_, ended, outcome) = self.runs.begin(&handle, &key, &run_id, prompt, options, Some(tx));
            if !from_agent {
                let direct = resets::chat_type(&key) == crate::config::ChatType::Direct;
                self.channels.wrote_from(&key, direct);
            }
            tokio::spawn(async move {
                outcome.await;
                drop(ticket);
            });
            Ok((rx, ended))
        })
    }

    fn steer(&self, key: &str, text: &str) -> futures_util::future::BoxFuture<'static, bool> {
        Box::pin(Gateway::steer(self, key, text))
    }

    fn abort_runs(&self, key: &str) {
        Gateway::abort_runs(self, key);
    }

    fn route_questions(&self, key: &str, chat: Arc<dyn approvals::ChatAsker>) {
        self.approvals.route_to_chat(key, chat);
    }

    fn answer_question(&self, id: &str, option: &str, by: &str) -> Result<String, String> {
        let label = self.approvals.label_of(id, option);
        self.approvals.resolve(&self.hub, id, option, by).map_err(|e| e.message.clone())?;
        Ok(label.unwrap_or_else(|| option.to_owned()))
    }

    fn channel_status(
        &self,
        channel: &str,
        account: &str,
        change: &mut dyn FnMut(&mut serde_json::Map<String, serde_json::Value>),
    ) {
        self.channels.change_status(channel, account, change);
    }

    fn message_hooks(
        &self,
        event: crate::config::hooks::HookEvent,
        channel: &str,
        fields: serde_json::Value,
    ) -> futures_util::future::BoxFuture<'static, Option<crate::hooks::Verdict>> {
        self.gateway_hooks(event, Some(channel), fields)
    }
}

/// Files on disk; approval questions go to the connected clients that may answer them (with none
/// connected, a call that needs one is refused with a message that says what to change).
struct GatewayHost {
    hub: Arc<Hub>,
    approvals: Arc<approvals::Approvals>,
    channels: Arc<channels::Channels>,
    /// For the `cron` tool.
    gateway: Weak<Gateway>,
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
        let elsewhere = async |size: usize| {
            let bus = self.gateway.upgrade().and_then(|gw| gw.bus.get().cloned());
            match bus {
                Some(bus) => bus.approvers_elsewhere(size).await,
                None => false,
            }
        };
        self.approvals.ask(&self.hub, session, request, cancel, elsewhere).await
    }

    fn can_message(&self) -> bool {
        !self.channels.outbox.is_empty()
    }

    fn own_chat(&self, session: &str) -> Option<crate::runtime::host::ChatTarget> {
        self.channels.outbox.own_chat(session)
    }

    fn can_schedule(&self) -> bool {
        true
    }

    async fn cron(&self, session: &str, method: &str, params: serde_json::Value) -> Result<serde_json::Value, String> {
        let gateway = self.gateway.upgrade().ok_or("the gateway is stopping")?;
        gateway.cron.clone().call(gateway, session, method, params).await.map_err(|e| e.message)
    }

    async fn send_message(
        &self,
        _session: &str,
        target: &crate::runtime::host::ChatTarget,
        text: &str,
        file: Option<&crate::runtime::host::ChatFile>,
    ) -> Result<(), String> {
        self.channels.outbox.send(target, text, file).await
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
    resets::check(&config)?;
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
    agents::check_bindings(&config)?;
    let pairings = Arc::new(channels::access::Pairings::load(&config.home)?);
    let prefs = Arc::new(channels::policy::SessionPrefs::load(&config.home)?);
    let channel_config = config.clone();
    // Local clients find it, and authenticate as its owner, through a file only its user reads.
    let owner_token = guard::random_token();
    let home = config.home.clone();
    let channels = Arc::new(channels::Channels::new(pairings.clone(), prefs.clone()));
    let shared = match &options.store {
        Some(url) => Some(
            crate::runtime::store::Postgres::connect_with(url, options.store_lease)
                .await
                .map_err(|e| format!("the session store: {e}"))?,
        ),
        None => None,
    };
    let store = shared.clone().map(|pg| Arc::new(pg) as Arc<dyn crate::runtime::store::SessionStore>);
    let gateway = Gateway::new(config, &options, browser_token.clone(), Some(owner_token.clone()), channels, store);
    if let Some(url) = &options.bus {
        let Some(pg) = &shared else {
            return Err("--bus needs a shared store (--store postgres://…): the bus joins gateways on one store".into());
        };
        let bus = bus::Bus::connect(url, pg.clone()).await?;
        bus.start(&gateway, stop.clone());
        bus.clone().serve_forwarded(&gateway, stop.clone()).await?;
        let _ = gateway.bus.set(bus);
    }
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
    gateway.runtime.start_discovery();
    if channel_config.channels.matrix.is_some() {
        let http = gateway.runtime.http_client().await?;
        let host: Arc<dyn channels::Host> = gateway.clone();
        for matrix in channels::matrix::start(&channel_config, host, pairings.clone(), prefs.clone(), http)? {
            gateway.channels.outbox.add(channels::inbox::scope_of("matrix", &matrix.name), matrix.inbox.clone());
            tokio::spawn(matrix.run(stop.clone()));
        }
    }
    if channel_config.channels.discord.is_some() {
        let http = gateway.runtime.http_client().await?;
        let host: Arc<dyn channels::Host> = gateway.clone();
        for discord in channels::discord::start(&channel_config, host, pairings.clone(), prefs.clone(), http)? {
            gateway.channels.outbox.add(channels::inbox::scope_of("discord", &discord.name), discord.inbox.clone());
            tokio::spawn(discord.run(stop.clone()));
        }
    }
    if channel_config.channels.slack.is_some() {
        let http = gateway.runtime.http_client().await?;
        let host: Arc<dyn channels::Host> = gateway.clone();
        for slack in channels::slack::start(&channel_config, host, pairings.clone(), prefs.clone(), http)? {
            gateway.channels.outbox.add(channels::inbox::scope_of("slack", &slack.name), slack.inbox.clone());
            tokio::spawn(slack.run(stop.clone()));
        }
    }
    if channel_config.channels.telegram.is_some() {
        let http = gateway.runtime.http_client().await?;
        let host: Arc<dyn channels::Host> = gateway.clone();
        for telegram in channels::telegram::start(&channel_config, host, pairings, prefs, http)? {
            let updates = telegram.webhook().map(|(path, secret)| gateway.channels.add_webhook(&path, &secret));
            let id = channels::inbox::scope_of("telegram", &telegram.account);
            gateway.channels.outbox.add(id, telegram.inbox.clone());
            // Gateways sharing a store: one of them polls the bot.
            let election = match (&shared, &updates) {
                (Some(pg), None) => {
                    let name = format!("telegram:{}", telegram.bot_id());
                    Some(channels::election::Election::start(pg.clone(), name, stop.clone()))
                }
                _ => None,
            };
            tokio::spawn(telegram.run(stop.clone(), updates, election));
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
    tokio::spawn(gateway.clone().started());
    let cron = tokio::spawn(gateway.cron.clone().serve(Arc::downgrade(&gateway), stop.clone()));
    // Idle sessions are closed as they pass the idle time (checked at a quarter of it, at least
    // every minute).
    let sweeper = {
        let gateway = Arc::downgrade(&gateway);
        let every = (options.runs.idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(gateway) = gateway.upgrade() else { return };
                let keep = gateway.open.most();
                gateway.close_idle(keep).await;
            }
        })
    };
    stop.cancelled().await;
    tracing::info!("gateway stopping");
    sweeper.abort();
    cron.abort();
    gateway.shut_down().await;
    if let Some(bus) = gateway.bus.get() {
        bus.flush().await;
    }
    if let Some(pg) = shared {
        // What the closed sessions still had to save, and their leases let go for others.
        pg.close(Duration::from_secs(10)).await;
    }
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
