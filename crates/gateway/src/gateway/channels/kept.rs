//! What a channel account keeps across restarts, in one file under `$ACP_HOME/channels/`: where
//! its stream resumes from (Matrix's sync token, Discord's session and sequence number) and the
//! ids of the last 1,000 messages it took in, written as each message is taken and as the stream
//! moves on — so a restart, a dropped connection or a batch delivered again neither loses nor
//! repeats a message.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::sync::lock;

/// How many message ids are kept.
const SEEN: usize = 1000;

pub struct Kept {
    path: PathBuf,
    state: Mutex<State>,
    /// One write at a time (they share the temporary file).
    writing: Mutex<()>,
}

struct State {
    /// Where the stream resumes from: the fields the channel gave (never a credential).
    cursor: Map<String, Value>,
    /// The messages taken in lately, oldest first.
    seen: VecDeque<String>,
}

impl Kept {
    /// What `path` keeps (nothing if it is missing or unreadable: the stream starts afresh).
    pub fn load(path: PathBuf) -> Self {
        let stored: Value = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let mut cursor = stored.as_object().cloned().unwrap_or_default();
        let seen = match cursor.remove("seen") {
            Some(Value::Array(ids)) => ids.into_iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            _ => VecDeque::new(),
        };
        Self { path, state: Mutex::new(State { cursor, seen }), writing: Mutex::new(()) }
    }

    /// The cursor's field `name`, if kept.
    pub fn get(&self, name: &str) -> Option<Value> {
        lock(&self.state).cursor.get(name).filter(|v| !v.is_null()).cloned()
    }

    /// Sets the cursor's fields (`null` removes one), and keeps it.
    pub fn set(&self, fields: Value) {
        {
            let mut state = lock(&self.state);
            for (name, value) in fields.as_object().into_iter().flatten() {
                if value.is_null() {
                    state.cursor.remove(name);
                } else {
                    state.cursor.insert(name.clone(), value.clone());
                }
            }
        }
        self.save();
    }

    /// Whether message `id` was taken already.
    pub fn has(&self, id: &str) -> bool {
        lock(&self.state).seen.iter().any(|e| e == id)
    }

    /// Whether message `id` is new (it is then remembered, and kept).
    pub fn first_time(&self, id: &str) -> bool {
        self.first_time_with(id, &Value::Null)
    }

    /// As [`Kept::first_time`], with the cursor's `fields` set in the same write.
    pub fn first_time_with(&self, id: &str, fields: &Value) -> bool {
        {
            let mut state = lock(&self.state);
            if state.seen.iter().any(|e| e == id) {
                return false;
            }
            for (name, value) in fields.as_object().into_iter().flatten() {
                state.cursor.insert(name.clone(), value.clone());
            }
            state.seen.push_back(id.to_owned());
            if state.seen.len() > SEEN {
                state.seen.pop_front();
            }
        }
        self.save();
        true
    }

    fn save(&self) {
        let _one = lock(&self.writing);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let text = {
            let state = lock(&self.state);
            let mut all = state.cursor.clone();
            all.insert("seen".into(), json!(state.seen));
            Value::Object(all).to_string()
        };
        let tmp = self.path.with_extension("tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.path)) {
            tracing::warn!(path = %self.path.display(), error = %e, "a channel could not keep where it is");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_and_the_ids_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let kept = Kept::load(path.clone());
        assert_eq!(kept.get("since"), None);
        assert!(kept.first_time("a") && !kept.first_time("a"));
        kept.set(json!({"since": "s1", "seq": 4}));
        let again = Kept::load(path.clone());
        assert_eq!((again.get("since"), again.get("seq")), (Some(json!("s1")), Some(json!(4))));
        assert!(!again.first_time("a") && again.first_time("b"));
        again.set(json!({"seq": null}));
        assert_eq!(Kept::load(path).get("seq"), None);
    }
}
