//! Models found on this machine with no configuration (a fake Ollama on a loopback port), and
//! `acp models`: what is configured, what was found, and the state of each credential.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::script::text;

/// Ollama's `GET /api/tags` answer: one chat model, one embedding model (not offered).
fn tags() -> Reply {
    let body = json!({"models": [
        {"name": "qwen3:8b", "model": "qwen3:8b", "size": 5225388164u64, "details": {"family": "qwen3"}},
        {"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest"}
    ]});
    let mut reply = Reply::sse(body.to_string());
    reply.headers = vec![("content-type".into(), "application/json; charset=utf-8".into())];
    reply
}

/// `acp ARGS` with no key and no config, Ollama at `mock`, and nothing else to find (the other
/// places it looks are pointed at a closed port).
fn acp(home: &Path, mock: &MockModel, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home)
        .env("HOME", home)
        .env("OLLAMA_HOST", mock.base().trim_start_matches("http://"))
        .current_dir(home)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Points the OpenAI-compatible places acp looks at a closed port (a test machine may run
/// anything on 8080).
fn only_ollama(home: &Path) {
    std::fs::write(home.join("config.toml"), "[models]\nlocal = [\"http://127.0.0.1:1/v1\"]\n").unwrap();
}

#[test]
fn ollama_is_found_and_used_with_no_key_and_no_provider_configured() {
    let home = tempfile::tempdir().unwrap();
    only_ollama(home.path());
    let mock = MockModel::start();
    mock.push(tags());
    mock.push(text("openai-chat", "Hello from Ollama."));
    let (ok, out, err) = acp(home.path(), &mock, &["run", "Say hello"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("Hello from Ollama."), "{out}");
    let reqs = mock.requests();
    assert_eq!((reqs[0].method.as_str(), reqs[0].path.as_str()), ("GET", "/api/tags"));
    assert_eq!((reqs[1].method.as_str(), reqs[1].path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(reqs[1].body["model"], "qwen3:8b");
    assert_eq!(reqs[1].header("authorization"), None, "no key is sent to a local server");

    // `acp models` lists it beside the providers that lack a key.
    mock.push(tags());
    let (ok, out, err) = acp(home.path(), &mock, &["models"]);
    assert!(ok, "{err}");
    assert!(out.contains("ollama (http://127.0.0.1:") && out.contains("ollama/qwen3:8b  ← default"), "{out}");
    assert!(!out.contains("nomic-embed"), "embedding models cannot chat: {out}");
    assert!(out.contains("anthropic (anthropic, https://api.anthropic.com)  — cannot be used: provider `anthropic` needs an API key: set ANTHROPIC_API_KEY"), "{out}");
    assert!(out.contains("sonnet → anthropic/claude-sonnet-4-5"), "{out}");
    mock.push(tags());
    let (_, out, _) = acp(home.path(), &mock, &["models", "--json"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["default"], "ollama/qwen3:8b");
    let ollama = listed["providers"].as_array().unwrap().iter().find(|p| p["provider"] == "ollama").unwrap().clone();
    assert_eq!((ollama["found"].clone(), ollama["usable"].clone()), (json!(true), json!(true)));
}

#[test]
fn session_new_never_waits_for_the_search_and_offers_what_was_found_before() {
    let home = tempfile::tempdir().unwrap();
    only_ollama(home.path());
    // An Ollama that takes the request and never answers.
    let mock = MockModel::start();
    mock.push(tags().stall_after(0));
    let options = |mock: &MockModel| {
        Options::default().env("OLLAMA_HOST", mock.base().trim_start_matches("http://")).home(home.path())
    };
    let mut agent = Agent::in_process(options(&mock));
    agent.initialize();
    mock.wait_requests(1);
    let cwd = home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    // Answered while the search was still waiting on the server: nothing was found yet.
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let pending = mock.requests();
    assert_eq!(pending.len(), 1);
    assert!(pending[0].finished_at.is_none() && !pending[0].client_left, "the probe was still under way");
    drop(agent);

    // Found once (by `acp models`): the next agent offers it at once, whatever the server does now.
    let found = MockModel::start();
    found.push(tags());
    let (ok, _, err) = acp(home.path(), &found, &["models"]);
    assert!(ok, "{err}");
    let mock = MockModel::start();
    mock.push(tags().stall_after(0));
    let mut agent = Agent::in_process(options(&mock));
    agent.initialize();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert!(r["result"]["sessionId"].is_string(), "{r}");
    let model = r["result"]["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "model").unwrap().clone();
    assert_eq!(model["currentValue"], "ollama/qwen3:8b", "{model}");
}

#[test]
fn models_status_shows_each_credential_and_what_cools_down() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[models]\ndiscover = false\n[[providers.anthropic.profiles]]\nid = \"work\"\napi_key_env = \"WORK_KEY\"\n",
    )
    .unwrap();
    let far = 4_000_000_000_000i64;
    let state = json!({
        "profiles": {},
        "models": {"anthropic/claude-opus-4-6": {"errors": 2, "until_ms": far, "reason": "overloaded", "last_failure_ms": 1}},
        "last_good": {"anthropic": "default"}
    });
    std::fs::write(home.path().join("models-state.json"), state.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["models", "status"])
        .env_clear()
        .env("ACP_HOME", home.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_API_KEY", "sk-own")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("Credentials of `anthropic` (round-robin):"), "{shown}");
    assert!(shown.contains("- default (ANTHROPIC_API_KEY)"), "{shown}");
    assert!(shown.contains("- work (WORK_KEY) — unusable: WORK_KEY is not set"), "{shown}");
    assert!(shown.contains("- `anthropic/claude-opus-4-6` —") && shown.contains("(overloaded, 2 in a row)"), "{shown}");
    assert!(!shown.contains("sk-own"), "a key is never shown: {shown}");
}

#[test]
fn a_server_started_after_the_search_is_found_on_the_next_try() {
    let home = tempfile::tempdir().unwrap();
    only_ollama(home.path());
    let mock = MockModel::start();
    // Ollama is up but has no model yet; then it has one.
    let mut empty = Reply::sse(json!({"models": []}).to_string());
    empty.headers = vec![("content-type".into(), "application/json".into())];
    mock.push(empty);
    mock.push(tags());
    let options = Options::default().env("OLLAMA_HOST", mock.base().trim_start_matches("http://")).home(home.path());
    let mut agent = Agent::in_process(options);
    agent.initialize();
    let cwd = home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let said = r["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(said.contains("has found none so far: one started now is found on the next try"), "{r}");
    // The failed session/new asked for another search; once it has been answered, the next try
    // finds the model.
    mock.wait_done(1);
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    loop {
        let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        if r["result"]["sessionId"].is_string() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never found: {r}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
