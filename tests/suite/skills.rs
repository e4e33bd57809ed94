//! Skills end to end: found in the workspace, `$ACP_HOME/skills` and the binary, listed in the
//! system prompt by name, description and path only; the model reads one without a question even
//! in ask mode; `/skills` says what is offered and why the rest is not.

use serde_json::json;

use crate::support::agent::Agent;
use crate::support::mock_model::MockModel;
use crate::support::options_for;
use crate::support::script::{calls, result_for, text};

fn write_skill(dir: &std::path::Path, name: &str, front: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name).join("SKILL.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("---\n{front}\n---\n{body}")).unwrap();
    path
}

#[test]
fn skills_are_listed_read_without_asking_and_reported() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let home = agent.home.path().to_owned();
    let review = write_skill(
        &cwd.path().join(".claude/skills"),
        "review",
        "name: review\ndescription: Review a change before it lands",
        "Check the tests first.\n",
    );
    let notes =
        write_skill(&home.join("skills"), "notes", "name: notes\ndescription: Keep release notes", "Secret body.\n");
    write_skill(
        &home.join("skills"),
        "cloud",
        "name: cloud\ndescription: Deploy\nmetadata:\n  acp:\n    requires:\n      bins: [no-such-cloud-cli]",
        "",
    );
    let session = agent.new_session_in(cwd.path(), json!({}));
    assert_eq!(agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}))["result"], json!({}));

    mock.push(calls("anthropic", &[("r1", "read", json!({"path": notes.display().to_string()}))]));
    mock.push(text("anthropic", "Read it."));
    let (_, response) = agent.prompt(&session, "write the release notes");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let first = mock.requests()[0].body.clone();
    let system = first["system"][0]["text"].as_str().unwrap().to_owned();
    for (name, path) in [("review", &review), ("notes", &notes)] {
        assert!(
            system.contains(&format!("<name>{name}</name>")) && system.contains(&path.display().to_string()),
            "{name}: {system}"
        );
    }
    assert!(system.contains("<name>openlang</name>"), "the bundled skill: {system}");
    assert!(!system.contains("cloud") && !system.contains("Secret body"), "{system}");
    let read = result_for("anthropic", &mock.requests()[1].body, "r1");
    assert!(read.contains("Secret body."), "read in ask mode without a question: {read}");

    let (updates, _) = agent.prompt(&session, "/skills");
    let said: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(said.starts_with("Skills offered to the model (3):"), "{said}");
    assert!(said.contains("- review (workspace): Review a change before it lands"), "{said}");
    assert!(said.contains("- cloud (user): needs `no-such-cloud-cli` on PATH"), "{said}");
    assert_eq!(mock.requests().len(), 2, "/skills does not call the model");
}
