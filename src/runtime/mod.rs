//! The in-process agent runtime: one actor per session, ops in, events out. It knows nothing of
//! JSON-RPC, ACP or WebSockets; every surface drives it through [`Runtime`] and [`SessionHandle`],
//! receives its [`Event`]s through an [`EventSink`], and lends it a [`Host`] (files as the user
//! sees them, approvals, terminals).

pub mod context;
pub mod event;
pub mod op;
pub mod session;
mod tool_calls;
pub mod turn;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use tokio::sync::OnceCell;

pub use event::{ChannelSink, Event, EventKind, EventSink, SessionId, StopReason, TurnError, TurnOutcome};
pub use op::{Mode, Op, TurnId};
pub use session::SessionHandle;

use crate::config::{Config, ModelInfo, ModelRef};
use crate::providers::client::build_http;
use crate::providers::{ProviderClient, ReasoningEffort};
use crate::tools::approval::Rule;
use crate::tools::host::Host;

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
}

impl SessionSettings {
    /// The workspace: the cwd and the additional directories.
    pub fn roots(&self) -> Vec<PathBuf> {
        std::iter::once(self.cwd.clone()).chain(self.additional_dirs.iter().cloned()).collect()
    }
}

/// What a running turn must see change at once: the mode, and "always" answers.
#[derive(Debug, Default)]
pub(crate) struct LiveState {
    mode: Mutex<Mode>,
    rules: Mutex<Vec<Rule>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveState {
    pub(crate) fn new(mode: Mode, rules: Vec<Rule>) -> Self {
        Self { mode: Mutex::new(mode), rules: Mutex::new(rules) }
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
    config: RwLock<Arc<Config>>,
    http: OnceCell<reqwest::Client>,
    sink: Arc<dyn EventSink>,
    host: Arc<dyn Host>,
    next_turn: AtomicU64,
}

impl Shared {
    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.read().unwrap_or_else(PoisonError::into_inner).clone()
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

    /// A client for the provider of `model`, with the model's limits.
    pub(crate) async fn client_for(&self, model: &ModelRef) -> Result<(ProviderClient, ModelInfo), TurnError> {
        let config = self.config();
        let (model, provider) =
            config.resolve_model(&model.to_string()).map_err(|e| TurnError::config(e.to_string()))?;
        let info = provider.model(&model.model);
        let http = self.http().await?;
        Ok((ProviderClient::new(http, provider.clone(), config.timeouts), info))
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
    pub fn new(config: Config, sink: Arc<dyn EventSink>, host: Arc<dyn Host>) -> Self {
        let shared = Arc::new(Shared {
            config: RwLock::new(Arc::new(config)),
            http: OnceCell::new(),
            sink,
            host,
            next_turn: AtomicU64::new(1),
        });
        Self { shared }
    }

    pub fn config(&self) -> Arc<Config> {
        self.shared.config()
    }

    /// Replaces the configuration (used after `authenticate` re-reads it). Running turns keep theirs.
    pub fn set_config(&self, config: Config) {
        *self.shared.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    pub fn next_turn_id(&self) -> TurnId {
        self.shared.next_turn.fetch_add(1, Ordering::Relaxed)
    }

    pub fn open_session(&self, id: SessionId, settings: SessionSettings) -> SessionHandle {
        session::spawn(id, settings, self.shared.clone())
    }

    /// Builds the HTTP client in the background so the first turn does not wait for it.
    pub fn prewarm(&self) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            if let Err(e) = shared.http().await {
                tracing::warn!(error = %e.message, "HTTP client setup failed");
            }
        });
    }
}
