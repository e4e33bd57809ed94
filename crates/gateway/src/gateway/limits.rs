//! What a gateway holds for its clients, at most: the runs waiting on one session (how many, and
//! the bytes of their messages) and on all of them, the runs going at once (a lane they wait
//! in, the reference's `maxConcurrent`), and the sessions kept open — an idle one is closed
//! after a while, and the least recently used idle one when too many are open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::lock;

/// The limits, from `[gateway]` in config.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Runs of one session not yet ended (the running one and those queued behind it).
    pub queued_runs: usize,
    /// Bytes of their messages.
    pub queued_bytes: usize,
    /// Bytes of the messages of every run not yet ended.
    pub total_bytes: usize,
    /// Runs going at once; more wait their turn.
    pub concurrent: usize,
    /// Sessions kept open.
    pub open_sessions: usize,
    /// How long a session with nothing to do stays open.
    pub idle: Duration,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            queued_runs: 20,
            queued_bytes: 32 << 20,
            total_bytes: 256 << 20,
            concurrent: 4,
            open_sessions: 256,
            idle: Duration::from_secs(30 * 60),
        }
    }
}

/// Runs not yet ended, by session.
pub struct Admission {
    limits: RunLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per session key: runs, bytes.
    sessions: HashMap<String, (usize, usize)>,
    bytes: usize,
}

impl Admission {
    pub fn new(limits: RunLimits) -> Arc<Self> {
        Arc::new(Self { limits, state: Mutex::default() })
    }

    /// Takes a run of `bytes` on session `key` in, or says why not.
    pub fn admit(self: &Arc<Self>, key: &str, bytes: usize) -> Result<Ticket, String> {
        let mut state = lock(&self.state);
        let (runs, held) = state.sessions.get(key).copied().unwrap_or_default();
        let l = &self.limits;
        if runs >= l.queued_runs {
            return Err(format!(
                "session `{key}` has {runs} runs waiting or going, the most it takes; wait for them, or stop them \
                 (chat.abort)"
            ));
        }
        if held + bytes > l.queued_bytes {
            return Err(format!(
                "session `{key}` holds {} MiB of messages waiting to run, and this one would pass its {} MiB; \
                 wait for them, or stop them (chat.abort)",
                held >> 20,
                l.queued_bytes >> 20
            ));
        }
        if state.bytes + bytes > l.total_bytes {
            return Err(format!(
                "the gateway holds {} MiB of messages waiting to run, the most it takes; try again when runs have ended",
                state.bytes >> 20
            ));
        }
        let entry = state.sessions.entry(key.to_owned()).or_default();
        entry.0 += 1;
        entry.1 += bytes;
        state.bytes += bytes;
        Ok(Ticket { admission: self.clone(), key: key.to_owned(), bytes })
    }

    /// Whether session `key` has a run not yet ended.
    pub fn busy(&self, key: &str) -> bool {
        lock(&self.state).sessions.contains_key(key)
    }

    fn release(&self, key: &str, bytes: usize) {
        let mut state = lock(&self.state);
        state.bytes -= bytes.min(state.bytes);
        if let Some(entry) = state.sessions.get_mut(key) {
            entry.0 = entry.0.saturating_sub(1);
            entry.1 = entry.1.saturating_sub(bytes);
            if entry.0 == 0 {
                state.sessions.remove(key);
            }
        }
    }
}

/// A run taken in; given back when dropped (the run ended, or never started).
pub struct Ticket {
    admission: Arc<Admission>,
    key: String,
    bytes: usize,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("key", &self.key).field("bytes", &self.bytes).finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.release(&self.key, self.bytes);
    }
}

/// Gives the memory freed by closed sessions back to the system (glibc keeps freed heap pages
/// otherwise, and an idle gateway would stay at its high-water mark).
pub fn return_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` only releases free pages at the top of the heaps; it reads and
        // writes nothing of ours and is safe to call at any time.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_bytes_are_capped_per_session_and_in_all_and_given_back() {
        let limits = RunLimits { queued_runs: 2, queued_bytes: 100, total_bytes: 150, ..RunLimits::default() };
        let a = Admission::new(limits);
        let one = a.admit("s", 60).unwrap();
        assert!(a.admit("s", 50).unwrap_err().contains("would pass its"), "bytes per session");
        let two = a.admit("s", 10).unwrap();
        assert!(a.admit("s", 1).unwrap_err().contains("2 runs waiting"), "runs per session");
        let other = a.admit("t", 80).unwrap();
        assert!(a.admit("u", 1).unwrap_err().contains("the gateway holds"), "bytes in all");
        assert!(a.busy("s"));
        drop((one, two));
        assert!(!a.busy("s"));
        assert!(a.admit("u", 60).is_ok());
        drop(other);
        assert_eq!(lock(&a.state).bytes, 0);
    }
}
