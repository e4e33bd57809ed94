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
use super::vectors::{VectorSet, quantize};

/// Bumped when what is stored changes (the pieces' size, the words): an older index is rebuilt.
const SCHEMA: &str = "3";

/// Query vectors kept per model (the most recently used).
const KEPT_QUERIES: usize = 256;

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
    /// The pieces' vectors for the embedding model last searched with, loaded on the first hybrid
    /// search and kept up to date by [`Index::sync`] and [`Index::store_vectors`].
    vectors: Option<VectorSet>,
    /// SQLite's `data_version` when `vectors` was loaded: another process's change reloads it.
    seen: i64,
    /// Whether the index is a file (else built in memory for one search).
    persistent: bool,
    /// Built anew (or never filled) and not synced with the files since.
    unfilled: bool,
    /// The embedding model every piece had a vector from when last asked, and `data_version`
    /// then: until a piece is added, nothing needs to be looked for.
    all_embedded: Option<(String, i64)>,
    /// How many pieces there are, and `data_version` then (our own changes reset it).
    pieces: std::cell::Cell<Option<(i64, i64)>>,
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
        Ok(Some(Self::with(db, true)))
    }

    /// An index in memory only (when the file cannot be used at all).
    pub fn in_memory() -> Result<Self, MemoryError> {
        let db = Connection::open_in_memory().map_err(|e| MemoryError(e.to_string()))?;
        let mut index = Self::with(db, false);
        index.create().map_err(|e| MemoryError(e.to_string()))?;
        index.unfilled = true;
        Ok(index)
    }

    fn open_as_is(path: &Path) -> Result<Self, OpenError> {
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY)?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "NORMAL")?;
        let mut index = Self::with(db, true);
        let version: Option<String> = index
            .db
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0))
            .optional()
            .or_else(|e| if no_such_table(&e) { Ok(None) } else { Err(e) })?;
        if version.as_deref() != Some(SCHEMA) {
            index.drop_all()?;
            index.create()?;
            index.unfilled = true;
        }
        Ok(index)
    }

    fn with(db: Connection, persistent: bool) -> Self {
        Self {
            db,
            vectors: None,
            seen: 0,
            persistent,
            unfilled: false,
            all_embedded: None,
            pieces: std::cell::Cell::new(None),
        }
    }

    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// Whether the index was built anew and has not been synced with the files since.
    pub fn unfilled(&self) -> bool {
        self.unfilled
    }

    fn drop_all(&self) -> rusqlite::Result<()> {
        self.db.execute_batch(
            "DROP TABLE IF EXISTS chunks_vocab; DROP TABLE IF EXISTS chunks_fts; DROP TABLE IF EXISTS chunks;
             DROP TABLE IF EXISTS files;
             DROP TABLE IF EXISTS vectors; DROP TABLE IF EXISTS meta;",
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
                 end_line INTEGER NOT NULL, text TEXT NOT NULL, hash TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks(path);
             CREATE INDEX IF NOT EXISTS chunks_by_hash ON chunks(hash);
             CREATE TABLE IF NOT EXISTS vectors (
                 model TEXT NOT NULL, hash TEXT NOT NULL, query INTEGER NOT NULL, used INTEGER NOT NULL,
                 data BLOB NOT NULL, PRIMARY KEY (model, hash)) WITHOUT ROWID;
             CREATE INDEX IF NOT EXISTS vectors_by_hash ON vectors(hash);
             CREATE INDEX IF NOT EXISTS queries_by_use ON vectors(model, query, used);
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
                 words, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, row);
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
        let synced = self.sync_known(&known, sources, None)?;
        self.unfilled = false;
        Ok(synced)
    }

    /// Brings the index up to date for some files only (what a watcher saw change): `present`,
    /// the memory files among them that exist, and `gone`, the names of those that no longer do.
    pub fn sync_some(&mut self, present: &[Source], gone: &[String]) -> Result<Synced, MemoryError> {
        let mut known: HashMap<String, (i64, i64, String)> = HashMap::new();
        {
            let mut stmt = self.db.prepare_cached("SELECT size, mtime_ns, hash FROM files WHERE path = ?1")?;
            for name in present.iter().map(|s| &s.shown).chain(gone) {
                if let Some(row) = stmt.query_row([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()? {
                    known.insert(name.clone(), row);
                }
            }
        }
        self.sync_known(&known, present, Some(gone))
    }

    /// Syncs `sources` against `known` (the index's rows for them); `gone`: the files known to
    /// have vanished, or `None` when `sources` are all there are (then every other row goes).
    fn sync_known(
        &mut self,
        known: &HashMap<String, (i64, i64, String)>,
        sources: &[Source],
        gone: Option<&[String]>,
    ) -> Result<Synced, MemoryError> {
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
        let gone: Vec<&String> = match gone {
            None => {
                let present: std::collections::HashSet<&str> = present.into_iter().collect();
                known.keys().filter(|p| !present.contains(p.as_str())).collect()
            }
            // Files now left out (grown too large, unreadable) go too, as a full sync would do.
            Some(gone) => gone
                .iter()
                .chain(synced.skipped.iter().map(|(name, _)| name))
                .filter(|p| known.contains_key(*p))
                .collect(),
        };
        synced.removed = gone.len();
        if work.is_empty() && gone.is_empty() {
            return Ok(synced);
        }
        let tx = self.db.transaction()?;
        let mut removed: Vec<(i64, String)> = Vec::new();
        let mut added: Vec<(i64, String)> = Vec::new();
        for path in gone {
            removed.extend(remove_chunks(&tx, path)?);
            tx.execute("DELETE FROM files WHERE path = ?1", [path])?;
        }
        for (source, size, mtime, cut) in work {
            match cut {
                Some((hash, text)) => {
                    removed.extend(remove_chunks(&tx, &source.shown)?);
                    for piece in chunks(&text) {
                        let piece_hash = self::hash(&piece.text);
                        tx.prepare_cached(
                            "INSERT INTO chunks (path, start_line, end_line, text, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
                        )?
                        .execute(params![
                            source.shown,
                            piece.start_line as i64,
                            piece.end_line as i64,
                            piece.text,
                            piece_hash
                        ])?;
                        let id = tx.last_insert_rowid();
                        tx.prepare_cached("INSERT INTO chunks_fts (rowid, words) VALUES (?1, ?2)")?
                            .execute(params![id, terms::for_index(&piece.text)])?;
                        added.push((id, piece_hash));
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
        // Vectors of pieces gone for good; those of pieces cut again unchanged stay theirs.
        for (_, hash) in &removed {
            tx.prepare_cached(
                "DELETE FROM vectors WHERE hash = ?1 AND query = 0 AND NOT EXISTS (SELECT 1 FROM chunks WHERE hash = ?1)",
            )?
            .execute([hash])?;
        }
        tx.commit()?;
        if let Some(set) = &mut self.vectors {
            for (id, _) in &removed {
                set.remove(*id);
            }
        }
        if !added.is_empty() {
            self.all_embedded = None;
        }
        if !added.is_empty() || !removed.is_empty() {
            self.pieces.set(None);
        }
        self.attach(&added)?;
        Ok(synced)
    }

    /// Puts the stored vectors of new pieces `(id, hash)` in the loaded set.
    fn attach(&mut self, pieces: &[(i64, String)]) -> Result<(), MemoryError> {
        let Some(set) = &mut self.vectors else { return Ok(()) };
        let mut stmt = self.db.prepare_cached("SELECT data FROM vectors WHERE model = ?1 AND hash = ?2")?;
        for (id, hash) in pieces {
            if let Some(data) = stmt.query_row(params![set.model, hash], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                set.insert(*id, &data);
            }
        }
        Ok(())
    }

    /// Pieces (hash, text) with no vector from `model` yet: at most `limit`, and how many there are.
    pub fn unembedded(&mut self, model: &str, limit: usize) -> Result<(Vec<(String, String)>, usize), MemoryError> {
        const MISSING: &str =
            "FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ?1 AND v.hash = c.hash)";
        let version: i64 = self.db.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        if self.all_embedded.as_ref().is_some_and(|(m, v)| m == model && *v == version) {
            return Ok((Vec::new(), 0));
        }
        let total: i64 =
            self.db.query_row(&format!("SELECT count(DISTINCT c.hash) {MISSING}"), [model], |r| r.get(0))?;
        let missing: Vec<(String, String)> = {
            let mut stmt =
                self.db.prepare_cached(&format!("SELECT c.hash, min(c.text) {MISSING} GROUP BY c.hash LIMIT ?2"))?;
            let rows = stmt.query_map(params![model, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        self.all_embedded = (total == 0).then(|| (model.to_owned(), version));
        Ok((missing, total as usize))
    }

    /// The stored vector of `query` from `model`, if it was embedded before. (Read only: a write
    /// on every search would make every other process's vectors look stale.)
    pub fn query_vector(&self, model: &str, query: &str) -> Result<Option<Vec<u8>>, MemoryError> {
        let hash = query_hash(query);
        let found = self
            .db
            .prepare_cached("SELECT data FROM vectors WHERE model = ?1 AND hash = ?2")?
            .query_row(params![model, hash], |r| r.get::<_, Vec<u8>>(0))
            .optional()?;
        Ok(found)
    }

    /// Stores vectors from `model`: of pieces, by their text's hash, and of a query; returns the
    /// query's as stored.
    pub fn store_vectors(
        &mut self,
        model: &str,
        pieces: &[(String, Vec<f32>)],
        query: Option<(&str, &[f32])>,
    ) -> Result<Option<Vec<u8>>, MemoryError> {
        let now = crate::clock::now_ms();
        let tx = self.db.transaction()?;
        for (hash, v) in pieces {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO vectors (model, hash, query, used, data) VALUES (?1, ?2, 0, ?3, ?4)",
            )?
            .execute(params![model, hash, now, quantize(v)])?;
        }
        let stored = query.map(|(text, v)| (query_hash(text), quantize(v)));
        if let Some((hash, data)) = &stored {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO vectors (model, hash, query, used, data) VALUES (?1, ?2, 1, ?3, ?4)",
            )?
            .execute(params![model, hash, now, data])?;
            tx.prepare_cached(
                "DELETE FROM vectors WHERE model = ?1 AND query = 1 AND used <
                 (SELECT used FROM vectors WHERE model = ?1 AND query = 1 ORDER BY used DESC LIMIT 1 OFFSET ?2)",
            )?
            .execute(params![model, KEPT_QUERIES as i64])?;
        }
        tx.commit()?;
        if self.vectors.as_ref().is_some_and(|set| set.model == model) && !pieces.is_empty() {
            let mut ids = Vec::new();
            {
                let mut stmt = self.db.prepare_cached("SELECT id FROM chunks WHERE hash = ?1")?;
                for (hash, _) in pieces {
                    let rows = stmt.query_map([hash], |r| r.get::<_, i64>(0))?;
                    for id in rows {
                        ids.push((id?, hash.clone()));
                    }
                }
            }
            self.attach(&ids)?;
        }
        Ok(stored.map(|(_, data)| data))
    }

    /// The loaded vectors of `model`, loaded now if they are not (or another process changed
    /// the index since).
    fn vectors_of(&mut self, model: &str) -> Result<&VectorSet, MemoryError> {
        let version: i64 = self.db.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        let fresh = self.vectors.as_ref().is_some_and(|set| set.model == model) && version == self.seen;
        if !fresh {
            let mut set = VectorSet::new(model);
            let mut stmt = self
                .db
                .prepare("SELECT c.id, v.data FROM chunks c JOIN vectors v ON v.model = ?1 AND v.hash = c.hash")?;
            let rows = stmt.query_map([model], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
            for row in rows {
                let (id, data) = row?;
                set.insert(id, &data);
            }
            self.seen = version;
            return Ok(self.vectors.insert(set));
        }
        Ok(self.vectors.get_or_insert_with(|| VectorSet::new(model)))
    }

    /// The pieces that best match `query`'s words, best first: at most `max`, none scoring under
    /// `min_score` (scores run from 0 to 1).
    pub fn search(&self, query: &str, max: usize, min_score: f64) -> Result<Vec<Hit>, MemoryError> {
        let words = terms::query_words(query);
        let found = self.keyword(&words, max)?;
        Ok(found.into_iter().filter(|(_, score)| *score >= min_score).map(|(p, score)| p.hit(&words, score)).collect())
    }

    /// Hybrid search (docs/memory.md): the [`CANDIDATES`]× `max` best pieces by words (BM25) and
    /// as many nearest to `query_vector` (the query's, from `model`), each scored
    /// `0.7 × cosine + 0.3 × word score`; a piece with no vector yet keeps its word score.
    pub fn hybrid(
        &mut self,
        model: &str,
        query: &str,
        query_vector: &[u8],
        max: usize,
        min_score: f64,
    ) -> Result<Vec<Hit>, MemoryError> {
        let words = terms::query_words(query);
        let k = max.saturating_mul(CANDIDATES);
        let keyword = self.keyword(&words, k)?;
        let set = self.vectors_of(model)?;
        let mut scored: HashMap<i64, Scored> = HashMap::new();
        for (id, cos) in set.nearest(query_vector, k) {
            scored.insert(id, (None, None, Some(cos)));
        }
        for (piece, score) in keyword {
            let cos = set.cosine(piece.id, query_vector);
            scored.insert(piece.id, (Some(piece), Some(score), cos));
        }
        let unread: Vec<i64> = scored.iter().filter(|(_, v)| v.0.is_none()).map(|(id, _)| *id).collect();
        for piece in self.pieces(&unread)? {
            if let Some(entry) = scored.get_mut(&piece.id) {
                // Not among the best by BM25: its word score is its coverage alone.
                entry.1 = Some(0.8 * coverage(&words, &piece.text));
                entry.0 = Some(piece);
            }
        }
        let mut hits: Vec<(Piece, f64)> = scored
            .into_values()
            .filter_map(|(piece, words, cos)| {
                let words = words.unwrap_or(0.0);
                let score = match cos {
                    Some(cos) => VECTOR_WEIGHT * f64::from(cos.max(0.0)) + (1.0 - VECTOR_WEIGHT) * words,
                    None => words,
                };
                Some((piece?, score))
            })
            .filter(|(_, score)| *score >= min_score)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.id.cmp(&b.0.id)));
        hits.truncate(max);
        Ok(hits.into_iter().map(|(p, score)| p.hit(&words, score)).collect())
    }

    /// The `limit` pieces best matching `words` by BM25, with their word scores.
    ///
    /// In a large index, ranking every piece that holds a common word is what makes a search
    /// slow, and such words hardly move BM25 anyway: words found in more than one piece in
    /// [`COMMON`] are left out of the match (still counted in the score) when rarer ones remain;
    /// a query of common words only matches the pieces holding all of them, then any of them if
    /// those are too few.
    fn keyword(&self, words: &[String], limit: usize) -> Result<Vec<(Piece, f64)>, MemoryError> {
        let pieces = self.piece_count()?;
        if pieces < PRUNE_FROM || words.len() < 2 {
            return self.ranked(terms::fts_query(words), words, limit);
        }
        let mut rare = Vec::new();
        {
            let mut df = self.db.prepare_cached("SELECT doc FROM chunks_vocab WHERE term = ?1")?;
            for w in words {
                let docs: i64 = df.query_row([w], |r| r.get(0)).optional()?.unwrap_or(0);
                if docs * COMMON <= pieces {
                    rare.push(w.clone());
                }
            }
        }
        if !rare.is_empty() {
            return self.ranked(terms::fts_query(&rare), words, limit);
        }
        let mut found = self.ranked(terms::fts_query_all(words), words, limit)?;
        if found.len() < limit {
            let seen: std::collections::HashSet<i64> = found.iter().map(|(p, _)| p.id).collect();
            let more = self.ranked(terms::fts_query(words), words, limit)?;
            found.extend(more.into_iter().filter(|(p, _)| !seen.contains(&p.id)).take(limit - seen.len()));
        }
        Ok(found)
    }

    /// How many pieces the index holds (counted again only after a change).
    fn piece_count(&self) -> Result<i64, MemoryError> {
        let version: i64 = self.db.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        if let Some((count, v)) = self.pieces.get()
            && v == version
        {
            return Ok(count);
        }
        let count: i64 = self.db.prepare_cached("SELECT count(*) FROM chunks")?.query_row([], |r| r.get(0))?;
        self.pieces.set(Some((count, version)));
        Ok(count)
    }

    /// The `limit` pieces best matching the FTS5 query `fts` by BM25, with their scores for `words`.
    fn ranked(&self, fts: Option<String>, words: &[String], limit: usize) -> Result<Vec<(Piece, f64)>, MemoryError> {
        let Some(fts) = fts else { return Ok(Vec::new()) };
        let mut stmt = self.db.prepare_cached(
            "SELECT c.id, c.path, c.start_line, c.end_line, c.text, bm25(chunks_fts) AS rank
             FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
             WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![fts, limit as i64], |r| Ok((Piece::from_row(r)?, r.get::<_, f64>(5)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (piece, rank) = row?;
            let score = score(rank, words, &piece.text);
            out.push((piece, score));
        }
        // The word score, not BM25 alone, orders them (BM25 leaves the common words out).
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(out)
    }

    /// The pieces `ids`.
    fn pieces(&self, ids: &[i64]) -> Result<Vec<Piece>, MemoryError> {
        let mut stmt =
            self.db.prepare_cached("SELECT id, path, start_line, end_line, text FROM chunks WHERE id = ?1")?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(piece) = stmt.query_row([id], Piece::from_row).optional()? {
                out.push(piece);
            }
        }
        Ok(out)
    }

    /// How many files and pieces the index holds.
    pub fn counts(&self) -> Result<Counts, MemoryError> {
        let files: i64 = self.db.query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
        let chunks: i64 = self.db.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        Ok(Counts { files: files as u64, chunks: chunks as u64 })
    }

    /// Of the distinct pieces, how many have a vector from `model`, and how many there are.
    pub fn vector_counts(&self, model: &str) -> Result<(u64, u64), MemoryError> {
        let (with, all): (i64, i64) = self.db.query_row(
            "SELECT count(v.hash), count(*) FROM (SELECT DISTINCT hash FROM chunks) c
             LEFT JOIN vectors v ON v.model = ?1 AND v.hash = c.hash",
            [model],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((with as u64, all as u64))
    }

    /// The indexed files, with their sizes.
    pub fn files(&self) -> Result<Vec<(String, u64)>, MemoryError> {
        let mut stmt = self.db.prepare("SELECT path, size FROM files ORDER BY path")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// An index of fewer pieces ranks every match (it is fast enough), and orders results exactly as
/// BM25 does.
const PRUNE_FROM: i64 = 5_000;
/// A word in more than one piece in this many is common ([`Index::keyword`]).
const COMMON: i64 = 50;

/// Results considered per result asked for, from each side of a hybrid search.
const CANDIDATES: usize = 4;
/// The share of a hybrid score that is the cosine (the rest is the word score).
const VECTOR_WEIGHT: f64 = 0.7;

/// A hybrid candidate: the piece (once read), its word score, its cosine.
type Scored = (Option<Piece>, Option<f64>, Option<f32>);

/// One indexed piece.
struct Piece {
    id: i64,
    path: String,
    start: usize,
    end: usize,
    text: String,
}

impl Piece {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            path: r.get(1)?,
            start: r.get::<_, i64>(2)? as usize,
            end: r.get::<_, i64>(3)? as usize,
            text: r.get(4)?,
        })
    }

    fn hit(self, words: &[String], score: f64) -> Hit {
        let (snippet, best_line) = snippet(&self.text, words, self.start);
        Hit { path: self.path, start_line: self.start, end_line: self.end, best_line, score, snippet }
    }
}

/// A file to write to the index: its size, time, and (hash, text) when it must be cut again.
type Work<'a> = (&'a Source, i64, i64, Option<(String, String)>);

/// Removes the pieces of `path`; returns their (id, hash).
fn remove_chunks(tx: &rusqlite::Transaction<'_>, path: &str) -> rusqlite::Result<Vec<(i64, String)>> {
    let removed = tx
        .prepare_cached("SELECT id, hash FROM chunks WHERE path = ?1")?
        .query_map([path], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    tx.prepare_cached("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE path = ?1)")?
        .execute([path])?;
    tx.prepare_cached("DELETE FROM chunks WHERE path = ?1")?.execute([path])?;
    Ok(removed)
}

/// The key a query's vector is stored under (apart from the pieces').
fn query_hash(query: &str) -> String {
    hash(&format!("query\0{}", query.trim()))
}

/// A result's score, 0 to 1: mostly the share of the query's words the piece holds (so `1.00`
/// means all of them, however small the index), and a little of BM25 (SQLite's rank: lower is
/// better, and negative), which also orders the results.
fn score(rank: f64, words: &[String], text: &str) -> f64 {
    let bm25 = (-rank).max(0.0);
    0.8 * coverage(words, text) + 0.2 * bm25 / (1.0 + bm25)
}

/// The share of `words` that `text` holds.
fn coverage(words: &[String], text: &str) -> f64 {
    let held = terms::text_words(text);
    words.iter().filter(|w| held.contains(*w)).count() as f64 / words.len().max(1) as f64
}

/// The part of a piece to show: all of it when short, else about [`SNIPPET_CHARS`] from the line
/// holding the most query words. Returns it and that line's number.
fn snippet(text: &str, words: &[String], first_line: usize) -> (String, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let hits = |line: &str| {
        let held = terms::text_words(line);
        words.iter().filter(|w| held.contains(w.as_str())).count()
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
