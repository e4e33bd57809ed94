//! Keeping the index current while sessions that read the memory are open: one watcher per
//! index in the process (inotify on Linux, through `notify`), started with the first session and
//! stopped with the last ([`Watching`] is the session's share). A change to the watched files is
//! indexed ~200 ms after the last event of a burst, in the background; and while the watcher has
//! seen no change since the last complete sync, a search does not walk the files at all.
//!
//! Only roots that existed when the watcher started are watched; if any memory root was missing
//! (a `memory/` not created yet, an extra path that comes later), searches walk the files as
//! they do without a watcher, so nothing is ever missed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::sync::lock;

/// Quiet time after an event before the index is brought up to date.
const SETTLE: Duration = Duration::from_millis(200);

/// What a watcher knows of its index.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Bumped on every change seen.
    generation: AtomicU64,
    /// 1 + the generation the last complete sync started at (0: none yet).
    synced: AtomicU64,
    /// A memory root is not watched (missing, a file, gone): searches still walk.
    unwatched: AtomicBool,
    /// A memory file is a link (its target may change where no watch sees it): searches walk.
    links: AtomicBool,
    /// What changed since the last sync: these paths, or more (a directory, a lost event) when
    /// `full`.
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    paths: std::collections::HashSet<PathBuf>,
    full: bool,
}

impl State {
    /// Whether the index holds every change seen, and every root is watched.
    pub(super) fn current(&self) -> bool {
        !self.unwatched.load(Ordering::Acquire)
            && !self.links.load(Ordering::Acquire)
            && self.synced.load(Ordering::Acquire) == self.generation.load(Ordering::Acquire) + 1
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A complete sync that started at generation `at` succeeded.
    pub(super) fn synced(&self, at: u64) {
        self.synced.fetch_max(at + 1, Ordering::AcqRel);
    }
}

struct Entry {
    sessions: usize,
    state: Arc<State>,
    /// Dropping it stops the watch (and the thread that indexes).
    watcher: Option<notify::RecommendedWatcher>,
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Entry>> {
    static WATCHED: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
    WATCHED.get_or_init(Mutex::default)
}

/// The state of the watcher of the index at `index`, if one runs.
pub(super) fn state(index: &Path) -> Option<Arc<State>> {
    lock(registry()).get(index).filter(|e| e.watcher.is_some()).map(|e| e.state.clone())
}

/// A memory file is about to change (a tool writes it): searches walk the files until the watcher
/// has indexed the change, so the next search cannot miss it while the event is on its way.
pub(super) fn changing(index: &Path) {
    if let Some(entry) = lock(registry()).get(index) {
        entry.state.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// A session's share of its memory's watcher: the watcher stops when the last share is dropped.
#[derive(Debug)]
pub struct Watching {
    index: PathBuf,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut watched = lock(registry());
        if let Some(entry) = watched.get_mut(&self.index) {
            entry.sessions = entry.sessions.saturating_sub(1);
            if entry.sessions == 0 {
                watched.remove(&self.index);
            }
        }
    }
}

/// How the watcher brings the index up to date: for these files (`None`: all of them), returning
/// what it did (or why it failed).
pub(super) type Sync = Box<dyn Fn(Option<Vec<PathBuf>>) -> Result<Synced, String> + Send>;

/// Whether a changed path can concern the memory (others are not looked at).
pub(super) type Relevant = Box<dyn Fn(&Path) -> bool + Send + std::marker::Sync>;

/// What a sync did.
pub(super) struct Synced {
    pub touched: bool,
    /// Whether a memory file is a link (its target may change where no watch sees it); known
    /// after a full sync.
    pub links: Option<bool>,
}

/// A root to watch, and whether the directories under it are watched too.
pub(super) struct Root {
    pub path: PathBuf,
    pub recursive: bool,
}

/// Keeps the index at `index` current while the returned share lives, watching `roots` (the
/// workspace and the extra paths) and running `sync` after changes. Cheap: the watcher is set up
/// on a thread of its own (its recursive watches walk the directories).
pub(super) fn watch(index: &Path, roots: Vec<Root>, relevant: Relevant, sync: Sync) -> Watching {
    let start = {
        let mut watched = lock(registry());
        let entry = watched.entry(index.to_path_buf()).or_insert_with(|| Entry {
            sessions: 0,
            state: Arc::default(),
            watcher: None,
        });
        entry.sessions += 1;
        (entry.sessions == 1).then(|| entry.state.clone())
    };
    if let Some(state) = start {
        let key = index.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("acp-memory-watch".into())
            .spawn(move || run(&key, &roots, relevant, &sync, &state));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot watch the memory files; searches read them instead");
        }
    }
    Watching { index: index.to_path_buf() }
}

fn run(index: &Path, roots: &[Root], relevant: Relevant, sync: &Sync, state: &Arc<State>) {
    let (tx, rx) = mpsc::channel::<()>();
    let seen = state.clone();
    let root_paths: Vec<PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
    let handler = move |event: notify::Result<notify::Event>| {
        {
            let mut pending = lock(&seen.pending);
            match &event {
                Ok(e) if matches!(e.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) => return,
                Ok(e) if !e.need_rescan() && !e.paths.is_empty() => {
                    if !e.paths.iter().any(|p| relevant(p)) {
                        return;
                    }
                    for path in e.paths.iter().filter(|p| relevant(p)) {
                        // A root gone or moved is no longer watched: searches look for themselves.
                        if root_paths.contains(path) && !path.exists() {
                            seen.unwatched.store(true, Ordering::Release);
                        }
                        // A directory (made, moved, gone) may hold many files: all are looked at.
                        pending.full |= !markdown(path);
                        pending.paths.insert(path.clone());
                    }
                }
                _ => pending.full = true,
            }
        }
        seen.generation.fetch_add(1, Ordering::AcqRel);
        let _ = tx.send(());
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the memory files; searches read them instead");
            return;
        }
    };
    let mut waiting: Vec<&Root> = Vec::new();
    for root in roots {
        if !add(&mut watcher, root) {
            waiting.push(root);
        }
    }
    state.unwatched.store(!waiting.is_empty(), Ordering::Release);
    {
        let mut watched = lock(registry());
        match watched.get_mut(index) {
            // Still wanted, by the sessions that started it.
            Some(entry) if Arc::ptr_eq(&entry.state, state) => entry.watcher = Some(watcher),
            _ => return,
        }
    }
    // Index what changed before the watch began, then every burst of changes.
    lock(&state.pending).full = true;
    index_now(sync, state);
    while rx.recv().is_ok() {
        while rx.recv_timeout(SETTLE).is_ok() {}
        // A directory root that appeared (`memory/` made by the first note) is watched from now,
        // and everything under it indexed.
        // One that went is waited for again.
        for root in roots {
            if !root.path.is_dir() && !waiting.iter().any(|w| w.path == root.path) {
                waiting.push(root);
            }
        }
        let before = waiting.len();
        waiting.retain(|root| {
            let mut watched = lock(registry());
            let Some(watcher) = watched.get_mut(index).and_then(|e| e.watcher.as_mut()) else { return true };
            !add(watcher, root)
        });
        if waiting.len() < before {
            lock(&state.pending).full = true;
        }
        state.unwatched.store(!waiting.is_empty(), Ordering::Release);
        index_now(sync, state);
    }
}

/// Watches `root`, if it is a directory; false if it is not watched.
fn add(watcher: &mut notify::RecommendedWatcher, root: &Root) -> bool {
    // A file is replaced, not written, by many editors (a new file renamed over it), which ends a
    // watch on it: a file root is never watched, and leaves the watch incomplete.
    if !root.path.is_dir() {
        return false;
    }
    let mode = if root.recursive { RecursiveMode::Recursive } else { RecursiveMode::NonRecursive };
    match watcher.watch(&root.path, mode) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(path = %root.path.display(), error = %e, "cannot watch a memory path");
            false
        }
    }
}

fn index_now(sync: &Sync, state: &State) {
    let at = state.generation();
    let pending = std::mem::take(&mut *lock(&state.pending));
    let paths = (!pending.full).then(|| pending.paths.into_iter().collect());
    match sync(paths) {
        Ok(synced) => {
            if let Some(links) = synced.links {
                state.links.store(links, Ordering::Release);
            }
            state.synced(at);
            if synced.touched {
                tracing::debug!("memory index brought up to date after a change");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not bring the memory index up to date"),
    }
}

/// Whether `path` names a Markdown file (anything else may be a directory).
fn markdown(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("markdown"))
}
