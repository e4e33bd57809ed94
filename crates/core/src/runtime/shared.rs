//! What every session of the process shares ([`Shared`]: the configuration, the store, the HTTP
//! clients, the open sessions, the MCP pool), the [`Runtime`] handle surfaces hold to it, and
//! where a session's events go ([`Outlet`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;

use super::event::{EventSink, TurnError};
use super::handle::SessionHandle;
use super::head_start::Head;
use crate::config::{Config, ConfigCell};
use crate::http::build_http;
use crate::store::backend::{SessionStore, Sqlite};
use crate::store::{Store, StoreError, now_ms};
use crate::sync::lock;
use crate::tools::host::AnyHost;

/// State shared by every session of the process.
pub(crate) struct Shared {
    pub(super) config: ConfigCell,
    pub(super) http: OnceCell<reqwest::Client>,
    /// For `http://` providers: no certificates to load ([`crate::http::build_plain_http`]).
    pub(super) plain_http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) host: Arc<dyn AnyHost>,
    pub(super) next_turn: AtomicU64,
    pub(super) store: OnceCell<Result<Arc<dyn SessionStore>, StoreError>>,
    /// What a client that opens one session straight away had begun ([`HeadStart`]).
    pub(super) head: Head,
    /// Which surface creates sessions (`acp`, `run`, `gateway`, …), kept in the index.
    pub(super) origin: String,
    /// Whether this process swept never-prompted sessions already.
    pub(super) swept: std::sync::atomic::AtomicBool,
    /// Whether [`Runtime::prewarm`] readied what every first turn needs already.
    pub(super) prewarmed: std::sync::atomic::AtomicBool,
    /// MCP servers, shared by the sessions that use the same ones.
    pub(super) mcp: crate::mcp::Pool,
    /// Language servers, shared by the sessions that use the same server for the same project.
    pub(super) lsp: Arc<crate::lsp::Pool>,
    /// The sessions open in this process, by id (subagent tools reach them through it).
    pub(super) sessions: Mutex<std::collections::HashMap<String, SessionHandle>>,
    /// Subagents running at once, at most `[subagents] max_concurrent`.
    pub(super) lane: tokio::sync::Semaphore,
    /// Who waits on whom in `sessions_send`, one entry per wait (a reply may wait on several
    /// sessions at once); a wait that would come back to its sender is refused.
    pub(super) waits: Mutex<Vec<(String, String)>>,
    /// Subagents spawned in this process: child → (parent, what stops the child alone).
    pub(super) parents: Mutex<std::collections::HashMap<String, (String, tokio_util::sync::CancellationToken)>>,
    /// What the models and credentials went through (cool-downs), read when first needed.
    pub(crate) models: crate::models::ModelState,
    /// The search for model servers on this machine, once it began ([`Runtime::discover`]).
    pub(super) discovery: OnceCell<Vec<crate::config::ProviderConfig>>,
    /// Whether a search asked for again ([`Runtime::search_again`]) is under way.
    pub(super) searching: std::sync::atomic::AtomicBool,
    /// Whether the servers found here last time were offered already.
    pub(super) offered_before: std::sync::atomic::AtomicBool,
}

/// How long a session that was opened but never prompted is kept.
const UNPROMPTED_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// How long after the store opens the once-per-process sweep of unused sessions runs.
const SWEEP_AFTER: Duration = Duration::from_secs(5);

impl Shared {
    /// The session store, opened on first use (off the async thread): SQLite under `$ACP_HOME`
    /// unless the surface gave another ([`Runtime::with_store`]).
    pub(crate) async fn store(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.store
            .get_or_init(|| async {
                let sqlite = |store: Store| -> Arc<dyn SessionStore> { Arc::new(Sqlite(Arc::new(store))) };
                if let Some(opened) = self.head.take_opening() {
                    let opened =
                        opened.await.unwrap_or_else(|_| Err(StoreError("opening the session store failed".into())));
                    return opened.map(sqlite);
                }
                let home = self.config().home.clone();
                let opened = match tokio::task::spawn_blocking(move || Store::open(&home)).await {
                    Ok(opened) => opened.map(sqlite),
                    Err(e) => Err(StoreError(format!("opening the session store failed: {e}"))),
                };
                // Opened on demand, the store was not swept ahead (see `Runtime::open_store`).
                if let Ok(store) = &opened
                    && self.head.store_on_demand()
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
    pub(crate) fn store_if_open(&self) -> Option<Arc<dyn SessionStore>> {
        self.store.get().and_then(|r| r.as_ref().ok()).cloned()
    }

    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.get()
    }

    /// The configuration session `id` runs with: its agent's (`[[agents]]`), else the file's.
    pub(crate) fn config_for(&self, id: &str) -> Arc<Config> {
        self.config.for_session(id)
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
    pub(super) fn plain_http(&self) -> Result<reqwest::Client, TurnError> {
        self.plain_http
            .get_or_init(|| crate::http::build_plain_http(&self.config().timeouts))
            .clone()
            .map_err(|e| TurnError::internal(format!("could not set up the HTTP client: {e}")))
    }

    /// Whether the default model's provider is reached over TLS (and so needs the certificates).
    pub(super) fn default_needs_tls(&self) -> bool {
        let config = self.config();
        let provider = config.default_model_ref().ok().and_then(|m| config.provider(&m.provider).cloned());
        provider.is_none_or(|p| !crate::http::is_plain(&p.base_url))
    }

    /// Waits for the search for model servers on this machine when the configuration wants one
    /// (it is bounded: [`crate::models::discover::PROBE_TIMEOUT`]).
    pub(crate) async fn discovered(&self) {
        if !self.discovery.initialized() && self.config().wants_discovery() {
            self.discover().await;
        }
    }

    /// With no provider to use: offers the model servers this machine had last time (once per
    /// process; a small file read, no network).
    pub(super) fn offer_found_before(&self) {
        if !self.config().wants_discovery() || self.offered_before.swap(true, Ordering::AcqRel) {
            return;
        }
        let cached: Vec<crate::config::ProviderConfig> =
            self.models.found().iter().map(crate::models::Found::provider).collect();
        if !cached.is_empty() {
            self.config
                .update(|c| if c.providers.iter().any(|p| p.discovered) { c.clone() } else { c.with_found(&cached) });
        }
    }

    /// Looks for model servers on this machine (the first search of the process, which turns
    /// wait for) and offers what it finds.
    pub(super) async fn discover(&self) -> &[crate::config::ProviderConfig] {
        self.discovery.get_or_init(|| self.search()).await
    }

    /// One search for model servers on this machine: what it finds is offered (with what was
    /// found before, for this run) and kept for the next start.
    pub(super) async fn search(&self) -> Vec<crate::config::ProviderConfig> {
        let config = self.config();
        let places = crate::models::discover::places(&config.models, config.ollama_host.as_deref());
        let http = if places.iter().any(|(_, base, _)| !crate::http::is_plain(base)) {
            self.http().await.ok()
        } else {
            self.plain_http().ok()
        };
        let Some(http) = http else { return Vec::new() };
        let found = crate::models::discover::discover(&http, &places).await;
        let names: Vec<String> = found.iter().map(|p| format!("{} ({} models)", p.id, p.models.len())).collect();
        tracing::info!(found = ?names, "looked for model servers on this machine");
        self.models.set_found(found.iter().map(crate::models::Found::of).collect()).written().await;
        // Servers offered before (last seen) and not found now stay offered for this run:
        // a session on one hears that it cannot be reached, not that it never existed.
        let mut offered = found.clone();
        for earlier in config.providers.iter().filter(|p| p.discovered) {
            if !offered.iter().any(|p| p.id == earlier.id) {
                offered.push(earlier.clone());
            }
        }
        self.config.update(|c| if c.wants_discovery() { c.with_found(&offered) } else { c.clone() });
        offered
    }
}

/// Handle to the runtime; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

/// Sweeps `store` of unused sessions [`SWEEP_AFTER`] from now, in the background.
pub(super) fn sweep_later(store: Arc<dyn SessionStore>) {
    tokio::spawn(async move {
        tokio::time::sleep(SWEEP_AFTER).await;
        let before = now_ms().saturating_sub(UNPROMPTED_KEPT_MS);
        match store.sweep_unprompted(before).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "removed sessions that were never prompted"),
            Err(e) => tracing::warn!(error = %e, "could not sweep unused sessions"),
        }
    });
}

/// Where a session's events go and what its tools reach the outside through: the surface's, or
/// for a subagent its parent's, relabelled (`subagents.rs`).
#[derive(Clone)]
pub(crate) struct Outlet {
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) host: Arc<dyn AnyHost>,
    /// A subagent: it gets no session tools (it cannot spawn in turn).
    pub(crate) child: bool,
}

impl Outlet {
    pub(crate) fn of(shared: &Shared) -> Self {
        Self { sink: shared.sink.clone(), host: shared.host().clone(), child: false }
    }
}
