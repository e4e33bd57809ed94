//! Language servers, real ones (pyright, and typescript-language-server with TypeScript, pinned by
//! tests/lsp/package-lock.json and installed by tests/run): an edit that breaks a file is told the
//! new error, one that fixes it is told nothing, an error that was there before is not repeated;
//! the `lsp` tool finds definitions, references, hovers and symbols; a server killed mid-session
//! is started again; a server that never answers leaves edits alone; servers go with the agent.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::agent::{Agent, TIMEOUT};
use crate::support::mock_model::MockModel;
use crate::support::options_for;
use crate::support::script::{calls, offered_tools, result_for, text};

const API: &str = "anthropic";

fn bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/node_modules/.bin").join(name);
    assert!(path.exists(), "{} is missing: run tests/run, which installs the language servers", path.display());
    path
}

/// Only the servers installed for the tests, each waited for long enough on a slow machine.
fn config() -> String {
    format!(
        "[lsp]\nwait_ms = 30000\n[lsp.pyright]\ncommand = \"{}\"\n[lsp.typescript]\ncommand = \"{}\"\n\
         [lsp.basedpyright]\ndisabled = true\n[lsp.rust-analyzer]\ndisabled = true\n[lsp.gopls]\ndisabled = true\n\
         [lsp.clangd]\ndisabled = true\n",
        bin("pyright-langserver").display(),
        bin("typescript-language-server").display()
    )
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    dir
}

fn start(mock: &MockModel, ws: &Path, config: &str) -> (Agent, String) {
    let mut agent = Agent::spawn(options_for(API, mock).config(config));
    agent.initialize();
    let session = agent.new_session_in(ws, json!({"_meta": {"mode": "code"}}));
    (agent, session)
}

const PY: &str = "def add(a: int, b: int) -> int:\n    return a + b\n\n\nbroken: int = \"old\"\ntotal = add(1, 2)\n";

/// The content a tool call last showed the editor, as text.
fn shown(updates: &[Value], id: &str) -> String {
    updates
        .iter()
        .rfind(|u| u["toolCallId"] == id && u.get("content").is_some())
        .map(|u| u["content"].to_string())
        .unwrap_or_default()
}

#[test]
fn an_edit_is_told_the_problems_it_made_and_only_those() {
    let ws = project(&[("pyproject.toml", "[project]\nname = \"calc\"\n"), ("calc.py", PY)]);
    let mock = MockModel::start();
    mock.push(calls(API, &[("r1", "read", json!({"path": "calc.py"}))]));
    // Breaks it: a str where an int is declared.
    mock.push(calls(
        API,
        &[(
            "e1",
            "edit",
            json!({"path": "calc.py", "old_string": "total = add(1, 2)", "new_string": "total: str = add(1, 2)"}),
        )],
    ));
    // Fixes it again.
    mock.push(calls(
        API,
        &[(
            "e2",
            "edit",
            json!({"path": "calc.py", "old_string": "total: str = add(1, 2)", "new_string": "total: int = add(1, 2)"}),
        )],
    ));
    // A new file with an error of its own, through apply_patch.
    let patch = "*** Begin Patch\n*** Add File: more.py\n+from calc import add\n+\n+add(\"x\", 2)\n*** End Patch";
    mock.push(calls(API, &[("p1", "apply_patch", json!({"patch": patch}))]));
    mock.push(text(API, "done"));
    let (mut agent, session) = start(&mock, ws.path(), &config());
    let (updates, response) = agent.prompt(&session, "work on calc");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert!(offered_tools(API, &requests[0].body).contains(&"lsp".to_owned()), "a Python project: `lsp` is offered");

    let broke = result_for(API, &requests[2].body, "e1");
    assert!(broke.contains("The language server reports new problems:"), "{broke}");
    assert!(broke.contains("calc.py:6:14: error: Type \"int\" is not assignable to declared type \"str\""), "{broke}");
    assert!(!broke.contains("Literal['old']"), "the error that was there before is not repeated: {broke}");
    assert!(shown(&updates, "e1").contains("is not assignable to declared type"), "the editor sees it too");

    let fixed = result_for(API, &requests[3].body, "e2");
    assert!(fixed.starts_with("Edited calc.py"), "{fixed}");
    assert!(!fixed.contains("problems"), "a fix is told nothing: {fixed}");

    let added = result_for(API, &requests[4].body, "p1");
    assert!(added.contains("more.py:3:5: error: Argument of type \"Literal['x']\""), "{added}");
    // The files were written regardless.
    assert!(std::fs::read_to_string(ws.path().join("calc.py")).unwrap().contains("total: int = add(1, 2)"));

    // /lsp: the server, its files and what it found.
    let (updates, _) = agent.prompt(&session, "/lsp");
    let report = crate::support::agent::text_of(&updates, "agent_message_chunk");
    assert!(report.contains("`pyright` for"), "{report}");
    assert!(report.contains(": ready; 2 open files, 2 errors"), "{report}");
}

#[test]
fn the_lsp_tool_finds_definitions_references_hovers_and_symbols() {
    let lib = "export function add(a: number, b: number): number {\n  return a + b;\n}\n";
    let main =
        "import { add } from \"./lib\";\n\nconst one = add(1, 2);\nconst two = add(one, 3);\nconsole.log(two);\n";
    let ws = project(&[
        ("tsconfig.json", "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}}\n"),
        ("lib.ts", lib),
        ("main.ts", main),
    ]);
    let mock = MockModel::start();
    mock.push(calls(
        API,
        &[
            ("d", "lsp", json!({"action": "definition", "path": "main.ts", "line": 3, "symbol": "add"})),
            ("r", "lsp", json!({"action": "references", "path": "lib.ts", "line": 1, "symbol": "add"})),
            ("h", "lsp", json!({"action": "hover", "path": "main.ts", "line": 4, "symbol": "add"})),
            ("s", "lsp", json!({"action": "symbols", "path": "main.ts"})),
            ("w", "lsp", json!({"action": "symbols", "query": "add"})),
            ("x", "lsp", json!({"action": "definition", "path": "main.ts", "line": 3, "symbol": "nope"})),
        ],
    ));
    mock.push(text(API, "found"));
    let (mut agent, session) = start(&mock, ws.path(), &config());
    let (updates, response) = agent.prompt(&session, "where is add?");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let body = &mock.requests()[1].body;
    assert_eq!(
        result_for(API, body, "d"),
        "lib.ts:1:17: export function add(a: number, b: number): number {",
        "{}",
        agent.stderr()
    );
    let references = result_for(API, body, "r");
    let lines: Vec<&str> = references.lines().map(|l| l.split(": ").next().unwrap()).collect();
    assert_eq!(lines, ["lib.ts:1:17", "main.ts:1:10", "main.ts:3:13", "main.ts:4:13"], "{references}");
    let hover = result_for(API, body, "h");
    assert!(hover.contains("add(a: number, b: number): number"), "{hover}");
    let symbols = result_for(API, body, "s");
    assert!(symbols.contains("variable one (line 3)") || symbols.contains("constant one (line 3)"), "{symbols}");
    assert!(result_for(API, body, "w").contains("function add"), "{}", result_for(API, body, "w"));
    assert!(result_for(API, body, "x").contains("`nope` is not on line 3"));
    // Read-only: nothing asked, and shown as reads and searches.
    let kinds: Vec<&str> =
        updates.iter().filter(|u| u["sessionUpdate"] == "tool_call").filter_map(|u| u["kind"].as_str()).collect();
    assert_eq!(kinds, ["read", "search", "read", "read", "search", "read"]);
}

/// The pids of processes whose command line holds `needle` and whose cwd is `dir`.
fn servers_in(needle: &str, dir: &Path) -> Vec<u32> {
    let dir = std::fs::canonicalize(dir).unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle)
            && std::fs::read_link(entry.path().join("cwd")).is_ok_and(|c| c == dir)
            && !stat.contains(") Z ")
        {
            found.push(pid);
        }
    }
    found
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_killed_mid_session_is_started_again() {
    let ws = project(&[("pyproject.toml", "[project]\nname = \"calc\"\n"), ("calc.py", PY)]);
    let mock = MockModel::start();
    let edit = |id: &str, from: &str, to: &str| {
        calls(API, &[(id, "edit", json!({"path": "calc.py", "old_string": from, "new_string": to}))])
    };
    mock.push(edit("e1", "total = add(1, 2)", "total: str = add(1, 2)"));
    mock.push(text(API, "one"));
    let (mut agent, session) = start(&mock, ws.path(), &config());
    agent.prompt(&session, "break it");
    assert!(result_for(API, &mock.requests()[1].body, "e1").contains("new problems"));
    let before = servers_in("pyright-langserver", ws.path());
    assert!(!before.is_empty(), "pyright runs for the workspace");
    for pid in &before {
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    wait_until("pyright is started again", || {
        let now = servers_in("pyright-langserver", ws.path());
        !now.is_empty() && now.iter().all(|p| !before.contains(p))
    });
    mock.push(edit("e2", "total: str = add(1, 2)", "total: bytes = add(1, 2)"));
    mock.push(text(API, "two"));
    agent.prompt(&session, "break it differently");
    let again = result_for(API, &mock.requests()[3].body, "e2");
    assert!(again.contains("declared type \"bytes\""), "the restarted server checks edits: {again}");
    let (updates, _) = agent.prompt(&session, "/lsp");
    let report = crate::support::agent::text_of(&updates, "agent_message_chunk");
    assert!(report.contains("ready") && report.contains("restarted 1×"), "{report}");
}

#[test]
fn a_server_that_never_answers_leaves_edits_alone() {
    let ws = project(&[("notes.txt", "one\n")]);
    let mock = MockModel::start();
    mock.push(calls(API, &[("e1", "edit", json!({"path": "notes.txt", "old_string": "one", "new_string": "two"}))]));
    mock.push(text(API, "ok"));
    let config = "[lsp]\nwait_ms = 300\n[lsp.mute]\ncommand = \"sleep\"\nargs = [\"100000\"]\nextensions = [\"txt\"]\n";
    let (mut agent, session) = start(&mock, ws.path(), config);
    let (_, response) = agent.prompt(&session, "edit");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        result_for(API, &mock.requests()[1].body, "e1"),
        "Edited notes.txt (1 replacement):\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-one\n+two\n"
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "two\n");
}

#[test]
fn servers_go_with_the_agent_whether_it_exits_or_is_killed() {
    for killed in [false, true] {
        let ws = project(&[("pyproject.toml", "[project]\nname = \"calc\"\n"), ("calc.py", PY)]);
        let mock = MockModel::start();
        mock.push(calls(API, &[("r1", "lsp", json!({"action": "diagnostics", "path": "calc.py"}))]));
        mock.push(text(API, "ok"));
        let (mut agent, session) = start(&mock, ws.path(), &config());
        agent.prompt(&session, "problems?");
        let found = result_for(API, &mock.requests()[1].body, "r1");
        assert!(found.contains("calc.py:5:15: error"), "{found}");
        let running = servers_in("pyright-langserver", ws.path());
        assert!(!running.is_empty());
        if killed {
            agent.kill();
        } else {
            agent.close_stdin();
            assert!(agent.wait_exit(TIMEOUT).is_some_and(|s| s.success()));
        }
        wait_until(&format!("pyright outlived the agent (killed: {killed})"), || {
            servers_in("pyright-langserver", ws.path()).is_empty()
        });
    }
}

#[test]
fn lsp_test_prints_what_the_server_reports() {
    let ws = project(&[("pyproject.toml", "[project]\nname = \"calc\"\n"), ("calc.py", PY), ("notes.txt", "hi\n")]);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["lsp", "test", "calc.py"])
        .current_dir(ws.path())
        .env("ACP_HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("calc.py:5:15: error: Type \"Literal['old']\" is not assignable to declared type \"int\""),
        "{stdout}"
    );
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["lsp", "test", "notes.txt"])
        .current_dir(ws.path())
        .env("ACP_HOME", home.path())
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("no language server serves"), "{said}");
}

#[test]
fn a_server_pointing_into_the_agents_home_gets_no_line_of_it_quoted() {
    let ws = project(&[("a.fk", "thing\n")]);
    let mock = MockModel::start();
    mock.push(calls(
        API,
        &[("d", "lsp", json!({"action": "definition", "path": "a.fk", "line": 1, "symbol": "thing"}))],
    ));
    mock.push(text(API, "ok"));
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/fake_server.py");
    // The server is told to point at the agent's own config.toml, whose first line is a secret.
    let home = tempfile::tempdir().unwrap();
    let secret = home.path().join("config.toml");
    let config = format!(
        "# secret-token-31337\n[lsp.fake]\ncommand = \"python3\"\nargs = [\"{}\"]\nextensions = [\"fk\"]\n\
         env = {{ FAKE_TARGET = \"{}\" }}\n",
        fake.display(),
        secret.display()
    );
    let mut agent = Agent::spawn(options_for(API, &mock).home(home.path()).config(&config));
    agent.initialize();
    let session = agent.new_session_in(ws.path(), json!({"_meta": {"mode": "code"}}));
    let (_, response) = agent.prompt(&session, "where?");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let found = result_for(API, &mock.requests()[1].body, "d");
    assert!(found.contains("config.toml:1:1"), "the location is given: {found}");
    assert!(!found.contains("secret-token"), "never a line of the agent's own files: {found}");
}

#[test]
fn a_moved_file_is_judged_against_what_it_held() {
    let ws = project(&[("pyproject.toml", "[project]\nname = \"calc\"\n"), ("calc.py", PY)]);
    let mock = MockModel::start();
    let patch = "*** Begin Patch\n*** Update File: calc.py\n*** Move to: sums.py\n@@\n-total = add(1, 2)\n+total = add(1, 3)\n*** End Patch";
    mock.push(calls(API, &[("m", "apply_patch", json!({"patch": patch}))]));
    let patch = "*** Begin Patch\n*** Update File: sums.py\n*** Move to: more.py\n@@\n-total = add(1, 3)\n+total: str = add(1, 3)\n*** End Patch";
    mock.push(calls(API, &[("n", "apply_patch", json!({"patch": patch}))]));
    mock.push(text(API, "moved"));
    let (mut agent, session) = start(&mock, ws.path(), &config());
    let (_, response) = agent.prompt(&session, "move it");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let moved = result_for(API, &mock.requests()[1].body, "m");
    assert!(moved.starts_with("Applied the patch:"), "{moved}");
    assert!(!moved.contains("new problems"), "the error it had before is not new: {moved}");
    let broke = result_for(API, &mock.requests()[2].body, "n");
    assert!(broke.contains("more.py:6:14: error: Type \"int\" is not assignable to declared type \"str\""), "{broke}");
    assert!(!broke.contains("Literal['old']"), "{broke}");
}
