//! The in-process agent runtime: one actor per session, ops in, events out. It knows nothing of
//! JSON-RPC, ACP or WebSockets; every surface drives it through [`Runtime`] and [`SessionHandle`]
//! and translates its [`Event`]s.

pub mod context;
pub mod event;
pub mod op;
pub mod session;
pub mod turn;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::{OnceCell, mpsc};

pub use event::{Event, EventKind, SessionId, StopReason, TurnError, TurnOutcome};
pub use op::{Mode, Op, TurnId};
pub use session::SessionHandle;

use crate::config::{Config, ModelInfo, ModelRef};
use crate::providers::client::build_http;
use crate::providers::{ProviderClient, ReasoningEffort};

/// Settings a session starts with; ops change them later.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSettings {
    pub cwd: PathBuf,
    pub model: ModelRef,
    pub mode: Mode,
    /// `None`: the provider's default.
    pub reasoning: Option<ReasoningEffort>,
}

/// State shared by every session of the process.
pub(crate) struct Shared {
    config: RwLock<Arc<Config>>,
    http: OnceCell<reqwest::Client>,
    events: mpsc::UnboundedSender<Event>,
    next_turn: AtomicU64,
}

impl Shared {
    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The shared HTTP client, built on first use (off the async workers: it reads the system's
    /// root certificates).
    async fn http(&self) -> Result<reqwest::Client, TurnError> {
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
    /// Creates the runtime and the receiving end of every session's events.
    pub fn new(config: Config) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            config: RwLock::new(Arc::new(config)),
            http: OnceCell::new(),
            events,
            next_turn: AtomicU64::new(1),
        });
        (Self { shared }, rx)
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
