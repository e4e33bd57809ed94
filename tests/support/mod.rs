//! Shared test harness: the mock model server and the agent process driver.

pub mod agent;
pub mod discord;
pub mod expect;
pub mod fix_turn;
pub mod gateway;
pub mod golden;
pub mod mock_model;
pub mod nats;
pub mod openclaw;
pub mod postgres;
pub mod pty;
pub mod script;
pub mod slack;
pub mod stub_http;
pub mod synapse;
pub mod telegram;

use mock_model::MockModel;

/// The three wire APIs, by fixture directory name.
pub const APIS: [&str; 4] = ["anthropic", "openai-chat", "openai-responses", "gemini"];

/// Fast retries so error tests take milliseconds, not seconds.
pub const FAST_RETRY: &str = "[retry]\ninitial_delay = 0.01\nmax_backoff = 0.05\n";

/// Agent options that send the given wire API to the mock.
pub fn options_for(api: &str, mock: &MockModel) -> agent::Options {
    let options = agent::Options::default();
    match api {
        "anthropic" => options.anthropic(&mock.base()),
        "openai-chat" => options.openai(&mock.base_v1(), false),
        "openai-responses" => options.openai(&mock.base_v1(), true),
        "gemini" => options.gemini(&mock.base()),
        other => panic!("unknown api {other}"),
    }
}

/// The request path each wire API uses.
pub fn path_for(api: &str) -> &'static str {
    match api {
        "anthropic" => "/v1/messages",
        "openai-chat" => "/v1/chat/completions",
        "gemini" => "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        _ => "/v1/responses",
    }
}

/// A copy of `fixtures/workspaces/<name>` in a temporary directory (tests change it).
pub fn workspace(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&mock_model::fixtures_dir().join("workspaces").join(name), dir.path());
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The session updates among received messages, as `params.update` values.
pub fn updates_of(messages: &[serde_json::Value]) -> Vec<serde_json::Value> {
    messages.iter().filter(|m| m["method"] == "session/update").map(|m| m["params"]["update"].clone()).collect()
}

/// Every `tool_call` / `tool_call_update` for one call id, in order.
pub fn tool_updates(updates: &[serde_json::Value], call_id: &str) -> Vec<serde_json::Value> {
    updates
        .iter()
        .filter(|u| {
            (u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
                && u["toolCallId"] == call_id
        })
        .cloned()
        .collect()
}

/// An agent with a session in `ws`, in `mode`, talking to `api` on the mock.
pub fn agent_in(api: &str, mock: &MockModel, ws: &std::path::Path, mode: &str) -> (agent::Agent, String) {
    let mut agent = agent::Agent::spawn(options_for(api, mock));
    agent.initialize();
    let session = agent.new_session_in(ws, serde_json::json!({"_meta": {"mode": mode}}));
    (agent, session)
}

/// A tool call's statuses in order, its announcement without one counted as `pending`.
pub fn status_sequence(updates: &[serde_json::Value], id: &str) -> Vec<String> {
    tool_updates(updates, id)
        .iter()
        .filter_map(|u| match (u["sessionUpdate"].as_str(), u.get("status")) {
            (Some("tool_call"), None) => Some("pending".to_owned()),
            (_, Some(s)) => s.as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// For `Agent::prompt_answering` when the agent must not ask the client anything.
pub fn no_requests(msg: &serde_json::Value) -> serde_json::Value {
    panic!("unexpected request from the agent: {msg}")
}

/// Answers every permission request with the option of the given kind, recording the requests.
pub fn answer_with<'a>(
    kind: &'static str,
    asked: &'a mut Vec<serde_json::Value>,
) -> impl FnMut(&serde_json::Value) -> serde_json::Value + 'a {
    move |msg: &serde_json::Value| {
        assert_eq!(msg["method"], "session/request_permission", "{msg}");
        asked.push(msg.clone());
        let option = msg["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {msg}"));
        serde_json::json!({"outcome": {"outcome": "selected", "optionId": option["optionId"]}})
    }
}

/// Whether process `pid` (as this side of any PID namespace numbers it) is alive (not a zombie).
pub fn is_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_none_or(|st| st != "Z"))
}

/// A live process whose command line is `command`, found on this side of any PID namespace (a
/// sandboxed command sees a `/proc` of its own namespace, so it cannot say its pid here).
pub fn running(command: &str) -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().into_string().ok()?;
        let line = std::fs::read(entry.path().join("cmdline")).ok()?;
        let line = String::from_utf8_lossy(&line).replace('\0', " ");
        (line.trim() == command && is_alive(&pid)).then_some(pid)
    })
}

/// A `sleep` command line no other process here has: `n` tells a test's processes apart.
pub fn unique_sleep(n: u32) -> String {
    format!("sleep {}", 100_000 + (std::process::id() % 10_000) * 8 + n)
}
