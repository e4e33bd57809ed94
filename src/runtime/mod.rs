//! The in-process agent runtime: one actor per session, ops in, events out. It knows nothing of
//! JSON-RPC, ACP or WebSockets; every surface drives it through [`Runtime`] and [`SessionHandle`],
//! receives its [`Event`]s through an [`EventSink`], and lends it a [`Host`] (files as the user
//! sees them, approvals, terminals).

pub mod commands;
pub mod compaction;
pub mod context;
pub mod directives;
pub mod event;
mod mcp;
pub mod op;
mod persist;
pub mod session;
mod stored;
mod subagents;
mod tool_calls;
pub mod turn;

use crate::sync::lock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;

pub use crate::tools::plan::{PlanEntry, PlanPriority, PlanStatus};
pub use event::{CompactionEvent, CompactionPhase, SettingsChange, SubagentChange, SubagentEvent};
pub use event::{Event, EventKind, EventSink, SessionId, StopReason, TurnError, TurnOutcome};
pub use mcp::SessionCommand;
pub use op::{Lane, Mode, Op, TurnId, TurnOptions};
pub use session::SessionHandle;
pub use stored::{CreateError, ListError, LoadError, LoadedSession, SessionPage, SessionSummary};
// What surfaces show of a session and its turns.
pub use crate::history::input::{UserBlock, plain_text};
pub use crate::history::replay::Shown;
pub use crate::providers::Usage;
pub use crate::settings::ReasoningEffort;
pub use crate::tools::host;
pub use crate::tools::kind::describe_foreign;
pub use crate::tools::{Location, ToolCallState, ToolContent, ToolKind, ToolStatus};

/// The longest session id, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = crate::store::MAX_ID_BYTES;

/// Whether `id` can name a session: 1 to [`MAX_SESSION_ID_BYTES`] bytes of printable text.
pub fn valid_session_id(id: &str) -> bool {
    crate::store::valid_id(id)
}

use crate::config::mcp::McpServer;
use crate::config::{Config, ConfigCell, ModelInfo, ModelRef};
use crate::http::build_http;
use crate::providers::ProviderClient;
use crate::settings::Rule;
use crate::store::{Store, StoreError, now_ms};
use crate::tools::host::AnyHost;

/// Settings a session starts with; ops change them later.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSettings {
    pub cwd: PathBuf,
    /// More directories that belong to the workspace (ACP `additionalDirectories`).
    pub additional_dirs: Vec<PathBuf>,
    pub model: ModelRef,
    pub mode: Mode,
    /// `None`: the provider's default.
    pub reasoning: Option<ReasoningEffort>,
    /// MCP servers the editor gave (config.toml's are added, the editor's winning by name).
    pub mcp_servers: Vec<McpServer>,
}

impl SessionSettings {
    /// The workspace: the cwd and the additional directories.
    pub fn roots(&self) -> Vec<PathBuf> {
        std::iter::once(self.cwd.clone()).chain(self.additional_dirs.iter().cloned()).collect()
    }
}

/// What a running turn must see change at once: the mode, "always" answers and whether
/// sandboxed commands may use the network.
#[derive(Debug, Default)]
pub(crate) struct LiveState {
    mode: Mutex<Mode>,
    rules: Mutex<Vec<Rule>>,
    network: std::sync::atomic::AtomicBool,
}

impl LiveState {
    pub(crate) fn new(mode: Mode, rules: Vec<Rule>, network: bool) -> Self {
        Self { mode: Mutex::new(mode), rules: Mutex::new(rules), network: network.into() }
    }

    pub(crate) fn network(&self) -> bool {
        self.network.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_network(&self, on: bool) {
        self.network.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *lock(&self.mode) = mode;
    }

    pub(crate) fn rules(&self) -> Vec<Rule> {
        lock(&self.rules).clone()
    }

    pub(crate) fn remember(&self, rule: Rule) {
        lock(&self.rules).push(rule);
    }
}

/// State shared by every session of the process.
pub(crate) struct Shared {
    config: ConfigCell,
    http: OnceCell<reqwest::Client>,
    /// For `http://` providers: no certificates to load ([`crate::http::build_plain_http`]).
    plain_http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    sink: Arc<dyn EventSink>,
    host: Arc<dyn AnyHost>,
    next_turn: AtomicU64,
    store: OnceCell<Result<Arc<Store>, StoreError>>,
    /// The store, being opened already on a thread of its own ([`StoreOpening`]).
    store_opening: Mutex<Option<StoreOpening>>,
    /// The id of the session a client opening one straight away will create, made up for it
    /// ([`Runtime::with_fresh_session`]); taken by that session.
    fresh_id: Mutex<Option<String>>,
    /// The store is opened when first needed, not ahead ([`Runtime::with_fresh_session`]).
    store_on_demand: std::sync::atomic::AtomicBool,
    /// Which surface creates sessions (`acp`, `run`, `gateway`, …), kept in the index.
    origin: String,
    /// Whether this process swept never-prompted sessions already.
    swept: std::sync::atomic::AtomicBool,
    /// Whether [`Runtime::prewarm`] readied what every first turn needs already.
    prewarmed: std::sync::atomic::AtomicBool,
    /// MCP servers, shared by the sessions that use the same ones.
    mcp: crate::mcp::Pool,
    /// The sessions open in this process, by id (subagent tools reach them through it).
    sessions: Mutex<std::collections::HashMap<String, SessionHandle>>,
    /// Subagents running at once, at most `[subagents] max_concurrent`.
    lane: tokio::sync::Semaphore,
    /// Who waits on whom in `sessions_send`, one entry per wait (a reply may wait on several
    /// sessions at once); a wait that would come back to its sender is refused.
    waits: Mutex<Vec<(String, String)>>,
    /// Subagents spawned in this process: child → (parent, what stops the child alone).
    parents: Mutex<std::collections::HashMap<String, (String, tokio_util::sync::CancellationToken)>>,
}

/// How long a session that was opened but never prompted is kept.
const UNPROMPTED_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// How long after the store opens the once-per-process sweep of unused sessions runs.
const SWEEP_AFTER: Duration = Duration::from_secs(5);

impl Shared {
    /// The session store, opened on first use (off the async thread).
    pub(crate) async fn store(&self) -> Result<Arc<Store>, StoreError> {
        self.store
            .get_or_init(|| async {
                let opening = lock(&self.store_opening).take().and_then(|o| o.opened);
                if let Some(opened) = opening {
                    let opened =
                        opened.await.unwrap_or_else(|_| Err(StoreError("opening the session store failed".into())));
                    return opened.map(Arc::new);
                }
                let home = self.config().home.clone();
                let opened = match tokio::task::spawn_blocking(move || Store::open(&home)).await {
                    Ok(opened) => opened.map(Arc::new),
                    Err(e) => Err(StoreError(format!("opening the session store failed: {e}"))),
                };
                // Opened on demand, the store was not swept ahead (see `Runtime::open_store`).
                if let Ok(store) = &opened
                    && self.store_on_demand.load(Ordering::Relaxed)
                    && !self.swept.swap(true, Ordering::Relaxed)
                {
                    sweep_later(store.clone());
                }
                opened
            })
            .await
            .clone()
    }

    /// The store, if it is open already.
    pub(crate) fn store_if_open(&self) -> Option<Arc<Store>> {
        self.store.get().and_then(|r| r.as_ref().ok()).cloned()
    }

    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.get()
    }

    pub(crate) fn host(&self) -> &Arc<dyn AnyHost> {
        &self.host
    }

    /// The open session `id`, if any.
    pub(crate) fn session(&self, id: &str) -> Option<SessionHandle> {
        lock(&self.sessions).get(id).cloned()
    }

    /// The shared HTTP client, built on first use (off the async thread: it reads the system's
    /// root certificates).
    pub(crate) async fn http(&self) -> Result<reqwest::Client, TurnError> {
        self.http
            .get_or_try_init(|| async {
                let timeouts = self.config().timeouts;
                tokio::task::spawn_blocking(move || build_http(&timeouts))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r)
            })
            .await
            .cloned()
            .map_err(|e| TurnError::internal(format!("could not set up the HTTP client: {e}")))
    }

    /// The client for `http://` providers, built on first use (it reads no files).
    fn plain_http(&self) -> Result<reqwest::Client, TurnError> {
        self.plain_http
            .get_or_init(|| crate::http::build_plain_http(&self.config().timeouts))
            .clone()
            .map_err(|e| TurnError::internal(format!("could not set up the HTTP client: {e}")))
    }

    /// Whether the default model's provider is reached over TLS (and so needs the certificates).
    fn default_needs_tls(&self) -> bool {
        let config = self.config();
        let provider = config.default_model_ref().ok().and_then(|m| config.provider(&m.provider).cloned());
        provider.is_none_or(|p| !crate::http::is_plain(&p.base_url))
    }

    /// A client for the provider of `model`, with the model's limits.
    pub(crate) async fn client_for(&self, model: &ModelRef) -> Result<(ProviderClient, ModelInfo), TurnError> {
        let config = self.config();
        let (model, provider) =
            config.resolve_model(&model.to_string()).map_err(|e| TurnError::config(e.to_string()))?;
        let info = provider.model(&model.model);
        let http = if crate::http::is_plain(&provider.base_url) { self.plain_http()? } else { self.http().await? };
        Ok((ProviderClient::new(http, provider.clone(), config.timeouts), info))
    }
}

/// The session store under a home, being opened on a thread of its own: `acp run` begins it
/// first thing, so the store is ready by the time its session is created.
pub struct StoreOpening {
    /// None if the thread could not be started: the runtime opens the store itself.
    opened: Option<tokio::sync::oneshot::Receiver<Result<Store, StoreError>>>,
}

impl StoreOpening {
    pub fn start(home: PathBuf) -> Self {
        let (tx, opened) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new().name("store-open".into()).spawn(move || {
            let _ = tx.send(Store::open(&home));
        });
        match spawned {
            Ok(_) => Self { opened: Some(opened) },
            Err(e) => {
                tracing::warn!(error = %e, "could not start opening the session store");
                Self { opened: None }
            }
        }
    }
}

impl std::fmt::Debug for StoreOpening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOpening").finish_non_exhaustive()
    }
}

/// Handle to the runtime; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Creates the runtime: events go to `sink`, files, approvals and terminals through `host`.
    pub fn new(config: ConfigCell, sink: Arc<dyn EventSink>, host: Arc<dyn AnyHost>) -> Self {
        let lane = config.get().subagents.max_concurrent.unwrap_or(subagents::LANE).max(1);
        let shared = Arc::new(Shared {
            config,
            http: OnceCell::new(),
            plain_http: std::sync::OnceLock::new(),
            sink,
            host,
            next_turn: AtomicU64::new(1),
            store: OnceCell::new(),
            store_opening: Mutex::new(None),
            fresh_id: Mutex::new(None),
            store_on_demand: Default::default(),
            origin: "acp".into(),
            swept: Default::default(),
            prewarmed: Default::default(),
            mcp: crate::mcp::Pool::default(),
            sessions: Mutex::default(),
            lane: tokio::sync::Semaphore::new(lane),
            waits: Mutex::default(),
            parents: Mutex::default(),
        });
        Self { shared }
    }

    /// Names the surface that creates sessions (kept in the session index); call before any
    /// session is opened.
    pub fn with_origin(mut self, origin: &str) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.origin = origin.to_owned();
        }
        self
    }

    /// Takes its session store from `opening` (begun before the runtime, for the same home).
    pub fn with_store(self, opening: StoreOpening) -> Self {
        *lock(&self.shared.store_opening) = Some(opening);
        self
    }

    /// For a client that creates the session `id` first thing, `id` made up for it (`acp run`):
    /// the session need not wait for the store, which opens when first needed — as its model
    /// starts answering, at the latest (see `persist`) — rather than ahead.
    pub fn with_fresh_session(self, id: String) -> Self {
        *lock(&self.shared.fresh_id) = Some(id);
        self.shared.store_on_demand.store(true, Ordering::Relaxed);
        self
    }

    pub fn config(&self) -> Arc<Config> {
        self.shared.config()
    }

    /// Replaces the configuration (used after `authenticate` re-reads it). Running turns keep theirs.
    pub fn set_config(&self, config: Config) {
        self.shared.config.set(config);
    }

    pub fn next_turn_id(&self) -> TurnId {
        self.shared.next_turn.fetch_add(1, Ordering::Relaxed)
    }

    /// The shared HTTP client (built on first use), for surfaces that call out themselves (a
    /// gateway's channels).
    pub async fn http_client(&self) -> Result<reqwest::Client, String> {
        self.shared.http().await.map_err(|e| e.message)
    }

    /// Readies in the background what the first turn needs, so it waits for none of it: the
    /// session store (unless it opens on demand: [`with_fresh_session`](Self::with_fresh_session)),
    /// the tools' argument schemas, and the default provider's HTTP client (with
    /// the certificates only for `https://`). Other TLS users (a fetch, an MCP server over HTTPS,
    /// another provider) load the certificates when they first need them.
    pub fn prewarm(&self) {
        self.open_store();
        let plain = !self.shared.default_needs_tls();
        if !self.shared.prewarmed.swap(true, Ordering::Relaxed) {
            // Off this thread: the tools' argument schemas, and the plain HTTP client.
            let shared = self.shared.clone();
            drop(tokio::task::spawn_blocking(move || {
                crate::tools::prewarm();
                subagents::prewarm();
                if plain {
                    let _ = shared.plain_http();
                }
            }));
        }
        if !plain && !self.shared.http.initialized() {
            let shared = self.shared.clone();
            tokio::spawn(async move {
                if let Err(e) = shared.http().await {
                    tracing::warn!(error = %e.message, "HTTP client setup failed");
                }
            });
        }
    }

    /// Opens the session store in the background (a `session/new` that comes meanwhile waits for
    /// the same opening), then sweeps it once. Not with the store opened on demand
    /// ([`with_fresh_session`](Self::with_fresh_session)): it is swept once it opens.
    pub fn open_store(&self) {
        if self.shared.store.initialized() || self.shared.store_on_demand.load(Ordering::Relaxed) {
            return;
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            if let Err(e) = shared.store().await {
                tracing::warn!(error = %e, "the session store cannot be opened; sessions will not be saved");
            }
        });
        self.sweep();
    }

    /// Once per process, in the background and [`SWEEP_AFTER`] the store opens (not beside the
    /// first sessions' writes; a process that ends sooner, like `acp run`, leaves it to the next):
    /// removes sessions opened more than a day ago and never prompted (editors open many they
    /// never use).
    fn sweep(&self) {
        if self.shared.swept.swap(true, Ordering::Relaxed) {
            return;
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            if let Ok(store) = shared.store().await {
                sweep_later(store);
            }
        });
    }
}

/// Sweeps `store` of unused sessions [`SWEEP_AFTER`] from now, in the background.
fn sweep_later(store: Arc<Store>) {
    tokio::spawn(async move {
        tokio::time::sleep(SWEEP_AFTER).await;
        let before = now_ms().saturating_sub(UNPROMPTED_KEPT_MS);
        match tokio::task::spawn_blocking(move || store.sweep_unprompted(before)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::debug!(removed = n, "removed sessions that were never prompted"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not sweep unused sessions"),
            Err(e) => tracing::warn!(error = %e, "sweeping unused sessions failed"),
        }
    });
}
