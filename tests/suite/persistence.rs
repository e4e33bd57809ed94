//! Sessions that last, against the real binary and a real `$ACP_HOME` shared between processes:
//! `session/load` after a restart replays exactly what the editor saw live (text, thoughts, tool
//! calls with their diffs, plans) and restores mode and model; `session/resume` does not replay;
//! `session/list` pages and filters; `session/delete`; `kill -9` mid-turn, over and over; two
//! processes writing at once; a session open in one process is refused by another; a torn
//! transcript line.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::expect::{
    ANTHROPIC_MODELS, BLANK, blank, chunk, commands_update, config_options, invalid_params, modes, new_session,
    not_found, replies, result, turn, update, usage_update,
};
use crate::support::fix_turn::{PROMPT, fix_turn_history, fix_turn_replay, push_fix_turn};
use crate::support::mock_model::{Chunking, MockModel, Reply};
use crate::support::script::{self, text};
use crate::support::{options_for, updates_of, workspace};

/// What an editor ends up showing from a stream of updates: messages merged by id, tool calls
/// merged with their updates, plans — in the order they first appeared. Usage, titles and commands
/// are not conversation.
fn fold(updates: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for u in updates {
        let kind = u["sessionUpdate"].as_str().unwrap_or_default();
        match kind {
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk" => {
                let id = u["messageId"].clone();
                let text = u["content"]["text"].as_str().map(str::to_owned);
                match out.last_mut() {
                    Some(last) if last["kind"] == kind && last["id"] == id && text.is_some() => {
                        let joined = format!("{}{}", last["text"].as_str().unwrap_or_default(), text.unwrap());
                        last["text"] = json!(joined);
                    }
                    _ => out.push(json!({"kind": kind, "id": id, "text": text, "content": u["content"]})),
                }
            }
            "tool_call" => {
                let mut fields: Map<String, Value> = u.as_object().unwrap().clone();
                fields.remove("sessionUpdate");
                fields.remove("_meta");
                out.push(json!({"kind": "tool", "fields": fields}));
            }
            "tool_call_update" => {
                let id = &u["toolCallId"];
                let item = out.iter_mut().rev().find(|i| i["kind"] == "tool" && i["fields"]["toolCallId"] == *id);
                let item = item.unwrap_or_else(|| panic!("update before its tool_call: {u}"));
                for (k, v) in u.as_object().unwrap() {
                    if k != "sessionUpdate" && k != "_meta" {
                        item["fields"][k] = v.clone();
                    }
                }
            }
            "plan" => out.push(json!({"kind": "plan", "entries": u["entries"]})),
            _ => {}
        }
    }
    out
}

fn load(agent: &mut Agent, session: &str, cwd: &Path) -> (Vec<Value>, Value) {
    let id = agent.send_request("session/load", json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    let (before, response) = agent.until_response(id);
    assert!(response.get("result").is_some(), "session/load failed: {response}\n{}", agent.stderr());
    (updates_of(&before), response)
}

fn transcript(home: &Path, session: &str) -> std::path::PathBuf {
    home.join("sessions").join(format!("{session}.jsonl"))
}

const SONNET: &str = "anthropic/claude-sonnet-4-5";

/// The error for a session another process holds open (its transcript locked).
fn open_elsewhere(verb: &str, home: &Path, session: &str) -> Value {
    let path = transcript(home, session);
    let message = format!(
        "internal error: could not {verb} session {session}: the session is open in another acp process ({} is \
         locked); close it there first",
        path.display()
    );
    json!({"code": -32603, "message": message})
}

/// The answer to `session/load` or `session/resume`: the session's modes and config options.
fn reopened(model: &str, mode: &str) -> Value {
    json!({"modes": modes(mode), "configOptions": config_options(model, &ANTHROPIC_MODELS, mode, "default")})
}

#[test]
fn load_after_a_restart_replays_what_the_editor_saw() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let mock = MockModel::start();
    push_fix_turn(&mock);

    // First process: the work, then a mode and model change, then exit.
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session_in(ws.path(), json!({"_meta": {"mode": "auto"}}));
    let (live, response) = a.prompt(&session, PROMPT);
    assert_eq!(response["result"], replies("anthropic", 3), "{}", a.stderr());
    assert!(std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap().contains("a + b"));
    let r = a.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "anthropic/claude-opus-4-6"}),
    );
    assert!(r.get("result").is_some(), "{r}");
    let r = a.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}));
    assert!(r.get("result").is_some(), "{r}");
    a.close_stdin();
    assert!(a.wait_exit(Duration::from_secs(5)).is_some_and(|s| s.success()));

    // Second process, same home: load replays everything before answering.
    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let (replayed, response) = load(&mut b, &session, ws.path());
    // The same conversation as live (message ids and tool-call ids included)…
    let live_view = fold(&live);
    let replay_view: Vec<Value> = fold(&replayed).into_iter().filter(|i| i["kind"] != "user_message_chunk").collect();
    assert_eq!(replay_view, live_view);
    // …plus the prompt as the user sent it; tool calls in their final state, with their diffs.
    assert_eq!(blank(&json!(replayed), &["messageId"]), fix_turn_replay(ws.path()));
    // Mode and model as they were left.
    let opus = "anthropic/claude-opus-4-6";
    assert_eq!(response["result"], reopened(opus, "ask"));
    // After the answer: the commands, the context's fill, the title.
    let after: Vec<Value> = (0..3).map(|_| b.recv()).collect();
    assert_eq!(
        after,
        [
            update(&session, commands_update()),
            update(&session, usage_update(70, 200_000)),
            update(&session, json!({"sessionUpdate": "session_info_update", "title": PROMPT})),
        ]
    );

    // The session goes on where it was: the model gets the whole history, thinking signed.
    mock.push(text("anthropic", "You're welcome."));
    let (_, response) = b.prompt(&session, "Thanks!");
    assert_eq!(response["result"], replies("anthropic", 1));
    let body = mock.requests().last().unwrap().body.clone();
    assert_eq!(body["model"], "claude-opus-4-6");
    assert_eq!(body["messages"], fix_turn_history("Thanks!"));

    // The replay is the same every time (a second load in the same process reopens it).
    let (again, _) = load(&mut b, &session, ws.path());
    let again_view: Vec<Value> = fold(&again).into_iter().filter(|i| i["kind"] != "user_message_chunk").collect();
    assert_eq!(&again_view[..live_view.len()], &live_view[..]);
    assert_eq!(again.iter().filter(|u| u["sessionUpdate"] == "user_message_chunk").count(), 2);
}

#[test]
fn resume_restores_without_replaying_and_new_with_a_stored_key_continues() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "First answer."));
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let cwd = home.path().display().to_string();
    let r = a.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"sessionKey": "chat-1"}}));
    assert_eq!(r["result"], new_session("chat-1", SONNET, &ANTHROPIC_MODELS, "code"));
    a.expect_setup("chat-1");
    a.prompt("chat-1", "first question");
    drop(a);

    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let id = b.send_request("session/resume", json!({"sessionId": "chat-1", "cwd": cwd}));
    let (before, response) = b.until_response(id);
    assert!(before.is_empty(), "resume must not replay: {before:?}");
    assert_eq!(response["result"], reopened(SONNET, "code"));
    assert_eq!(b.recv(), update("chat-1", commands_update()));
    mock.push(text("anthropic", "Second answer."));
    b.prompt("chat-1", "second question");
    let body = mock.requests().last().unwrap().body.clone();
    assert_eq!(body["messages"].as_array().unwrap().len(), 3, "the history came back: {body}");
    drop(b);

    // session/new naming a stored key continues that session.
    let mut c = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    c.initialize();
    let r = c.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"sessionKey": "chat-1"}}));
    assert_eq!(r["result"], new_session("chat-1", SONNET, &ANTHROPIC_MODELS, "code"));
    mock.push(text("anthropic", "Third answer."));
    c.prompt("chat-1", "third question");
    assert_eq!(mock.requests().last().unwrap().body["messages"].as_array().unwrap().len(), 5);

    // Unknown sessions are "not found"; bad keys are refused.
    let r = c.request("session/resume", json!({"sessionId": "nope", "cwd": cwd}));
    assert_eq!(r["error"], not_found("nope"));
    let r = c.request("session/load", json!({"sessionId": "../etc/passwd", "cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"], not_found("../etc/passwd"));
    for bad in ["a\nb", "nul\u{0}", &"k".repeat(257)] {
        let r = c.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"sessionKey": bad}}));
        let says = format!(
            "`_meta.sessionKey`: `{}` is not a valid session key (1 to 256 bytes of printable text)",
            bad.escape_debug()
        );
        assert_eq!(r["error"], invalid_params(&says));
    }
    let r = c.request("session/load", json!({"sessionId": "chat-1", "cwd": "relative", "mcpServers": []}));
    assert_eq!(r["error"], invalid_params("`cwd` must be an absolute path, got `relative`"));
}

#[test]
fn list_pages_newest_first_and_filters_by_cwd() {
    let home = tempfile::tempdir().unwrap();
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let mut made = Vec::new();
    for i in 0..55 {
        let cwd = if i % 5 == 0 { two.path() } else { one.path() };
        let session = agent.new_session_in(cwd, json!({}));
        mock.push(text("anthropic", "ok"));
        agent.prompt(&session, &format!("question {i}\nwith a second line"));
        made.push(session);
    }
    // A session nobody spoke to is not kept.
    agent.new_session();

    let first = agent.request("session/list", json!({}));
    let page = first["result"]["sessions"].as_array().unwrap();
    assert_eq!(page.len(), 50, "{first}");
    assert!(page[0]["updatedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        blank(&page[0], &["updatedAt", "createdAt"]),
        json!({
            "sessionId": made[54],
            "cwd": one.path(),
            "title": "question 54",
            "updatedAt": BLANK,
            "_meta": {
                "createdAt": BLANK,
                "model": SONNET,
                "mode": "code",
                "origin": "acp",
                "inputTokens": 50,
                "outputTokens": 20,
                "contextTokens": 70
            }
        })
    );
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let second = agent.request("session/list", json!({"cursor": cursor}));
    let rest = second["result"]["sessions"].as_array().unwrap();
    assert_eq!(rest.len(), 5);
    assert!(second["result"].get("nextCursor").is_none(), "{second}");
    let ids: Vec<&str> = page.iter().chain(rest).map(|s| s["sessionId"].as_str().unwrap()).collect();
    let expected: Vec<&str> = made.iter().rev().map(String::as_str).collect();
    assert_eq!(ids, expected, "newest first, each once");

    let filtered = agent.request("session/list", json!({"cwd": two.path()}));
    let sessions = filtered["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 11);
    assert!(sessions.iter().all(|s| s["cwd"] == two.path().display().to_string()));

    let r = agent.request("session/list", json!({"cursor": "not-a-cursor"}));
    assert_eq!(r["error"], invalid_params("`cursor`: `cursor` is not a cursor this agent gave out"));
    let r = agent.request("session/list", json!({"cwd": "relative/dir"}));
    assert_eq!(r["error"], invalid_params("`cwd` must be an absolute path, got `relative/dir`"));
}

#[test]
fn delete_removes_the_session_everywhere() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "ok"));
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session();
    agent.prompt(&session, "hello");
    assert!(transcript(home.path(), &session).exists());

    let r = agent.request("session/delete", json!({"sessionId": session}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(!transcript(home.path(), &session).exists());
    let list = agent.request("session/list", json!({}));
    assert_eq!(list["result"]["sessions"], json!([]));
    let r = agent.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}));
    assert_eq!(r["error"], not_found(&session), "deleting closes it");
    let cwd = home.path().display().to_string();
    let r = agent.request("session/load", json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"], not_found(&session));
    let r = agent.request("session/delete", json!({"sessionId": session}));
    assert_eq!(r["result"], json!({}), "deleting twice is fine: {r}");
    let r = agent.request("session/delete", json!({"sessionId": "never-was"}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn a_session_open_in_one_process_is_refused_by_another() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "ok"));
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session();
    a.prompt(&session, "hello");

    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let cwd = home.path().display().to_string();
    let r = b.request("session/load", json!({"sessionId": session, "cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"], open_elsewhere("open", home.path(), &session));
    let r = b.request("session/delete", json!({"sessionId": session}));
    assert_eq!(r["error"], open_elsewhere("delete", home.path(), &session));

    // Once the first process is gone (even killed), the session opens.
    a.kill();
    let (replayed, _) = load(&mut b, &session, home.path());
    assert_eq!(turn(&replayed), json!([chunk("user_message_chunk", "hello"), chunk("agent_message_chunk", "ok")]));
}

#[test]
fn two_processes_write_to_one_home_at_once() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let spawn = || {
        let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
        agent.initialize();
        let session = agent.new_session();
        (agent, session)
    };
    let (mut a, sa) = spawn();
    let (mut b, sb) = spawn();
    for _ in 0..40 {
        mock.push(text("anthropic", "reply").chunking(Chunking::Bytes(40)));
    }
    // Both send every prompt before reading anything: the two processes write together.
    let mut pending = Vec::new();
    for i in 0..20 {
        pending.push((0, a.send_request("session/prompt", prompt(&sa, &format!("a{i}")))));
        pending.push((1, b.send_request("session/prompt", prompt(&sb, &format!("b{i}")))));
    }
    for (who, id) in pending {
        let agent = if who == 0 { &mut a } else { &mut b };
        let (_, r) = agent.until_response(id);
        assert_eq!(r, result(id, replies("anthropic", 1)));
    }
    drop((a, b));

    let mut c = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    c.initialize();
    let list = c.request("session/list", json!({}));
    assert_eq!(list["result"]["sessions"].as_array().unwrap().len(), 2, "{list}");
    for (session, tag) in [(&sa, "a"), (&sb, "b")] {
        let (replayed, _) = load(&mut c, session, home.path());
        let prompts: Vec<&str> = replayed
            .iter()
            .filter(|u| u["sessionUpdate"] == "user_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap())
            .collect();
        let expected: Vec<String> = (0..20).map(|i| format!("{tag}{i}")).collect();
        assert_eq!(prompts, expected);
        let texts = replayed.iter().filter(|u| u["sessionUpdate"] == "agent_message_chunk").count();
        assert_eq!(texts, 20);
    }
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Checks an Anthropic request's history: roles alternate (after merging) and every `tool_use`
/// is answered by a `tool_result` in the next message.
fn assert_valid_history(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "roles alternate: {messages:#?}");
    }
    for (i, m) in messages.iter().enumerate() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                let next = &messages[i + 1]["content"];
                let answered = next.as_array().unwrap().iter().any(|b| b["tool_use_id"] == block["id"]);
                assert!(answered, "tool_use {} unanswered: {messages:#?}", block["id"]);
            }
        }
    }
}

#[test]
fn kill_dash_nine_mid_turn_fifty_times_then_load() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace("calc");
    let cwd = ws.path().display().to_string();
    let mut torn = 0;
    let mut recorded = 0;
    // Round 0 runs its turn to the end, so the session is stored; rounds 1 to 50 are killed.
    for round in 0..=50 {
        let mock = MockModel::start();
        let content = "x".repeat(2_000);
        mock.push(
            script::text_then_calls(
                "anthropic",
                &format!("Round {round}: writing a file. {}", "More words. ".repeat(30)),
                &[("call_w", "write", json!({"path": format!("out/{round}.txt"), "content": content}))],
            )
            .chunking(Chunking::Bytes(64))
            .delay(Duration::from_millis(2)),
        );
        mock.push(text("anthropic", &format!("Done with round {round}.")).chunking(Chunking::Bytes(8)));
        let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
        agent.initialize();
        if round == 0 {
            let r = agent.request(
                "session/new",
                json!({"cwd": cwd, "mcpServers": [], "_meta": {"sessionKey": "crashy", "mode": "auto"}}),
            );
            assert_eq!(r["result"], new_session("crashy", SONNET, &ANTHROPIC_MODELS, "auto"));
            let (_, response) = agent.prompt("crashy", "round 0");
            assert_eq!(response["result"], replies("anthropic", 2), "{}", agent.stderr());
            agent.close_stdin();
            assert!(agent.wait_exit(Duration::from_secs(5)).is_some_and(|s| s.success()));
            recorded = 1;
            continue;
        } else {
            let (replayed, _) = load(&mut agent, "crashy", ws.path());
            let prompts = replayed.iter().filter(|u| u["sessionUpdate"] == "user_message_chunk").count();
            // The last prompt is there if the kill came after it reached the agent; none is lost.
            assert!(
                prompts == recorded || prompts == recorded + 1,
                "round {round}: {prompts} prompts, {recorded} before"
            );
            recorded = prompts;
        }
        agent.send_request("session/prompt", prompt("crashy", &format!("round {round}")));
        // Somewhere in the turn: streaming, running the tool, or the second request.
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..120)));
        agent.kill();

        // Every whole line of the transcript is a record; at most the last one is torn.
        let bytes = std::fs::read(transcript(home.path(), "crashy")).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.split('\n').collect();
        let last = lines.pop().unwrap();
        for line in &lines {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("round {round}: {e}: {line}"));
            assert!(v["t"].is_string());
        }
        if !last.is_empty() {
            torn += 1;
        }
    }

    eprintln!("{torn} of 50 kills tore a line");
    // Usable afterwards: a turn runs, and the model gets a history every API accepts.
    let mock = MockModel::start();
    mock.push(text("anthropic", "Still here."));
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let (replayed, _) = load(&mut agent, "crashy", ws.path());
    let prompts = replayed.iter().filter(|u| u["sessionUpdate"] == "user_message_chunk").count();
    assert!(prompts == recorded || prompts == recorded + 1);
    assert!(prompts >= 40, "most kills came after the prompt arrived: {prompts}");
    let interrupted = replayed
        .iter()
        .filter(|u| u["content"]["text"].as_str().is_some_and(|t| t.contains("acp stopped before this turn finished")))
        .count();
    assert!(interrupted >= 10, "the kills cut turns short ({interrupted} of {prompts}), and each says so");
    eprintln!("{interrupted} of {prompts} turns were cut short");
    let (_, response) = agent.prompt("crashy", "are you still there?");
    assert_eq!(response["result"], replies("anthropic", 1), "{}", agent.stderr());
    assert_valid_history(&mock.requests()[0].body);
}

#[test]
fn a_torn_last_line_is_reported_and_skipped() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello there."));
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session();
    a.prompt(&session, "hi");
    drop(a);
    let path = transcript(home.path(), &session);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"t":"text","id":"msg_torn","text":"half a li"#);
    std::fs::write(&path, &bytes).unwrap();

    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let (replayed, _) = load(&mut b, &session, home.path());
    assert_eq!(
        turn(&replayed),
        json!([chunk("user_message_chunk", "hi"), chunk("agent_message_chunk", "Hello there.")])
    );
    b.wait_for_stderr("torn line", 1);
    // The torn bytes were cut off before anything new was appended.
    mock.push(text("anthropic", "Again."));
    b.prompt(&session, "again");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("half a li"));
    assert!(text.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));
}

#[test]
fn sessions_without_a_store_still_work() {
    // The database path is a directory: nothing can be saved, but the session works and says so.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("acp.db")).unwrap();
    let mock = MockModel::start();
    mock.push(text("anthropic", "Works anyway."));
    let mut agent = Agent::spawn(Options::default().anthropic(&mock.base()).home(dir.path()));
    agent.initialize();
    let session = agent.new_session_in(dir.path(), json!({}));
    let (updates, response) = agent.prompt(&session, "hello");
    assert_eq!(response["result"], replies("anthropic", 1));
    assert!(updates.iter().any(|u| u["content"]["text"] == "Works anyway."));
    let (updates, _) = agent.prompt(&session, "/status");
    let status = updates.iter().map(|u| u["content"]["text"].as_str().unwrap_or_default()).collect::<String>();
    assert!(status.contains("not saved"), "{status}");
    let r = agent.request("session/list", json!({}));
    let db = dir.path().join("acp.db").display().to_string();
    let says = format!("internal error: could not list sessions: {db}: unable to open database file: {db}");
    assert_eq!(r["error"], json!({"code": -32603, "message": says}));
}

/// Reopens `id` with `session/load` or `session/resume`; returns the response (the replay and the
/// setup updates that follow are read and dropped).
fn reopen(agent: &mut Agent, method: &str, id: &str, cwd: &Path) -> Value {
    let mut params = json!({"sessionId": id, "cwd": cwd});
    if method == "session/load" {
        params["mcpServers"] = json!([]);
    }
    let request = agent.send_request(method, params);
    let (_, response) = agent.until_response(request);
    if response.get("result").is_some() {
        assert_eq!(agent.recv(), update(id, commands_update()));
    }
    response
}

#[test]
fn a_session_never_prompted_can_be_loaded_and_resumed_on_its_own_connection() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    let session = agent.new_session_in(home.path(), json!({}));
    for method in ["session/load", "session/resume"] {
        let r = reopen(&mut agent, method, &session, home.path());
        assert!(r.get("result").is_some(), "{method}: {r}\n{}", agent.stderr());
        assert_eq!(r["result"], reopened(SONNET, "code"), "{method}");
        let _usage = agent.recv();
    }
    // The session is still there: it answers a prompt and closes.
    mock.push(text("anthropic", "Still here."));
    let (updates, response) = agent.prompt(&session, "hello");
    assert_eq!(response["result"], replies("anthropic", 1));
    assert!(updates.iter().any(|u| u["content"]["text"] == "Still here."));
    let r = agent.request("session/close", json!({"sessionId": session}));
    assert!(r.get("result").is_some(), "{r}");
}

#[test]
fn a_session_never_prompted_is_resumed_from_another_process_with_its_settings() {
    // As acpx does: one process creates the session and sets it up, the next runs the prompt.
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session_in(home.path(), json!({}));
    let r = a.request("session/set_mode", json!({"sessionId": session, "modeId": "auto"}));
    assert!(r.get("result").is_some(), "{r}");
    let r = a.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "anthropic/claude-opus-4-6"}),
    );
    assert!(r.get("result").is_some(), "{r}");
    drop(a); // kill -9: what was answered is on disk

    let list = |agent: &mut Agent| agent.request("session/list", json!({}))["result"]["sessions"].clone();
    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    assert_eq!(list(&mut b), json!([]), "a session never prompted is not listed");
    let r = reopen(&mut b, "session/resume", &session, home.path());
    let opus = "anthropic/claude-opus-4-6";
    assert_eq!(r["result"], reopened(opus, "auto"), "{}", b.stderr());
    let _usage = b.recv();
    mock.push(text("anthropic", "Hello from the second process."));
    let (_, response) = b.prompt(&session, "first prompt");
    assert_eq!(response["result"], replies("anthropic", 1));
    assert_eq!(mock.requests().last().unwrap().body["model"], "claude-opus-4-6");
    let listed = list(&mut b);
    let meta = json!({"createdAt": BLANK, "model": opus, "mode": "auto", "origin": "acp", "inputTokens": 50, "outputTokens": 20, "contextTokens": 70});
    assert_eq!(
        blank(&listed, &["createdAt", "updatedAt"]),
        json!([{"sessionId": session, "cwd": home.path(), "title": "first prompt", "updatedAt": BLANK, "_meta": meta}])
    );
}

/// A session's title and its place in the list are saved with the end of its first turn; a first
/// turn cut off once the model was answering (the process killed) still gives the session the
/// title of its prompt and a place in the list when it is reopened.
#[test]
fn a_first_turn_cut_off_mid_reply_is_listed_with_its_title_and_keeps_it_once_reopened() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    // A reply of 200 deltas, 5 ms apart.
    let mut sse = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_slow\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for i in 0..200 {
        sse.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"word {i} \"}}}}\n\n"
        ));
    }
    sse.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    mock.push(Reply::sse(sse).chunking(Chunking::PerEvent).delay(Duration::from_millis(5)));
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    let session = a.new_session_in(home.path(), json!({}));
    a.send_request("session/prompt", prompt(&session, "Explain the build\nin detail"));
    // Killed once part of the reply is on disk (streamed text is written every 100 ms).
    let path = transcript(home.path(), &session);
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    while !std::fs::read_to_string(&path).unwrap_or_default().contains(r#""t":"text""#) {
        assert!(std::time::Instant::now() < deadline, "no reply text was written: {}", a.stderr());
        std::thread::sleep(Duration::from_millis(5));
    }
    a.kill();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(!written.contains(r#""t":"end""#), "the turn ended before the kill:\n{written}");

    let list = |agent: &mut Agent| agent.request("session/list", json!({}))["result"]["sessions"].clone();
    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    // A saved prompt is listed after any crash, titled by it, before it is reopened.
    let listed = list(&mut b);
    assert_eq!(listed[0]["sessionId"], json!(session), "{listed}");
    assert_eq!(listed[0]["title"], "Explain the build", "{listed}");
    load(&mut b, &session, home.path());
    // After the answer: the commands, the usage, then the session's title.
    let after: Vec<Value> = (0..3).map(|_| b.recv()["params"]["update"].clone()).collect();
    assert_eq!(after[2], json!({"sessionUpdate": "session_info_update", "title": "Explain the build"}), "{after:?}");
    let listed = list(&mut b);
    assert_eq!(listed[0]["sessionId"], json!(session), "{listed}");
    assert_eq!(listed[0]["title"], "Explain the build", "{listed}");
}

#[test]
fn session_keys_of_any_printable_text_are_stored_safely_and_distinctly() {
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let keys = ["agent:main:main", "agent:main:telegram:dm:123", "Demo", "demo", "../../escape", "a b/c"];
    let mut agent = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    agent.initialize();
    for key in keys {
        let id = agent.new_session_in(home.path(), json!({"_meta": {"sessionKey": key}}));
        assert_eq!(id, key);
        mock.push(text("anthropic", &format!("I am {key}.")));
        let (_, response) = agent.prompt(key, "who are you?");
        assert_eq!(response["result"], replies("anthropic", 1), "{key}");
    }
    drop(agent);
    // Every transcript is a file directly in sessions/, one per key, and nothing else was written.
    let names: Vec<String> = std::fs::read_dir(home.path().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), keys.len(), "{names:?}");
    let lower: std::collections::HashSet<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    assert_eq!(lower.len(), keys.len(), "names differ only by case: {names:?}");
    assert!(!home.path().parent().unwrap().join("escape.jsonl").exists());
    // Each loads back as itself in another process.
    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    for key in keys {
        let request = b.send_request("session/load", json!({"sessionId": key, "cwd": home.path(), "mcpServers": []}));
        let (replayed, response) = b.until_response(request);
        assert!(response.get("result").is_some(), "{key}: {response}");
        let said = updates_of(&replayed).iter().any(|u| u["content"]["text"] == format!("I am {key}."));
        assert!(said, "{key}: {replayed:?}");
    }
}

#[test]
fn one_session_key_in_two_processes_at_once_is_refused_clearly_in_one() {
    let mock = MockModel::start();
    for round in 0..10 {
        let home = tempfile::tempdir().unwrap();
        let mut agents: Vec<Agent> =
            (0..2).map(|_| Agent::spawn(options_for("anthropic", &mock).home(home.path()))).collect();
        for agent in &mut agents {
            agent.initialize();
        }
        let params = json!({"cwd": home.path(), "mcpServers": [], "_meta": {"sessionKey": "shared"}});
        let ids: Vec<i64> = agents.iter_mut().map(|a| a.send_request("session/new", params.clone())).collect();
        let answers: Vec<Value> = agents.iter_mut().zip(ids).map(|(a, id)| a.until_response(id).1).collect();
        let won: Vec<&Value> = answers.iter().filter(|r| r.get("result").is_some()).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let lost = answers.iter().find(|r| r.get("error").is_some()).unwrap();
        let message = lost["error"]["message"].as_str().unwrap();
        assert!(message.contains("open in another acp process"), "round {round}: {lost}");
        for agent in &agents {
            assert!(!agent.stderr().contains("UNIQUE"), "round {round}: {}", agent.stderr());
        }
    }
    // Once the first is closed, the key opens elsewhere with what it holds.
    let home = tempfile::tempdir().unwrap();
    let mut a = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    a.initialize();
    a.new_session_in(home.path(), json!({"_meta": {"sessionKey": "shared"}}));
    mock.push(text("anthropic", "Saved."));
    a.prompt("shared", "remember me");
    let mut b = Agent::spawn(options_for("anthropic", &mock).home(home.path()));
    b.initialize();
    let r = b.request("session/new", json!({"cwd": home.path(), "mcpServers": [], "_meta": {"sessionKey": "shared"}}));
    assert_eq!(r["error"], open_elsewhere("open", home.path(), "shared"));
    let r = a.request("session/close", json!({"sessionId": "shared"}));
    assert!(r.get("result").is_some(), "{r}");
    let r = b.request("session/new", json!({"cwd": home.path(), "mcpServers": [], "_meta": {"sessionKey": "shared"}}));
    assert_eq!(r["result"], new_session("shared", SONNET, &ANTHROPIC_MODELS, "code"));
}
