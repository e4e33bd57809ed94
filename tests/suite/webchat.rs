//! The gateway's web chat in real headless Chromium (Debian's `chromium`, driven by
//! `playwright-core`; tests/webchat/webchat.mjs): log in with the token, a streamed reply rendered
//! as Markdown, a reply made of HTML and script shown as text, a run stopped, a screenshot.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::gateway::{Gateway, TOKEN};
use crate::support::mock_model::MockModel;
use crate::support::script::{endless_text, text};

#[test]
fn the_web_chat_in_chromium() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webchat");
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is not installed: run tests/run (it installs it and Chromium)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(std::path::Path::new(&chromium).exists(), "Chromium is not installed ({chromium}): run tests/run");
    let mock = MockModel::start();
    mock.push(text("anthropic", "Hello **world** from `acp`."));
    mock.push(text(
        "anthropic",
        "Look: <img src=x onerror=\"window.__pwned = true\"> and <script>window.__pwned = true</script>",
    ));
    mock.push(endless_text("Counting: "));
    let gw = Gateway::start(&mock.base(), &[]);
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webchat.png");
    let out = Command::new("node")
        .arg(dir.join("webchat.mjs"))
        .arg(format!("http://127.0.0.1:{}/", gw.port))
        .arg(TOKEN)
        .arg(&shot)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("no report ({e}):\n{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), gw.stderr())
    });
    assert!(out.status.success(), "failures: {:#}\ngateway:\n{}", report["failures"], gw.stderr());
    assert_eq!(report["steps"].as_array().unwrap().len(), 6, "{report:#}");
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000), "a screenshot at {}", shot.display());
    println!("web chat screenshot: {}", shot.display());
}
