//! Who may talk to the agent through a channel. Per channel, `dmPolicy`: `pairing` (the default —
//! an unknown sender gets a code, which the owner approves with `acp pairing approve <channel>
//! <code>`), `allowlist` (only `allowFrom`) or `open`. Codes are 8 characters from an alphabet
//! without look-alikes and expire after an hour. Limits are per sender and per time window, so
//! strangers cannot lock others out: a sender has at most one code waiting and gets a new one at
//! most once an hour (a rejected one waits out the hour), and a channel gives out at most 10 new
//! codes in 10 minutes (later strangers are told to try again in a few minutes). Approved senders,
//! waiting codes and when codes were given are kept in `$ACP_HOME/channels/pairing.json`. Inbound
//! messages are deduplicated by (channel, account, peer, message id), so a redelivery never starts
//! a second run.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::sync::lock;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmPolicy {
    #[default]
    Pairing,
    Allowlist,
    Open,
}

/// How long a pairing code is good for.
pub const CODE_TTL_MS: i64 = 60 * 60 * 1000;
/// The channels pairing codes can be for.
pub const CHANNELS: &[&str] = &["telegram", "matrix", "discord", "slack"];
/// A sender gets a new code at most once in this long.
pub const SENDER_INTERVAL_MS: i64 = CODE_TTL_MS;
/// New codes a channel gives out in one window, at most, and the window.
pub const CODES_PER_WINDOW: usize = 10;
pub const WINDOW_MS: i64 = 10 * 60 * 1000;
/// No 0/O, 1/I/L: codes are read aloud and typed.
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A sender waiting for an owner to approve its code: as kept on disk, and as `pairing.list`
/// shows it.
pub use acp_protocol::gateway::methods::PendingPair;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    #[serde(default)]
    approved: BTreeMap<String, BTreeSet<String>>,
    #[serde(default)]
    pending: Vec<PendingPair>,
    /// Codes given in the last hour: (channel, sender, when), for the limits.
    #[serde(default)]
    given: Vec<(String, String, i64)>,
}

/// What to do with a direct message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    /// Not allowed, and nothing to say (allowlist).
    Denied,
    /// Tell the sender this code (`new`: just made; else the one already waiting).
    Pair {
        code: String,
        new: bool,
    },
    /// This sender had a code in the last hour (one that was rejected): a new one in `minutes`.
    TryLater {
        minutes: i64,
    },
    /// The channel gave out as many codes as it may for now; `first`: the first turned away in
    /// this window (the owner is told once).
    Busy {
        first: bool,
    },
}

pub struct Pairings {
    path: PathBuf,
    state: Mutex<Stored>,
    /// When each channel last turned a stranger away for giving out too many codes.
    turned_away: Mutex<HashMap<String, i64>>,
}

impl Pairings {
    /// Loads `$ACP_HOME/channels/pairing.json` (empty if missing; a damaged file is an error).
    pub fn load(home: &std::path::Path) -> Result<Self, String> {
        let path = home.join("channels").join("pairing.json");
        let state = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok(Self { path, state: Mutex::new(state), turned_away: Mutex::default() })
    }

    fn save(&self, state: &Stored) -> Result<(), String> {
        let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(state).unwrap_or_default();
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Whether `peer` may talk to the agent on `channel`, under `policy` and `allow_from`.
    pub fn admit(&self, channel: &str, policy: DmPolicy, allow_from: &[String], peer: &str, name: &str) -> Admission {
        let listed = allow_from.iter().any(|a| a == peer || a == "*");
        match policy {
            DmPolicy::Open => return Admission::Allowed,
            DmPolicy::Allowlist => return if listed { Admission::Allowed } else { Admission::Denied },
            DmPolicy::Pairing if listed => return Admission::Allowed,
            DmPolicy::Pairing => {}
        }
        let mut state = lock(&self.state);
        if state.approved.get(channel).is_some_and(|s| s.contains(peer)) {
            return Admission::Allowed;
        }
        let now = now_ms();
        state.pending.retain(|p| now - p.created_ms < CODE_TTL_MS);
        state.given.retain(|(_, _, at)| now - at < SENDER_INTERVAL_MS.max(WINDOW_MS));
        if let Some(waiting) = state.pending.iter().find(|p| p.channel == channel && p.peer == peer) {
            return Admission::Pair { code: waiting.code.clone(), new: false };
        }
        if let Some((_, _, at)) = state.given.iter().rev().find(|(c, p, _)| c == channel && p == peer)
            && now - at < SENDER_INTERVAL_MS
        {
            return Admission::TryLater { minutes: (SENDER_INTERVAL_MS - (now - at) + 59_999) / 60_000 };
        }
        let recent = state.given.iter().filter(|(c, _, at)| c == channel && now - at < WINDOW_MS).count();
        if recent >= CODES_PER_WINDOW {
            let mut turned = lock(&self.turned_away);
            let first = turned.get(channel).is_none_or(|at| now - at >= WINDOW_MS);
            if first {
                turned.insert(channel.to_owned(), now);
            }
            return Admission::Busy { first };
        }
        let code = new_code();
        state.pending.push(PendingPair {
            channel: channel.into(),
            peer: peer.into(),
            name: name.into(),
            code: code.clone(),
            created_ms: now,
        });
        state.given.push((channel.into(), peer.into(), now));
        if let Err(e) = self.save(&state) {
            tracing::warn!(error = %e, "could not save the pairing code");
        }
        Admission::Pair { code, new: true }
    }

    /// The codes waiting (unexpired).
    pub fn pending(&self) -> Vec<PendingPair> {
        let now = now_ms();
        lock(&self.state).pending.iter().filter(|p| now - p.created_ms < CODE_TTL_MS).cloned().collect()
    }

    /// Minutes until the code waiting for `peer` on `channel` expires.
    pub fn minutes_left(&self, channel: &str, peer: &str) -> Option<i64> {
        let now = now_ms();
        lock(&self.state)
            .pending
            .iter()
            .find(|p| p.channel == channel && p.peer == peer)
            .map(|p| ((CODE_TTL_MS - (now - p.created_ms)).max(0) + 59_999) / 60_000)
    }

    /// Whether `sender` is let in without asking: listed in `allow_from`, or approved by pairing.
    pub fn known(&self, channel: &str, allow_from: &[String], sender: &str) -> bool {
        allow_from.iter().any(|a| a == sender || a == "*")
            || lock(&self.state).approved.get(channel).is_some_and(|s| s.contains(sender))
    }

    /// How many senders are approved on `channel`.
    pub fn approved(&self, channel: &str) -> usize {
        lock(&self.state).approved.get(channel).map_or(0, BTreeSet::len)
    }

    /// Approves `code` on `channel`; returns the sender it was for.
    pub fn approve(&self, channel: &str, code: &str) -> Result<PendingPair, String> {
        self.take(channel, code, true)
    }

    pub fn reject(&self, channel: &str, code: &str) -> Result<PendingPair, String> {
        self.take(channel, code, false)
    }

    fn take(&self, channel: &str, code: &str, approve: bool) -> Result<PendingPair, String> {
        // A channel, or one of its accounts (`telegram:family`).
        let base = channel.split_once(':').map_or(channel, |(c, _)| c);
        if !CHANNELS.contains(&base) {
            return Err(format!("there is no channel `{channel}` (channels: {})", CHANNELS.join(", ")));
        }
        let code = code.trim().to_uppercase();
        let mut state = lock(&self.state);
        let now = now_ms();
        state.pending.retain(|p| now - p.created_ms < CODE_TTL_MS);
        let at =
            state.pending.iter().position(|p| p.channel == channel && p.code == code).ok_or_else(|| {
                format!("no pairing code `{code}` is waiting on {channel} (codes expire after an hour)")
            })?;
        let pair = state.pending.remove(at);
        if approve {
            state.approved.entry(channel.to_owned()).or_default().insert(pair.peer.clone());
        }
        self.save(&state)?;
        Ok(pair)
    }
}

fn new_code() -> String {
    let mut bytes = [0u8; 8];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes = uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap_or_default();
    }
    bytes.iter().map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect()
}

/// Messages seen recently, by (channel, account, peer, message id): a redelivered one is dropped.
pub struct Dedupe {
    seen: Mutex<(HashMap<String, Instant>, VecDeque<String>)>,
    ttl: Duration,
    max: usize,
}

impl Dedupe {
    pub fn new(ttl: Duration, max: usize) -> Self {
        Self { seen: Mutex::default(), ttl, max }
    }

    /// True the first time a message is seen (within the window).
    pub fn first(&self, channel: &str, account: &str, peer: &str, message_id: &str) -> bool {
        let key = format!("{channel}\u{0}{account}\u{0}{peer}\u{0}{message_id}");
        let mut guard = lock(&self.seen);
        let (seen, order) = &mut *guard;
        let now = Instant::now();
        while let Some(oldest) = order.front() {
            let expired = seen.get(oldest).is_none_or(|at| now.duration_since(*at) > self.ttl);
            if expired || order.len() > self.max {
                let k = order.pop_front().unwrap_or_default();
                seen.remove(&k);
            } else {
                break;
            }
        }
        if seen.contains_key(&key) {
            return false;
        }
        seen.insert(key.clone(), now);
        order.push_back(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairing_gives_a_code_the_owner_approves_and_it_lasts() {
        let home = tempfile::tempdir().unwrap();
        let p = Pairings::load(home.path()).unwrap();
        let Admission::Pair { code, new: true } = p.admit("telegram", DmPolicy::Pairing, &[], "123", "Ada") else {
            panic!()
        };
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)), "{code}");
        assert_eq!(
            p.admit("telegram", DmPolicy::Pairing, &[], "123", "Ada"),
            Admission::Pair { code: code.clone(), new: false },
            "the same code again, not a new one"
        );
        assert!(p.approve("telegram", "WRONG123").unwrap_err().contains("no pairing code"));
        assert_eq!(p.approve("telegram", &code.to_lowercase()).unwrap().peer, "123");
        assert_eq!(p.admit("telegram", DmPolicy::Pairing, &[], "123", "Ada"), Admission::Allowed);
        // Kept across a restart.
        let again = Pairings::load(home.path()).unwrap();
        assert_eq!(again.admit("telegram", DmPolicy::Pairing, &[], "123", "Ada"), Admission::Allowed);
        assert!(
            matches!(again.admit("other", DmPolicy::Pairing, &[], "123", "Ada"), Admission::Pair { .. }),
            "per channel"
        );
    }

    #[test]
    fn limits_are_per_sender_and_per_window_so_strangers_lock_no_one_out() {
        let home = tempfile::tempdir().unwrap();
        let p = Pairings::load(home.path()).unwrap();
        let code = |a: Admission| match a {
            Admission::Pair { code, .. } => code,
            other => panic!("{other:?}"),
        };
        // Three strangers no longer fill anything: a fourth, and more, get codes.
        let codes: Vec<String> = (0..CODES_PER_WINDOW)
            .map(|i| code(p.admit("telegram", DmPolicy::Pairing, &[], &i.to_string(), "x")))
            .collect();
        assert_eq!(p.pending().len(), CODES_PER_WINDOW);
        // Past the window's share: told to try later, and the first such is said to be the first.
        assert_eq!(p.admit("telegram", DmPolicy::Pairing, &[], "late", "x"), Admission::Busy { first: true });
        assert_eq!(p.admit("telegram", DmPolicy::Pairing, &[], "later", "x"), Admission::Busy { first: false });
        assert!(matches!(p.admit("other", DmPolicy::Pairing, &[], "late", "x"), Admission::Pair { .. }), "per channel");
        // A rejected sender waits out the hour rather than asking again at once.
        assert_eq!(p.reject("telegram", &codes[0]).unwrap().peer, "0");
        assert!(matches!(
            p.admit("telegram", DmPolicy::Pairing, &[], "0", "x"),
            Admission::TryLater { minutes: 59 | 60 }
        ));
        // Kept across a restart.
        let again = Pairings::load(home.path()).unwrap();
        assert!(matches!(again.admit("telegram", DmPolicy::Pairing, &[], "0", "x"), Admission::TryLater { .. }));
        assert_eq!(again.admit("telegram", DmPolicy::Pairing, &[], "late", "x"), Admission::Busy { first: true });
        // Once the window has passed, new strangers get codes again.
        {
            let mut state = lock(&again.state);
            for given in &mut state.given {
                given.2 -= WINDOW_MS;
            }
        }
        assert!(matches!(
            again.admit("telegram", DmPolicy::Pairing, &[], "late", "x"),
            Admission::Pair { new: true, .. }
        ));
    }

    #[test]
    fn allowlists_and_open_channels() {
        let home = tempfile::tempdir().unwrap();
        let p = Pairings::load(home.path()).unwrap();
        let allow = vec!["123".to_owned()];
        assert_eq!(p.admit("t", DmPolicy::Allowlist, &allow, "123", "x"), Admission::Allowed);
        assert_eq!(p.admit("t", DmPolicy::Allowlist, &allow, "456", "x"), Admission::Denied);
        assert_eq!(p.admit("t", DmPolicy::Pairing, &allow, "123", "x"), Admission::Allowed, "listed: no pairing");
        assert_eq!(p.admit("t", DmPolicy::Open, &[], "456", "x"), Admission::Allowed);
        std::fs::create_dir_all(home.path().join("channels")).unwrap();
        std::fs::write(home.path().join("channels/pairing.json"), "{").unwrap();
        assert!(Pairings::load(home.path()).err().unwrap().contains("pairing.json"), "damaged: an error, not a reset");
    }

    #[test]
    fn a_redelivered_message_is_seen_once() {
        let d = Dedupe::new(Duration::from_secs(600), 3);
        assert!(d.first("telegram", "default", "1", "m1"));
        assert!(!d.first("telegram", "default", "1", "m1"));
        assert!(d.first("telegram", "default", "2", "m1"), "another peer's message 1");
        assert!(d.first("telegram", "other", "1", "m1"), "another account");
        for i in 0..10 {
            assert!(d.first("telegram", "default", "1", &format!("n{i}")));
        }
        assert!(d.first("telegram", "default", "1", "m1"), "bounded: the oldest was forgotten");
    }
}
