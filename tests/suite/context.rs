//! What the model is sent: the assembled system prompt (project instructions from the repository
//! root down, agent-workspace files, truncation), and keeping long sessions inside the window —
//! compaction when a request would overflow, when the provider says it did, and on `/compact`
//! (as `compaction_update`s for clients that ask for them), surviving a restart.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{BLANK, blank, replies};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;
use crate::support::script::{text, text_with_usage};

#[test]
fn the_system_prompt_carries_project_and_workspace_files() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join(".git")).unwrap();
    std::fs::write(repo.path().join("AGENTS.md"), "Use tabs.\n").unwrap();
    let cwd = repo.path().join("crates/core");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("CLAUDE.md"), "Core has no unsafe code.\n").unwrap();

    let mock = MockModel::start();
    mock.push(text("anthropic", "ok"));
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config("bootstrap_max_chars = 1000\n"));
    let ws = agent.home.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("SOUL.md"), format!("Be brief.\n{}\nSign off as Ada.", "x".repeat(5_000))).unwrap();
    std::fs::write(ws.join("USER.md"), "").unwrap();
    agent.initialize();
    let session = agent.new_session_in(&cwd, json!({}));
    agent.prompt(&session, "hi");
    let system = mock.requests()[0].body["system"][0]["text"].as_str().unwrap().to_owned();

    let root = system.find("Use tabs.").expect("the root AGENTS.md");
    let core = system.find("Core has no unsafe code.").expect("the cwd's CLAUDE.md");
    assert!(root < core, "the repository root comes first");
    assert!(system.contains(&format!("Working directory: {}", cwd.display())));
    assert!(system.contains("Be brief."), "head of SOUL.md");
    assert!(system.contains("Sign off as Ada."), "tail of SOUL.md");
    assert!(
        system.contains("[...truncated, read SOUL.md for full content...]\n…(truncated SOUL.md: kept 700+200 chars of")
    );
    assert!(system.contains(&format!("[MISSING] Expected at: {}", ws.join("AGENTS.md").display())));
    assert!(!system.contains(&format!("Expected at: {}", ws.join("USER.md").display())), "empty files are skipped");
    assert!(system.contains("Time zone: ") && system.contains("Runtime: host="));

    // /context reports what was injected.
    let (updates, _) = agent.prompt(&session, "/context");
    let report: String = updates.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert!(report.contains(&format!("`{}` (project): 9 chars", repo.path().join("AGENTS.md").display())), "{report}");
    assert!(report.contains("SOUL.md` (agent workspace): 900 of 5,027 chars (truncated)"), "{report}");
    assert!(report.contains("AGENTS.md` (agent workspace): missing"), "{report}");
}

fn thoughts(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_thought_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

#[test]
fn an_overflowing_request_is_compacted_and_sent_again() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session();
    mock.push(text("anthropic", "First answer."));
    agent.prompt(&session, "first question");

    mock.push(Reply::fixture("anthropic", "400_too_long"));
    mock.push(text("anthropic", "SUMMARY: the user asked a first question."));
    mock.push(text("anthropic", "Second answer."));
    let (updates, response) = agent.prompt(&session, "second question");
    // The answer counts the request that answered; the summary's is not in it.
    assert_eq!(response["result"], replies("anthropic", 1), "{}", agent.stderr());
    assert!(thoughts(&updates).starts_with("Compacted the conversation to fit the context window"), "{updates:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    // The summary request reads the older part; the retry sends the summary and the prompt.
    assert!(
        requests[2].body["system"][0]["text"].as_str().unwrap().contains("precise summaries"),
        "{}",
        requests[2].body
    );
    let ask = requests[2].body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(ask.contains("first question") && ask.contains("First answer.") && !ask.contains("second question"));
    let retry = &requests[3].body["messages"];
    assert_eq!(retry.as_array().unwrap().len(), 1, "summary and prompt in one user message: {retry}");
    assert!(retry[0]["content"][0]["text"].as_str().unwrap().contains("SUMMARY: the user asked a first question."));
    assert_eq!(retry[0]["content"][1]["text"], "second question");

    // The summary is in the transcript: after a restart the model still starts from it.
    drop(agent);
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let cwd = home.path().display().to_string();
    let id = agent.send_request("session/load", json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    let (before, _) = agent.until_response(id);
    let replayed: Vec<Value> = before.iter().map(|m| m["params"]["update"].clone()).collect();
    assert!(thoughts(&replayed).contains("Compacted the conversation"), "{replayed:?}");
    mock.push(text("anthropic", "Third answer."));
    agent.prompt(&session, "third question");
    let body = mock.requests()[4].body.clone();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert!(messages[0]["content"][0]["text"].as_str().unwrap().contains("SUMMARY"));
    assert_eq!(messages[2]["content"][0]["text"], "third question");
}

#[test]
fn a_request_past_the_threshold_compacts_first() {
    let mock = MockModel::start();
    // (Without the memory flush that comes first: tests/suite/memory.rs has it.)
    let config = "[providers.anthropic]\nmodels = [{ id = \"claude-sonnet-4-5\", context_window = 30000, max_tokens = 1000 }]\n\
                  [compaction]\nthreshold = 0.6\n[memory]\nflush = false\n";
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config(config));
    agent.initialize();
    let session = agent.new_session();
    let big = |c: char| c.to_string().repeat(40_000);
    // The provider counts the first request at 13,000 tokens.
    mock.push(text_with_usage("anthropic", "Noted.", 13_000));
    agent.prompt(&session, &big('A'));
    mock.push(text("anthropic", "SUMMARY: a long run of the letter A."));
    mock.push(text("anthropic", "Noted again."));
    let (updates, response) = agent.prompt(&session, &big('B'));
    assert_eq!(response["result"], replies("anthropic", 1), "{}", agent.stderr());
    assert!(thoughts(&updates).contains("Compacted the conversation"), "{updates:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "no request overflowed: compaction came first");
    assert!(requests[1].body["system"][0]["text"].as_str().unwrap().contains("precise summaries"));
    let sent = &requests[2].body["messages"][0]["content"];
    assert!(sent[0]["text"].as_str().unwrap().contains("SUMMARY: a long run"), "{sent}");
    assert_eq!(sent[1]["text"].as_str().unwrap().len(), 40_000, "the prompt itself is kept verbatim");
    assert!(!requests[2].body.to_string().contains(&big('A')), "the old prompt is gone");
}

#[test]
fn clients_that_ask_get_compaction_updates() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    let r = agent
        .request("initialize", json!({"protocolVersion": 1, "clientCapabilities": {"session": {"compaction": {}}}}));
    assert!(r.get("result").is_some());
    let session = agent.new_session();
    mock.push(text("anthropic", "One."));
    agent.prompt(&session, "one");
    mock.push(text("anthropic", "Two."));
    agent.prompt(&session, "two");
    mock.push(text("anthropic", "The user counted to two."));
    let (updates, _) = agent.prompt(&session, "/compact");
    let compaction: Vec<&Value> = updates.iter().filter(|u| u["sessionUpdate"] == "compaction_update").collect();
    // One compaction, started then done, with its summary.
    assert_eq!(compaction[0]["compactionId"], compaction[1]["compactionId"]);
    assert_eq!(
        blank(&json!(compaction), &["compactionId"]),
        json!([
            {"sessionUpdate": "compaction_update", "compactionId": BLANK, "status": "in_progress"},
            {
                "sessionUpdate": "compaction_update",
                "compactionId": BLANK,
                "status": "completed",
                "summary": [{"type": "text", "text": "The user counted to two."}]
            }
        ])
    );
    assert!(thoughts(&updates).is_empty(), "no thought line when the client shows compactions");
}

#[test]
fn compaction_that_fails_says_why_and_the_session_goes_on() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config(crate::support::FAST_RETRY));
    agent.initialize();
    let session = agent.new_session();
    let (updates, _) = agent.prompt(&session, "/compact");
    assert!(updates.iter().any(|u| u["content"]["text"] == "Nothing to compact yet."), "{updates:?}");
    mock.push(text("anthropic", "One."));
    agent.prompt(&session, "one");
    mock.push(text("anthropic", "Two."));
    agent.prompt(&session, "two");
    mock.push(Reply::fixture("anthropic", "401"));
    let (updates, response) = agent.prompt(&session, "/compact");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let said: String = updates.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert!(said.contains("Could not compact"), "{said}");
    mock.push(text("anthropic", "Three."));
    agent.prompt(&session, "three");
    assert_eq!(mock.requests().last().unwrap().body["messages"].as_array().unwrap().len(), 5, "nothing was lost");
}
