//! The memory index: one SQLite file per agent beside the session store
//! (`$ACP_HOME/memory/<agent>.sqlite`) holding each memory file's size, modification time and
//! hash, its pieces (`chunk.rs`) with their lines, and an FTS5 table over the pieces' words
//! (`terms.rs`) ranked by BM25. Brought up to date incrementally: a file whose size and time are
//! unchanged is not read, one whose hash is unchanged is not cut again. A file that cannot be
//! opened as an index (corrupt, or not SQLite) is set aside and built anew; the Markdown files
//! are the truth, the index only a cache of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::chunk::chunks;
use super::terms;

/// Bumped when what is stored changes (the pieces' size, the words): an older index is rebuilt.
const SCHEMA: &str = "1";

/// The largest memory file indexed; a larger one is left out (and said so in the status).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// How long a search waits for another process writing the index.
const BUSY: Duration = Duration::from_secs(2);

/// Snippets are at most this many characters of the piece around its best line.
const SNIPPET_CHARS: usize = 700;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryError(pub String);

impl std::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One memory file: where it is, and the name it is known by (relative to the workspace, or the
/// full path for an extra one outside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub shown: String,
    pub path: PathBuf,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    /// The line that matched best.
    pub best_line: usize,
    /// 0 to 1, higher is better.
    pub score: f64,
    pub snippet: String,
}

pub struct Index {
    db: Connection,
}

/// What bringing the index up to date did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Synced {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    /// Files left out: (path, why).
    pub skipped: Vec<(String, String)>,
}

impl Synced {
    pub fn touched(&self) -> bool {
        self.added + self.changed + self.removed > 0
    }
}

/// What the index holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub files: u64,
    pub chunks: u64,
}

impl Index {
    /// Opens the index at `path`, creating it; an index that cannot be read is moved aside
    /// (`<path>.broken`) and begun anew.
    pub fn open(path: &Path) -> Result<Self, MemoryError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError(format!("{}: {e}", dir.display())))?;
        }
        match Self::open_as_is(path) {
            Ok(index) => Ok(index),
            Err(e) if e.busy => Err(MemoryError(e.message)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e.message, "the memory index is unreadable; rebuilding it");
                let aside = path.with_extension("sqlite.broken");
                for (from, to) in [(path.to_path_buf(), aside.clone()), (wal(path, "-wal"), wal(&aside, "-wal"))] {
                    let _ = std::fs::rename(from, to);
                }
                let _ = std::fs::remove_file(wal(path, "-shm"));
                Self::open_as_is(path).map_err(|e| MemoryError(e.message))
            }
        }
    }

    /// The index at `path` if there is one (read as it is; `None` if it was never built).
    pub fn open_existing(path: &Path) -> Result<Option<Self>, MemoryError> {
        if !path.exists() {
            return Ok(None);
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(path, flags)?;
        db.busy_timeout(BUSY)?;
        Ok(Some(Self { db }))
    }

    /// An index in memory only (when the file cannot be used at all).
    pub fn in_memory() -> Result<Self, MemoryError> {
        let db = Connection::open_in_memory().map_err(|e| MemoryError(e.to_string()))?;
        let index = Self { db };
        index.create().map_err(|e| MemoryError(e.to_string()))?;
        Ok(index)
    }

    fn open_as_is(path: &Path) -> Result<Self, OpenError> {
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY)?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "NORMAL")?;
        let index = Self { db };
        let version: Option<String> = index
            .db
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0))
            .optional()
            .or_else(|e| if no_such_table(&e) { Ok(None) } else { Err(e) })?;
        if version.as_deref() != Some(SCHEMA) {
            index.drop_all()?;
            index.create()?;
        }
        Ok(index)
    }

    fn drop_all(&self) -> rusqlite::Result<()> {
        self.db.execute_batch(
            "DROP TABLE IF EXISTS chunks_fts; DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS files;
             DROP TABLE IF EXISTS meta;",
        )
    }

    fn create(&self) -> rusqlite::Result<()> {
        self.db.execute_batch(&format!(
            "BEGIN;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS files (
                 path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS chunks (
                 id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
                 end_line INTEGER NOT NULL, text TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks(path);
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
                 words, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
             INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', '{SCHEMA}');
             COMMIT;"
        ))
    }

    /// Brings the index up to date with `sources` (every memory file there is now): new and
    /// changed files are cut and indexed, vanished ones dropped, in one transaction.
    pub fn sync(&mut self, sources: &[Source]) -> Result<Synced, MemoryError> {
        let known: HashMap<String, (i64, i64, String)> = {
            let mut stmt = self.db.prepare_cached("SELECT path, size, mtime_ns, hash FROM files")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut synced = Synced::default();
        let mut work: Vec<Work<'_>> = Vec::new();
        let mut present: Vec<&str> = Vec::new();
        for source in sources {
            let Ok(meta) = std::fs::metadata(&source.path) else { continue };
            if !meta.is_file() {
                continue;
            }
            if meta.len() > MAX_FILE_BYTES {
                synced.skipped.push((source.shown.clone(), format!("larger than {} MiB", MAX_FILE_BYTES >> 20)));
                continue;
            }
            present.push(&source.shown);
            let size = i64::try_from(meta.len()).unwrap_or(i64::MAX);
            let mtime = mtime_ns(&meta);
            match known.get(&source.shown) {
                Some((s, m, _)) if *s == size && *m == mtime => synced.unchanged += 1,
                old => {
                    let text = match crate::files::read_capped(&source.path, MAX_FILE_BYTES) {
                        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                        Err(e) => {
                            synced.skipped.push((source.shown.clone(), e.to_string()));
                            continue;
                        }
                    };
                    let hash = hash(&text);
                    let cut = match old {
                        Some((_, _, h)) if *h == hash => None,
                        _ => Some((hash, text)),
                    };
                    match (&cut, old) {
                        // Only the time moved: the new one is kept, the pieces stay.
                        (None, _) => synced.unchanged += 1,
                        (Some(_), Some(_)) => synced.changed += 1,
                        (Some(_), None) => synced.added += 1,
                    }
                    work.push((source, size, mtime, cut));
                }
            }
        }
        let gone: Vec<&String> = known.keys().filter(|p| !present.contains(&p.as_str())).collect();
        synced.removed = gone.len();
        if work.is_empty() && gone.is_empty() {
            return Ok(synced);
        }
        let tx = self.db.transaction()?;
        for path in gone {
            remove_chunks(&tx, path)?;
            tx.execute("DELETE FROM files WHERE path = ?1", [path])?;
        }
        for (source, size, mtime, cut) in work {
            match cut {
                Some((hash, text)) => {
                    remove_chunks(&tx, &source.shown)?;
                    for piece in chunks(&text) {
                        tx.prepare_cached(
                            "INSERT INTO chunks (path, start_line, end_line, text) VALUES (?1, ?2, ?3, ?4)",
                        )?
                        .execute(params![
                            source.shown,
                            piece.start_line as i64,
                            piece.end_line as i64,
                            piece.text
                        ])?;
                        let id = tx.last_insert_rowid();
                        tx.prepare_cached("INSERT INTO chunks_fts (rowid, words) VALUES (?1, ?2)")?
                            .execute(params![id, terms::for_index(&piece.text)])?;
                    }
                    tx.prepare_cached(
                        "INSERT OR REPLACE INTO files (path, size, mtime_ns, hash) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![source.shown, size, mtime, hash])?;
                }
                None => {
                    tx.prepare_cached("UPDATE files SET size = ?2, mtime_ns = ?3 WHERE path = ?1")?
                        .execute(params![source.shown, size, mtime])?;
                }
            }
        }
        tx.commit()?;
        Ok(synced)
    }

    /// The pieces that best match `query`, best first: at most `max`, none scoring under `min_score`
    /// (scores run from 0 to 1).
    pub fn search(&self, query: &str, max: usize, min_score: f64) -> Result<Vec<Hit>, MemoryError> {
        let words = terms::query_words(query);
        let Some(fts) = terms::fts_query(&words) else { return Ok(Vec::new()) };
        let mut stmt = self.db.prepare_cached(
            "SELECT c.path, c.start_line, c.end_line, c.text, bm25(chunks_fts) AS rank
             FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
             WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![fts, max as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })?;
        let mut hits = Vec::new();
        for row in rows {
            let (path, start, end, text, rank) = row?;
            let score = score(rank, &words, &text);
            if score < min_score {
                continue;
            }
            let (snippet, first_line) = snippet(&text, &words, start as usize);
            hits.push(Hit {
                path,
                start_line: start as usize,
                end_line: end as usize,
                best_line: first_line,
                score,
                snippet,
            });
        }
        Ok(hits)
    }

    /// How many files and pieces the index holds.
    pub fn counts(&self) -> Result<Counts, MemoryError> {
        let files: i64 = self.db.query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
        let chunks: i64 = self.db.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        Ok(Counts { files: files as u64, chunks: chunks as u64 })
    }

    /// The indexed files, with their sizes.
    pub fn files(&self) -> Result<Vec<(String, u64)>, MemoryError> {
        let mut stmt = self.db.prepare("SELECT path, size FROM files ORDER BY path")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A file to write to the index: its size, time, and (hash, text) when it must be cut again.
type Work<'a> = (&'a Source, i64, i64, Option<(String, String)>);

fn remove_chunks(tx: &rusqlite::Transaction<'_>, path: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE path = ?1)")?
        .execute([path])?;
    tx.prepare_cached("DELETE FROM chunks WHERE path = ?1")?.execute([path])?;
    Ok(())
}

/// A result's score, 0 to 1: mostly the share of the query's words the piece holds (so `1.00`
/// means all of them, however small the index), and a little of BM25 (SQLite's rank: lower is
/// better, and negative), which also orders the results.
fn score(rank: f64, words: &[String], text: &str) -> f64 {
    let held: std::collections::HashSet<String> = terms::query_words(text).into_iter().collect();
    let coverage = words.iter().filter(|w| held.contains(*w)).count() as f64 / words.len().max(1) as f64;
    let bm25 = (-rank).max(0.0);
    0.8 * coverage + 0.2 * bm25 / (1.0 + bm25)
}

/// The part of a piece to show: all of it when short, else about [`SNIPPET_CHARS`] from the line
/// holding the most query words. Returns it and that line's number.
fn snippet(text: &str, words: &[String], first_line: usize) -> (String, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let hits = |line: &str| {
        let lower = terms::for_index(&line.to_lowercase());
        words.iter().filter(|w| lower.contains(w.as_str())).count()
    };
    let best = (0..lines.len()).max_by_key(|&i| (hits(lines[i]), std::cmp::Reverse(i))).unwrap_or(0);
    if text.chars().count() <= SNIPPET_CHARS {
        return (text.to_owned(), first_line + best);
    }
    // From a line or two before the best one, as far as the budget goes.
    let from = best.saturating_sub(1);
    let mut out = String::new();
    if from > 0 {
        out.push_str("…\n");
    }
    for line in &lines[from..] {
        let room = SNIPPET_CHARS.saturating_sub(out.chars().count());
        if room == 0 {
            break;
        }
        if line.chars().count() + 1 > room {
            out.extend(line.chars().take(room));
            out.push('…');
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    (out.trim_end().to_owned(), first_line + best)
}

fn hash(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn wal(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn no_such_table(e: &rusqlite::Error) -> bool {
    e.to_string().contains("no such table")
}

struct OpenError {
    message: String,
    /// Another process holds the index: not a reason to rebuild it.
    busy: bool,
}

impl From<rusqlite::Error> for OpenError {
    fn from(e: rusqlite::Error) -> Self {
        let busy = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        Self { message: e.to_string(), busy }
    }
}

impl From<rusqlite::Error> for MemoryError {
    fn from(e: rusqlite::Error) -> Self {
        MemoryError(format!("memory index: {e}"))
    }
}
