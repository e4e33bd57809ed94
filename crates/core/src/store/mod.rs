//! Sessions that last: a SQLite index of sessions (`$ACP_HOME/acp.db`, WAL, versioned
//! migrations) and one append-only JSONL transcript per session (`$ACP_HOME/sessions/<id>.jsonl`,
//! see `transcript.rs`). Several `acp` processes may share one `$ACP_HOME`: SQLite serialises
//! writers (busy timeout), and each transcript has one writer at a time (an exclusive file lock).

mod archive;
pub mod backend;
pub mod cron;
mod error;
pub mod export;
pub mod find;
pub mod keys;
pub mod postgres;
mod recover;
pub mod transcript;

pub use error::{CreateError, StoreError};

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use transcript::Transcript;

use crate::history::record::Record;
use crate::sync::lock;

/// One row of the session index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub cwd: PathBuf,
    pub additional_dirs: Vec<PathBuf>,
    pub title: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
    pub model: String,
    pub mode: String,
    pub reasoning: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Tokens in the context after the last model request.
    pub context_tokens: u64,
    pub parent_id: Option<String>,
    /// Which surface created it (`acp`, `run`, `gateway`, …).
    pub origin: String,
    /// Whether the model ever answered in it (listings leave the others out).
    pub prompted: bool,
}

/// A stored session opened for writing: its row, what its transcript replays to, and the
/// transcript, held by this process until it is dropped.
pub struct Opened {
    pub row: SessionRow,
    pub replay: crate::history::replay::Replay,
    pub writer: Transcript,
}

/// Where a listing goes on from: (updated_at, id) of the last row shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub updated_at: i64,
    pub id: String,
}

impl Cursor {
    /// An opaque token: hex of `updated_at:id`.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.updated_at, self.id).bytes().map(|b| format!("{b:02x}")).collect()
    }

    pub fn decode(token: &str) -> Option<Self> {
        if !token.len().is_multiple_of(2) {
            return None;
        }
        let bytes: Option<Vec<u8>> =
            (0..token.len()).step_by(2).map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok()).collect();
        let text = String::from_utf8(bytes?).ok()?;
        let (at, id) = text.split_once(':')?;
        Some(Self { updated_at: at.parse().ok()?, id: id.to_owned() })
    }
}

/// Migrations, in order; `PRAGMA user_version` says how many have run.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        additional_dirs TEXT NOT NULL DEFAULT '[]',
        title TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        model TEXT NOT NULL,
        mode TEXT NOT NULL,
        reasoning TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        parent_id TEXT,
        origin TEXT NOT NULL DEFAULT 'acp'
    );
    CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);
    CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, id DESC);",
    // Sessions are stored from `session/new` on; until the model has answered in one (`prompted`)
    // it is left out of listings. Every session stored before this was stored at its first prompt.
    "ALTER TABLE sessions ADD COLUMN prompted INTEGER NOT NULL DEFAULT 1;",
    // The gateway's idempotency keys (`chat.send`, `agent`, `send`): a retry after a restart
    // finds the run (or the delivery) it asked for and starts nothing.
    "CREATE TABLE request_keys (
        key TEXT PRIMARY KEY,
        session TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL,
        ended_at INTEGER,
        outcome TEXT
    );
    CREATE INDEX request_keys_by_age ON request_keys (created_at);",
    // The gateway's cron jobs (JSON as it shapes them) and their run log: a run is claimed (its
    // row inserted) before it starts, a scheduled one by (job, slot), so no slot runs twice.
    "CREATE TABLE cron_jobs (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        job TEXT NOT NULL
    );
    CREATE TABLE cron_runs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        slot INTEGER,
        run_id TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        status TEXT,
        entry TEXT,
        UNIQUE (job_id, slot)
    );
    CREATE INDEX cron_runs_by_job ON cron_runs (job_id, seq);
    CREATE INDEX cron_runs_by_end ON cron_runs (ended_at);",
];

pub struct Store {
    home: PathBuf,
    db: Mutex<Connection>,
    /// Whether this process has listed the sessions stopped processes left mid-turn (once, at
    /// its first listing).
    recovered: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("home", &self.home).finish_non_exhaustive()
    }
}

/// The longest session id, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// A session id is any printable text of 1 to 256 bytes (`sess_…`, `demo`, `agent:main:main`,
/// `agent:main:telegram:dm:123`); control characters are refused.
pub fn valid_id(id: &str) -> bool {
    (1..=MAX_ID_BYTES).contains(&id.len()) && !id.chars().any(char::is_control)
}

/// The transcript's file name for a session id. Ids of lower-case letters, digits, `.`, `_` and `-`
/// (not starting with a dot) are their own name; any other id gets a name no plain id can have: a
/// lower-cased slug of it, `~`, and 16 hex digits of its SHA-256. So no id reaches outside
/// `sessions/`, and two ids never share a file, even on a case-insensitive file system.
pub fn file_name(id: &str) -> String {
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    if id.len() <= 128 && !id.is_empty() && !id.starts_with('.') && id.chars().all(plain) {
        return format!("{id}.jsonl");
    }
    let slug: String = id
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if plain(c) && c != '.' { c } else { '_' })
        .take(48)
        .collect();
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let hex: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{slug}~{hex}.jsonl")
}

/// A count as SQLite stores it (saturating at `i64::MAX`).
fn sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub use crate::clock::now_ms;

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let dirs: String = r.get("additional_dirs")?;
    Ok(SessionRow {
        id: r.get("id")?,
        cwd: PathBuf::from(r.get::<_, String>("cwd")?),
        additional_dirs: serde_json::from_str(&dirs).unwrap_or_default(),
        title: r.get("title")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        model: r.get("model")?,
        mode: r.get("mode")?,
        reasoning: r.get("reasoning")?,
        input_tokens: r.get::<_, i64>("input_tokens")?.max(0) as u64,
        output_tokens: r.get::<_, i64>("output_tokens")?.max(0) as u64,
        context_tokens: r.get::<_, i64>("context_tokens")?.max(0) as u64,
        parent_id: r.get("parent_id")?,
        origin: r.get("origin")?,
        prompted: r.get("prompted")?,
    })
}

/// The transcript of session `id` under `home`.
fn transcript_path(home: &Path, id: &str) -> PathBuf {
    let name = file_name(id);
    // Before ids could be any text, every id was its own file name (mixed case included).
    let legacy = format!("{id}.jsonl");
    let path = home.join("sessions").join(&name);
    if name != legacy
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !path.exists()
    {
        let legacy = home.join("sessions").join(legacy);
        if legacy.exists() {
            return legacy;
        }
    }
    path
}

/// The first record of session `s`'s transcript.
pub(crate) fn header(s: &SessionRow) -> Record {
    Record::Session {
        v: crate::history::record::FORMAT_VERSION,
        id: s.id.clone(),
        cwd: s.cwd.clone(),
        created_at: s.created_at,
    }
}

/// `home`'s directory of transcripts, created if needed.
fn sessions_dir(home: &Path) -> Result<(), StoreError> {
    let sessions = home.join("sessions");
    std::fs::create_dir_all(&sessions).map_err(|e| StoreError(format!("{}: {e}", sessions.display())))
}

/// Whether `id` has the form of one made up for a new session (`sess_` and 32 lower-case hex
/// digits, as `acp::new_session_id` makes them): the only ids a session is begun under without
/// its index row ([`begin_fresh_session`]).
pub fn made_up(id: &str) -> bool {
    id.len() == 37 && id.starts_with("sess_") && id[5..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Begins storing a session whose id was just made up, so that nothing can be stored under it,
/// without the index: its transcript, created exclusively under `home` with `s`'s header and
/// `settings`, and locked. [`Store::index_new`] stores its row once the store is open. `None`: a
/// file is there already after all; [`Store::create_session`] sorts that out.
pub fn begin_fresh_session(home: &Path, s: &SessionRow, settings: &Record) -> Result<Option<Transcript>, StoreError> {
    if !made_up(&s.id) {
        return Err(StoreError(format!("`{}` is not a made-up session id", s.id.escape_debug())));
    }
    let path = transcript_path(home, &s.id);
    let header = header(s);
    let mut created = Transcript::create_with(&path, &[&header, settings]);
    if created.is_err() && !path.exists() {
        // A new home: the store may not have made the directory yet.
        sessions_dir(home)?;
        created = Transcript::create_with(&path, &[&header, settings]);
    }
    match created {
        Ok(t) => Ok(Some(t)),
        Err(_) if path.exists() => Ok(None),
        Err(e) => Err(e),
    }
}

/// What the end of each turn writes to a session's row ([`Store::finish_turn`]).
const FINISH_TURN: &str = "UPDATE sessions SET updated_at = ?2,
         input_tokens = CAST(MIN(input_tokens + ?3, 9223372036854775807) AS INTEGER),
         output_tokens = CAST(MIN(output_tokens + ?4, 9223372036854775807) AS INTEGER),
         context_tokens = COALESCE(?5, context_tokens), title = COALESCE(title, ?6),
         prompted = MAX(prompted, ?7)
     WHERE id = ?1";

impl Store {
    /// Opens (creating and migrating if needed) the store under `home`.
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        sessions_dir(home)?;
        let path = home.join("acp.db");
        let db = Connection::open(&path).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        db.busy_timeout(BUSY_TIMEOUT)?;
        db.pragma_update(None, "synchronous", "NORMAL")?;
        db.pragma_update(None, "foreign_keys", "ON")?;
        // A process that exits (every `acp run`) leaves the WAL for the next to fold in, rather
        // than checkpointing and syncing it on the way out; checkpoints still run as it fills.
        db.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        // The next process to open the store reads every frame of that WAL to rebuild its index
        // (~1.5 ms at SQLite's default of 1,000 pages): checkpoint at a tenth of that instead.
        db.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)?;
        let journal: String = db.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if !journal.eq_ignore_ascii_case("wal") || schema_version(&db)? != MIGRATIONS.len() as i64 {
            // A new (or older) database. Switching it to WAL upgrades a read lock to an exclusive
            // one, and SQLite answers SQLITE_BUSY at once rather than wait when another connection
            // holds a read lock on it (a deadlock guard the busy timeout does not cover). So the
            // processes that set up one home take turns, under a lock on the home directory.
            let _setup = SetupLock::take(home)?;
            db.pragma_update(None, "journal_mode", "WAL")?;
            migrate(&db)?;
        }
        Ok(Self { home: home.to_path_buf(), db: Mutex::new(db), recovered: false.into() })
    }

    fn db(&self) -> MutexGuard<'_, Connection> {
        lock(&self.db)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn transcript_path(&self, id: &str) -> PathBuf {
        transcript_path(&self.home, id)
    }

    /// Stores a new session: its transcript, begun with `header` and `settings` and locked (this
    /// process is its writer from now on), then its index row. Two processes creating one id at
    /// once cannot both succeed: the transcript is created exclusively, and the loser is told the
    /// session is open elsewhere (or that it exists, once the winner has stored it).
    pub fn create_session(&self, s: &SessionRow, settings: &Record) -> Result<Transcript, CreateError> {
        if !valid_id(&s.id) {
            return Err(CreateError::Store(StoreError(format!("`{}` is not a valid session id", s.id.escape_debug()))));
        }
        if self.get(&s.id)?.is_some() {
            return Err(CreateError::Exists);
        }
        let path = self.transcript_path(&s.id);
        let header = header(s);
        let t = match Transcript::create_with(&path, &[&header, settings]) {
            Ok(t) => t,
            Err(_) if path.exists() => {
                // Being created by another process (locked: refused here), or left by one that
                // stopped before storing the row: then it is indexed if it holds a turn (see
                // `begin_fresh_session`), else ours to start over.
                let t = Transcript::open(&path).map_err(CreateError::Busy)?;
                if self.get(&s.id)?.is_some() || self.index_left_over(&s.id)?.is_some() {
                    return Err(CreateError::Exists);
                }
                t.restart(&header)?;
                t.record(settings);
                t
            }
            Err(e) => return Err(e.into()),
        };
        if let Err(e) = self.create(s) {
            drop(t);
            if self.get(&s.id).ok().flatten().is_some() {
                return Err(CreateError::Exists);
            }
            let _ = std::fs::remove_file(&path);
            return Err(e.into());
        }
        Ok(t)
    }

    /// Stores the index row of a session begun by [`begin_fresh_session`]. `Exists`: a row with
    /// its id is there (its transcript lost, as the new one was created exclusively). Readies
    /// the statement that ends each turn meanwhile (this runs while the model answers).
    pub fn index_new(&self, s: &SessionRow) -> Result<(), CreateError> {
        match self.create(s) {
            Ok(()) => {
                self.db().prepare_cached(FINISH_TURN)?;
                Ok(())
            }
            Err(_) if self.get(&s.id).ok().flatten().is_some() => Err(CreateError::Exists),
            Err(e) => Err(e.into()),
        }
    }

    /// The row of a session whose index row was left unstored ([`begin_fresh_session`]: its
    /// process stopped first), rebuilt from its transcript and stored — if that holds a turn to
    /// keep. The caller holds the transcript's lock. Only `acp run` begins sessions so, under an
    /// id it made up ([`made_up`]); no other id is looked at.
    pub fn index_left_over(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        if !made_up(id) {
            return Ok(None);
        }
        let path = self.transcript_path(id);
        let mut records = transcript::open_records(&path)?;
        let Some(Record::Session { id: named, cwd, created_at, .. }) = records.next() else { return Ok(None) };
        let replay = crate::history::replay::replay(records);
        let Some(settings) = replay.settings.filter(|_| named == id && replay.turns > 0) else { return Ok(None) };
        let answered =
            replay.conversation.messages().iter().any(|m| matches!(m, crate::providers::Message::Assistant(_)));
        let row = SessionRow {
            id: id.to_owned(),
            cwd,
            additional_dirs: Vec::new(),
            title: None,
            created_at,
            updated_at: now_ms(),
            model: settings.model,
            mode: settings.mode.id().to_owned(),
            reasoning: settings.reasoning.map(|r| r.as_str().to_owned()),
            input_tokens: replay.usage.input,
            output_tokens: replay.usage.output,
            context_tokens: replay.context_tokens.unwrap_or(0),
            parent_id: None,
            origin: "run".into(),
            prompted: answered,
        };
        self.create(&row)?;
        tracing::info!(session = id, "indexed a session whose process stopped before listing it");
        Ok(Some(row))
    }

    /// Applies `update` to session `id`'s row.
    pub fn apply(&self, id: &str, update: &transcript::IndexUpdate) -> Result<(), StoreError> {
        use transcript::IndexUpdate as U;
        match update {
            U::TurnEnded { input, output, context, title, prompted } => {
                self.finish_turn(id, *input, *output, *context, title.as_deref(), *prompted)
            }
            U::Settings { model, mode, reasoning } => self.update_settings(id, model, mode, reasoning.as_deref()),
            U::Title(title) => self.set_title(id, title),
            U::Prompted => self.mark_prompted(id),
        }
    }

    /// Opens stored session `id` for writing (its transcript locked by this process), in `cwd`
    /// with `dirs` (recorded if they changed). A turn that never ended is closed first (see
    /// `history::replay`). `None`: no such session.
    pub fn open_session(&self, id: &str, cwd: &Path, dirs: &[PathBuf]) -> Result<Option<Opened>, StoreError> {
        if !valid_id(id) {
            return Ok(None);
        }
        let found = self.get(id)?;
        let path = self.transcript_path(id);
        let writer = match Transcript::open(&path) {
            Ok(w) => w,
            Err(_) if !path.exists() => {
                let Some(row) = &found else { return Ok(None) };
                tracing::warn!(session = %id, path = %path.display(), "the session's transcript is missing; it starts empty");
                Transcript::create(&path, &header(row))?
            }
            Err(e) => return Err(e),
        };
        let row = match found {
            Some(row) => row,
            None => match self.index_left_over(id)? {
                Some(row) => row,
                None => return Ok(None),
            },
        };
        // Read after taking the lock: nobody else is writing now.
        let replay = crate::history::replay::replay(transcript::open_records(&path)?);
        for record in &replay.repair {
            writer.record(record);
        }
        if (row.cwd != cwd || row.additional_dirs != dirs)
            && let Err(e) = self.set_workspace(id, cwd, dirs)
        {
            tracing::warn!(session = %id, error = %e, "could not record the session's new working directory");
        }
        Ok(Some(Opened { row, replay, writer }))
    }

    /// The model answered in the session for the first time: listings show it from now on.
    pub fn mark_prompted(&self, id: &str) -> Result<(), StoreError> {
        self.db().execute("UPDATE sessions SET prompted = 1, updated_at = ?2 WHERE id = ?1", params![id, now_ms()])?;
        Ok(())
    }

    /// Removes sessions that were opened but never prompted and not touched since `before` (Unix
    /// ms), unless a process has them open — after listing those a stopped process left mid-turn
    /// ([`Self::list_interrupted`]). Returns how many were listed, indexed or removed.
    pub fn sweep_unprompted(&self, before: i64) -> Result<usize, StoreError> {
        // Never a session holding a prompt its process stopped during: it is listed instead.
        let listed = self.list_interrupted()?;
        let ids: Vec<String> = self
            .db()
            .prepare("SELECT id FROM sessions WHERE prompted = 0 AND updated_at < ?1")?
            .query_map([before], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut removed = 0;
        for id in ids {
            if self.delete_if_closed(&id).is_ok() {
                removed += 1;
            }
        }
        Ok(listed + removed + self.sweep_left_over(before)?)
    }

    /// Transcripts begun without their row ([`begin_fresh_session`]) whose process stopped before
    /// storing it, last written before `before` (Unix ms) and open nowhere: indexed if they hold
    /// a turn ([`index_left_over`](Self::index_left_over)), removed if not. Returns how many.
    fn sweep_left_over(&self, before: i64) -> Result<usize, StoreError> {
        let Ok(entries) = std::fs::read_dir(self.home.join("sessions")) else { return Ok(0) };
        let indexed: std::collections::HashSet<String> =
            self.db().prepare("SELECT id FROM sessions")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        let mut swept = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            if !made_up(id) || indexed.contains(id) {
                continue;
            }
            let written = entry.metadata().ok().and_then(|m| m.modified().ok());
            let written = written.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            if written.is_none_or(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX) >= before) {
                continue;
            }
            let Ok(lock) = Transcript::open(&entry.path()) else { continue };
            if self.index_left_over(id)?.is_none() {
                let _ = std::fs::remove_file(entry.path());
            }
            drop(lock);
            swept += 1;
        }
        Ok(swept)
    }

    pub fn create(&self, s: &SessionRow) -> Result<(), StoreError> {
        let dirs = serde_json::to_string(&s.additional_dirs).unwrap_or_else(|_| "[]".into());
        self.db().execute(
            "INSERT INTO sessions (id, cwd, additional_dirs, title, created_at, updated_at, model, mode, reasoning,
                 input_tokens, output_tokens, context_tokens, parent_id, origin, prompted)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                s.id,
                s.cwd.to_string_lossy(),
                dirs,
                s.title,
                s.created_at,
                s.updated_at,
                s.model,
                s.mode,
                s.reasoning,
                sql_count(s.input_tokens),
                sql_count(s.output_tokens),
                sql_count(s.context_tokens),
                s.parent_id,
                s.origin,
                s.prompted
            ],
        )?;
        Ok(())
    }

    pub fn get(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        Ok(self.db().query_row("SELECT * FROM sessions WHERE id = ?1", [id], row).optional()?)
    }

    /// Records the settings a session now has.
    pub fn update_settings(
        &self,
        id: &str,
        model: &str,
        mode: &str,
        reasoning: Option<&str>,
    ) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE sessions SET model = ?2, mode = ?3, reasoning = ?4, updated_at = ?5 WHERE id = ?1",
            params![id, model, mode, reasoning, now_ms()],
        )?;
        Ok(())
    }

    /// Records the end of a turn: time, token counters, and a title if the session has none.
    /// A turn ended: its tokens, the title if the session has none yet, and `prompted` (the model
    /// answered: the session is listed from now on) — one write.
    pub fn finish_turn(
        &self,
        id: &str,
        input: u64,
        output: u64,
        context: Option<u64>,
        title: Option<&str>,
        prompted: bool,
    ) -> Result<(), StoreError> {
        // Once per turn: the statement is prepared once per connection.
        self.db().prepare_cached(FINISH_TURN)?.execute(params![
            id,
            now_ms(),
            sql_count(input),
            sql_count(output),
            context.map(sql_count),
            title,
            prompted
        ])?;
        Ok(())
    }

    pub fn set_title(&self, id: &str, title: &str) -> Result<(), StoreError> {
        self.db().execute("UPDATE sessions SET title = ?2 WHERE id = ?1", params![id, title])?;
        Ok(())
    }

    /// A session reopened elsewhere (`session/load` with another cwd).
    pub fn set_workspace(&self, id: &str, cwd: &Path, dirs: &[PathBuf]) -> Result<(), StoreError> {
        let dirs = serde_json::to_string(dirs).unwrap_or_else(|_| "[]".into());
        self.db().execute(
            "UPDATE sessions SET cwd = ?2, additional_dirs = ?3 WHERE id = ?1",
            params![id, cwd.to_string_lossy(), dirs],
        )?;
        Ok(())
    }

    /// A session's row and its replayed transcript, read without taking the writer's lock (a
    /// session open elsewhere is shown as far as it is written).
    pub fn read_session(&self, id: &str) -> Result<Option<(SessionRow, crate::history::replay::Replay)>, StoreError> {
        if !valid_id(id) {
            return Ok(None);
        }
        let Some(row) = self.get(id)? else { return Ok(None) };
        let path = self.transcript_path(id);
        let replay = match transcript::open_records(&path) {
            Ok(records) => crate::history::replay::replay(records),
            Err(_) if !path.exists() => crate::history::replay::replay(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(Some((row, replay)))
    }

    /// Removes a session unless an acp process has it open (holding its transcript's lock proves no
    /// one is writing it); removing one that does not exist is fine.
    pub fn delete_if_closed(&self, id: &str) -> Result<(), StoreError> {
        let path = self.transcript_path(id);
        let lock = match transcript::Transcript::open(&path) {
            Ok(t) => Some(t),
            Err(_) if !path.exists() => None,
            Err(e) => return Err(e),
        };
        let result = self.delete(id);
        drop(lock);
        result
    }

    /// Removes a session and its transcript; removing one that does not exist is fine.
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        // The transcript first: one left behind without its row could be indexed again.
        match std::fs::remove_file(self.transcript_path(id)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError(format!("{}: {e}", self.transcript_path(id).display()))),
        }
        self.db().execute("DELETE FROM sessions WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Sessions, most recently updated first, `limit` at a time; the cursor says where the next page
    /// starts (`None` on the last page).
    pub fn list(
        &self,
        cwd: Option<&Path>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<SessionRow>, Option<Cursor>), StoreError> {
        self.recover_once();
        let db = self.db();
        let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
        let take = limit as i64 + 1;
        const ORDER: &str = "ORDER BY updated_at DESC, id DESC LIMIT";
        // Sessions opened but never prompted are left out (editors open many they never use).
        let mut rows: Vec<SessionRow> = match (&cwd, after) {
            (None, None) => db
                .prepare_cached(&format!("SELECT * FROM sessions WHERE prompted {ORDER} ?1"))?
                .query_map(params![take], row)?
                .collect::<Result<_, _>>()?,
            (Some(cwd), None) => db
                .prepare_cached(&format!("SELECT * FROM sessions WHERE prompted AND cwd = ?1 {ORDER} ?2"))?
                .query_map(params![cwd, take], row)?
                .collect::<Result<_, _>>()?,
            (None, Some(c)) => db
                .prepare_cached(&format!(
                    "SELECT * FROM sessions WHERE prompted AND (updated_at, id) < (?1, ?2) {ORDER} ?3"
                ))?
                .query_map(params![c.updated_at, c.id, take], row)?
                .collect::<Result<_, _>>()?,
            (Some(cwd), Some(c)) => db
                .prepare_cached(&format!(
                    "SELECT * FROM sessions WHERE prompted AND cwd = ?1 AND (updated_at, id) < (?2, ?3) {ORDER} ?4"
                ))?
                .query_map(params![cwd, c.updated_at, c.id, take], row)?
                .collect::<Result<_, _>>()?,
        };
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|r| Cursor { updated_at: r.updated_at, id: r.id.clone() })
        } else {
            None
        };
        Ok((rows, next))
    }
}

impl Store {
    /// Before the first listing: the sessions stopped processes left mid-turn are found.
    fn recover_once(&self) {
        if !self.recovered.swap(true, std::sync::atomic::Ordering::Relaxed)
            && let Err(e) = self.list_interrupted()
        {
            tracing::warn!(error = %e, "could not list the sessions stopped processes left mid-turn");
        }
    }
}

/// How long a statement waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// WAL pages written before a checkpoint folds them into the database (SQLite's default: 1,000).
const WAL_AUTOCHECKPOINT: i64 = 100;

/// The schema version (`PRAGMA user_version`); a database from a newer acp is refused.
fn schema_version(db: &Connection) -> Result<i64, StoreError> {
    let current = MIGRATIONS.len() as i64;
    let version: i64 = db.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version < 0 {
        return Err(StoreError(format!("the session database's schema version ({version}) is damaged")));
    }
    if version > current {
        return Err(StoreError(format!(
            "the session database is from a newer acp (schema {version}, this one knows {current}); upgrade acp"
        )));
    }
    Ok(version)
}

/// An exclusive `flock` on the home directory while a process sets its database up; released when
/// dropped, or by the kernel if the process dies. Waits at most `BUSY_TIMEOUT` for another process.
struct SetupLock {
    _dir: std::fs::File,
}

impl SetupLock {
    fn take(home: &Path) -> Result<Self, StoreError> {
        use rustix::fs::{FlockOperation, flock};
        let dir = std::fs::File::open(home).map_err(|e| StoreError(format!("{}: {e}", home.display())))?;
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_micros(200);
        loop {
            match flock(&dir, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Self { _dir: dir }),
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(StoreError(format!(
                        "{}: another acp process has been setting up the session database for {} s",
                        home.display(),
                        BUSY_TIMEOUT.as_secs()
                    )));
                }
                Err(e) => return Err(StoreError(format!("{}: could not lock: {e}", home.display()))),
            }
        }
    }
}

/// Brings the schema up to date, inside a write transaction, so each migration runs exactly once
/// even if a process that does not take the setup lock (an older acp) migrates at the same time.
fn migrate(db: &Connection) -> Result<(), StoreError> {
    let current = MIGRATIONS.len() as i64;
    if schema_version(db)? == current {
        return Ok(());
    }
    let tx = rusqlite::Transaction::new_unchecked(db, rusqlite::TransactionBehavior::Immediate)?;
    let version = schema_version(&tx)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests;
