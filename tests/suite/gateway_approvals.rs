//! Approval questions of gateway runs answered by connected clients: `exec.approval.requested`
//! to those who may answer, `exec.approval.resolve`, withdrawal on expiry, replay to an approver
//! who connects while a question waits.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::{Client, Gateway};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, result_for, text};

fn events<'a>(frames: &'a [Value], name: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["event"] == name).map(|f| &f["payload"]).collect()
}

/// Sends a prompt and reads until the approver is asked; returns the question.
fn asked(sender: &mut Client, approver: &mut Client, run: &str) -> Value {
    let r =
        sender.request("chat.send", json!({"sessionKey": "wire-approve", "message": "read", "idempotencyKey": run}));
    assert_eq!(r["payload"]["status"], "started", "{r}");
    let frames = approver.until_event(|e| e["event"] == "exec.approval.requested");
    events(&frames, "exec.approval.requested").last().copied().cloned().unwrap()
}

fn finished(client: &mut Client, run: &str) -> Vec<Value> {
    client.until_event(|e| e["event"] == "chat" && e["payload"]["runId"] == run && e["payload"]["state"] == "final")
}

#[test]
fn a_connected_client_answers_the_question_of_a_run() {
    let mock = MockModel::start();
    for n in 1..=3 {
        let write = json!({"path": "notes.txt", "content": format!("version {n}")});
        mock.push(calls("anthropic", &[(&format!("r{n}"), "write", write)]));
        mock.push(text("anthropic", &format!("done {n}")));
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[gateway]\napproval_timeout_secs = 2\n").unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let notes = gw.workspace.path().join("notes.txt");
    std::fs::write(&notes, "version 0").unwrap();
    mock.push(calls("anthropic", &[("r4", "write", json!({"path": "notes.txt", "content": "version 4"}))]));
    let mut approver = gw.client(&["operator.read", "operator.approvals"]);
    let mut sender = gw.client(&["operator.write"]);
    let r = sender.request("sessions.patch", json!({"key": "wire-approve", "mode": "ask"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");

    // Allowed once: it runs.
    let question = asked(&mut sender, &mut approver, "a1");
    let request = &question["request"];
    assert_eq!((&request["toolCallId"], &request["runId"]), (&json!("r1"), &json!("a1")));
    assert_eq!(request["sessionKey"], "agent:main:wire-approve");
    assert!(request["title"].as_str().unwrap().contains("notes.txt"), "{request}");
    let kinds: Vec<&str> = request["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"allow_once") && kinds.contains(&"reject_once"), "{kinds:?}");
    let id = question["id"].as_str().unwrap().to_owned();
    assert_eq!(approver.request("exec.approval.get", json!({"id": id}))["payload"]["id"], id.as_str());
    let refused = sender.request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
    assert_eq!(refused["error"]["details"]["code"], "MISSING_SCOPE", "a writer may not answer");
    let bad = approver.request("exec.approval.resolve", json!({"id": id, "decision": "maybe"}));
    assert!(bad["error"]["message"].as_str().unwrap().starts_with("invalid decision: use allow-once"), "{bad}");
    let sent = approver.send_request("exec.approval.resolve", json!({"id": id, "decision": "allow-once"}));
    let (before, r) = approver.until_response(&sent);
    assert_eq!(r["payload"], json!({"ok": true, "id": id, "decision": "allow-once"}));
    let resolved = events(&before, "exec.approval.resolved");
    assert_eq!((&resolved[0]["id"], &resolved[0]["decision"]), (&json!(id), &json!("allow-once")));
    finished(&mut approver, "a1");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "version 1");
    assert!(!result_for("anthropic", &mock.requests()[1].body, "r1").contains("Not run"));
    let again = approver.request("exec.approval.resolve", json!({"id": id, "decision": "deny"}));
    assert_eq!(again["error"]["message"], "unknown or expired approval id", "answered once");

    // Denied: not run, and the model is told.
    let question = asked(&mut sender, &mut approver, "a2");
    let r = approver.request("exec.approval.resolve", json!({"id": question["id"], "decision": "deny"}));
    assert_eq!(r["payload"]["decision"], "deny");
    finished(&mut approver, "a2");
    let result = result_for("anthropic", &mock.requests()[3].body, "r2");
    assert!(result.contains("rejected"), "{result}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "version 1");

    // Unanswered: an approver who connects meanwhile is shown the waiting question; it expires.
    let question = asked(&mut sender, &mut approver, "a3");
    let mut late = gw.client(&["operator.admin"]);
    let replayed = late.until_event(|e| e["event"] == "exec.approval.requested");
    assert_eq!(events(&replayed, "exec.approval.requested")[0]["id"], question["id"]);
    let frames = finished(&mut approver, "a3");
    let resolved = events(&frames, "exec.approval.resolved");
    assert_eq!(resolved.last().unwrap()["reason"], "expired", "{resolved:?}");
    let result = result_for("anthropic", &mock.requests()[5].body, "r3");
    assert!(result.contains("did not approve"), "{result}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "version 1");
    // The sender, without the scope, never saw a question.
    let seen = finished(&mut sender, "a3");
    assert!(events(&seen, "exec.approval.requested").is_empty());

    // Aborted while it waits: the question is withdrawn.
    let question = asked(&mut sender, &mut approver, "a4");
    let r = sender.request("chat.abort", json!({"sessionKey": "wire-approve", "runId": "a4"}));
    assert_eq!(r["payload"]["aborted"], true, "{r}");
    let frames =
        approver.until_event(|e| e["event"] == "exec.approval.resolved" && e["payload"]["id"] == question["id"]);
    assert_eq!(events(&frames, "exec.approval.resolved").last().unwrap()["reason"], "cancelled");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "version 1");
}
