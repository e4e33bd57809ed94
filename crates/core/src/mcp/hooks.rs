//! What an MCP connection's handler shares with the server it belongs to: who can answer the
//! server's questions now, the workspace roots, list changes, and the progress of running calls.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use rmcp::model::ProgressNotificationParam;
use tokio::sync::Notify;

use crate::sync::lock;
use crate::tools::host::{ElicitAnswer, ElicitRequest};

/// Shows a running call's progress (already worded).
pub type Report = Arc<dyn Fn(String) + Send + Sync>;

/// Whoever can answer a server's question now (the session with a call running on it).
pub trait Asker: Send + Sync {
    fn ask(&self, request: ElicitRequest) -> BoxFuture<'static, ElicitAnswer>;
}

/// What the connection's handler shares with the server.
pub(crate) struct Hooks {
    /// The workspace, as `file://` URIs.
    pub(crate) roots: Vec<String>,
    pub(crate) lists_changed: Notify,
    pub(crate) progress: Mutex<HashMap<String, Report>>,
    pub(crate) askers: Mutex<Vec<(u64, Arc<dyn Asker>)>>,
    pub(crate) next: AtomicU64,
}

impl Hooks {
    /// The asker of the most recent call still running.
    pub(crate) fn asker(&self) -> Option<Arc<dyn Asker>> {
        lock(&self.askers).last().map(|(_, a)| a.clone())
    }

    pub(crate) fn progress(&self, p: ProgressNotificationParam) {
        let key = p.progress_token.0.to_string();
        let Some(report) = lock(&self.progress).get(&key).cloned() else { return };
        let mut text = match p.total {
            Some(total) => format!("{} of {}", p.progress, total),
            None => format!("{}", p.progress),
        };
        if let Some(message) = p.message.filter(|m| !m.is_empty()) {
            text = format!("{message} ({text})");
        }
        report(text);
    }
}
