//! The floor for `acp serve`'s start-up (tests/bench/coldstart.rs): a bare tokio + serde_json
//! process that reads NDJSON JSON-RPC from stdin and answers `initialize`, nothing else — what
//! any agent written the same way pays before it does anything of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, Write};

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            let Ok(request) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
            if request["method"] == "initialize" {
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                    "protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}});
                let mut out = std::io::stdout().lock();
                serde_json::to_writer(&mut out, &answer).unwrap();
                out.write_all(b"\n").unwrap();
                out.flush().unwrap();
            }
        }
    });
}
