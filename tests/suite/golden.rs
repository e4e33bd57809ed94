//! Golden NDJSON exchanges: each `fixtures/acp/*.ndjson` file is a script of what a client sends
//! and exactly what the agent must answer, run against the real binary and the mock model.
//!
//! Line forms: `{"setup": {"api": "anthropic" | null, "replies": ["text", {"fixture": "text",
//! "stall_after": 5}], "args": []}}` (first line), `{"send": <message>}`, `{"send_raw": "<text>"}`,
//! `{"recv": <message>}`, `{"close_stdin": true}`, `{"exit": <code>}`, `{"comment": "..."}`.
//! In `recv`, `"$any"` matches any value and `"${name}"` captures a value on first sight and must
//! match it afterwards (ids that change every run); `$home` inside strings is the agent's home.
//! In `send`, `"${name}"` is replaced by the captured value and `$home` as above.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::agent::{Agent, Options};
use crate::support::mock_model::{MockModel, Reply, fixtures_dir};
use crate::support::options_for;

#[test]
fn golden_exchanges() {
    let mut files: Vec<_> = std::fs::read_dir(fixtures_dir().join("acp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "golden files: {files:?}");
    for file in files {
        run(&file);
    }
}

fn run(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).enumerate();
    let (_, first) = lines.next().unwrap();
    let setup: Value = serde_json::from_str(first).unwrap();
    let setup = &setup["setup"];
    let mock = MockModel::start();
    for reply in setup["replies"].as_array().cloned().unwrap_or_default() {
        let api = setup["api"].as_str().unwrap();
        let r = match &reply {
            Value::String(fixture) => Reply::fixture(api, fixture),
            obj => {
                let mut r = Reply::fixture(api, obj["fixture"].as_str().unwrap());
                if let Some(n) = obj["stall_after"].as_u64() {
                    r = r.stall_after(n as usize);
                }
                r
            }
        };
        mock.push(r);
    }
    let mut options = match setup["api"].as_str() {
        Some(api) => options_for(api, &mock),
        None => Options::default(),
    };
    for arg in setup["args"].as_array().cloned().unwrap_or_default() {
        options = options.arg(arg.as_str().unwrap());
    }
    let mut agent = Agent::spawn(options);
    let mut vars: HashMap<String, Value> = HashMap::new();
    let home = agent.home.path().display().to_string();

    for (n, line) in lines {
        let at = format!("{name}:{}", n + 1);
        let step: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: bad golden line: {e}"));
        if let Some(msg) = step.get("send") {
            let msg = substitute(msg, &vars, &home);
            agent.send(&msg);
        } else if let Some(raw) = step.get("send_raw") {
            agent.send_raw(format!("{}\n", raw.as_str().unwrap()).as_bytes());
        } else if let Some(expected) = step.get("recv") {
            let actual = agent.recv();
            if let Err(e) = matches(expected, &actual, &mut vars, &home, "$") {
                panic!("{at}: {e}\nexpected: {expected}\nactual:   {actual}\nstderr:\n{}", agent.stderr());
            }
        } else if step.get("close_stdin").is_some() {
            agent.close_stdin();
        } else if let Some(code) = step.get("exit") {
            let status = agent.wait_exit(Duration::from_secs(5)).unwrap_or_else(|| panic!("{at}: did not exit"));
            assert_eq!(status.code(), code.as_i64().map(|c| c as i32), "{at}");
        } else if step.get("comment").is_none() {
            panic!("{at}: unknown step {step}");
        }
    }
    assert_eq!(mock.remaining(), 0, "{name}: unused scripted replies");
}

fn substitute(value: &Value, vars: &HashMap<String, Value>, home: &str) -> Value {
    match value {
        Value::String(s) => match var_name(s) {
            Some(name) => vars.get(name).cloned().unwrap_or_else(|| panic!("${{{name}}} used before capture")),
            None => Value::String(s.replace("$home", home)),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars, home)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), substitute(v, vars, home))).collect()),
        other => other.clone(),
    }
}

fn var_name(s: &str) -> Option<&str> {
    s.strip_prefix("${")?.strip_suffix('}')
}

fn matches(
    expected: &Value,
    actual: &Value,
    vars: &mut HashMap<String, Value>,
    home: &str,
    path: &str,
) -> Result<(), String> {
    match expected {
        Value::String(s) if s == "$any" => Ok(()),
        Value::String(s) if var_name(s).is_some() => {
            let name = var_name(s).unwrap_or_default().to_owned();
            match vars.get(&name) {
                Some(v) if v == actual => Ok(()),
                Some(v) => Err(format!("{path}: ${{{name}}} was {v}, now {actual}")),
                None => {
                    vars.insert(name, actual.clone());
                    Ok(())
                }
            }
        }
        Value::String(s) => {
            let want = s.replace("$home", home);
            (actual.as_str() == Some(want.as_str()))
                .then_some(())
                .ok_or_else(|| format!("{path}: want {want:?}, got {actual}"))
        }
        Value::Object(want) => {
            let got = actual.as_object().ok_or_else(|| format!("{path}: want an object, got {actual}"))?;
            let mut want_keys: Vec<&String> = want.keys().collect();
            let mut got_keys: Vec<&String> = got.keys().collect();
            want_keys.sort();
            got_keys.sort();
            if want_keys != got_keys {
                return Err(format!("{path}: keys {want_keys:?} != {got_keys:?}"));
            }
            want.iter().try_for_each(|(k, v)| matches(v, &got[k], vars, home, &format!("{path}.{k}")))
        }
        Value::Array(want) => {
            let got = actual.as_array().ok_or_else(|| format!("{path}: want an array, got {actual}"))?;
            if want.len() != got.len() {
                return Err(format!("{path}: length {} != {}", want.len(), got.len()));
            }
            want.iter()
                .zip(got)
                .enumerate()
                .try_for_each(|(i, (w, g))| matches(w, g, vars, home, &format!("{path}[{i}]")))
        }
        other => (other == actual).then_some(()).ok_or_else(|| format!("{path}: want {other}, got {actual}")),
    }
}
