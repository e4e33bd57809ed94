//! Building the runtime and readying, ahead of the first turn, what every turn needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::event::{EventSink, TurnId};
use super::head_start::{Head, HeadStart};
use super::shared::{Runtime, Shared, sweep_later};
use super::subagents;
use crate::config::{Config, ConfigCell};
use crate::tools::host::AnyHost;

impl Runtime {
    /// Creates the runtime: events go to `sink`, files, approvals and terminals through `host`.
    pub fn new(config: ConfigCell, sink: Arc<dyn EventSink>, host: Arc<dyn AnyHost>) -> Self {
        let lane = config.get().subagents.max_concurrent.unwrap_or(subagents::LANE).max(1);
        let models = crate::models::ModelState::new(&config.get().home);
        let shared = Arc::new(Shared {
            config,
            http: OnceCell::new(),
            plain_http: std::sync::OnceLock::new(),
            sink,
            host,
            next_turn: AtomicU64::new(1),
            store: OnceCell::new(),
            head: Head::default(),
            origin: "acp".into(),
            swept: Default::default(),
            prewarmed: Default::default(),
            mcp: crate::mcp::Pool::default(),
            lsp: Arc::default(),
            sessions: Mutex::default(),
            lane: tokio::sync::Semaphore::new(lane),
            waits: Mutex::default(),
            parents: Mutex::default(),
            models,
            discovery: OnceCell::new(),
            searching: Default::default(),
            offered_before: Default::default(),
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

    /// Keeps sessions in `store` rather than SQLite under `$ACP_HOME` (`acp gateway --store
    /// postgres://…`); call before any session is opened.
    pub fn with_store(self, store: Arc<dyn crate::store::backend::SessionStore>) -> Self {
        let _ = self.shared.store.set(Ok(store));
        self
    }

    /// Begins what `start` says (a client that opens one session straight away); call before
    /// any session is opened.
    pub fn with_head_start(mut self, start: HeadStart) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.head = Head::new(start);
        }
        self
    }

    pub fn config(&self) -> Arc<Config> {
        self.shared.config()
    }

    /// The configuration session `key` runs with: its agent's (`[[agents]]`), else the file's.
    pub fn config_for(&self, key: &str) -> Arc<Config> {
        self.shared.config_for(key)
    }

    /// Replaces the configuration (used after `authenticate` re-reads it). Running turns keep theirs.
    pub fn set_config(&self, config: Config) {
        let config = match self.shared.discovery.get() {
            Some(found) if config.wants_discovery() => config.with_found(found),
            _ => config,
        };
        self.shared.config.set(config);
    }

    /// With no usable provider (and `[models] discover` not off): offers the model servers this
    /// machine had last time, and looks for them again, in the background — never on the way of
    /// `initialize` or `session/new`, which answer from what is known. A turn that finds no model
    /// waits for the search to end (at most a probe's timeout).
    pub fn start_discovery(&self) {
        let config = self.shared.config();
        if !config.wants_discovery() {
            return;
        }
        // Looked for just now by the command that started this (`acp run`): that is the search.
        let given: Vec<crate::config::ProviderConfig> =
            config.providers.iter().filter(|p| p.discovered).cloned().collect();
        if !given.is_empty() {
            let _ = self.shared.discovery.set(given);
            return;
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            shared.offer_found_before();
            shared.discover().await;
        });
    }

    /// With no provider to use: offers the model servers this machine had last time (once).
    pub fn offer_found_before(&self) {
        self.shared.offer_found_before();
    }

    /// No model could be offered (a `session/new` without one): looks for model servers on this
    /// machine again, in the background — one started since the last search is offered on the next
    /// try. One search at a time; never waited for.
    pub fn search_again(&self) {
        if !self.shared.config().wants_discovery() || self.shared.searching.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            shared.discover().await;
            shared.search().await;
            shared.searching.store(false, Ordering::Release);
        });
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
    /// session store (unless it opens on demand: [`HeadStart::Fresh`]),
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
    /// ([`HeadStart::Fresh`]): it is swept once it opens.
    pub fn open_store(&self) {
        if self.shared.head.store_on_demand() {
            return;
        }
        if !self.shared.store.initialized() {
            let shared = self.shared.clone();
            tokio::spawn(async move {
                if let Err(e) = shared.store().await {
                    tracing::warn!(error = %e, "the session store cannot be opened; sessions will not be saved");
                }
            });
        }
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
