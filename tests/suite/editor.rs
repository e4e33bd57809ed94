//! The agent inside an editor: the official ACP TypeScript SDK plays an editor that offers fs (with
//! an unsaved buffer) and terminals, approves each permission request, and records what it is
//! asked (tests/conformance/editor.mjs). The order must be: read the buffer → tool_call with the
//! diff → permission → in progress → fs write → completed; and for a command: terminal/create →
//! terminal content → wait_for_exit → output → release → completed. Every message is validated
//! against the SDK's JSON schema.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::mock_model::MockModel;
use crate::support::script::{self, calls, result_for};
use crate::support::workspace;

/// A log entry's event name and a test of its fields.
type Expect<'a> = (&'a str, &'a dyn Fn(&Value) -> bool);

/// Finds each expected entry in `log`, in order.
fn in_order(log: &[Value], expected: &[Expect<'_>]) {
    let mut at = 0;
    for (event, pred) in expected {
        match log[at..].iter().position(|e| e["event"] == *event && pred(e)) {
            Some(i) => at += i + 1,
            None => panic!("expected {event} after entry {at} in:\n{:#}", Value::Array(log.to_vec())),
        }
    }
}

/// Runs editor.mjs with the OpenAI-compatible and Anthropic mocks pointed at `mock`; returns its report.
fn run_editor(scenario: &str, ws: &std::path::Path, mock: &MockModel, model: &str) -> Value {
    run_editor_with(scenario, ws, mock, model, &[])
}

fn run_editor_with(
    scenario: &str,
    ws: &std::path::Path,
    mock: &MockModel,
    model: &str,
    env: &[(&str, String)],
) -> Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").exists(),
        "the ACP TypeScript SDK is not installed: run `npm ci --prefix tests/conformance` (tests/run does it)"
    );
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(dir.join("editor.mjs"))
        .arg(scenario)
        .arg(ws)
        .arg(env!("CARGO_BIN_EXE_acp"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .env("OPENAI_API_KEY", "test-key")
        .env("OPENAI_BASE_URL", mock.base_v1())
        .env("ACP_MODEL", model)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        out.status.success(),
        "failures:\n{:#}\nstderr:\n{}",
        report["failures"],
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

#[test]
fn an_editor_with_fs_and_terminals_sees_reviewable_diffs_and_runs_commands() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "anthropic";
    script::push_fix_and_check(&mock, api);
    let report = run_editor("fix", ws.path(), &mock, "anthropic/claude-sonnet-4-5");
    let log = report["log"].as_array().unwrap().clone();
    let lib = ws.path().join("src/lib.rs").display().to_string();
    let is = |key: &'static str, value: &'static str| move |e: &Value| e[key] == value;
    let path_is = |e: &Value| e["path"] == lib.as_str();
    in_order(
        &log,
        &[
            ("fs/read_text_file", &path_is),
            ("tool_call", &|e: &Value| {
                e["id"] == "e1"
                    && e["status"] == "pending"
                    && e["diff"]["oldText"].as_str().is_some_and(|t| t.starts_with("// unsaved change in the editor\n"))
                    && e["diff"]["newText"].as_str().is_some_and(|t| t.contains("a + b"))
            }),
            ("request_permission", &is("id", "e1")),
            ("tool_call_update", &|e: &Value| e["id"] == "e1" && e["status"] == "in_progress"),
            ("fs/write_text_file", &path_is),
            ("tool_call_update", &|e: &Value| e["id"] == "e1" && e["status"] == "completed"),
            ("tool_call", &|e: &Value| e["id"] == "x1" && e["kind"] == "execute"),
            ("request_permission", &is("id", "x1")),
            ("tool_call_update", &|e: &Value| e["id"] == "x1" && e["status"] == "in_progress"),
            // Through the sandbox's launcher, in the editor's terminal too.
            ("terminal/create", &|e: &Value| {
                let args = e["args"].as_array().unwrap();
                e["command"].as_str().unwrap().ends_with("/acp-sandbox")
                    && args[args.len() - 2] == "-c"
                    && args[args.len() - 1] == "sh check.sh"
            }),
            ("tool_call_update", &|e: &Value| e["id"] == "x1" && e["terminalId"].is_string()),
            ("terminal/wait_for_exit", &|_| true),
            ("terminal/output", &|_| true),
            ("terminal/release", &|_| true),
            ("tool_call_update", &|e: &Value| e["id"] == "x1" && e["status"] == "completed"),
        ],
    );
    // The write went through the editor, from its buffer (unsaved change kept), and nothing else
    // touched the disk behind its back.
    let written = report["written"][&lib].as_str().unwrap();
    assert!(written.starts_with("// unsaved change in the editor\n") && written.contains("    a + b\n"), "{written}");
    assert!(!log.iter().any(|e| e["event"] == "terminal/kill"), "the command ended on its own");
    let result = result_for(api, &mock.requests()[2].body, "x1");
    assert!(result.contains("ok: 1 passed") && result.contains("[exit code 0]"), "{result}");
    for def in [
        "RequestPermissionRequest",
        "ReadTextFileRequest",
        "WriteTextFileRequest",
        "CreateTerminalRequest",
        "WaitForTerminalExitRequest",
        "TerminalOutputRequest",
        "ReleaseTerminalRequest",
        "SessionNotification",
    ] {
        assert!(report["byKind"][def].as_u64().unwrap_or(0) > 0, "nothing validated as {def}: {}", report["byKind"]);
    }
}

#[test]
fn cancelling_kills_and_releases_the_editor_terminal() {
    let ws = workspace("calc");
    let mock = MockModel::start();
    let api = "openai-chat";
    mock.push(calls(api, &[("x1", "exec", json!({"command": "sleep 60"}))]));
    // Ask mode asks and the editor approves.
    let report = run_editor("cancel", ws.path(), &mock, "openai/gpt-4.1");
    let log = report["log"].as_array().unwrap().clone();
    in_order(
        &log,
        &[
            ("request_permission", &|e: &Value| e["id"] == "x1"),
            ("terminal/create", &|e: &Value| e["args"].as_array().unwrap().last().unwrap() == "sleep 60"),
            ("session/cancel", &|_| true),
            ("terminal/kill", &|_| true),
            ("killed", &|_| true),
            ("terminal/output", &|_| true),
            ("terminal/release", &|_| true),
            ("tool_call_update", &|e: &Value| e["id"] == "x1" && e["status"] == "failed"),
        ],
    );
    assert_eq!(mock.requests().len(), 1, "no further model request after the cancel");
}

#[test]
fn an_editor_passes_its_mcp_servers_and_fills_their_forms() {
    let ws = tempfile::tempdir().unwrap();
    let mock = MockModel::start();
    let api = "anthropic";
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(everything.exists(), "the MCP reference servers are not installed: run tests/run");
    let servers = json!([{"name": "everything", "command": "node", "args": [everything, "stdio"], "env": []}]);
    mock.push(calls(
        api,
        &[
            ("e1", "mcp__everything__echo", json!({"message": "from the editor"})),
            ("f1", "mcp__everything__trigger-elicitation-request", json!({})),
        ],
    ));
    mock.push(script::text(api, "Done."));
    let report = run_editor_with(
        "mcp",
        ws.path(),
        &mock,
        "anthropic/claude-sonnet-4-5",
        &[("ACP_TEST_MCP_SERVERS", servers.to_string())],
    );
    let log = report["log"].as_array().unwrap().clone();
    let body = &mock.requests()[1].body;
    assert_eq!(result_for(api, body, "e1"), "Echo: from the editor");
    assert!(result_for(api, body, "f1").contains("Ada"), "{}", result_for(api, body, "f1"));
    let id = |want: &'static str| move |e: &Value| e["id"] == want;
    let echo_title = |e: &Value| e["id"] == "e1" && e["title"] == "Echo Tool (everything): message: from the editor";
    in_order(
        &log,
        &[
            ("tool_call", &echo_title),
            // Ask mode: the read-only echo asks too (an MCP server's hints are not trusted there).
            ("request_permission", &id("e1")),
            ("tool_call_update", &|e: &Value| e["id"] == "e1" && e["status"] == "completed"),
            ("request_permission", &id("f1")),
            ("elicitation/create", &|e: &Value| {
                e["id"] == "f1"
                    && e["mode"] == "form"
                    && e["fields"].as_array().is_some_and(|f| f.contains(&json!("name")))
            }),
            ("tool_call_update", &|e: &Value| e["id"] == "f1" && e["status"] == "completed"),
        ],
    );
}
