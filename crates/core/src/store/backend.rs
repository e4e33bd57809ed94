//! The store as the runtime, the gateway and `acp sessions` use it ([`SessionStore`]), with two
//! implementations: SQLite and JSONL files under `$ACP_HOME` (the default, [`Sqlite`]), and
//! PostgreSQL for gateways on several hosts ([`super::postgres::Postgres`]).

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::cron::Unfinished;
use super::find::Found;
use super::keys::KeyRecord;
use super::transcript::{IndexUpdate, Transcript};
use super::{CreateError, Cursor, Opened, SessionRow, Store, StoreError};
use crate::history::record::Record;
use crate::history::replay::Replay;

pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// What every store keeps: sessions (an index row and a transcript each), the gateway's
/// idempotency keys and its cron jobs. Arguments are owned so the futures are `'static` in all
/// but `self`.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Where it is, for people (`/home/me/.acp`, `postgres://db.example/acp`).
    fn describe(&self) -> String;

    /// Where session `id`'s transcript is kept, for people.
    fn location(&self, id: &str) -> String;

    /// Stores a new session, its transcript begun with its header and `settings`; this process
    /// writes it from now on. `Exists`: stored already; `Busy`: being created, or open, elsewhere.
    fn create_session(&self, row: SessionRow, settings: Record) -> BoxFuture<'_, Result<Transcript, CreateError>>;

    /// Stores the index row of a session begun without it (`begin_fresh_session`).
    fn index_new(&self, row: SessionRow) -> BoxFuture<'_, Result<(), CreateError>>;

    /// Opens stored session `id` for writing, in `cwd` (recorded if it moved): a turn that never
    /// ended is closed first. `None`: no such session. An error: the store failed, or another
    /// process holds the session.
    fn open_session(&self, id: String, cwd: PathBuf, dirs: Vec<PathBuf>) -> StoreFuture<'_, Option<Opened>>;

    /// Applies `update` to session `id`'s row (for a session whose transcript does not keep
    /// them in order itself, [`Transcript::index`]).
    fn update(&self, id: &str, update: &IndexUpdate) -> Result<(), StoreError>;

    fn get(&self, id: String) -> StoreFuture<'_, Option<SessionRow>>;

    /// Prompted sessions, most recently updated first, `limit` at a time; the cursor says where
    /// the next page starts.
    fn list(
        &self,
        cwd: Option<PathBuf>,
        after: Option<Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<SessionRow>, Option<Cursor>)>;

    /// Prompted sessions whose id or title holds `search` (any case).
    fn find(&self, search: String, offset: u64, limit: u64) -> StoreFuture<'_, Found>;
    /// Session `id`, if it was ever prompted.
    fn prompted(&self, id: String) -> StoreFuture<'_, Option<SessionRow>>;
    /// The most recently updated prompted session titled `title`.
    fn titled(&self, title: String) -> StoreFuture<'_, Option<SessionRow>>;

    /// A session's row and its replayed transcript, read without taking it (an open session is
    /// shown as far as it is stored).
    fn read_session(&self, id: String) -> StoreFuture<'_, Option<(SessionRow, Replay)>>;

    /// Removes a session unless a process has it open; removing one that is not there is fine.
    fn delete_if_closed(&self, id: String) -> StoreFuture<'_, ()>;
    /// Moves closed session `id` aside to id `to`: `id` starts afresh.
    fn archive(&self, id: String, to: String) -> StoreFuture<'_, ()>;
    /// Removes sessions never prompted and untouched since `before` (Unix ms); how many.
    fn sweep_unprompted(&self, before: i64) -> StoreFuture<'_, usize>;

    /// Claims idempotency key `key` for a request on `session`: `None` if it is new (claimed
    /// now), else what was recorded of it.
    fn claim_key(&self, key: String, session: String) -> StoreFuture<'_, Option<KeyRecord>>;
    fn key(&self, key: String) -> StoreFuture<'_, Option<KeyRecord>>;
    fn forget_key(&self, key: String) -> StoreFuture<'_, ()>;
    fn end_key(&self, key: String, outcome: String) -> StoreFuture<'_, ()>;

    fn cron_jobs(&self) -> StoreFuture<'_, Vec<String>>;
    fn cron_job(&self, id: String) -> StoreFuture<'_, Option<String>>;
    fn cron_put(&self, id: String, created_at: i64, job: String) -> StoreFuture<'_, ()>;
    fn cron_replace(&self, id: String, job: String) -> StoreFuture<'_, bool>;
    fn cron_remove(&self, id: String) -> StoreFuture<'_, bool>;
    fn cron_claim(&self, id: String, slot: Option<i64>, run_id: String, at: i64, job: String) -> StoreFuture<'_, bool>;
    fn cron_finish(&self, run: CronEnd) -> StoreFuture<'_, ()>;
    fn cron_log(&self, id: String, run_id: String, at: i64, entry: String, job: String) -> StoreFuture<'_, ()>;
    fn cron_unfinished(&self) -> StoreFuture<'_, Vec<Unfinished>>;
    fn cron_runs(&self, query: CronRuns) -> StoreFuture<'_, (Vec<String>, u64)>;
    fn cron_sessions_before(&self, prefix: String, before: i64, limit: u64) -> StoreFuture<'_, Vec<String>>;
}

/// How a cron run ended ([`SessionStore::cron_finish`]); `job`: the job as it is now, `None` if
/// it is gone (a one-shot job deleted after its run).
#[derive(Debug, Clone)]
pub struct CronEnd {
    pub id: String,
    pub run_id: String,
    pub ended_at: i64,
    pub status: String,
    pub entry: String,
    pub job: Option<String>,
}

/// Which cron runs to list ([`SessionStore::cron_runs`]).
#[derive(Debug, Clone, Default)]
pub struct CronRuns {
    pub id: Option<String>,
    pub status: Option<String>,
    pub oldest_first: bool,
    pub offset: u64,
    pub limit: u64,
}

/// The default store: SQLite and JSONL transcripts under `$ACP_HOME` ([`Store`]), each call on
/// the blocking pool.
#[derive(Debug, Clone)]
pub struct Sqlite(pub Arc<Store>);

impl Sqlite {
    fn on<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let store = self.0.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&store))
                .await
                .map_err(|e| StoreError(format!("the session store failed: {e}")))?
        })
    }
}

impl SessionStore for Sqlite {
    fn describe(&self) -> String {
        self.0.home().display().to_string()
    }

    fn location(&self, id: &str) -> String {
        self.0.transcript_path(id).display().to_string()
    }

    fn create_session(&self, row: SessionRow, settings: Record) -> BoxFuture<'_, Result<Transcript, CreateError>> {
        let store = self.0.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.create_session(&row, &settings))
                .await
                .map_err(|e| CreateError::Store(StoreError(format!("storing the session failed: {e}"))))?
        })
    }

    fn index_new(&self, row: SessionRow) -> BoxFuture<'_, Result<(), CreateError>> {
        let store = self.0.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.index_new(&row))
                .await
                .map_err(|e| CreateError::Store(StoreError(format!("storing the session failed: {e}"))))?
        })
    }

    fn open_session(&self, id: String, cwd: PathBuf, dirs: Vec<PathBuf>) -> StoreFuture<'_, Option<Opened>> {
        self.on(move |store| store.open_session(&id, &cwd, &dirs))
    }

    fn update(&self, id: &str, update: &IndexUpdate) -> Result<(), StoreError> {
        // Inline: one small write (WAL, no fsync), in order with the transcript's.
        self.0.apply(id, update)
    }

    fn get(&self, id: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.on(move |s| s.get(&id))
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
        after: Option<Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<SessionRow>, Option<Cursor>)> {
        self.on(move |s| s.list(cwd.as_deref(), after.as_ref(), limit))
    }

    fn find(&self, search: String, offset: u64, limit: u64) -> StoreFuture<'_, Found> {
        self.on(move |s| s.find(&search, offset, limit))
    }

    fn prompted(&self, id: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.on(move |s| s.prompted(&id))
    }

    fn titled(&self, title: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.on(move |s| s.titled(&title))
    }

    fn read_session(&self, id: String) -> StoreFuture<'_, Option<(SessionRow, Replay)>> {
        self.on(move |s| s.read_session(&id))
    }

    fn delete_if_closed(&self, id: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.delete_if_closed(&id))
    }

    fn archive(&self, id: String, to: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.archive(&id, &to))
    }

    fn sweep_unprompted(&self, before: i64) -> StoreFuture<'_, usize> {
        self.on(move |s| s.sweep_unprompted(before))
    }

    fn claim_key(&self, key: String, session: String) -> StoreFuture<'_, Option<KeyRecord>> {
        self.on(move |s| s.claim_key(&key, &session))
    }

    fn key(&self, key: String) -> StoreFuture<'_, Option<KeyRecord>> {
        self.on(move |s| s.key(&key))
    }

    fn forget_key(&self, key: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.forget_key(&key))
    }

    fn end_key(&self, key: String, outcome: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.end_key(&key, &outcome))
    }

    fn cron_jobs(&self) -> StoreFuture<'_, Vec<String>> {
        self.on(|s| s.cron_jobs())
    }

    fn cron_job(&self, id: String) -> StoreFuture<'_, Option<String>> {
        self.on(move |s| s.cron_job(&id))
    }

    fn cron_put(&self, id: String, created_at: i64, job: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.cron_put(&id, created_at, &job))
    }

    fn cron_replace(&self, id: String, job: String) -> StoreFuture<'_, bool> {
        self.on(move |s| s.cron_replace(&id, &job))
    }

    fn cron_remove(&self, id: String) -> StoreFuture<'_, bool> {
        self.on(move |s| s.cron_remove(&id))
    }

    fn cron_claim(&self, id: String, slot: Option<i64>, run_id: String, at: i64, job: String) -> StoreFuture<'_, bool> {
        self.on(move |s| s.cron_claim(&id, slot, &run_id, at, &job))
    }

    fn cron_finish(&self, r: CronEnd) -> StoreFuture<'_, ()> {
        self.on(move |s| s.cron_finish(&r.id, &r.run_id, r.ended_at, &r.status, &r.entry, r.job.as_deref()))
    }

    fn cron_log(&self, id: String, run_id: String, at: i64, entry: String, job: String) -> StoreFuture<'_, ()> {
        self.on(move |s| s.cron_log(&id, &run_id, at, &entry, &job))
    }

    fn cron_unfinished(&self) -> StoreFuture<'_, Vec<Unfinished>> {
        self.on(|s| s.cron_unfinished())
    }

    fn cron_runs(&self, q: CronRuns) -> StoreFuture<'_, (Vec<String>, u64)> {
        self.on(move |s| s.cron_runs(q.id.as_deref(), q.status.as_deref(), q.oldest_first, q.offset, q.limit))
    }

    fn cron_sessions_before(&self, prefix: String, before: i64, limit: u64) -> StoreFuture<'_, Vec<String>> {
        self.on(move |s| s.cron_sessions_before(&prefix, before, limit))
    }
}
