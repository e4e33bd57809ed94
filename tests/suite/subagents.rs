//! Subagents through an editor: a scripted parent spawns children; a child's permission question
//! reaches the editor under the parent's session, labelled with the child; the child shows as a
//! tool call of the parent that ends with its result; the result is announced to the idle parent,
//! which answers on its own; the child is listed with its parent and has no session tools; a child
//! past its time limit is stopped and announced; one spawned by a cancelled turn is cancelled with
//! it; a malformed OpenLang task comes back to the model as `~err`.

use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;
use crate::support::script::{calls, offered_tools, result_for, text};

/// Parent requests are told apart by the tool only they are offered.
const PARENT: &str = "\"name\":\"sessions_spawn\"";

fn parent(reply: Reply) -> Reply {
    reply.when(PARENT)
}

fn child(marker: &str, reply: Reply) -> Reply {
    reply.when(marker).unless(PARENT)
}

/// What the model was told of call `id` (in whichever request carried its result: sessions run
/// at once, so request order is not fixed).
fn told(mock: &MockModel, id: &str) -> String {
    let needle = format!("\"tool_use_id\":\"{id}\"");
    let request =
        mock.requests().into_iter().find(|r| r.body.to_string().contains(&needle)).expect("a request with the result");
    result_for("anthropic", &request.body, id)
}

fn update(m: &Value) -> &Value {
    &m["params"]["update"]
}

#[test]
fn a_child_asks_through_the_parent_shows_its_progress_and_is_announced_to_the_idle_parent() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({}));
    assert_eq!(agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}))["result"], json!({}));

    let task = "TASK-A: write a.txt saying hello";
    mock.push(parent(calls("anthropic", &[("s1", "sessions_spawn", json!({"task": task, "label": "writer"}))])));
    mock.push(parent(text("anthropic", "Started the writer.")));
    mock.push(child("TASK-A", calls("anthropic", &[("w1", "write", json!({"path": "a.txt", "content": "hello"}))])));
    mock.push(child("TASK-A", text("anthropic", "Wrote a.txt.")));
    mock.push(text("anthropic", "The writer is done.").when("Subagent announcement"));

    let id = agent.send_request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "delegate"}]}),
    );
    let (mut answered, mut asked, mut announced) = (false, false, false);
    let mut child_call: Option<Value> = None;
    while !(answered && asked && announced) {
        let m = agent.recv();
        if m["id"] == json!(id) && m.get("method").is_none() {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            answered = true;
        } else if m["method"] == "session/request_permission" {
            let params = &m["params"];
            assert_eq!(params["sessionId"], json!(session), "asked under the parent's session: {m}");
            let title = params["toolCall"]["title"].as_str().unwrap();
            assert!(title.starts_with("[subagent writer] "), "{title}");
            agent.respond(&m["id"], json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}));
            asked = true;
        } else if m["method"] == "session/update" {
            assert_eq!(m["params"]["sessionId"], json!(session), "only the parent's session is shown: {m}");
            let u = update(&m);
            if u["toolCallId"].as_str().is_some_and(|c| c.starts_with("subagent-")) {
                child_call = Some(u.clone());
            }
            if u["sessionUpdate"] == "agent_message_chunk" && u["content"]["text"] == "The writer is done." {
                announced = true;
            }
        }
    }
    assert_eq!(std::fs::read_to_string(cwd.path().join("a.txt")).unwrap(), "hello");
    let last = child_call.expect("the child is shown as a tool call");
    assert_eq!(last["status"], "completed", "{last}");
    let shown = last["content"].to_string();
    assert!(shown.contains("Subagent `writer` finished") && shown.contains("Wrote a.txt."), "{shown}");

    // The child: offered no session tools, told its task; its result reached the parent.
    let requests = mock.requests();
    let child_first = requests.iter().find(|r| !r.body.to_string().contains(PARENT)).unwrap();
    let offered = offered_tools("anthropic", &child_first.body);
    assert!(
        offered.contains(&"write".to_owned()) && !offered.iter().any(|t| t.starts_with("sessions_")),
        "{offered:?}"
    );
    assert!(child_first.body.to_string().contains("A task from another agent session"));
    let announce = requests.iter().find(|r| r.body.to_string().contains("Subagent announcement")).unwrap();
    assert!(announce.body.to_string().contains("Wrote a.txt."));
    let spawned = told(&mock, "s1");
    let spawned: Value = serde_json::from_str(&spawned).unwrap();
    let key = spawned["sessionKey"].as_str().unwrap().to_owned();
    assert!(key.starts_with("agent:main:subagent:") && spawned["status"] == "accepted", "{spawned}");

    // Listed with its parent.
    let list = agent.request("session/list", json!({}));
    let rows = list["result"]["sessions"].as_array().unwrap();
    let row = rows.iter().find(|r| r["sessionId"] == json!(key)).unwrap_or_else(|| panic!("{list}"));
    assert_eq!(row["_meta"]["parentId"], json!(session), "{row}");
}

#[test]
fn limits_a_timed_out_child_is_announced_a_cancelled_turn_takes_its_child_and_bad_openlang_comes_back() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({}));

    // A child that never answers, with a one-second limit; a task in broken OpenLang.
    let broken = "~openlang\n?fnd @fs {p:\"src";
    mock.push(parent(calls(
        "anthropic",
        &[
            ("s1", "sessions_spawn", json!({"task": "TASK-B: think forever", "label": "slow", "timeout": 1})),
            ("s2", "sessions_spawn", json!({"task": broken})),
        ],
    )));
    mock.push(parent(text("anthropic", "One started.")));
    mock.push(child("TASK-B", text("anthropic", "Thinking").stall_after(3)));
    mock.push(text("anthropic", "The slow one ran out of time.").when("Subagent announcement"));
    let (updates, response) = agent.prompt(&session, "start them");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let rejected = told(&mock, "s2");
    assert!(rejected.contains("~err {code:E_PARSE lvl:warn kind:unclosed ln:2 col:13"), "{rejected}");
    assert!(updates.iter().all(|u| u["toolCallId"] != "s2" || u["status"] != "completed"));
    loop {
        let m = agent.recv();
        let u = update(&m);
        if u["sessionUpdate"] == "agent_message_chunk" && u["content"]["text"] == "The slow one ran out of time." {
            break;
        }
    }
    let announce = mock.requests().into_iter().find(|r| r.body.to_string().contains("Subagent announcement")).unwrap();
    assert!(announce.body.to_string().contains("was stopped after 1 s (its time limit)"), "{}", announce.body);

    // A child of a turn that is cancelled is cancelled with it, and nothing is announced.
    let before = mock.requests().len();
    mock.push(parent(calls(
        "anthropic",
        &[("s3", "sessions_spawn", json!({"task": "TASK-C: stall", "label": "doomed"}))],
    )));
    mock.push(parent(text("anthropic", "Waiting").stall_after(3)));
    mock.push(child("TASK-C", text("anthropic", "Working").stall_after(3)));
    let id = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}));
    mock.wait_requests(before + 3);
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (mut ended, mut cancelled_child) = (false, false);
    while !(ended && cancelled_child) {
        let m = agent.recv();
        if m["id"] == json!(id) && m.get("method").is_none() {
            assert_eq!(m["result"]["stopReason"], "cancelled", "{m}");
            ended = true;
            continue;
        }
        let u = update(&m);
        if u["toolCallId"].as_str().is_some_and(|c| c.starts_with("subagent-")) && u["status"] == "failed" {
            assert!(
                u["content"].to_string().contains("was cancelled with the turn (or session) that started it"),
                "{u}"
            );
            cancelled_child = true;
        }
    }
    let child_request = mock
        .requests()
        .iter()
        .position(|r| r.body.to_string().contains("TASK-C") && !r.body.to_string().contains(PARENT))
        .unwrap();
    assert!(mock.wait_done(child_request).client_left, "the child's request was dropped");
    assert_eq!(mock.requests().len(), before + 3, "no announcement turn for a cancelled child");
    assert!(!mock.requests().iter().any(|r| r.body.to_string().contains("`doomed` was cancelled")));
}

#[test]
fn the_lane_runs_one_child_at_a_time_when_so_configured_and_a_fixed_message_goes_through() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(
        options_for("anthropic", &mock).config("[subagents]\nmax_concurrent = 1\nprotocol = \"openlang\"\n"),
    );
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({}));
    let delay = std::time::Duration::from_millis(150);

    // The model's first OpenLang task is malformed; it reads the error and sends it fixed.
    mock.push(parent(calls(
        "anthropic",
        &[("s1", "sessions_spawn", json!({"task": "~openlang\n!tst @sh {cmd:\"cargo test\""}))],
    )));
    mock.push(parent(calls(
        "anthropic",
        &[
            (
                "s2",
                "sessions_spawn",
                json!({"task": "~openlang\n!tst @sh {cmd:\"cargo test\"} -- TASK-X", "label": "x"}),
            ),
            ("s3", "sessions_spawn", json!({"task": "TASK-Y: lint", "label": "y"})),
        ],
    )));
    mock.push(parent(text("anthropic", "Both running.")));
    mock.push(child("TASK-X", text("anthropic", "X done.").delay(delay)));
    mock.push(child("TASK-Y", text("anthropic", "Y done.").delay(delay)));
    mock.push(text("anthropic", "Noted.").when("Subagent announcement"));
    mock.push(text("anthropic", "Noted again.").when("Subagent announcement"));
    let (_, response) = agent.prompt(&session, "test and lint");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let first = told(&mock, "s1");
    assert!(first.contains("~err {code:E_PARSE") && first.contains("kind:unclosed ln:2 col:10"), "{first}");
    let accepted = told(&mock, "s2");
    assert!(accepted.contains("\"status\":\"accepted\""), "the fixed message went through: {accepted}");

    let all = mock.wait_requests(7);
    let x =
        all.iter().position(|r| r.body.to_string().contains("TASK-X") && !r.body.to_string().contains(PARENT)).unwrap();
    let y =
        all.iter().position(|r| r.body.to_string().contains("TASK-Y") && !r.body.to_string().contains(PARENT)).unwrap();
    let (first, second) = if all[x].at < all[y].at { (x, y) } else { (y, x) };
    let first_done = mock.wait_done(first).finished_at.unwrap();
    assert!(all[second].at >= first_done, "with a lane of one, the second child starts after the first is answered");
}

#[test]
fn another_session_is_read_or_written_only_after_a_question() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let other = agent.new_session_in(cwd.path(), json!({}));
    mock.push(text("anthropic", "I am the other session."));
    let (_, r) = agent.prompt(&other, "remember the secret word: plum");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let me = agent.new_session_in(cwd.path(), json!({}));

    // Code mode (the default): reading another session's conversation asks; rejected, nothing read.
    mock.push(calls("anthropic", &[("h1", "sessions_history", json!({"sessionKey": other}))]));
    mock.push(text("anthropic", "I was not allowed."));
    let id =
        agent.send_request("session/prompt", json!({"sessionId": me, "prompt": [{"type": "text", "text": "peek"}]}));
    let mut asked = false;
    loop {
        let m = agent.recv();
        if m["method"] == "session/request_permission" {
            let title = m["params"]["toolCall"]["title"].as_str().unwrap();
            assert_eq!(title, format!("Read session {other}"));
            agent.respond(&m["id"], json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}));
            asked = true;
        }
        if m["id"] == json!(id) && m.get("method").is_none() {
            break;
        }
    }
    assert!(asked, "the read was asked about");
    let told = told(&mock, "h1");
    assert!(!told.contains("plum"), "nothing was read: {told}");
}

#[test]
fn a_client_that_shows_subagents_sees_each_child_as_a_session_asks_as_it_and_cancels_it() {
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    let r = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert!(r.get("result").is_some(), "{r}");
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({}));
    assert_eq!(agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}))["result"], json!({}));

    mock.push(parent(calls(
        "anthropic",
        &[
            ("s1", "sessions_spawn", json!({"task": "TASK-A: write a.txt saying hello", "label": "writer"})),
            ("s2", "sessions_spawn", json!({"task": "TASK-D: think forever", "label": "stuck"})),
        ],
    )));
    mock.push(parent(text("anthropic", "Both started.")));
    // The same call id in the child as in the parent: told apart by session.
    mock.push(child("TASK-A", calls("anthropic", &[("s1", "write", json!({"path": "a.txt", "content": "hello"}))])));
    mock.push(child("TASK-A", text("anthropic", "Wrote a.txt.")));
    mock.push(child("TASK-D", text("anthropic", "Thinking").stall_after(3)));
    mock.push(text("anthropic", "Noted the writer.").when("Subagent announcement").when("`writer`"));
    mock.push(text("anthropic", "Noted the stuck one.").when("Subagent announcement").when("`stuck`"));

    let id = agent.send_request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "delegate"}]}),
    );
    let mut children: std::collections::HashMap<String, String> = Default::default(); // label → key
    let mut states: std::collections::HashMap<String, Vec<String>> = Default::default(); // key → states
    let mut seen: Vec<Value> = Vec::new();
    let (mut answered, mut asked, mut cancelled, mut notes) = (false, false, false, 0);
    while !(answered && asked && notes == 2) {
        let m = agent.recv();
        seen.push(m.clone());
        if m["id"] == json!(id) && m.get("method").is_none() {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            answered = true;
            continue;
        }
        if m["method"] == "session/request_permission" {
            let writer = children.get("writer").expect("the child was announced before it asked");
            assert_eq!(m["params"]["sessionId"], json!(writer), "asked as the child: {m}");
            assert_eq!(states[writer].last().map(String::as_str), Some("requires_action"));
            let title = m["params"]["toolCall"]["title"].as_str().unwrap();
            assert!(!title.contains("[subagent"), "not relabelled: {title}");
            agent.respond(&m["id"], json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}));
            asked = true;
            continue;
        }
        let (on, u) = (m["params"]["sessionId"].as_str().unwrap_or_default().to_owned(), update(&m));
        let announced = on == session || children.values().any(|k| *k == on);
        let announcing = u["sessionUpdate"] == "subagent_update" && on == session;
        assert!(announced || announcing, "traffic of a session not announced yet: {m}");
        assert!(
            !u["toolCallId"].as_str().is_some_and(|c| c.starts_with("subagent-")),
            "no tool call stands in for a child: {m}"
        );
        match u["sessionUpdate"].as_str().unwrap_or_default() {
            "subagent_update" => {
                assert_eq!(on, session, "announced on its parent: {m}");
                let key = u["sessionId"].as_str().unwrap().to_owned();
                if let Some(title) = u["title"].as_str() {
                    assert!(!children.values().any(|k| *k == key), "announced once: {m}");
                    assert_eq!(u["cwd"], json!(cwd.path()), "{m}");
                    assert_eq!(u["capabilities"], json!({"cancel": {}}), "{m}");
                    children.insert(title.to_owned(), key.clone());
                }
                if let Some(state) = u["state"]["state"].as_str() {
                    states.entry(key.clone()).or_default().push(state.to_owned());
                }
                if children.get("stuck") == Some(&key) && u["state"]["state"] == "running" && !cancelled {
                    // The user stops the stuck child, and only it, once it is at work.
                    let working = |r: &crate::support::mock_model::Recorded| {
                        let body = r.body.to_string();
                        body.contains("TASK-D") && !body.contains(PARENT)
                    };
                    while !mock.requests().iter().any(working) {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    agent.notify("session/cancel", json!({"sessionId": key}));
                    cancelled = true;
                }
            }
            "agent_message_chunk" if u["content"]["text"].as_str().is_some_and(|t| t.starts_with("Noted")) => {
                assert_eq!(on, session);
                notes += 1;
            }
            _ => {}
        }
    }
    let (writer, stuck) = (children["writer"].clone(), children["stuck"].clone());
    assert!(writer.starts_with("agent:main:subagent:") && writer != stuck);
    assert_eq!(states[&writer], ["running", "requires_action", "running", "idle"], "{states:?}");
    assert_eq!(states[&stuck], ["running", "idle"], "{states:?}");
    let idle = |key: &str| {
        seen.iter()
            .map(update)
            .find(|u| u["sessionUpdate"] == "subagent_update" && u["sessionId"] == key && u["state"]["state"] == "idle")
            .cloned()
            .unwrap()
    };
    assert_eq!(idle(&writer)["state"]["stopReason"], "end_turn");
    assert_eq!(idle(&writer).get("capabilities"), Some(&Value::Null), "no more cancelling a finished child");
    assert_eq!(idle(&stuck)["state"]["stopReason"], "cancelled");

    // The child's own updates, under its id: its text and its tool call (same id as the parent's).
    let on = |key: &str, kind: &str| -> Vec<Value> {
        seen.iter()
            .filter(|m| m["params"]["sessionId"] == key && update(m)["sessionUpdate"] == kind)
            .map(|m| update(m).clone())
            .collect()
    };
    assert_eq!(
        on(&writer, "agent_message_chunk").iter().map(|u| u["content"]["text"].as_str().unwrap()).collect::<String>(),
        "Wrote a.txt."
    );
    assert!(
        on(&writer, "tool_call")
            .iter()
            .any(|u| u["toolCallId"] == "s1" && u["title"].as_str().unwrap().contains("a.txt"))
    );
    assert!(on(&writer, "tool_call_update").iter().any(|u| u["toolCallId"] == "s1" && u["status"] == "completed"));
    assert!(on(&session, "tool_call_update").iter().any(|u| u["toolCallId"] == "s1" && u["status"] == "completed"));
    assert_eq!(std::fs::read_to_string(cwd.path().join("a.txt")).unwrap(), "hello");

    // The task and the result as messages between the sessions, in both transcripts.
    for transcript in [&session, &writer] {
        let messages = on(transcript, "session_message");
        let task = messages
            .iter()
            .find(|u| u["senderSessionId"] == json!(session) && u["recipientSessionId"] == json!(writer))
            .expect("the task");
        assert!(task["content"][0]["text"].as_str().unwrap().contains("TASK-A"), "{task}");
        let result = messages.iter().find(|u| u["senderSessionId"] == json!(writer)).expect("the result");
        assert_eq!(result["content"][0]["text"], "Wrote a.txt.", "{result}");
    }
    let announced = mock.requests().into_iter().find(|r| r.body.to_string().contains("`stuck`")).unwrap();
    assert!(announced.body.to_string().contains("`stuck` was cancelled by the user"), "{}", announced.body);

    // Reloaded in a new process, the parent shows each child as the tool call it ended as.
    drop(agent);
    let mut agent = Agent::in_process(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let id = agent.send_request("session/load", json!({"sessionId": session, "cwd": cwd.path(), "mcpServers": []}));
    let (replayed, r) = agent.until_response(id);
    assert!(r.get("result").is_some(), "{r}");
    let calls: Vec<&Value> = replayed
        .iter()
        .map(update)
        .filter(|u| u["toolCallId"].as_str().is_some_and(|c| c.starts_with("subagent-")))
        .collect();
    assert_eq!(calls.len(), 2, "{replayed:?}");
    let writer_call = calls.iter().find(|u| u["title"] == "Subagent writer").unwrap();
    assert_eq!(writer_call["status"], "completed", "{writer_call}");
    assert!(writer_call["content"].to_string().contains("Wrote a.txt."), "{writer_call}");
    let stuck_call = calls.iter().find(|u| u["title"] == "Subagent stuck").unwrap();
    assert_eq!(stuck_call["status"], "failed", "{stuck_call}");
}

#[test]
fn on_the_gateway_an_announcement_runs_where_the_parents_clients_see_it_web_and_chat() {
    use crate::support::gateway::Gateway;
    use crate::support::telegram::FakeTelegram;
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\nallow_from = [\"4242\"]\nchunk_min_chars = 1\n",
            fake.base
        ),
    )
    .unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut approver = gw.client(&["operator.read", "operator.write", "operator.approvals"]);

    // The web: the child waits on a question until the parent's run is over, so its result
    // reaches an idle parent; the announcement's run is one every client sees.
    let r = approver.request("sessions.patch", json!({"key": "web", "mode": "ask"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    mock.push(parent(calls("anthropic", &[("s1", "sessions_spawn", json!({"task": "TASK-W: write w.txt"}))])));
    mock.push(parent(text("anthropic", "Started.")).unless("Subagent announcement"));
    mock.push(child("TASK-W", calls("anthropic", &[("w1", "write", json!({"path": "w.txt", "content": "w"}))])));
    mock.push(child("TASK-W", text("anthropic", "W written.")));
    mock.push(text("anthropic", "The web child is done.").when("Subagent announcement").when("TASK-W"));
    let r = approver.request("chat.send", json!({"sessionKey": "web", "message": "go", "idempotencyKey": "run1"}));
    assert_eq!(r["payload"]["status"], "started", "{r}");
    let (mut frames, mut over) = (Vec::new(), false);
    while !(over && frames.iter().any(|f: &Value| f["event"] == "exec.approval.requested")) {
        let frame = approver.recv();
        over |= frame["event"] == "chat" && frame["payload"]["runId"] == "run1" && frame["payload"]["state"] == "final";
        frames.push(frame);
    }
    let question = frames.iter().find(|f| f["event"] == "exec.approval.requested").unwrap()["payload"].clone();
    let r = approver.request("exec.approval.resolve", json!({"id": question["id"], "decision": "allow-once"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let frames = approver
        .until_event(|e| e["event"] == "chat" && e["payload"]["state"] == "final" && e["payload"]["runId"] != "run1");
    let last = &frames.last().unwrap()["payload"];
    assert_eq!(last["sessionKey"], "agent:main:web", "{last}");
    assert_eq!(last["message"]["content"][0]["text"], "The web child is done.", "{last}");
    let run = last["runId"].clone();
    assert!(
        frames
            .iter()
            .any(|f| f["event"] == "agent" && f["payload"]["runId"] == run && f["payload"]["data"]["phase"] == "start"),
        "the run was announced to clients: {frames:#?}"
    );

    // A chat: the announcement's reply is delivered in the chat the parent talks in.
    let user = 4242;
    mock.push(
        parent(calls("anthropic", &[("s2", "sessions_spawn", json!({"task": "TASK-T: write t.txt"}))])).when("tg go"),
    );
    mock.push(parent(text("anthropic", "Started it.")).unless("Subagent announcement"));
    mock.push(child("TASK-T", calls("anthropic", &[("t1", "write", json!({"path": "t.txt", "content": "t"}))])));
    mock.push(child("TASK-T", text("anthropic", "T written.")));
    mock.push(text("anthropic", "The chat child is done.").when("Subagent announcement").when("TASK-T"));
    // Direct chats share the main session (`dm_scope = main`, the default).
    let r = approver.request("sessions.patch", json!({"key": "main", "mode": "ask"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    fake.message(user, "private", user, "tg go");
    let sent = fake.wait_sent(user, 2);
    assert!(sent.iter().any(|m| m == "Started it."), "{sent:?}");
    let question = sent.iter().find(|m| m.contains("[subagent")).unwrap_or_else(|| panic!("{sent:?}"));
    assert!(question.contains("t.txt"), "{question}");
    fake.message(user, "private", user, "1");
    let sent = fake.wait_sent(user, 4);
    assert_eq!(sent.last().unwrap(), "The chat child is done.", "{sent:?}");
    assert_eq!(std::fs::read_to_string(gw.workspace.path().join("t.txt")).unwrap(), "t");
}

#[test]
fn a_child_cancelled_while_it_waits_for_the_lane_never_starts() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config("[subagents]\nmax_concurrent = 1\n"));
    let r = agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert!(r.get("result").is_some(), "{r}");
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({}));
    mock.push(parent(calls(
        "anthropic",
        &[
            ("s1", "sessions_spawn", json!({"task": "TASK-1: wait", "label": "one"})),
            ("s2", "sessions_spawn", json!({"task": "TASK-2: wait", "label": "two"})),
        ],
    )));
    mock.push(parent(text("anthropic", "Both started.")).unless("Subagent announcement"));
    mock.push(child("TASK-1", text("anthropic", "Working").stall_after(3)));
    mock.push(child("TASK-2", text("anthropic", "Working").stall_after(3)));
    mock.push(text("anthropic", "Noted.").when("Subagent announcement"));
    mock.push(text("anthropic", "Noted again.").when("Subagent announcement"));
    let id =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    let mut keys: std::collections::HashMap<String, String> = Default::default(); // task marker → key
    let mut idle: std::collections::HashMap<String, Value> = Default::default();
    let (mut answered, mut cancelled) = (false, None::<String>);
    while !(answered && idle.len() == 2) {
        let m = agent.recv();
        if m["id"] == json!(id) && m.get("method").is_none() {
            answered = true;
            continue;
        }
        let u = update(&m);
        if u["sessionUpdate"] == "subagent_update" && m["params"]["sessionId"] == json!(session) {
            let key = u["sessionId"].as_str().unwrap().to_owned();
            if let Some(d) = u["description"].as_str() {
                keys.insert(d[..6].to_owned(), key.clone());
            }
            if u["state"]["state"] == "idle" {
                idle.insert(key.clone(), u.clone());
            }
        }
        if keys.len() == 2 && cancelled.is_none() {
            // Whichever child holds the lane, cancel the one waiting for it, then the other.
            let working = loop {
                let requests = mock.requests();
                let body = |t: &str| {
                    requests.iter().any(|r| r.body.to_string().contains(t) && !r.body.to_string().contains(PARENT))
                };
                if body("TASK-1") {
                    break "TASK-1";
                }
                if body("TASK-2") {
                    break "TASK-2";
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            };
            let waiting = if working == "TASK-1" { "TASK-2" } else { "TASK-1" };
            agent.notify("session/cancel", json!({"sessionId": keys[waiting]}));
            agent.notify("session/cancel", json!({"sessionId": keys[working]}));
            cancelled = Some(waiting.to_owned());
        }
    }
    let waiting = cancelled.unwrap();
    assert_eq!(idle[&keys[&waiting]]["state"]["stopReason"], "cancelled", "{idle:?}");
    let started = mock
        .requests()
        .iter()
        .filter(|r| {
            let body = r.body.to_string();
            body.contains(&waiting) && !body.contains(PARENT) && !body.contains("Subagent announcement")
        })
        .count();
    assert_eq!(started, 0, "the waiting child never reached the model");
}

#[test]
fn one_reply_spawning_many_children_that_loop_is_held_to_the_turns_limits() {
    let mock = MockModel::start();
    let config = "[subagents]\nmax_children_per_turn = 2\nmax_requests_per_turn = 3\n";
    let mut agent = Agent::spawn(options_for("anthropic", &mock).config(config));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({"_meta": {"mode": "auto"}}));
    let spawns: Vec<(String, String, Value)> = (1..=4)
        .map(|n| {
            (format!("s{n}"), "sessions_spawn".to_owned(), json!({"task": format!("LOOP-{n}: list files forever")}))
        })
        .collect();
    let spawns: Vec<(&str, &str, Value)> = spawns.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone())).collect();
    mock.push(parent(calls("anthropic", &spawns)));
    mock.push(parent(text("anthropic", "Spawned what I could.")));
    // Every child reply asks for another tool call: children that never stop on their own.
    for n in 0..12 {
        mock.push(child("LOOP-", calls("anthropic", &[(&format!("l{n}"), "ls", json!({}))])));
    }
    for _ in 0..4 {
        mock.push(parent(text("anthropic", "Noted.")).when("Subagent announcement"));
    }
    let (_, response) = agent.prompt_answering(&session, "do it all at once", |m| panic!("asked: {m}"));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    for refused in ["s3", "s4"] {
        let said = told(&mock, refused);
        assert!(said.contains("the most one turn may"), "{refused}: {said}");
    }
    // Both children end (announced) once their shared budget is spent.
    let announced = |mock: &MockModel| {
        mock.requests().iter().filter(|r| r.body.to_string().contains("Subagent announcement")).count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while announced(&mock) < 2 {
        assert!(std::time::Instant::now() < deadline, "the children did not end\n{}", agent.stderr());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let by_children = mock
        .requests()
        .iter()
        .filter(|r| {
            let body = r.body.to_string();
            body.contains("LOOP-") && !body.contains(PARENT)
        })
        .count();
    assert_eq!(by_children, 3, "the children's requests, together");
}

#[test]
fn directives_in_another_agents_words_are_never_read() {
    // A task (and a result announced back) is the model's text: `/think`, `/model` in it change
    // nothing and reach the model as written; only the user's own prompts set them.
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = tempfile::tempdir().unwrap();
    let session = agent.new_session_in(cwd.path(), json!({"_meta": {"mode": "auto"}}));
    let task = "TASK-Z: answer /think xhigh /model anthropic/claude-opus-4-6 in one word";
    mock.push(parent(calls("anthropic", &[("s1", "sessions_spawn", json!({"task": task}))])));
    mock.push(parent(text("anthropic", "Started.")));
    mock.push(child("TASK-Z", text("anthropic", "Done /think xhigh")));
    mock.push(text("anthropic", "All done.").when("Subagent announcement"));
    agent.prompt(&session, "delegate");
    let announced = loop {
        let found = mock.requests().into_iter().find(|r| r.body.to_string().contains("Subagent announcement"));
        if let Some(r) = found {
            break r.body;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let task_request = mock
        .requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("TASK-Z") && !r.body.to_string().contains(PARENT))
        .unwrap()
        .body;
    for body in [&task_request, &announced] {
        assert!(body.get("thinking").is_none(), "{body}");
        assert_eq!(body["model"], "claude-sonnet-4-5", "{body}");
        assert!(body.to_string().contains("/think xhigh"), "kept as written: {body}");
    }
}
