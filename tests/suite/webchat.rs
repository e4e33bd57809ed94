//! The gateway's web chat in real headless Chromium (Debian's `chromium`, driven by
//! `playwright-core`; tests/webchat/webchat.mjs): log in with the token, a streamed reply rendered
//! as Markdown with the session's model, token usage, context fill and the messages' times, a
//! reply made of HTML and script shown as text, an approval question showing the edit's diff and
//! answered, dark mode, a phone's width, a run stopped, screenshots, and the page reconnecting by
//! itself after the gateway restarts.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::gateway::{Gateway, TOKEN};
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, endless_text, text};

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
    // An edit of a file that is there, so the question's diff has a line removed and one added.
    let edit = serde_json::json!({"path": "notes.txt", "old_string": "old line", "new_string": "from the web chat"});
    mock.push(calls("anthropic", &[("e1", "edit", edit)]));
    mock.push(text("anthropic", "Written."));
    mock.push(endless_text("Counting: "));
    let mut gw = Some(Gateway::start(&mock.base(), &[]));
    let port = gw.as_ref().unwrap().port;
    // The session asks before every change, so the page gets a question to answer.
    let patched = gw
        .as_ref()
        .unwrap()
        .client(&["operator.admin"])
        .request("sessions.patch", serde_json::json!({"key": "main", "mode": "ask"}));
    assert_eq!(patched["ok"], true, "{patched}");
    let model =
        gw.as_ref().unwrap().client(&["operator.read"]).request("status", serde_json::json!({}))["payload"]["sessions"]
            ["defaults"]["model"]
            .as_str()
            .expect("the default model")
            .to_owned();
    let notes = gw.as_ref().unwrap().workspace.path().join("notes.txt");
    std::fs::write(&notes, "first line\nold line\nlast line\n").unwrap();
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webchat.png");
    let mut node = Command::new("node")
        .arg(dir.join("webchat.mjs"))
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(TOKEN)
        .arg(&shot)
        .arg(&model)
        .env("CHROMIUM", &chromium)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node");
    let mut report = None;
    let mut written = None;
    for line in BufReader::new(node.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "RESTART" {
            // Approved in the page, then written (read before the restart takes the workspace).
            written = std::fs::read_to_string(&notes).ok();
            // The page asks for a gateway restart: same port, same store.
            gw = Some(gw.take().unwrap().restart(&mock.base()));
        } else if let Some(json) = line.strip_prefix("REPORT ") {
            report = Some(serde_json::from_str::<Value>(json).unwrap());
        }
    }
    let status = node.wait().unwrap();
    let gw = gw.unwrap();
    let report = report.unwrap_or_else(|| panic!("no report from the page\n{}", gw.stderr()));
    assert!(status.success(), "failures: {:#}\ngateway:\n{}", report["failures"], gw.stderr());
    assert_eq!(report["steps"].as_array().unwrap().len(), 17, "{report:#}");
    assert_eq!(
        written.as_deref(),
        Some("first line\nfrom the web chat\nlast line\n"),
        "approved in the page, then written"
    );
    let shots: Vec<&str> = report["screenshots"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(shots.len(), 8, "{report:#}");
    for shot in &shots {
        assert!(std::fs::metadata(shot).is_ok_and(|m| m.len() > 1000), "a screenshot at {shot}");
    }
    println!("web chat screenshots (light, dark, approval question, phone): {}", shots.join(" "));
}

#[test]
fn the_printed_link_logs_the_web_chat_in_and_a_rebinding_page_gets_nothing() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webchat");
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is not installed: run tests/run (it installs it and Chromium)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let mock = MockModel::start();
    let gw = Gateway::start_without_token(&mock.base(), &[]);
    assert!(gw.web.contains("/#token="), "the link carries the browsers' token: {}", gw.web);
    let out = Command::new("node")
        .arg(dir.join("link.mjs"))
        .arg(&gw.web)
        .arg(gw.port.to_string())
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("REPORT "))
        .map(|j| serde_json::from_str(j).unwrap())
        .unwrap_or_else(|| panic!("no report\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["failures"], serde_json::json!([]), "{report:#}\ngateway:\n{}", gw.stderr());
    assert_eq!(report["steps"].as_array().unwrap().len(), 6, "{report:#}");
    assert!(gw.stderr().contains("request for another host refused"), "the page's requests reached the gateway");
}
