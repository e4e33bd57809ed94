//! Stored sessions, as the runtime sees them: creating one (stored before it answers anything),
//! reopening, listing, reading and deleting them.

use std::path::PathBuf;
use std::sync::Arc;

use super::event::SessionId;
use super::handle::SessionHandle;
use super::op::Mode;
use super::session;
use super::settings::SessionSettings;
use super::shared::{Outlet, Runtime};
use super::turn::SystemAhead;
use crate::config::ModelRef;
use crate::config::mcp::McpServer;
use crate::history::record::Record;
use crate::history::replay::Shown;
use crate::history::replay::StoredSettings;
use crate::settings::ReasoningEffort;
use crate::store::backend::SessionStore;
use crate::store::transcript::IndexUpdate;
use crate::store::{Cursor, SessionRow, now_ms};

impl Runtime {
    /// Starts a new session, stored (index row and transcript) before this returns, so it can be
    /// loaded or resumed from now on, here or in another process. Without a usable store it lives
    /// in memory only (logged; `/status` says so). `Exists`: a session with this id is stored —
    /// reopen it instead; `Busy`: another process is creating it or has it open.
    pub async fn create_session(&self, id: SessionId, settings: SessionSettings) -> Result<SessionHandle, CreateError> {
        if let Some(handle) = self.create_fresh(&id, &settings) {
            return Ok(handle);
        }
        self.create(id, settings, None, Outlet::of(&self.shared)).await
    }

    /// The session made up for the client ([`super::head_start::HeadStart::Fresh`]): no session can
    /// be stored under its id, so it starts at once, its transcript created here, and its index
    /// row is stored later, before the session answers anything (see `persist`). `None`: not that
    /// session.
    fn create_fresh(&self, id: &SessionId, settings: &SessionSettings) -> Option<SessionHandle> {
        if !self.shared.head.take_fresh(id) || !crate::store::made_up(id) {
            return None;
        }
        let (row, record) = self.new_row(id, settings, None);
        let outlet = Outlet::of(&self.shared);
        // Its first prompt follows at once: the system prompt is built meanwhile.
        let config = self.config();
        let system = SystemAhead::start(&config, settings, id);
        // Inline: a few small file operations, like every write of the transcript.
        let stored = match crate::store::begin_fresh_session(&config.home, &row, &record) {
            Ok(Some(t)) => session::Stored::Unindexed(Arc::new(t), row),
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "could not save the session; it lives in memory only");
                session::Stored::Memory
            }
        };
        Some(session::spawn(
            id.clone(),
            settings.clone(),
            self.shared.clone(),
            stored,
            outlet,
            Some(system),
            Some("startup"),
        ))
    }

    /// A new session's index row and the settings its transcript starts with.
    fn new_row(&self, id: &str, settings: &SessionSettings, parent: Option<String>) -> (SessionRow, Record) {
        let now = now_ms();
        let row = SessionRow {
            id: id.to_string(),
            cwd: settings.cwd.clone(),
            additional_dirs: settings.additional_dirs.clone(),
            title: None,
            created_at: now,
            updated_at: now,
            model: settings.model.to_string(),
            mode: settings.mode.id().to_owned(),
            reasoning: settings.reasoning.map(|r| r.as_str().to_owned()),
            input_tokens: 0,
            output_tokens: 0,
            context_tokens: 0,
            parent_id: parent,
            origin: self.shared.origin.clone(),
            prompted: false,
        };
        let record = Record::Settings { model: row.model.clone(), mode: settings.mode, reasoning: settings.reasoning };
        (row, record)
    }

    /// A new session; `parent`: the session that spawned it (stored with it).
    pub(crate) async fn create(
        &self,
        id: SessionId,
        settings: SessionSettings,
        parent: Option<String>,
        outlet: Outlet,
    ) -> Result<SessionHandle, CreateError> {
        use crate::store::CreateError as Stored;
        let store = match self.shared.store().await {
            Ok(store) => store,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "sessions cannot be saved; this one lives in memory only");
                let memory = session::Stored::Memory;
                return Ok(session::spawn(id, settings, self.shared.clone(), memory, outlet, None, Some("startup")));
            }
        };
        let (row, record) = self.new_row(&id, &settings, parent);
        let stored = match store.create_session(row, record).await {
            Ok(t) => session::Stored::New(Arc::new(t)),
            Err(Stored::Exists) => return Err(CreateError::Exists),
            Err(Stored::Busy(e)) => return Err(CreateError::Busy(e.to_string())),
            Err(Stored::Store(e)) => {
                tracing::warn!(session = %id, error = %e, "could not save the session; it lives in memory only");
                session::Stored::Memory
            }
        };
        Ok(session::spawn(id, settings, self.shared.clone(), stored, outlet, None, Some("startup")))
    }

    /// Reopens a stored session in `cwd`: its conversation, settings and everything it showed. A
    /// turn that never ended is closed first (see `store::replay`). Fails if another process has it
    /// open.
    /// `source`: how it is opened, for the `SessionStart` hooks (`load`, `resume`).
    pub async fn load_session(
        &self,
        id: &str,
        cwd: PathBuf,
        additional_dirs: Vec<PathBuf>,
        mcp_servers: Vec<McpServer>,
        source: &'static str,
    ) -> Result<LoadedSession, LoadError> {
        if !crate::store::valid_id(id) {
            return Err(LoadError::NotFound);
        }
        let store = self.shared.store().await.map_err(|e| LoadError::Store(e.to_string()))?;
        let opened = store
            .open_session(id.to_owned(), cwd.clone(), additional_dirs.clone())
            .await
            .map_err(|e| LoadError::Store(e.to_string()))?;
        let Some(crate::store::Opened { row, replay, writer }) = opened else { return Err(LoadError::NotFound) };
        // The index row, in order with the transcript where the store keeps them so.
        let index = |what: &str, update: IndexUpdate| {
            if !writer.index(&update)
                && let Err(e) = store.update(id, &update)
            {
                tracing::warn!(session = %id, error = %e, "could not {what}");
            }
        };
        let answered =
            replay.conversation.messages().iter().any(|m| matches!(m, crate::providers::Message::Assistant(_)));
        if answered && !row.prompted {
            index("update the session index", IndexUpdate::Prompted);
        }
        let config = self.config();
        let stored = replay.settings.clone().unwrap_or(StoredSettings {
            model: row.model.clone(),
            mode: Mode::parse(&row.mode).unwrap_or_default(),
            reasoning: row.reasoning.as_deref().and_then(ReasoningEffort::parse),
        });
        let model = match config.resolve_model(&stored.model) {
            Ok((model, _)) => model,
            Err(e) => {
                let fallback = config.default_model_ref().ok().or_else(|| ModelRef::parse(&stored.model));
                tracing::warn!(session = %id, model = %stored.model, error = %e, "the session's model is not available; using the default");
                fallback.ok_or_else(|| LoadError::Model(e.to_string()))?
            }
        };
        let settings = SessionSettings {
            cwd,
            additional_dirs,
            model,
            mode: stored.mode,
            reasoning: stored.reasoning,
            mcp_servers,
        };
        let context_window =
            config.provider(&settings.model.provider).map(|p| p.model(&settings.model.model).context_window);
        // A title is saved with the end of the turn that gave it: one cut off before its end is
        // worked out again from the first prompt, and saved now.
        let title = row.title.clone().or_else(|| {
            let title = replay.shown.iter().find_map(|s| match s {
                Shown::User { blocks, .. } => crate::history::input::title_of(blocks).filter(|t| !t.starts_with('/')),
                _ => None,
            })?;
            index("save the session title", IndexUpdate::Title(title.clone()));
            Some(title)
        });
        let restored = session::Restored {
            conversation: replay.conversation,
            transcript: Arc::new(writer),
            usage: replay.usage,
            context_tokens: replay.context_tokens,
            turns: replay.last_turn,
            title: title.clone(),
            // A session whose first answer was cut off by a crash is listed once it is reopened.
            prompted: row.prompted || answered,
        };
        let handle = session::spawn(
            Arc::from(id),
            settings.clone(),
            self.shared.clone(),
            session::Stored::Restored(restored),
            Outlet::of(&self.shared),
            None,
            Some(source),
        );
        Ok(LoadedSession {
            handle,
            settings,
            shown: replay.shown,
            title,
            updated_at: row.updated_at,
            context_tokens: replay.context_tokens,
            context_window,
        })
    }

    /// Stored sessions, most recently updated first; `cursor` continues a listing.
    pub async fn list_sessions(
        &self,
        cwd: Option<PathBuf>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<SessionPage, ListError> {
        let after = match cursor {
            Some(token) => Some(Cursor::decode(token).ok_or(ListError::BadCursor)?),
            None => None,
        };
        let store = self.shared.store().await.map_err(|e| ListError::Store(e.to_string()))?;
        let (sessions, next) = store.list(cwd, after, limit).await.map_err(|e| ListError::Store(e.to_string()))?;
        Ok(SessionPage {
            sessions: sessions.into_iter().map(SessionSummary::from).collect(),
            next_cursor: next.map(|c| c.encode()),
        })
    }

    /// Prompted sessions whose id or title holds `search` (any case), most recently updated
    /// first: `limit` after the first `offset`, and how many match in all.
    pub async fn find_sessions(&self, search: &str, offset: u64, limit: u64) -> Result<Found, String> {
        let found = self.store().await?.find(search.to_owned(), offset, limit).await.map_err(|e| e.to_string())?;
        Ok(Found { sessions: found.rows.into_iter().map(SessionSummary::from).collect(), total: found.total })
    }

    /// Stored session `id`, if it was ever prompted.
    pub async fn session_summary(&self, id: &str) -> Result<Option<SessionSummary>, String> {
        let found = self.store().await?.prompted(id.to_owned()).await.map_err(|e| e.to_string())?;
        Ok(found.map(SessionSummary::from))
    }

    /// The most recently updated prompted session titled `title`.
    pub async fn session_titled(&self, title: &str) -> Result<Option<SessionSummary>, String> {
        let found = self.store().await?.titled(title.to_owned()).await.map_err(|e| e.to_string())?;
        Ok(found.map(SessionSummary::from))
    }

    /// The session store (the gateway keeps its cron jobs and idempotency keys there too).
    pub async fn store(&self) -> Result<Arc<dyn SessionStore>, String> {
        self.shared.store().await.map_err(|e| e.to_string())
    }

    /// What a stored session showed, in order, read from its transcript (also while it is open:
    /// a transcript is only appended to). `None`: no such session.
    pub async fn history(&self, id: &str) -> Result<Option<Vec<Shown>>, String> {
        let found = self.store().await?.read_session(id.to_owned()).await.map_err(|e| e.to_string())?;
        Ok(found.map(|(_, replay)| replay.shown))
    }

    /// Moves closed session `id` aside to id `to` (its transcript and row): `id` starts afresh.
    pub async fn archive_session(&self, id: &str, to: &str) -> Result<(), String> {
        self.store().await?.archive(id.to_owned(), to.to_owned()).await.map_err(|e| e.to_string())
    }

    /// Claims idempotency key `key` for a request on `session` ([`SessionStore::claim_key`]).
    pub async fn claim_key(&self, key: &str, session: &str) -> Result<Option<crate::store::keys::KeyRecord>, String> {
        self.store().await?.claim_key(key.to_owned(), session.to_owned()).await.map_err(|e| e.to_string())
    }

    /// What was recorded of idempotency key `key`.
    pub async fn key(&self, key: &str) -> Result<Option<crate::store::keys::KeyRecord>, String> {
        self.store().await?.key(key.to_owned()).await.map_err(|e| e.to_string())
    }

    /// Forgets idempotency key `key` (what it asked for failed).
    pub async fn forget_key(&self, key: &str) -> Result<(), String> {
        self.store().await?.forget_key(key.to_owned()).await.map_err(|e| e.to_string())
    }

    /// Records how what idempotency key `key` asked for ended.
    pub async fn end_key(&self, key: &str, outcome: &impl serde::Serialize) -> Result<(), String> {
        let outcome = serde_json::to_string(outcome).map_err(|e| e.to_string())?;
        self.store().await?.end_key(key.to_owned(), outcome).await.map_err(|e| e.to_string())
    }

    /// Deletes a stored session (index row and transcript). Unknown ids are fine; a session open
    /// elsewhere is not deleted.
    pub async fn delete_session(&self, id: &str) -> Result<(), String> {
        if !crate::store::valid_id(id) {
            return Ok(());
        }
        self.store().await?.delete_if_closed(id.to_owned()).await.map_err(|e| e.to_string())
    }
}

/// A session reopened from the store.
#[derive(Debug)]
pub struct LoadedSession {
    pub handle: SessionHandle,
    pub settings: SessionSettings,
    /// What the session showed, in order, to replay.
    pub shown: Vec<Shown>,
    pub title: Option<String>,
    pub updated_at: i64,
    pub context_tokens: Option<u64>,
    pub context_window: Option<u64>,
}

/// Why a new session could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    /// A session with this id is stored already: reopen it instead.
    Exists,
    /// Another process is creating, or has open, a session with this id.
    Busy(String),
    Failed(String),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exists => f.write_str("a session with this id exists"),
            Self::Busy(e) | Self::Failed(e) => f.write_str(e),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    NotFound,
    /// The store failed, or the session is open in another process.
    Store(String),
    /// Neither the session's model nor a default is available.
    Model(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound => f.write_str("no such session"),
            Self::Store(e) | Self::Model(e) => f.write_str(e),
        }
    }
}

/// Sessions found, and how many match in all.
pub struct Found {
    pub sessions: Vec<SessionSummary>,
    pub total: u64,
}

/// A stored session, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: PathBuf,
    pub additional_dirs: Vec<PathBuf>,
    pub title: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
    pub model: String,
    pub mode: String,
    /// Its reasoning effort, when it asks for one.
    pub reasoning: Option<String>,
    /// Which surface created it (`acp`, `run`, …).
    pub origin: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub context_tokens: u64,
    /// The session that spawned it (a subagent's parent).
    pub parent_id: Option<String>,
}

impl From<SessionRow> for SessionSummary {
    fn from(row: SessionRow) -> Self {
        Self {
            id: row.id,
            cwd: row.cwd,
            additional_dirs: row.additional_dirs,
            title: row.title,
            created_at: row.created_at,
            updated_at: row.updated_at,
            model: row.model,
            mode: row.mode,
            reasoning: row.reasoning,
            origin: row.origin,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            context_tokens: row.context_tokens,
            parent_id: row.parent_id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    BadCursor,
    /// The store failed.
    Store(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadCursor => f.write_str("`cursor` is not a cursor this agent gave out"),
            Self::Store(e) => f.write_str(e),
        }
    }
}
