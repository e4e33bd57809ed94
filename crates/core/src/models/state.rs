//! What acp remembers of its models and credentials between requests and restarts: which
//! credential (auth profile) or model failed, how often, and until when it cools down; which
//! credential of each provider last answered. Kept in `$ACP_HOME/models-state.json`, written
//! (atomically) only when something changes — a failure, a recovery — never per request.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::providers::{ErrorKind, ProviderError};
use crate::sync::lock;

/// A failure count older than this is forgotten: the next failure starts the schedule again.
const FORGET_AFTER_MS: i64 = 24 * 60 * 60 * 1000;

/// What a failure puts on cool-down: the credential it was made with, or the model itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The key: refused (401/403), out of money, or rate limited.
    Profile,
    /// The model or its provider: overloaded, failing, unreachable, unknown.
    Model,
}

/// Who a failure of this kind is held against, and for how long its `n`th time in a row.
pub fn cooldown(kind: ErrorKind, n: u32, retry_after: Option<Duration>) -> Option<(Blame, Duration)> {
    let grow = |base: u64, factor: u64, cap: u64| {
        let mut secs = base;
        for _ in 1..n.min(16) {
            secs = secs.saturating_mul(factor).min(cap);
        }
        Duration::from_secs(secs.min(cap))
    };
    let (blame, d) = match kind {
        // 1 min, 5, 25, then an hour: a key that keeps being limited rests.
        ErrorKind::RateLimited => (Blame::Profile, grow(60, 5, 3_600).max(retry_after.unwrap_or_default())),
        // Money or a wrong key does not come back by itself: hours, until the key changes.
        ErrorKind::Billing => (Blame::Profile, grow(5 * 3_600, 2, 24 * 3_600)),
        ErrorKind::Auth | ErrorKind::PermissionDenied => (Blame::Profile, grow(3_600, 2, 24 * 3_600)),
        // 30 s, 1 min, 2, … 10 min: an overloaded provider is tried again soon.
        ErrorKind::Overloaded
        | ErrorKind::Server
        | ErrorKind::Connect
        | ErrorKind::Timeout
        | ErrorKind::Truncated
        | ErrorKind::Protocol => (Blame::Model, grow(30, 2, 600).max(retry_after.unwrap_or_default())),
        ErrorKind::NotFound => (Blame::Model, grow(600, 2, 3_600)),
        ErrorKind::ContextLength | ErrorKind::InvalidRequest => return None,
    };
    Some((blame, d))
}

/// One credential's or model's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Failures in a row.
    pub errors: u32,
    /// Cooling down until then (milliseconds since the epoch).
    pub until_ms: i64,
    /// The last failure's kind (`rate_limited`, `overloaded`, …).
    pub reason: String,
    pub last_failure_ms: i64,
    /// The key's fingerprint when it failed (profiles): another key starts afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Entry {
    pub fn cooling(&self, now: i64) -> bool {
        self.until_ms > now
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Saved {
    /// By `provider/profile`.
    #[serde(default)]
    profiles: HashMap<String, Entry>,
    /// By `provider/model`.
    #[serde(default)]
    models: HashMap<String, Entry>,
    /// By provider: the profile that last answered.
    #[serde(default)]
    last_good: HashMap<String, String>,
    /// The model servers last found on this machine.
    #[serde(default)]
    found: Vec<super::discover::Found>,
}

#[derive(Debug, Default)]
struct Inner {
    loaded: bool,
    saved: Saved,
    /// By provider: the next profile a new session is given (round-robin; not kept).
    turn: HashMap<String, usize>,
    /// Changes made, counted: a write carries the count of the state it writes.
    changes: u64,
}

/// The models' and credentials' state, shared by every session of the process.
#[derive(Debug)]
pub struct ModelState {
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
    /// The count of the state last written: writes run one at a time, and one of an older
    /// state than that is skipped (so an older state never lands after a newer one).
    write: std::sync::Arc<Mutex<u64>>,
}

impl ModelState {
    /// The state kept in `home/models-state.json`, read when first needed.
    pub fn new(home: &std::path::Path) -> Self {
        Self { path: Some(home.join("models-state.json")), inner: Mutex::default(), write: Default::default() }
    }

    /// A state kept nowhere (tests, benchmarks).
    pub fn in_memory() -> Self {
        Self { path: None, inner: Mutex::default(), write: Default::default() }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = lock(&self.inner);
        if !inner.loaded {
            inner.loaded = true;
            if let Some(path) = &self.path {
                inner.saved = read(path);
            }
        }
        f(&mut inner)
    }

    /// A credential's record, unless it belongs to another key than `fingerprint`.
    pub fn profile(&self, provider: &str, profile: &str, fingerprint: &str) -> Option<Entry> {
        self.with(|i| {
            i.saved.profiles.get(&key(provider, profile)).filter(|e| e.key.as_deref() == Some(fingerprint)).cloned()
        })
    }

    pub fn model(&self, provider: &str, model: &str) -> Option<Entry> {
        self.with(|i| i.saved.models.get(&key(provider, model)).cloned())
    }

    /// The models cooling down at `now`, by `provider/model`.
    pub fn models_cooling(&self, now: i64) -> Vec<(String, Entry)> {
        let mut out: Vec<(String, Entry)> = self.with(|i| {
            i.saved.models.iter().filter(|(_, e)| e.cooling(now)).map(|(k, e)| (k.clone(), e.clone())).collect()
        });
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The servers last found on this machine.
    pub fn found(&self) -> Vec<super::discover::Found> {
        self.with(|i| i.saved.found.clone())
    }

    /// Keeps what this search found (written only when it differs).
    pub fn set_found(&self, found: Vec<super::discover::Found>) -> Written {
        let changed = self.with(|i| {
            (i.saved.found != found).then(|| {
                i.saved.found = found;
                i.changes += 1;
                (i.changes, i.saved.clone())
            })
        });
        match changed {
            Some(saved) => self.save(saved),
            None => Written(None),
        }
    }

    pub fn last_good(&self, provider: &str) -> Option<String> {
        self.with(|i| i.saved.last_good.get(provider).cloned())
    }

    /// The index (of `count`) the next new session of `provider` starts from, round-robin.
    pub fn next_turn(&self, provider: &str, count: usize) -> usize {
        self.with(|i| {
            let n = i.turn.entry(provider.to_owned()).or_default();
            let at = *n % count.max(1);
            *n = n.wrapping_add(1);
            at
        })
    }

    /// A request failed with `error`: the credential or the model it blames cools down. Returns
    /// what was blamed and for how long.
    pub fn failed(
        &self,
        provider: &str,
        model: &str,
        profile: Option<(&str, &str)>,
        error: &ProviderError,
        now: i64,
    ) -> (Option<(Blame, Duration)>, Written) {
        let changed = self.with(|i| {
            let (blame, name) = match cooldown(error.kind, 1, None)?.0 {
                Blame::Profile => (Blame::Profile, key(provider, profile?.0)),
                Blame::Model => (Blame::Model, key(provider, model)),
            };
            let map = match blame {
                Blame::Profile => &mut i.saved.profiles,
                Blame::Model => &mut i.saved.models,
            };
            let fingerprint = profile.map(|(_, f)| f.to_owned()).filter(|_| blame == Blame::Profile);
            let previous = map
                .get(&name)
                .filter(|e| e.key == fingerprint && now - e.last_failure_ms < FORGET_AFTER_MS)
                .map_or(0, |e| e.errors);
            let errors = previous.saturating_add(1);
            let (_, duration) = cooldown(error.kind, errors, error.retry_after)?;
            let until_ms = now.saturating_add(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX));
            let reason = error.kind.as_str().to_owned();
            map.insert(name, Entry { errors, until_ms, reason, last_failure_ms: now, key: fingerprint });
            i.changes += 1;
            Some((blame, duration, (i.changes, i.saved.clone())))
        });
        match changed {
            Some((blame, duration, saved)) => (Some((blame, duration)), self.save(saved)),
            None => (None, Written(None)),
        }
    }

    /// A request answered: its model and credential are well again, and the credential is the
    /// provider's last good one.
    pub fn answered(&self, provider: &str, model: &str, profile: Option<&str>) -> Written {
        let changed = self.with(|i| {
            let mut changed = i.saved.models.remove(&key(provider, model)).is_some();
            if let Some(profile) = profile {
                changed |= i.saved.profiles.remove(&key(provider, profile)).is_some();
                if i.saved.last_good.get(provider).map(String::as_str) != Some(profile) {
                    i.saved.last_good.insert(provider.to_owned(), profile.to_owned());
                    changed = true;
                }
            }
            changed.then(|| {
                i.changes += 1;
                (i.changes, i.saved.clone())
            })
        });
        match changed {
            Some(saved) => self.save(saved),
            None => Written(None),
        }
    }

    /// Writes state number `count` out: on the blocking pool when there is a runtime (the
    /// returned [`Written`] says when it is on disk), else at once.
    fn save(&self, (count, saved): (u64, Saved)) -> Written {
        let Some(path) = self.path.clone() else { return Written(None) };
        let write = self.write.clone();
        let job = move || {
            let mut written = lock(&write);
            if *written >= count {
                return;
            }
            *written = count;
            let bytes = serde_json::to_vec_pretty(&saved).unwrap_or_default();
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = crate::files::write_atomic(&path, &bytes) {
                tracing::warn!(path = %path.display(), error = %e, "could not save the models' state");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => Written(Some(handle.spawn_blocking(job))),
            Err(_) => {
                job();
                Written(None)
            }
        }
    }
}

/// A change of the state on its way to disk.
#[must_use = "await `written()` so the change is on disk before the process may end"]
#[derive(Debug)]
pub struct Written(Option<tokio::task::JoinHandle<()>>);

impl Written {
    /// Once the change is on disk (or could not be written, which is logged).
    pub async fn written(self) {
        if let Some(task) = self.0 {
            let _ = task.await;
        }
    }
}

fn key(provider: &str, name: &str) -> String {
    format!("{provider}/{name}")
}

/// The saved state; a missing or broken file is an empty state (it only ever speeds choices up).
fn read(path: &std::path::Path) -> Saved {
    match crate::files::read_capped(path, 4 << 20) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "the models' state is unreadable; starting afresh");
            Saved::default()
        }),
        Err(_) => Saved::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooldowns_grow_and_are_capped() {
        let secs = |kind, n| cooldown(kind, n, None).unwrap().1.as_secs();
        assert_eq!([1, 2, 3, 4, 9].map(|n| secs(ErrorKind::RateLimited, n)), [60, 300, 1_500, 3_600, 3_600]);
        assert_eq!([1, 2, 6].map(|n| secs(ErrorKind::Overloaded, n)), [30, 60, 600]);
        assert_eq!([1, 2, 4].map(|n| secs(ErrorKind::Billing, n)), [18_000, 36_000, 86_400]);
        assert_eq!(cooldown(ErrorKind::RateLimited, 1, Some(Duration::from_secs(90))).unwrap().1.as_secs(), 90);
        assert!(cooldown(ErrorKind::InvalidRequest, 1, None).is_none());
        assert!(cooldown(ErrorKind::ContextLength, 1, None).is_none());
    }

    #[test]
    fn a_failure_is_held_against_the_key_or_the_model_and_survives_a_restart() {
        let home = tempfile::tempdir().unwrap();
        let state = ModelState::new(home.path());
        let limited = ProviderError::from_status(429, "slow down");
        let (blamed, _) = state.failed("anthropic", "claude", Some(("work", "k1")), &limited, 1_000);
        assert_eq!(blamed.unwrap().0, Blame::Profile);
        let _ = state.failed("anthropic", "claude", Some(("work", "k1")), &limited, 2_000);
        let overloaded = ProviderError::from_status(529, "overloaded");
        let _ = state.failed("anthropic", "claude", Some(("work", "k1")), &overloaded, 2_000);
        // Written off the caller's thread when there is a runtime; here, at once.
        let again = ModelState::new(home.path());
        let entry = again.profile("anthropic", "work", "k1").unwrap();
        assert_eq!((entry.errors, entry.until_ms, entry.reason.as_str()), (2, 2_000 + 300_000, "rate_limited"));
        assert!(again.profile("anthropic", "work", "another key").is_none(), "a new key starts afresh");
        assert_eq!(again.model("anthropic", "claude").unwrap().until_ms, 32_000);
        let _ = again.answered("anthropic", "claude", Some("work"));
        let healed = ModelState::new(home.path());
        assert!(healed.profile("anthropic", "work", "k1").is_none());
        assert!(healed.model("anthropic", "claude").is_none());
        assert_eq!(healed.last_good("anthropic").as_deref(), Some("work"));
    }

    #[test]
    fn a_broken_state_file_is_an_empty_state() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("models-state.json"), b"{not json").unwrap();
        let state = ModelState::new(home.path());
        assert!(state.last_good("anthropic").is_none());
        assert_eq!(
            (state.next_turn("p", 3), state.next_turn("p", 3), state.next_turn("p", 3), state.next_turn("p", 3)),
            (0, 1, 2, 0)
        );
    }
}
