//! The agent's memory (docs/memory.md): Markdown files in its workspace — `MEMORY.md`, curated and
//! long-lived, and `memory/YYYY-MM-DD.md`, a log a day, appended to — that the model writes with
//! the ordinary file tools, and an index over them (`index.rs`) that `memory_search` asks. The
//! files are the truth; the index is rebuilt from them whenever it cannot be used.

pub mod chunk;
pub mod index;
pub mod terms;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::config::Config;
use crate::sync::lock;
pub use index::{Hit, MemoryError, Source};
use index::{Index, Synced};

/// The long-lived memory file, and the lower-case name some workspaces use for it.
pub const MEMORY_FILE: &str = "MEMORY.md";
const MEMORY_FILE_LOWER: &str = "memory.md";
/// The directory of daily logs (and any other notes) in the workspace.
pub const MEMORY_DIR: &str = "memory";

/// Memory files walked at most (a workspace with more is cut there, and says so).
const MAX_FILES: usize = 50_000;

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

    /// The default agent's memory: `$ACP_HOME/workspace`.
    pub fn of(config: &Config) -> Self {
        Self::new(config, "main", config.home.join("workspace"))
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
        let mut add = |path: PathBuf, out: &mut Vec<Source>| {
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if out.len() < MAX_FILES && seen.insert(real) {
                out.push(Source { shown: self.shown(&path), path });
            }
        };
        for name in [MEMORY_FILE, MEMORY_FILE_LOWER] {
            let path = self.workspace.join(name);
            if path.is_file() {
                add(path, &mut out);
            }
        }
        for dir in std::iter::once(self.workspace.join(MEMORY_DIR)).chain(self.extra.iter().cloned()) {
            if dir.is_file() {
                if is_markdown(&dir) {
                    add(dir, &mut out);
                }
                continue;
            }
            let mut found = Vec::new();
            markdown_under(&dir, &mut found, 0);
            found.sort();
            for path in found {
                add(path, &mut out);
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
        self.with_index(|index, sources| {
            let synced = index.sync(sources)?;
            Ok((index.search(query, max, min_score)?, synced))
        })
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
            Ok(None) => out.push_str("Index: not built yet (the first memory_search builds it).\n"),
            Err(e) => out.push_str(&format!("Index: cannot be read ({e}); the next search rebuilds it.\n")),
        }
        out
    }

    fn with_index<T>(&self, f: impl Fn(&mut Index, &[Source]) -> Result<T, MemoryError>) -> Result<T, MemoryError> {
        let sources = self.sources();
        let shared = match open_shared(&self.index) {
            Ok(shared) => shared,
            Err(e) => {
                tracing::warn!(error = %e, "the memory index cannot be opened; searching an index built in memory");
                let mut index = Index::in_memory()?;
                return f(&mut index, &sources);
            }
        };
        let mut index = lock(&shared);
        match f(&mut index, &sources) {
            Err(e) if broken(&e) => {
                tracing::warn!(error = %e, "the memory index is damaged; rebuilding it");
                drop(index);
                forget_shared(&self.index);
                let aside = self.index.with_extension("sqlite.broken");
                let _ = std::fs::rename(&self.index, aside);
                let shared = open_shared(&self.index)?;
                let mut index = lock(&shared);
                f(&mut index, &sources)
            }
            other => other,
        }
    }
}

/// What `acp memory status` and `/memory` show.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub counts: index::Counts,
    pub files: Vec<(String, u64)>,
    pub skipped: Vec<(String, String)>,
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

/// Markdown files under `dir`, symlinked directories not followed (no loops), hidden entries left
/// out.
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
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
            Ok(t) if (t.is_file() || t.is_symlink()) && is_markdown(&path) => out.push(path),
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
