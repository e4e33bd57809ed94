//! Conformance: the official ACP TypeScript SDK (from npm, installed by `tests/run`) drives the real
//! binary as an editor would, and every message the agent writes is validated against the JSON
//! schema that package ships (see `tests/conformance/conformance.mjs`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::mock_model::{MockModel, Reply};

#[test]
fn the_official_typescript_sdk_accepts_every_message() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk/schema/v1/schema.json").exists(),
        "the ACP TypeScript SDK is not installed: run `npm ci --prefix tests/conformance` (tests/run does it)"
    );
    let mock = MockModel::start();
    mock.push(Reply::fixture("anthropic", "text"));
    mock.push(Reply::fixture("anthropic", "thinking"));
    mock.push(Reply::fixture("anthropic", "text").stall_after(5));
    mock.push(Reply::fixture("anthropic", "401"));
    mock.push(Reply::fixture("openai-chat", "text"));
    mock.push(Reply::fixture("openai-responses", "thinking"));
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(dir.join("conformance.mjs"))
        .arg(env!("CARGO_BIN_EXE_acp"))
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .env("OPENAI_API_KEY", "test-key")
        .env("OPENAI_BASE_URL", mock.base_v1())
        .output()
        .expect("run node (Node 20 or newer is needed)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stdout:\n{stdout}\nstderr:\n{stderr}"));
    assert!(out.status.success(), "conformance failures:\n{:#}\nstderr:\n{stderr}", report["failures"]);
    assert_eq!(report["failures"], Value::Array(vec![]));
    for def in [
        "InitializeResponse",
        "NewSessionResponse",
        "PromptResponse",
        "SessionNotification",
        "Error",
        "LoadSessionResponse",
        "ResumeSessionResponse",
        "ListSessionsResponse",
        "DeleteSessionResponse",
    ] {
        assert!(report["byKind"][def].as_u64().unwrap_or(0) > 0, "nothing validated as {def}: {report}");
    }
    assert_eq!(mock.remaining(), 0, "every scripted reply was used");
}
