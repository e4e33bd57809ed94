//! MCP from the command line, with the reference servers from npm: `acp run` with working,
//! missing and misconfigured servers (its reply only the model's words, the notices on stderr),
//! `acp mcp list` and `acp mcp test`.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::mcp::{everything, stub, toml_path};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, offered_tools, result_for, text};

/// `acp run` exits as soon as its prompt is answered, but not before the MCP servers it started
/// are stopped (their whole process group: here a shell stays as the server's parent).
#[test]
fn acp_run_stops_its_servers_before_it_exits() {
    let api = "anthropic";
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    let command = format!("python3 {} tools; true", stub());
    let config = format!("[mcp_servers.stub]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n", toml_path(&command));
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    mock.push(calls(api, &[("p1", "mcp__stub__pid", json!({}))]));
    mock.push(text(api, "ok"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["run", "--allow", "all", "pid?"])
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    let pid = result_for(api, &mock.requests()[1].body, "p1");
    let proc = PathBuf::from(format!("/proc/{pid}"));
    // Killed as acp run exits; the kernel may take a moment to take it down.
    let deadline = std::time::Instant::now() + crate::support::agent::TIMEOUT;
    while proc.exists() && !std::fs::read_to_string(proc.join("stat")).unwrap_or_default().contains(") Z ") {
        assert!(std::time::Instant::now() < deadline, "the server {pid} outlived acp run");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn acp_mcp_lists_the_configured_servers_and_tests_one() {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n\n[mcp_servers.gone]\ncommand = \"acp-test-no-such-server\"\n",
        toml_path(&everything())
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let acp = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", home.path())
            .current_dir(home.path())
            .output()
            .unwrap()
    };
    let out = acp(&["mcp", "list"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "NAME        SERVER\neverything  stdio: node {} stdio\ngone        stdio: acp-test-no-such-server\n",
            everything()
        )
    );
    let out = acp(&["mcp", "test", "everything"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("`everything`: ready in "), "{stdout}");
    assert!(stdout.contains("\n  mcp__everything__get-sum  [read]  Get Sum Tool\n"), "{stdout}");
    assert!(stdout.contains("\n  /everything:simple-prompt  A prompt with no arguments\n"), "{stdout}");
    assert!(stdout.contains("\n  demo://resource/static/document/features.md  features.md\n"), "{stdout}");
    let out = acp(&["mcp", "test", "gone"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("acp: `gone` (stdio: acp-test-no-such-server): `acp-test-no-such-server` was not found\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = acp(&["mcp", "test", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no MCP server `nope` in "));
}

/// The README's remote server with its token variable unset, and a server that is not installed:
/// only they are unavailable — `acp run` answers (its notices on stderr, never in the reply or the
/// transcript), `acp mcp` lists and tests the others.
#[test]
fn a_broken_server_is_unavailable_alone_and_its_notice_is_never_the_models_words() {
    let api = "anthropic";
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "[mcp_servers.down]\nurl = \"http://127.0.0.1:{closed}/mcp\"\n\n\
         [mcp_servers.docs]\nurl = \"https://mcp.example.com/mcp\"\nbearer_token_env_var = \"DOCS_TOKEN\"\n\n\
         [mcp_servers.gone]\ncommand = \"acp-test-no-such-server\"\n\n\
         [mcp_servers.everything]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n",
        toml_path(&everything())
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let acp = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", home.path())
            .env("HOME", home.path())
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.base())
            .current_dir(home.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    mock.push(text(api, "Hello."));
    let out = acp(&["run", "--session", "s1", "hi"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "Hello.\n", "the reply and nothing else on stdout");
    assert!(!stderr.contains("broken"), "{stderr}");
    for line in [
        "acp run: MCP server `docs` is not available: DOCS_TOKEN is not set (its `bearer_token_env_var`). Its \
         tools are left out; `/mcp` (in a session) or `acp mcp test docs` shows why.\n",
        "acp run: MCP server `gone` is not available: `acp-test-no-such-server` was not found.",
    ] {
        assert!(stderr.contains(line), "{line:?} not in {stderr}");
    }
    let tools = offered_tools(api, &mock.requests()[0].body);
    assert!(tools.contains(&"mcp__everything__get-sum".to_owned()), "the working server's tools: {tools:?}");
    // In --json the notice is marked as the agent's own.
    mock.push(text(api, "Again."));
    let out = acp(&["run", "--json", "--session", "s2", "hi"]);
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let chunks: Vec<&Value> =
        lines.iter().filter(|l| l["update"]["sessionUpdate"] == "agent_message_chunk").map(|l| &l["update"]).collect();
    let notices: Vec<&&Value> = chunks.iter().filter(|c| c["_meta"]["notice"] == true).collect();
    assert_eq!(notices.len(), 3, "{chunks:#?}");
    assert!(chunks.iter().filter(|c| c["_meta"]["notice"] != true).all(|c| c["content"]["text"] == "Again."));
    // Never saved as the model's words.
    let out = acp(&["sessions", "export", "s1", "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported = String::from_utf8_lossy(&out.stdout);
    assert!(exported.contains("Hello.") && !exported.contains("is not available"), "{exported}");
    // `acp mcp` works for every server but says why one cannot.
    let out = acp(&["mcp", "list"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("docs        http: https://mcp.example.com/mcp  (not available: DOCS_TOKEN is not set (its `bearer_token_env_var`))\n"),
        "{listed}"
    );
    let out = acp(&["mcp", "test", "everything"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = acp(&["mcp", "test", "docs"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "acp: `docs` (http: https://mcp.example.com/mcp): DOCS_TOKEN is not set (its `bearer_token_env_var`)\n"
    );
    // A refused connection is said as such, on one line.
    let out = acp(&["mcp", "test", "down"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "acp: `down` (http: http://127.0.0.1:{closed}/mcp): could not connect to 127.0.0.1:{closed}: connection \
             refused (is the server running?)\n"
        )
    );
}
