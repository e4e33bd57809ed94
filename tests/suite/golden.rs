//! Golden NDJSON exchanges: each `fixtures/acp/*.ndjson` file is a script of what a client sends
//! and exactly what the agent must answer, run against the real binary and the mock model. The
//! files are the source of truth: `UPDATE_GOLDEN=1 cargo test --test all golden` reruns each script
//! and rewrites its `recv` lines with what the agent sent, keeping the placeholders that still match.
//!
//! Line forms: `{"setup": {"api": "anthropic" | null, "replies": ["text", {"fixture": "text",
//! "stall_after": 5}], "args": []}}` (first line), `{"send": <message>}`, `{"send_raw": "<text>"}`,
//! `{"recv": <message>}`, `{"close_stdin": true}`, `{"exit": <code>}`, `{"comment": "..."}`.
//! In `recv`, `"$any"` matches any value and `"${name}"` captures a value on first sight and must
//! match it afterwards (ids that change every run); `$home` inside strings is the agent's home.
//! In `send`, `"${name}"` is replaced by the captured value and `$home` as above.
//!
//! The update writes what the agent sent as it is, except that a value the line had a placeholder
//! for keeps it while it still matches; in a value the line did not have, a value captured before
//! becomes its `"${name}"`, a time `"$any"`, a generated id a new capture and the home `$home`
//! (see `tests/support/golden.rs`). A message the script does not expect at that point gets a
//! `recv` line of its own; `{"recv":{}}` takes any one message, so a new exchange can be written as
//! its requests, each followed by `{"recv":{"jsonrpc":"2.0","id":N}}`, and filled in by the update.
//! A `recv` line no message arrives for fails in both modes: delete it by hand if the agent is
//! right to send less.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::agent::{Agent, Options, TIMEOUT};
use crate::support::golden::{Bindings, Json, same_message};
use crate::support::mock_model::{MockModel, Reply, fixtures_dir};
use crate::support::options_for;

const UPDATE: &str = "UPDATE_GOLDEN=1 cargo test --test all golden";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Fail on any difference.
    Check,
    /// Rewrite the `recv` lines with what the agent sent.
    Update,
}

#[test]
fn golden_exchanges() {
    let mode = if std::env::var_os("UPDATE_GOLDEN").is_some() { Mode::Update } else { Mode::Check };
    let mut files: Vec<_> = std::fs::read_dir(fixtures_dir().join("acp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "golden files: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = shown(&file);
        let rewritten = run(&name, &text, mode).unwrap_or_else(|e| panic!("{e}"));
        if mode == Mode::Update && rewritten != text {
            // Whole or not at all: a test reading the file meanwhile never sees half of it.
            let tmp = file.with_extension("ndjson.new");
            std::fs::write(&tmp, &rewritten).unwrap();
            std::fs::rename(&tmp, &file).unwrap();
            eprintln!("updated {name}");
        }
    }
}

/// The file as the repository names it.
fn shown(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// Runs one script; returns its text, with the `recv` lines rewritten from what the agent sent in
/// `Update` mode, unchanged once every line matched in `Check` mode.
fn run(name: &str, text: &str, mode: Mode) -> Result<String, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or_else(|| format!("{name}: empty"))?;
    let setup: Value = serde_json::from_str(first).map_err(|e| format!("{name}:1: bad setup line: {e}"))?;
    let mock = MockModel::start();
    let mut agent = spawn(&setup["setup"], &mock);
    let mut bindings = Bindings::new(&agent.home.path().display().to_string());
    let mut out: Vec<String> = text.lines().map(str::to_owned).collect();
    // Lines written before a line of the file (messages the script did not expect there).
    let mut inserted: Vec<(usize, String)> = Vec::new();

    for (n, line) in lines {
        let at = format!("{name}:{}", n + 1);
        let step: Value = serde_json::from_str(line).map_err(|e| format!("{at}: bad golden line: {e}"))?;
        if let Some(msg) = step.get("send") {
            agent.send(&bindings.substitute(msg).map_err(|e| format!("{at}: {e}"))?);
        } else if let Some(raw) = step.get("send_raw") {
            let raw = raw.as_str().ok_or_else(|| format!("{at}: send_raw takes a string"))?;
            agent.send_raw(format!("{raw}\n").as_bytes());
        } else if let Some(expected) = step.get("recv") {
            loop {
                let Some(raw) = agent.recv_line_within(TIMEOUT) else {
                    return Err(format!(
                        "{at}: no message arrived for this line within {TIMEOUT:?} (the agent sent fewer \
                         messages, or stopped); if that is right, delete the line\nexpected: {expected}\nstderr:\n{}",
                        agent.stderr()
                    ));
                };
                let actual: Value = serde_json::from_str(&raw)
                    .map_err(|e| format!("{at}: stdout carried a non-JSON line ({e}): {raw:?}"))?;
                if mode == Mode::Check {
                    bindings.matches(expected, &actual, "$").map_err(|e| {
                        format!(
                            "{at}: {e}\nexpected: {expected}\nactual:   {actual}\n\
                             if the agent is right, `{UPDATE}` rewrites the file\nstderr:\n{}",
                            agent.stderr()
                        )
                    })?;
                    break;
                }
                let actual = Json::parse(&raw).map_err(|e| format!("{at}: {e}"))?;
                if !same_message(expected, &actual.to_value()) {
                    let fresh = bindings.fresh(&actual, None);
                    inserted.push((n, format!("{{\"recv\":{fresh}}}")));
                    continue;
                }
                let line = Json::parse(line).map_err(|e| format!("{at}: {e}"))?;
                let expected = line.get("recv").cloned().unwrap_or(Json::Scalar(Value::Null));
                out[n] = format!("{{\"recv\":{}}}", bindings.merge(&expected, &actual, None));
                break;
            }
        } else if step.get("close_stdin").is_some() {
            agent.close_stdin();
        } else if let Some(code) = step.get("exit") {
            let status = agent.wait_exit(Duration::from_secs(5)).ok_or_else(|| format!("{at}: did not exit"))?;
            if status.code().map(i64::from) != code.as_i64() {
                return Err(format!("{at}: exit status {status:?}, want {code}"));
            }
        } else if step.get("comment").is_none() {
            return Err(format!("{at}: unknown step {step}"));
        }
    }
    if mock.remaining() != 0 {
        return Err(format!("{name}: {} scripted model replies were not used", mock.remaining()));
    }
    for (n, line) in inserted.into_iter().rev() {
        out.insert(n, line);
    }
    let mut rewritten = out.join("\n");
    if text.ends_with('\n') {
        rewritten.push('\n');
    }
    Ok(rewritten)
}

/// The agent and its model as the setup line asks.
fn spawn(setup: &Value, mock: &MockModel) -> Agent {
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
        Some(api) => options_for(api, mock),
        None => Options::default(),
    };
    for arg in setup["args"].as_array().cloned().unwrap_or_default() {
        options = options.arg(arg.as_str().unwrap());
    }
    Agent::spawn(options)
}

/// A file whose `recv` lines went stale (another text, a path where `$home` was, a message it
/// lacks) fails as it is and comes back as it was from the update, placeholders and all.
#[test]
fn the_update_rewrites_stale_lines_and_keeps_the_placeholders() {
    let text = std::fs::read_to_string(fixtures_dir().join("acp/03_text_turn_anthropic.ndjson")).unwrap();
    let stale: String = text
        .lines()
        .filter(|l| !l.contains("session_info_update"))
        .map(|l| {
            let l = if l.starts_with("{\"recv\"") {
                l.replace("$home/config.toml", "/elsewhere/config.toml")
            } else {
                l.to_owned()
            };
            format!("{}\n", l.replace(", wörld! 👋", ", world"))
        })
        .collect();
    let error = run("stale.ndjson", &stale, Mode::Check).unwrap_err();
    assert!(error.starts_with("stale.ndjson:3: $.result.authMethods[2].description: "), "{error}");
    assert!(error.contains(UPDATE), "{error}");
    assert_eq!(run("stale.ndjson", &stale, Mode::Update).unwrap(), text);
}

/// The update accepts what the agent sent, but not silence: a `recv` line no message arrives for
/// fails in both modes, naming the line.
#[test]
fn a_recv_line_without_a_message_fails_even_in_the_update() {
    let text =
        "{\"setup\":{\"api\":null}}\n{\"close_stdin\":true}\n{\"recv\":{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}}\n";
    for mode in [Mode::Check, Mode::Update] {
        let error = run("short.ndjson", text, mode).unwrap_err();
        assert!(error.starts_with("short.ndjson:3: no message arrived for this line"), "{mode:?}: {error}");
    }
}

/// A new exchange is written as its `send` lines and, for each request, a `recv` line with the id
/// of its answer: the update fills in that answer and every message before it.
#[test]
fn the_update_writes_a_new_exchange_from_its_requests() {
    for name in ["01_initialize.ndjson", "02_auth_required.ndjson", "06_bad_input.ndjson"] {
        let text = std::fs::read_to_string(fixtures_dir().join("acp").join(name)).unwrap();
        let skeleton: String = text
            .lines()
            .map(|line| match Json::parse(line).unwrap().get("recv").and_then(|m| m.get("id")) {
                Some(id) => format!("{{\"recv\":{{\"jsonrpc\":\"2.0\",\"id\":{id}}}}}\n"),
                None => format!("{line}\n"),
            })
            .collect();
        let written = run(name, &skeleton, Mode::Update).unwrap();
        // The same lines as the file (keys in the order the agent sent them), which pass as they
        // are and which a second update leaves alone.
        let values = |text: &str| text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).collect::<Vec<_>>();
        assert_eq!(values(&written), values(&text), "{name}");
        run(name, &written, Mode::Check).unwrap();
        assert_eq!(run(name, &written, Mode::Update).unwrap(), written, "{name}");
    }
}
