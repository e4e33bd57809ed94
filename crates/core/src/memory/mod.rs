//! The agent's memory (docs/memory.md): Markdown files in its workspace — `MEMORY.md`, curated and
//! long-lived, and `memory/YYYY-MM-DD.md`, a log a day, appended to — that the model writes with
//! the ordinary file tools, and an index over them (`index.rs`) that `memory_search` asks. The
//! files are the truth; the index is rebuilt from them whenever it cannot be used.

pub mod chunk;
pub mod embed;
pub mod index;
pub mod terms;
pub mod vectors;
mod watch;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::config::Config;
use crate::sync::lock;
use embed::Embedder;
pub use index::{Hit, MemoryError, Source};
use index::{Index, Synced};
pub use watch::Watching;

/// The long-lived memory file, and the lower-case name some workspaces use for it.
pub const MEMORY_FILE: &str = "MEMORY.md";
const MEMORY_FILE_LOWER: &str = "memory.md";
/// The directory of daily logs (and any other notes) in the workspace.
pub const MEMORY_DIR: &str = "memory";

/// Memory files walked at most (a workspace with more is cut there, and says so).
const MAX_FILES: usize = 50_000;
/// Pieces embedded at most during one search — one request — (more are embedded by the next
/// searches, or all at once by `acp memory index`), so a
/// search answers in seconds even on a new, large memory.
const EMBED_PER_SEARCH: usize = embed::BATCH;
/// Pieces embedded per round by [`Memory::embed_all`].
const EMBED_PER_ROUND: usize = 1024;

/// What a search found, and how.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub hits: Vec<Hit>,
    pub synced: Synced,
    /// Whether vectors ranked the results too (hybrid mode).
    pub hybrid: bool,
    /// What the searcher should know: semantic search unavailable, pieces not embedded yet.
    pub note: Option<String>,
}

/// One agent's memory: its workspace and its index.
#[derive(Debug, Clone)]
pub struct Memory {
    workspace: PathBuf,
    extra: Vec<PathBuf>,
    index: PathBuf,
}

impl Memory {
    /// The memory of the agent `agent` whose workspace is `workspace`, as `config` says.
    pub fn new(config: &Config, agent: &str, workspace: PathBuf) -> Self {
        let extra = config.memory.extra_paths.iter().map(|p| workspace.join(p)).collect();
        let index = config.home.join("memory").join(format!("{agent}.sqlite"));
        Self { workspace, extra, index }
    }

    /// The memory of the agent `config` is for: its workspace's, else `$ACP_HOME/workspace`'s.
    pub fn of(config: &Config) -> Self {
        let agent = config.agent_scope.as_ref().map_or("main", |a| a.id.as_str());
        Self::new(config, agent, config.agent_dir())
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn index_path(&self) -> &Path {
        &self.index
    }

    /// Every memory file there is now: `MEMORY.md` (or `memory.md`), the Markdown files under
    /// `memory/`, and the extra paths (files, or directories walked for Markdown files), each
    /// once, in a stable order.
    pub fn sources(&self) -> Vec<Source> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // Files are told apart by their real paths (an extra path may overlap `memory/`, a link
        // may point at another memory file); each root is resolved once, and only links one by one.
        let mut add = |path: PathBuf, real: PathBuf, out: &mut Vec<Source>| {
            if out.len() < MAX_FILES && seen.insert(real) {
                out.push(Source { shown: self.shown(&path), path });
            }
        };
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        // A link is followed only to a file inside the memory's own places: one to anything else
        // (`memory/x.md` → `/etc/passwd`, `~/.ssh/…`) would hand the model a file nobody put in
        // its memory.
        let places: Vec<PathBuf> =
            std::iter::once(self.workspace.clone()).chain(self.extra.iter().cloned()).map(|p| real(&p)).collect();
        let inside = |p: &Path| places.iter().any(|place| p.starts_with(place));
        let is_link = |p: &Path| p.symlink_metadata().is_ok_and(|m| m.is_symlink());
        for name in [MEMORY_FILE, MEMORY_FILE_LOWER] {
            let path = self.workspace.join(name);
            if path.is_file() {
                let resolved = real(&path);
                if !is_link(&path) || inside(&resolved) {
                    add(path, resolved, &mut out);
                }
            }
        }
        for dir in std::iter::once(self.workspace.join(MEMORY_DIR)).chain(self.extra.iter().cloned()) {
            if dir.is_file() {
                if is_markdown(&dir) {
                    let resolved = real(&dir);
                    if !is_link(&dir) || inside(&resolved) {
                        add(dir, resolved, &mut out);
                    }
                }
                continue;
            }
            let mut found = Vec::new();
            markdown_under(&dir, &mut found, 0);
            found.sort();
            let root = real(&dir);
            for (path, link) in found {
                let resolved = match path.strip_prefix(&dir) {
                    Ok(inner) if !link => root.join(inner),
                    _ => real(&path),
                };
                if link && !inside(&resolved) {
                    tracing::debug!(path = %path.display(), "a memory file links out of the memory; left out");
                    continue;
                }
                add(path, resolved, &mut out);
            }
        }
        out
    }

    fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(inner) => inner.to_string_lossy().into_owned(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Resolves a path the model gave `memory_get` — relative to the workspace, or one of the
    /// names results carry — to a memory file; `None` if it is not one (the tool reads nothing
    /// else).
    pub fn resolve(&self, raw: &str) -> Option<PathBuf> {
        let raw = raw.trim();
        let candidate = if Path::new(raw).is_absolute() { PathBuf::from(raw) } else { self.workspace.join(raw) };
        if candidate.components().any(|c| c == Component::ParentDir) {
            return None;
        }
        let real = std::fs::canonicalize(&candidate).ok()?;
        self.sources().into_iter().find(|s| std::fs::canonicalize(&s.path).is_ok_and(|p| p == real)).map(|s| s.path)
    }

    /// Brings the index up to date and searches it (blocking: call off the async threads). An
    /// index that cannot be used is rebuilt; one that another process holds too long is
    /// replaced, for this search, by one built in memory.
    pub fn search(&self, query: &str, max: usize, min_score: f64) -> Result<(Vec<Hit>, Synced), MemoryError> {
        self.with_synced(|index, synced| Ok((index.search(query, max, min_score)?, synced)))
    }

    /// Keeps this memory's index current while the returned share lives (docs/memory.md): one
    /// watcher per index in the process, stopped with its last share.
    pub fn watch(&self) -> Watching {
        // The workspace itself for MEMORY.md (and `memory/` appearing), `memory/` and the extra
        // paths with everything under them.
        let roots = [watch::Root { path: self.workspace.clone(), recursive: false }]
            .into_iter()
            .chain(
                std::iter::once(self.workspace.join(MEMORY_DIR))
                    .chain(self.extra.iter().cloned())
                    .map(|path| watch::Root { path, recursive: true }),
            )
            .collect();
        let this = self.clone();
        let relevant = Box::new(move |p: &Path| this.may_hold_memory(p));
        let this = self.clone();
        // Roots that overlap would give one file two names; then every change is a full sync.
        let overlap = self.extra.iter().any(|e| e.starts_with(&self.workspace) || self.workspace.starts_with(e));
        let sync = Box::new(move |paths: Option<Vec<PathBuf>>| {
            let (synced, links) = match paths {
                Some(paths) if !overlap => (this.sync_paths(paths), None),
                _ => {
                    let sources = this.sources();
                    let links = sources.iter().any(|s| s.path.symlink_metadata().is_ok_and(|m| m.is_symlink()));
                    (this.with_sources(Some(sources), |index, sources| index.sync(sources)), Some(links))
                }
            };
            synced.map(|s| watch::Synced { touched: s.touched(), links }).map_err(|e| e.0)
        });
        watch::watch(&self.index, roots, relevant, sync)
    }

    /// Whether a changed path may be (or hold) a memory file: `MEMORY.md`, `memory/` and what is
    /// under it, the extra paths and what is under them.
    fn may_hold_memory(&self, path: &Path) -> bool {
        [MEMORY_FILE, MEMORY_FILE_LOWER].iter().any(|f| path == self.workspace.join(f))
            || path.starts_with(self.workspace.join(MEMORY_DIR))
            || self.extra.iter().any(|e| path.starts_with(e))
    }

    /// Brings the index up to date for `paths` only (files a watcher saw change).
    pub fn sync_paths(&self, paths: Vec<PathBuf>) -> Result<Synced, MemoryError> {
        let (mut present, mut gone) = (Vec::new(), Vec::new());
        for path in paths.into_iter().filter(|p| self.is_memory_file(p)) {
            if path.is_file() {
                present.push(Source { shown: self.shown(&path), path });
            } else {
                gone.push(self.shown(&path));
            }
        }
        self.with_open(|index| index.sync_some(&present, &gone))
    }

    /// Whether `path` is (or was) a memory file by its name: `MEMORY.md`, a Markdown file under
    /// `memory/` or an extra path, none of its parts hidden.
    fn is_memory_file(&self, path: &Path) -> bool {
        let under = |root: &Path| {
            path.strip_prefix(root)
                .is_ok_and(|inner| inner.components().all(|c| !c.as_os_str().to_string_lossy().starts_with('.')))
        };
        is_markdown(path)
            && ([MEMORY_FILE, MEMORY_FILE_LOWER].iter().any(|f| path == self.workspace.join(f))
                || under(&self.workspace.join(MEMORY_DIR))
                || self.extra.iter().any(|e| path == e || under(e)))
    }

    /// A tool is about to write one of the memory files ([`watch::changing`]).
    pub fn changing(&self) {
        watch::changing(&self.index);
    }

    /// Runs `f` on the index brought up to date — by the watcher, if one runs and has seen
    /// everything (no walk then), else by walking the files now.
    fn with_synced<T>(&self, f: impl Fn(&mut Index, Synced) -> Result<T, MemoryError>) -> Result<T, MemoryError> {
        let watched = watch::state(&self.index);
        if let Some(state) = watched.as_ref().filter(|s| s.current()) {
            let at = state.generation();
            let out = self.with_open(|index| f(index, Synced::default()));
            if out.is_ok() && state.current() && state.generation() == at {
                return out;
            }
        }
        let at = watched.as_ref().map(|s| s.generation());
        let out = self.with_index(|index, sources| {
            let synced = index.sync(sources)?;
            f(index, synced)
        });
        if let (Ok(_), Some(state), Some(at)) = (&out, &watched, at) {
            state.synced(at);
        }
        out
    }

    /// Searches as configured (async; the index work on the blocking pool): hybrid when
    /// `embedder` is given and answers, by words alone otherwise — with a note saying why when
    /// an embedder was named but could not be used.
    pub async fn find(
        &self,
        embedder: Option<Result<Embedder, String>>,
        query: &str,
        max: usize,
        min_score: f64,
    ) -> Result<Found, MemoryError> {
        let embedder = match embedder {
            None => return self.find_by_words(query, max, min_score, None).await,
            Some(Err(why)) => return self.find_by_words(query, max, min_score, Some(unavailable(&why))).await,
            Some(Ok(e)) => e,
        };
        let (this, model, q) = (self.clone(), embedder.name.clone(), query.to_owned());
        let ahead = blocking(move || {
            this.with_synced(|index, synced| {
                if !index.persistent() {
                    let hits = index.search(&q, max, min_score)?;
                    return Ok(Ahead::Done(Found { hits, synced, ..Found::default() }));
                }
                let (missing, total) = index.unembedded(&model, EMBED_PER_SEARCH)?;
                Ok(Ahead::Embed { synced, missing, total, query: index.query_vector(&model, &q)? })
            })
        })
        .await?;
        let (synced, missing, total, cached) = match ahead {
            Ahead::Done(found) => return Ok(found),
            Ahead::Embed { synced, missing, total, query } => (synced, missing, total, query),
        };
        // The query first: without its vector there is no hybrid search.
        let query_vector = match &cached {
            Some(_) => None,
            None => match embedder.embed(&[query.to_owned()]).await {
                Ok(mut v) => v.pop(),
                Err(why) => {
                    tracing::warn!(error = %why, "embeddings failed; searching by words alone");
                    return self.find_by_words(query, max, min_score, Some(unavailable(&why))).await;
                }
            },
        };
        // Then one batch of the pieces that have none, best effort.
        let texts: Vec<String> = missing.iter().map(|(_, text)| text.clone()).collect();
        let (pieces, failed): (Vec<(String, Vec<f32>)>, Option<String>) = if texts.is_empty() {
            (Vec::new(), None)
        } else {
            match embedder.embed(&texts).await {
                Ok(vectors) => (missing.into_iter().map(|(hash, _)| hash).zip(vectors).collect(), None),
                Err(why) => (Vec::new(), Some(why)),
            }
        };
        let note = (total > pieces.len()).then(|| {
            let why = failed.map(|why| format!(" ({why})")).unwrap_or_default();
            format!(
                "{} of the memory's pieces have no vector yet{why} and were matched by their words only \
                 (`acp memory index` embeds them all)",
                total - pieces.len()
            )
        });
        let (this, model, q) = (self.clone(), embedder.name.clone(), query.to_owned());
        let hits = blocking(move || {
            this.with_open(|index| {
                let stored = index.store_vectors(&model, &pieces, query_vector.as_deref().map(|v| (q.as_str(), v)))?;
                let Some(qv) = cached.clone().or(stored) else { return index.search(&q, max, min_score) };
                index.hybrid(&model, &q, &qv, max, min_score)
            })
        })
        .await?;
        Ok(Found { hits, synced, hybrid: true, note })
    }

    async fn find_by_words(
        &self,
        query: &str,
        max: usize,
        min_score: f64,
        note: Option<String>,
    ) -> Result<Found, MemoryError> {
        let (this, q) = (self.clone(), query.to_owned());
        let (hits, synced) = blocking(move || this.search(&q, max, min_score)).await?;
        Ok(Found { hits, synced, hybrid: false, note })
    }

    /// Embeds every piece that has no vector yet (`acp memory index` in hybrid mode); returns how
    /// many were embedded.
    pub async fn embed_all(&self, embedder: &Embedder) -> Result<usize, MemoryError> {
        let mut done = 0;
        loop {
            let (this, model) = (self.clone(), embedder.name.clone());
            let (missing, _) =
                blocking(move || this.with_open(|index| index.unembedded(&model, EMBED_PER_ROUND))).await?;
            if missing.is_empty() {
                return Ok(done);
            }
            let texts: Vec<String> = missing.iter().map(|(_, text)| text.clone()).collect();
            let vectors = embedder.embed(&texts).await.map_err(MemoryError)?;
            let pieces: Vec<(String, Vec<f32>)> = missing.into_iter().map(|(hash, _)| hash).zip(vectors).collect();
            done += pieces.len();
            let (this, model) = (self.clone(), embedder.name.clone());
            blocking(move || this.with_open(|index| index.store_vectors(&model, &pieces, None).map(drop))).await?;
        }
    }

    /// Brings the index up to date (`acp memory index`).
    pub fn sync(&self) -> Result<Synced, MemoryError> {
        self.with_index(|index, sources| index.sync(sources))
    }

    /// What the index holds after bringing it up to date: its files (name, bytes) and pieces.
    pub fn status(&self) -> Result<Status, MemoryError> {
        self.with_index(|index, sources| {
            let synced = index.sync(sources)?;
            Ok(Status { counts: index.counts()?, files: index.files()?, skipped: synced.skipped })
        })
    }

    /// How many distinct pieces have a vector from `model`, of how many (`acp memory status`).
    pub fn vector_counts(&self, model: &str) -> Result<(u64, u64), MemoryError> {
        self.with_open(|index| index.vector_counts(model))
    }

    /// `/memory`: where the files are, what the index holds (as last brought up to date: this
    /// reads, it does not index), and whether the session reads the memory.
    pub fn report(&self, enabled: bool, reads: bool) -> String {
        let mut out = String::new();
        if !enabled {
            out.push_str("Memory is off (`[memory] enabled = false` in config.toml).\n");
            return out;
        }
        out.push_str(&format!("Memory files: {} (MEMORY.md, memory/*.md", self.workspace.display()));
        for extra in &self.extra {
            out.push_str(&format!(", {}", extra.display()));
        }
        out.push_str(")\n");
        out.push_str(if reads {
            "This session reads MEMORY.md and today's and yesterday's logs, and may search the rest.\n"
        } else {
            "This session does not read the memory (a group chat's or a subagent's).\n"
        });
        let counts = Index::open_existing(&self.index).and_then(|opened| match opened {
            Some(index) => Ok(Some((index.counts()?, index.files()?))),
            None => Ok(None),
        });
        match counts {
            Ok(Some((counts, files))) => {
                out.push_str(&format!(
                    "Index: {} — {} files, {} pieces\n",
                    self.index.display(),
                    counts.files,
                    counts.chunks
                ));
                for (path, size) in files.iter().take(20) {
                    out.push_str(&format!("- {path} ({size} bytes)\n"));
                }
                if files.len() > 20 {
                    out.push_str(&format!("- … and {} more\n", files.len() - 20));
                }
            }
            Ok(None) => out.push_str("Index: not built yet.\n"),
            // Being built by another connection this very moment.
            Err(e) if e.0.contains("no such table") => out.push_str("Index: not built yet.\n"),
            Err(e) => out.push_str(&format!("Index: cannot be read ({e}); the next search rebuilds it.\n")),
        }
        out
    }

    /// Runs `f` on the index without walking the files first.
    fn with_open<T>(&self, f: impl Fn(&mut Index) -> Result<T, MemoryError>) -> Result<T, MemoryError> {
        self.with_sources(None, |index, _| f(index))
    }

    fn with_index<T>(&self, f: impl Fn(&mut Index, &[Source]) -> Result<T, MemoryError>) -> Result<T, MemoryError> {
        self.with_sources(Some(self.sources()), f)
    }

    /// Runs `f` on the shared index; `sources`: the files walked (`None`: not walked, by a caller
    /// trusting the index as it is). An index built anew — in memory, when the file cannot be
    /// opened, or after it was found damaged — is first filled from every file, so `f` never
    /// reads an empty index for an up-to-date one.
    fn with_sources<T>(
        &self,
        sources: Option<Vec<Source>>,
        f: impl Fn(&mut Index, &[Source]) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let fill = |index: &mut Index, walked: &Option<Vec<Source>>| -> Result<(), MemoryError> {
            if walked.is_none() && index.unfilled() {
                index.sync(&self.sources())?;
            }
            Ok(())
        };
        let given: &[Source] = sources.as_deref().unwrap_or(&[]);
        let shared = match open_shared(&self.index) {
            Ok(shared) => shared,
            Err(e) => {
                tracing::warn!(error = %e, "the memory index cannot be opened; searching an index built in memory");
                let mut index = Index::in_memory()?;
                fill(&mut index, &sources)?;
                return f(&mut index, given);
            }
        };
        let mut index = lock(&shared);
        let in_memory = |why: &MemoryError| -> Result<T, MemoryError> {
            tracing::warn!(error = %why, "the memory index is held by another process; searching an index built in memory");
            let mut index = Index::in_memory()?;
            let all = self.sources();
            index.sync(&all)?;
            f(&mut index, &all)
        };
        if let Err(e) = fill(&mut index, &sources) {
            return if busy(&e) { in_memory(&e) } else { Err(e) };
        }
        match f(&mut index, given) {
            Err(e) if busy(&e) => in_memory(&e),
            Err(e) if broken(&e) => {
                tracing::warn!(error = %e, "the memory index is damaged; rebuilding it");
                drop(index);
                forget_shared(&self.index);
                let aside = self.index.with_extension("sqlite.broken");
                let _ = std::fs::rename(&self.index, aside);
                let shared = open_shared(&self.index)?;
                let mut index = lock(&shared);
                fill(&mut index, &sources)?;
                f(&mut index, given)
            }
            other => other,
        }
    }
}

/// What a hybrid search learns before it embeds.
enum Ahead {
    Done(Found),
    Embed { synced: Synced, missing: Vec<(String, String)>, total: usize, query: Option<Vec<u8>> },
}

/// The note of a search that could not use vectors.
fn unavailable(why: &str) -> String {
    format!("semantic search is unavailable ({why}); these results match words only")
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, MemoryError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| MemoryError(format!("memory search stopped: {e}")))?
}

/// What `acp memory status` and `/memory` show.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub counts: index::Counts,
    pub files: Vec<(String, u64)>,
    pub skipped: Vec<(String, String)>,
}

/// Whether an index error means another connection holds the file too long.
fn busy(e: &MemoryError) -> bool {
    e.0.contains("database is locked") || e.0.contains("database is busy")
}

/// Whether an index error means the file is damaged (rather than busy, or a bad query).
fn broken(e: &MemoryError) -> bool {
    ["malformed", "not a database", "corrupt", "no such table", "no such column"].iter().any(|w| e.0.contains(w))
}

/// The open indexes of this process, one connection each, by path.
fn shared() -> &'static Mutex<HashMap<PathBuf, Arc<Mutex<Index>>>> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<Index>>>>> = OnceLock::new();
    OPEN.get_or_init(Mutex::default)
}

fn open_shared(path: &Path) -> Result<Arc<Mutex<Index>>, MemoryError> {
    if let Some(open) = lock(shared()).get(path) {
        return Ok(open.clone());
    }
    let index = Arc::new(Mutex::new(Index::open(path)?));
    Ok(lock(shared()).entry(path.to_path_buf()).or_insert(index).clone())
}

fn forget_shared(path: &Path) {
    lock(shared()).remove(path);
}

fn is_markdown(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("markdown"))
}

/// Markdown files under `dir` (and whether each is a link), symlinked directories not followed
/// (no loops), hidden entries left out.
fn markdown_under(dir: &Path, out: &mut Vec<(PathBuf, bool)>, depth: usize) {
    if depth > 16 || out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => markdown_under(&path, out, depth + 1),
            Ok(t) if (t.is_file() || t.is_symlink()) && is_markdown(&path) => out.push((path, t.is_symlink())),
            _ => {}
        }
    }
}

/// Whether session `key` reads the private memory. Every session does but those whose key says
/// they are a gateway group's or channel's (`agent:<agent>:<channel>:group:<id>…`,
/// `…:channel:<id>…`: people besides the owner read what the agent says there) or a subagent's
/// (`agent:<agent>:subagent:<id>`: memory is its parent's business).
pub fn private_session(key: &str) -> bool {
    let parts: Vec<&str> = key.split(':').collect();
    if parts.first() != Some(&"agent") {
        return true;
    }
    let subagent = parts.get(2) == Some(&"subagent");
    let shared = parts.iter().skip(3).any(|p| matches!(*p, "group" | "channel"));
    !(subagent || shared)
}

/// The daily log of `date` (`YYYY-MM-DD`), relative to the workspace.
pub fn daily_log(date: &str) -> String {
    format!("{MEMORY_DIR}/{date}.md")
}

#[cfg(test)]
mod tests;
