//! Typed readers for `_meta` objects: each takes a list of keys and returns the value of the first
//! key whose value qualifies (a non-empty string, a boolean, a finite number).

use serde_json::{Map, Value};

pub type Meta = Map<String, Value>;

/// `session/new`: a client-chosen session id (handy for scripted NDJSON pipelines).
pub const SESSION_KEY: &[&str] = &["sessionKey", "session", "key"];
/// `session/new`: the model to start with (`provider/model`).
pub const MODEL: &[&str] = &["model", "modelId"];
/// `session/new`: the mode to start with.
pub const MODE: &[&str] = &["mode", "modeId"];
/// `session/new`: the thought level to start with (`default` or a [`crate::settings::ReasoningEffort`]).
pub const THINKING: &[&str] = &["thinking", "thinkingLevel", "thoughtLevel"];

/// The gateway bridge, `session/new` / `session/load`: a session label (resolved by the gateway).
pub const SESSION_LABEL: &[&str] = &["sessionLabel", "label"];
/// The gateway bridge: fail unless the key or label exists on the gateway.
pub const REQUIRE_EXISTING: &[&str] = &["requireExisting", "requireExistingSession"];
/// The gateway bridge: reset the gateway session before first use.
pub const RESET: &[&str] = &["resetSession", "reset"];
/// The gateway bridge: prefix prompts with `[Working directory: …]`.
pub const PREFIX_CWD: &[&str] = &["prefixCwd"];
/// The gateway bridge, per prompt: the run's time limit.
pub const TIMEOUT_MS: &[&str] = &["timeoutMs"];

/// The first key holding a string that is not blank; returned trimmed.
pub fn read_string<'a>(meta: Option<&'a Meta>, keys: &[&str]) -> Option<&'a str> {
    let meta = meta?;
    keys.iter().find_map(|k| meta.get(*k)?.as_str().map(str::trim).filter(|s| !s.is_empty()))
}

/// The first key holding a boolean.
pub fn read_bool(meta: Option<&Meta>, keys: &[&str]) -> Option<bool> {
    let meta = meta?;
    keys.iter().find_map(|k| meta.get(*k)?.as_bool())
}

/// The first key holding a finite number.
pub fn read_number(meta: Option<&Meta>, keys: &[&str]) -> Option<f64> {
    let meta = meta?;
    keys.iter().find_map(|k| meta.get(*k)?.as_f64().filter(|n| n.is_finite()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Meta {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn first_qualifying_key_wins() {
        let m = meta(json!({"session": "b", "sessionKey": "  a  ", "key": "c"}));
        assert_eq!(read_string(Some(&m), SESSION_KEY), Some("a"));
        let m = meta(json!({"sessionKey": "   ", "session": 5, "key": "c"}));
        assert_eq!(read_string(Some(&m), SESSION_KEY), Some("c"), "blank and non-string values are skipped");
        assert_eq!(read_string(None, SESSION_KEY), None);
    }

    #[test]
    fn booleans_and_numbers_are_typed() {
        let m = meta(json!({"a": "true", "b": true, "n": "3", "m": 2.5}));
        assert_eq!(read_bool(Some(&m), &["a", "b"]), Some(true));
        assert_eq!(read_bool(Some(&m), &["a"]), None);
        assert_eq!(read_number(Some(&m), &["n", "m"]), Some(2.5));
    }
}
