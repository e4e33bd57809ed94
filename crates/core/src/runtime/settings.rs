//! What a session's settings are, and what of them a running turn must see change at once.

use std::path::PathBuf;
use std::sync::Mutex;

use super::op::Mode;
use crate::config::ModelRef;
use crate::config::mcp::McpServer;
use crate::hooks::workspace::Workspace;
use crate::settings::{ReasoningEffort, Rule};
use crate::sync::lock;

/// Settings a session starts with; ops change them later.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSettings {
    pub cwd: PathBuf,
    /// More directories that belong to the workspace (ACP `additionalDirectories`).
    pub additional_dirs: Vec<PathBuf>,
    pub model: ModelRef,
    pub mode: Mode,
    /// `None`: the provider's default.
    pub reasoning: Option<ReasoningEffort>,
    /// MCP servers the editor gave (config.toml's are added, the editor's winning by name).
    pub mcp_servers: Vec<McpServer>,
}

impl SessionSettings {
    /// The workspace: the cwd and the additional directories.
    pub fn roots(&self) -> Vec<PathBuf> {
        std::iter::once(self.cwd.clone()).chain(self.additional_dirs.iter().cloned()).collect()
    }
}

/// What a running turn must see change at once: the mode, "always" answers, whether sandboxed
/// commands may use the network, and the workspace's hooks file (allowed during the session).
#[derive(Debug, Default)]
pub(crate) struct LiveState {
    mode: Mutex<Mode>,
    rules: Mutex<Vec<Rule>>,
    network: std::sync::atomic::AtomicBool,
    hooks: Mutex<std::sync::Arc<Workspace>>,
    /// The credentials the session holds, by provider ([`super::failover`]).
    pub(crate) held: super::failover::Held,
}

impl LiveState {
    pub(crate) fn new(mode: Mode, rules: Vec<Rule>, network: bool, hooks: Workspace) -> Self {
        Self {
            mode: Mutex::new(mode),
            rules: Mutex::new(rules),
            network: network.into(),
            hooks: Mutex::new(std::sync::Arc::new(hooks)),
            held: Default::default(),
        }
    }

    /// The workspace's hooks file, as the session sees it.
    pub(crate) fn workspace_hooks(&self) -> std::sync::Arc<Workspace> {
        lock(&self.hooks).clone()
    }

    pub(crate) fn set_workspace_hooks(&self, hooks: Workspace) {
        *lock(&self.hooks) = std::sync::Arc::new(hooks);
    }

    pub(crate) fn network(&self) -> bool {
        self.network.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_network(&self, on: bool) {
        self.network.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *lock(&self.mode) = mode;
    }

    pub(crate) fn rules(&self) -> Vec<Rule> {
        lock(&self.rules).clone()
    }

    pub(crate) fn remember(&self, rule: Rule) {
        lock(&self.rules).push(rule);
    }
}
