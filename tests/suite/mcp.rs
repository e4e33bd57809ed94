//! MCP servers end to end, with the reference servers from npm (tests/mcp, installed by
//! tests/run) and a stub for what they never do (crash, hang, exit mid-call): servers given by the
//! editor and by config.toml, over stdio, streamable HTTP and legacy SSE; tool calls shown with
//! their kind and title, results reaching the model, approval asked and remembered per server,
//! cancel, progress, images, elicitation, failures said to the user, restarts and sharing.

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, offered_tools, result_for, text};
use crate::support::{no_requests, options_for, status_sequence, tool_updates, updates_of};

pub(super) fn servers_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/node_modules/@modelcontextprotocol");
    assert!(
        dir.join("server-everything/dist/index.js").exists(),
        "the MCP reference servers are not installed: run tests/run (it installs them)"
    );
    dir
}

pub(super) fn everything() -> String {
    servers_dir().join("server-everything/dist/index.js").display().to_string()
}

pub(super) fn stub() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/stub_server.py").display().to_string()
}

/// server-everything on stdio, as an editor passes it.
fn everything_stdio(name: &str) -> Value {
    json!({"name": name, "command": "node", "args": [everything(), "stdio"], "env": []})
}

/// The agent's message text, without its notices.
fn said(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk" && u["_meta"]["notice"] != true)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// The agent's own notices (marked `_meta.notice`), one per chunk, trimmed.
fn noticed(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk" && u["_meta"]["notice"] == true)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default().trim_end().to_owned())
        .collect()
}

/// An agent (code mode) with a session in a fresh workspace using `servers`.
fn agent_with(mock: &MockModel, options: Options, servers: Value) -> (Agent, String, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(options);
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"mcpServers": servers}));
    let _ = mock;
    (agent, session, ws)
}

#[test]
fn an_editors_stdio_server_gives_the_model_its_tools_shown_with_kind_and_title() {
    let api = "anthropic";
    let mock = MockModel::start();
    mock.push(calls(api, &[("c1", "mcp__everything__echo", json!({"message": "hi there"}))]));
    mock.push(text(api, "Done."));
    let (mut agent, session, _ws) = agent_with(&mock, options_for(api, &mock), json!([everything_stdio("everything")]));
    let (before, response) = agent.prompt_answering(&session, "echo something", no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    let requests = mock.requests();
    let offered = offered_tools(api, &requests[0].body);
    for tool in ["mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything__get-tiny-image"] {
        assert!(offered.contains(&tool.to_owned()), "{tool} not in {offered:?}");
    }
    let echo =
        requests[0].body["tools"].as_array().unwrap().iter().find(|t| t["name"] == "mcp__everything__echo").unwrap();
    assert_eq!(echo["input_schema"]["properties"]["message"]["type"], "string");
    assert_eq!(echo["input_schema"]["required"], json!(["message"]));
    assert_eq!(result_for(api, &requests[1].body, "c1"), "Echo: hi there");
    let updates = updates_of(&before);
    let shown = tool_updates(&updates, "c1");
    assert_eq!(shown[0]["kind"], "read", "echo is annotated read-only: {:#}", shown[0]);
    assert_eq!(shown[0]["title"], "Echo Tool (everything): message: hi there", "the tool's own title");
    assert_eq!(status_sequence(&updates, "c1"), ["pending", "in_progress", "completed"]);
    let last = shown.last().unwrap();
    assert_eq!(last["content"], json!([{"type": "content", "content": {"type": "text", "text": "Echo: hi there"}}]));
}

/// Answers each permission question with the option `id`, recording the questions.
fn choose<'a>(id: &'static str, asked: &'a mut Vec<Value>) -> impl FnMut(&Value) -> Value + 'a {
    move |msg: &Value| {
        assert_eq!(msg["method"], "session/request_permission", "{msg}");
        asked.push(msg.clone());
        json!({"outcome": {"outcome": "selected", "optionId": id}})
    }
}

/// config.toml with the stub in `tools` mode as server `stub`.
fn stub_config() -> String {
    format!("[mcp_servers.stub]\ncommand = \"python3\"\nargs = [{}, \"tools\"]\n", toml_path(&stub()))
}

pub(super) fn toml_path(path: &str) -> String {
    serde_json::to_string(path).unwrap()
}

#[test]
fn a_configured_server_asks_before_tools_that_change_things_and_remembers_a_whole_server() {
    let api = "anthropic";
    let mock = MockModel::start();
    let ws = tempfile::tempdir().unwrap();
    let fs_server = servers_dir().join("server-filesystem/dist/index.js").display().to_string();
    let config = format!(
        "[mcp_servers.files]\ncommand = \"node\"\nargs = [{}, {}]\n",
        toml_path(&fs_server),
        toml_path(&ws.path().display().to_string())
    );
    let file = ws.path().join("a.txt");
    let dir = ws.path().join("sub");
    mock.push(calls(api, &[("w1", "mcp__files__write_file", json!({"path": file, "content": "one"}))]));
    mock.push(calls(api, &[("d1", "mcp__files__create_directory", json!({"path": dir}))]));
    mock.push(calls(api, &[("l1", "mcp__files__list_directory", json!({"path": ws.path()}))]));
    mock.push(text(api, "Done."));
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({}));
    let mut asked = Vec::new();
    let (before, response) = agent.prompt_answering(&session, "write a file", choose("allow-server", &mut asked));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    // One question: the write. The directory is covered by the answer; the listing only reads.
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let question = &asked[0]["params"];
    assert_eq!(question["toolCall"]["toolCallId"], "w1");
    assert_eq!(question["toolCall"]["kind"], "edit", "write_file is destructive");
    let options: Vec<(&str, &str)> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow-once", "Allow once"),
            ("allow-always", "Always allow `mcp__files__write_file`"),
            ("allow-server", "Always allow every tool of `files`"),
            ("reject-once", "Reject"),
            ("reject-always", "Always reject `mcp__files__write_file`"),
        ]
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one");
    assert!(dir.is_dir());
    let updates = updates_of(&before);
    assert_eq!(status_sequence(&updates, "d1"), ["pending", "in_progress", "completed"]);
    let listing = result_for(api, &mock.requests()[3].body, "l1");
    assert!(listing.contains("[FILE] a.txt") && listing.contains("[DIR] sub"), "{listing}");
    let saved = std::fs::read_to_string(agent.home.path().join("config.toml")).unwrap();
    assert!(saved.contains("tool = \"mcp__files__*\"") && saved.contains("decision = \"allow\""), "{saved}");
}

#[test]
fn a_server_that_is_not_there_is_said_once_and_the_turn_goes_on_without_it() {
    let api = "anthropic";
    let mock = MockModel::start();
    let config = format!(
        "[mcp_servers.missing]\ncommand = \"acp-test-no-such-server\"\n\n\
         [mcp_servers.crashing]\ncommand = \"python3\"\nargs = [{}, \"crash\"]\n\n\
         [mcp_servers.hanging]\ncommand = \"python3\"\nargs = [{}, \"hang\"]\nstartup_timeout_sec = 0.5\n",
        toml_path(&stub()),
        toml_path(&stub())
    );
    mock.push(text(api, "Hello."));
    mock.push(text(api, "Again."));
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session();
    let (updates, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    // The model's words are only the model's; the notices are marked as the agent's own.
    assert_eq!(said(&updates), "Hello.");
    let notices = noticed(&updates);
    for line in [
        "MCP server `missing` is not available: `acp-test-no-such-server` was not found.",
        "MCP server `crashing` is not available: initialize failed: it exited before answering (exit status: 3); its last output: stub: cannot open the database /nonexistent/db.",
        "MCP server `hanging` is not available: it did not finish starting within 0.5 s.",
    ] {
        assert!(notices.iter().any(|n| n.starts_with(line)), "{line:?} not in {notices:#?}");
    }
    assert_eq!(notices.len(), 3, "{notices:#?}");
    // Said once per start, not on every prompt.
    let (updates, _) = agent.prompt(&session, "again");
    assert_eq!(said(&updates), "Again.");
    assert!(noticed(&updates).is_empty());
    let (updates, _) = agent.prompt(&session, "/mcp");
    let report = said(&updates);
    let stub = stub();
    assert_eq!(
        report,
        format!(
            "MCP servers:\n\n\
             - `crashing` — failed (stdio: python3 {stub} crash)\n  \
             last error: initialize failed: it exited before answering (exit status: 3); its last output: stub: cannot open the database /nonexistent/db\n\n\
             - `hanging` — failed (stdio: python3 {stub} hang)\n  last error: it did not finish starting within 0.5 s\n\n\
             - `missing` — failed (stdio: acp-test-no-such-server)\n  last error: `acp-test-no-such-server` was not found\n\n\
             `/mcp restart NAME` starts a server again."
        )
    );
    assert_eq!(mock.requests().len(), 2, "/mcp does not reach the model");
}

#[test]
fn session_new_answers_while_a_server_hangs_and_the_prompt_waits_for_it_until_cancelled() {
    let api = "anthropic";
    let mock = MockModel::start();
    let config = format!(
        "[mcp_servers.slow]\ncommand = \"python3\"\nargs = [{}, \"hang\"]\nstartup_timeout_sec = 3600\n",
        toml_path(&stub())
    );
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session();
    let id =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}));
    // Answered at once, while the turn waits for the server.
    let (updates, _) = agent.prompt(&session, "/mcp");
    assert!(said(&updates).contains("- `slow` — starting (stdio: python3 "), "{}", said(&updates));
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (_, response) = agent.until_response(id);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    assert_eq!(mock.requests().len(), 0, "the turn never ran without the server's tools");
}

#[test]
fn a_server_that_exits_mid_call_fails_the_call_and_is_started_again_next_time() {
    let api = "anthropic";
    let mock = MockModel::start();
    let config = stub_config();
    mock.push(calls(api, &[("p1", "mcp__stub__pid", json!({}))]));
    mock.push(calls(api, &[("x1", "mcp__stub__die", json!({}))]));
    mock.push(text(api, "It died."));
    mock.push(calls(api, &[("p2", "mcp__stub__pid", json!({}))]));
    mock.push(text(api, "Back."));
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session();
    let (updates, response) = agent.prompt(&session, "go");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    let requests = mock.requests();
    let first_pid = result_for(api, &requests[1].body, "p1");
    assert!(first_pid.parse::<u32>().is_ok(), "{first_pid}");
    let died = result_for(api, &requests[2].body, "x1");
    assert_eq!(died, "`die` failed: the server exited (exit status: 1); its last output: stub: out of memory");
    assert_eq!(status_sequence(&updates, "x1"), ["pending", "in_progress", "failed"]);
    let (_, response) = agent.prompt(&session, "again");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let requests = mock.requests();
    assert!(offered_tools(api, &requests[3].body).contains(&"mcp__stub__pid".to_owned()), "started again");
    let second_pid = result_for(api, &requests[4].body, "p2");
    assert!(second_pid.parse::<u32>().is_ok() && second_pid != first_pid, "{first_pid} then {second_pid}");
}

#[test]
fn cancel_mid_call_tells_the_server() {
    let api = "anthropic";
    let mock = MockModel::start();
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = format!(
        "[mcp_servers.stub]\ncommand = \"python3\"\nargs = [{}, \"tools\", {}]\n",
        toml_path(&stub()),
        toml_path(&log.path().display().to_string())
    );
    mock.push(calls(api, &[("w1", "mcp__stub__wait", json!({}))]));
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session();
    let id = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}));
    loop {
        let msg = agent.recv();
        if msg["params"]["update"]["status"] == "in_progress" {
            break;
        }
    }
    agent.notify("session/cancel", json!({"sessionId": session}));
    let (before, response) = agent.until_response(id);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    assert_eq!(status_sequence(&updates_of(&before), "w1"), ["failed"]);
    // The server reads its input in its own time.
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    let lines = loop {
        let lines: Vec<Value> =
            std::fs::read_to_string(log.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.iter().any(|l| l["method"] == "notifications/cancelled") {
            break lines;
        }
        assert!(std::time::Instant::now() < deadline, "the server was never told: {lines:#?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let call = lines.iter().find(|l| l["method"] == "tools/call").expect("the call reached the server");
    let cancelled = lines.iter().find(|l| l["method"] == "notifications/cancelled").unwrap();
    assert_eq!(cancelled["params"]["requestId"], call["id"]);
}

#[test]
fn sessions_with_the_same_server_share_one_process() {
    let api = "anthropic";
    let mock = MockModel::start();
    let ws = tempfile::tempdir().unwrap();
    let config = stub_config();
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let mut pids = Vec::new();
    for n in 0..2 {
        let session = agent.new_session_in(ws.path(), json!({}));
        let id = format!("p{n}");
        mock.push(calls(api, &[(id.as_str(), "mcp__stub__pid", json!({}))]));
        mock.push(text(api, "ok"));
        agent.prompt(&session, "pid?");
        pids.push(result_for(api, &mock.requests().last().unwrap().body, &id));
    }
    assert_eq!(pids[0], pids[1]);
}

#[test]
fn images_and_progress_reach_the_editor_and_images_the_model() {
    let api = "anthropic";
    let mock = MockModel::start();
    mock.push(calls(api, &[("i1", "mcp__everything__get-tiny-image", json!({}))]));
    mock.push(calls(
        api,
        &[("t1", "mcp__everything__trigger-long-running-operation", json!({"duration": 1, "steps": 2}))],
    ));
    mock.push(text(api, "Seen."));
    let (mut agent, session, _ws) = agent_with(&mock, options_for(api, &mock), json!([everything_stdio("everything")]));
    let (before, response) = agent.prompt_answering(&session, "show me", no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    let updates = updates_of(&before);
    let image = tool_updates(&updates, "i1").last().unwrap()["content"].clone();
    let kinds: Vec<&str> = image.as_array().unwrap().iter().map(|c| c["content"]["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "image", "text"]);
    assert_eq!(image[1]["content"]["mimeType"], "image/png");
    // The model gets the image after the results, in the same message.
    let body = &mock.requests()[1].body;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    let blocks: Vec<&str> = last["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(blocks, ["tool_result", "image"]);
    assert_eq!(last["content"][1]["source"]["data"], image[1]["content"]["data"]);
    let progress: Vec<String> = tool_updates(&updates, "t1")
        .iter()
        .filter(|u| u["status"].is_null() && u["sessionUpdate"] == "tool_call_update")
        .map(|u| u["content"][0]["content"]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(progress.iter().any(|p| p.contains("1 of 2")), "{progress:?}");
}

/// server-everything serving `transport` (`streamableHttp` or `sse`) on a free loopback port,
/// stopped when dropped.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl HttpServer {
    fn start(transport: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("node")
            .arg(everything())
            .arg(transport)
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Ready once it accepts connections.
        let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "server-everything did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn servers_over_streamable_http_and_legacy_sse_from_config_and_from_the_editor() {
    let api = "anthropic";
    let mock = MockModel::start();
    let http = HttpServer::start("streamableHttp");
    let sse = HttpServer::start("sse");
    let config = format!(
        "[mcp_servers.web]\nurl = \"http://127.0.0.1:{}/mcp\"\nheaders = {{ \"X-Team\" = \"core\" }}\n",
        http.port
    );
    mock.push(calls(
        api,
        &[
            ("h1", "mcp__web__get-sum", json!({"a": 2, "b": 3})),
            ("s1", "mcp__old__get-sum", json!({"a": 4, "b": 5})),
            ("h2", "mcp__web__get-structured-content", json!({"location": "Chicago"})),
        ],
    ));
    mock.push(text(api, "Sums."));
    let editor_servers = json!([{
        "type": "sse", "name": "old", "url": format!("http://127.0.0.1:{}/sse", sse.port),
        "headers": [{"name": "X-Team", "value": "core"}]
    }]);
    let (mut agent, session, _ws) = agent_with(&mock, options_for(api, &mock).config(&config), editor_servers);
    let (before, response) = agent.prompt_answering(&session, "add", no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    let body = &mock.requests()[1].body;
    assert_eq!(result_for(api, body, "h1"), "The sum of 2 and 3 is 5.");
    assert_eq!(result_for(api, body, "s1"), "The sum of 4 and 5 is 9.");
    let weather = result_for(api, body, "h2");
    let parsed: Value = serde_json::from_str(&weather).unwrap_or_else(|e| panic!("{e}: {weather}"));
    assert!(parsed["temperature"].is_number(), "{weather}");
    let updates = updates_of(&before);
    for id in ["h1", "s1", "h2"] {
        assert_eq!(status_sequence(&updates, id), ["pending", "in_progress", "completed"], "{id}");
    }
}

#[test]
fn a_server_question_becomes_an_editor_form_or_is_declined_without_one() {
    let api = "anthropic";
    for form in [true, false] {
        let mock = MockModel::start();
        mock.push(calls(api, &[("e1", "mcp__everything__trigger-elicitation-request", json!({}))]));
        mock.push(text(api, "Thanks."));
        let ws = tempfile::tempdir().unwrap();
        let mut agent = Agent::spawn(options_for(api, &mock));
        let caps = if form { json!({"elicitation": {"form": {}}}) } else { json!({}) };
        let r = agent.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        let session = agent.new_session_in(ws.path(), json!({"mcpServers": [everything_stdio("everything")]}));
        let mut asked = Vec::new();
        let (_, response) = agent.prompt_answering(&session, "ask me", |msg| {
            asked.push(msg.clone());
            match msg["method"].as_str() {
                Some("elicitation/create") => json!({"action": "accept", "content": {"name": "Ada", "check": true}}),
                // The tool itself may change things: allowed once.
                _ => json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
            }
        });
        assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
        let result = result_for(api, &mock.requests()[1].body, "e1");
        let methods: Vec<&str> = asked.iter().map(|m| m["method"].as_str().unwrap()).collect();
        if form {
            assert_eq!(methods, ["session/request_permission", "elicitation/create"]);
            let params = &asked[1]["params"];
            assert_eq!(params["sessionId"], session.as_str());
            assert_eq!(params["toolCallId"], "e1");
            assert_eq!(params["mode"], "form");
            assert!(params["message"].as_str().unwrap().starts_with("everything asks: "), "{params}");
            assert_eq!(params["requestedSchema"]["required"], json!(["name"]));
            assert!(result.contains("Ada"), "the answer reached the server: {result}");
        } else {
            // No form support, and a required field without a default: declined, nobody asked.
            assert_eq!(methods, ["session/request_permission"]);
            assert!(result.to_lowercase().contains("decline"), "{result}");
        }
    }
}

#[test]
fn servers_stop_with_the_agent_whether_it_exits_or_is_killed() {
    let api = "anthropic";
    for killed in [false, true] {
        let mock = MockModel::start();
        // On exit the whole process group goes: here a shell that stays as the server's parent.
        // Killed, the agent cannot clean up: its direct child gets SIGKILL from the kernel.
        // The stub ignores the end of its stdin, as server-everything does.
        let config = if killed {
            stub_config()
        } else {
            let command = format!("python3 {} tools; true", stub());
            format!("[mcp_servers.stub]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n", toml_path(&command))
        };
        mock.push(calls(api, &[("p1", "mcp__stub__pid", json!({}))]));
        mock.push(text(api, "ok"));
        let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
        agent.initialize();
        let session = agent.new_session();
        agent.prompt(&session, "pid?");
        let pid = result_for(api, &mock.requests()[1].body, "p1");
        let proc = PathBuf::from(format!("/proc/{pid}"));
        assert!(proc.exists());
        if killed {
            agent.kill();
        } else {
            agent.close_stdin();
            assert!(agent.wait_exit(crate::support::agent::TIMEOUT).is_some_and(|s| s.success()));
        }
        let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
        while proc.exists() && !std::fs::read_to_string(proc.join("stat")).unwrap_or_default().contains(") Z ") {
            assert!(std::time::Instant::now() < deadline, "the server {pid} outlived the agent (killed: {killed})");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[test]
fn a_servers_prompts_are_slash_commands() {
    let api = "anthropic";
    let mock = MockModel::start();
    let (mut agent, session, _ws) = agent_with(&mock, options_for(api, &mock), json!([everything_stdio("everything")]));
    // Once the server is up, the editor learns its prompts as commands.
    let commands = loop {
        let msg = agent.recv();
        let update = &msg["params"]["update"];
        if update["sessionUpdate"] == "available_commands_update" {
            break update["availableCommands"].as_array().unwrap().clone();
        }
    };
    let args_prompt =
        commands.iter().find(|c| c["name"] == "everything:args-prompt").unwrap_or_else(|| panic!("{commands:#?}"));
    assert_eq!(args_prompt["input"], json!({"hint": "city [state]"}));
    assert_eq!(commands[0]["name"], "help", "the built-in commands first");
    mock.push(text(api, "Sunny."));
    let (updates, response) = agent.prompt(&session, "/everything:args-prompt 'New York' state=NY");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
    assert_eq!(said(&updates), "Sunny.");
    let body = &mock.requests()[0].body;
    let sent = body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(sent.contains("New York") && sent.contains("NY"), "{sent}");
    assert!(!sent.starts_with('/'), "the prompt's text, not the command: {sent}");
    for (line, answer) in [
        (
            "/everything:args-prompt",
            "`/everything:args-prompt`: missing city. Usage: `/everything:args-prompt city [state]`.",
        ),
        (
            "/everything:nope",
            "`everything` has no prompt `nope`; its prompts: `/everything:simple-prompt`, `/everything:args-prompt`, \
             `/everything:completable-prompt`, `/everything:resource-prompt`.",
        ),
    ] {
        let (updates, response) = agent.prompt(&session, line);
        assert_eq!(response["result"]["stopReason"], "end_turn");
        assert_eq!(noticed(&updates), [answer]);
    }
    assert_eq!(mock.requests().len(), 1, "failed prompts never reach the model");
    // The next turn's context holds the expanded prompt, not the failed commands.
    mock.push(text(api, "ok"));
    agent.prompt(&session, "thanks");
    let messages = mock.requests()[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 3, "{messages:#?}");
}

#[test]
fn a_server_that_changes_its_tools_is_listed_again() {
    let api = "anthropic";
    let mock = MockModel::start();
    let config = stub_config();
    mock.push(calls(api, &[("g1", "mcp__stub__grow", json!({}))]));
    mock.push(text(api, "Grown."));
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let session = agent.new_session();
    agent.prompt(&session, "grow");
    let before = offered_tools(api, &mock.requests()[0].body);
    assert!(!before.contains(&"mcp__stub__extra".to_owned()));
    assert_eq!(result_for(api, &mock.requests()[1].body, "g1"), "grown");
    // The notification is handled in the background; the next turn offers the new tool.
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    loop {
        let (updates, _) = agent.prompt(&session, "/mcp");
        if said(&updates).contains("`extra`") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", said(&updates));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    mock.push(text(api, "ok"));
    agent.prompt(&session, "again");
    assert!(offered_tools(api, &mock.requests()[2].body).contains(&"mcp__stub__extra".to_owned()));
}

#[test]
fn remote_servers_get_their_headers_and_a_refusal_is_said_plainly() {
    let api = "anthropic";
    let mock = MockModel::start();
    let log = tempfile::NamedTempFile::new().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/header_server.py");
    let mut server = std::process::Command::new("python3")
        .arg(&script)
        .arg(log.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut port).unwrap();
    let port = port.trim();
    let config = format!(
        "[mcp_servers.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ \"X-Team\" = \"core\" }}\n\
         bearer_token_env_var = \"ACP_TEST_MCP_TOKEN\"\n"
    );
    let editor = json!([{"type": "sse", "name": "legacy", "url": format!("http://127.0.0.1:{port}/sse"),
        "headers": [{"name": "X-Editor", "value": "zed"}]}]);
    mock.push(text(api, "Hello."));
    let options = options_for(api, &mock).config(&config).env("ACP_TEST_MCP_TOKEN", "s3cret");
    let (mut agent, session, _ws) = agent_with(&mock, options, editor);
    let (updates, _) = agent.prompt(&session, "hi");
    let _ = server.kill();
    let _ = server.wait();
    let text = noticed(&updates).join("\n");
    assert!(
        text.contains(
            "MCP server `remote` is not available: the server refused the credentials (HTTP 401 or 403; it asks \
             for `Bearer realm=\"test\"`): check the server's headers or its bearer token."
        ),
        "{text}"
    );
    assert!(
        text.contains("MCP server `legacy` is not available: the server answered HTTP 401 Unauthorized."),
        "{text}"
    );
    assert!(!text.contains("rmcp::"), "no Rust type names: {text}");
    let requests: Vec<Value> =
        std::fs::read_to_string(log.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let post = requests.iter().find(|r| r["method"] == "POST" && r["path"] == "/mcp").expect("initialize was posted");
    assert_eq!(post["headers"]["x-team"], "core");
    assert_eq!(post["headers"]["authorization"], "Bearer s3cret");
    let get =
        requests.iter().find(|r| r["method"] == "GET" && r["path"] == "/sse").expect("the event stream was opened");
    assert_eq!(get["headers"]["x-editor"], "zed");
    assert_eq!(get["headers"]["accept"], "text/event-stream");
}

#[test]
fn a_server_stops_with_the_last_session_that_uses_it() {
    let api = "anthropic";
    let mock = MockModel::start();
    let ws = tempfile::tempdir().unwrap();
    let config = stub_config();
    let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
    agent.initialize();
    let first = agent.new_session_in(ws.path(), json!({}));
    let second = agent.new_session_in(ws.path(), json!({}));
    mock.push(calls(api, &[("p1", "mcp__stub__pid", json!({}))]));
    mock.push(text(api, "ok"));
    agent.prompt(&first, "pid?");
    let pid = result_for(api, &mock.requests()[1].body, "p1");
    let alive = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !stat.is_empty() && !stat.contains(") Z ")
    };
    let r = agent.request("session/close", json!({"sessionId": first}));
    assert!(r.get("result").is_some(), "{r}");
    assert!(alive(), "the other session still uses it");
    let r = agent.request("session/close", json!({"sessionId": second}));
    assert!(r.get("result").is_some(), "{r}");
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    while alive() {
        assert!(std::time::Instant::now() < deadline, "the server outlived its sessions");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn without_forms_a_question_with_defaults_is_asked_as_a_permission() {
    let api = "anthropic";
    for (choice, answer) in
        [("accept", r#"{"action": "accept", "content": {"color": "red"}}"#), ("decline", r#"{"action": "decline"}"#)]
    {
        let mock = MockModel::start();
        let config = stub_config();
        mock.push(calls(api, &[("a1", "mcp__stub__ask", json!({}))]));
        mock.push(text(api, "ok"));
        let mut agent = Agent::spawn(options_for(api, &mock).config(&config));
        agent.initialize();
        let session = agent.new_session();
        let mut asked = Vec::new();
        let (_, response) = agent.prompt_answering(&session, "ask", choose(choice, &mut asked));
        assert_eq!(response["result"]["stopReason"], "end_turn", "{}", agent.stderr());
        assert_eq!(asked.len(), 1);
        let question = &asked[0]["params"];
        assert_eq!(question["toolCall"]["toolCallId"], "a1");
        assert_eq!(question["toolCall"]["title"], "stub asks: Pick a color");
        assert_eq!(question["toolCall"]["rawInput"], json!({"color": "red"}));
        let options: Vec<&str> =
            question["options"].as_array().unwrap().iter().map(|o| o["optionId"].as_str().unwrap()).collect();
        assert_eq!(options, ["accept", "decline"]);
        let got: Value = serde_json::from_str(&result_for(api, &mock.requests()[1].body, "a1")).unwrap();
        assert_eq!(got, serde_json::from_str::<Value>(answer).unwrap(), "{choice}");
    }
}
