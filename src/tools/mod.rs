//! Tools the model can call, one per file behind [`ToolHandler`]; policy (`policy.rs`) and approval
//! (`approval.rs`) live in one place each, not in the tools. A call is prepared first — arguments
//! checked, title, kind, locations and a preview (the diff of an edit) computed, the paths and
//! commands it touches listed — so it can be shown and approved before its [`Action`] runs.
//! Nothing here knows ACP: the editor is reached through [`host::Host`].

pub mod apply_patch;
pub mod approval;
pub mod diff;
pub mod edit;
pub mod exec;
pub mod fetch_guard;
pub mod glob;
pub mod grep;
pub mod host;
pub mod kind;
pub mod ls;
pub mod paths;
pub mod plan;
pub mod policy;
pub mod read;
pub mod truncate;
pub mod web_fetch;
pub mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use kind::ToolKind;

use crate::config::Config;
use host::Host;

/// A place a tool call touches, shown by editors to follow the agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub path: PathBuf,
    /// 1-based.
    pub line: Option<u32>,
}

impl Location {
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), line: None }
    }
}

/// What a tool call shows the user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolContent {
    Text(String),
    /// A change to a file; `old_text` is `None` only for a file that does not exist yet.
    Diff {
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the editor created and shows.
    Terminal(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// The full state of one tool call, as surfaces show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallState {
    pub id: String,
    pub name: String,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolStatus,
    pub locations: Vec<Location>,
    pub raw_input: Value,
    pub content: Vec<ToolContent>,
    pub raw_output: Option<Value>,
    /// A command whose output streams as it runs (`ToolOutput` events).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streams_output: bool,
}

/// What a call will touch, for the approval decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Access {
    pub reads: Vec<PathBuf>,
    pub writes: Vec<PathBuf>,
    /// A shell command.
    pub exec: Option<ExecAccess>,
    /// A URL fetched over the network.
    pub network: Option<String>,
}

/// A shell command as it will run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecAccess {
    pub command: String,
    /// The directory it runs in.
    pub cwd: PathBuf,
    /// Variables set for it.
    pub env: Vec<(String, String)>,
    pub confinement: Confinement,
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Confinement {
    /// In the sandbox.
    #[default]
    Sandboxed,
    /// Unconfined, because there is no sandbox here (or it is turned off): it asks first unless a
    /// rule covers it.
    NoSandbox,
    /// Unconfined, because the model asked to leave the sandbox: it always asks first.
    Escape,
}

impl Access {
    pub fn is_mutating(&self) -> bool {
        !self.writes.is_empty() || self.exec.is_some()
    }
}

/// A call ready to be shown, approved and run.
pub struct Prepared {
    pub title: String,
    pub kind: ToolKind,
    pub locations: Vec<Location>,
    /// Shown with the pending call, before approval (e.g. the diff of an edit).
    pub preview: Vec<ToolContent>,
    pub access: Access,
    pub action: Box<dyn Action>,
}

/// The effect of a prepared call.
pub trait Action: Send {
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// What a finished call returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model reads (already truncated, with a marker saying how to get the rest).
    pub for_model: String,
    /// What the user sees.
    pub content: Vec<ToolContent>,
    pub is_error: bool,
    pub raw_output: Option<Value>,
}

impl ToolOutput {
    pub fn ok(for_model: impl Into<String>, content: Vec<ToolContent>) -> Self {
        Self { for_model: for_model.into(), content, is_error: false, raw_output: None }
    }

    /// A failure the model should read, shown to the user as the same text.
    pub fn error(message: impl Into<String>) -> Self {
        let message = message.into();
        Self { content: vec![ToolContent::Text(message.clone())], for_model: message, is_error: true, raw_output: None }
    }
}

/// Progress a running call reports (streamed to the user as it happens).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// New output of a command, in order; never repeated.
    Output(String),
    /// Content to show now (replaces what the call showed).
    Content(Vec<ToolContent>),
    /// The agent's plan (complete; replaces the previous one).
    Plan(Vec<crate::tools::plan::PlanEntry>),
}

/// Everything a tool may use while it is prepared and run.
pub struct ToolContext {
    pub session: Arc<str>,
    pub call_id: String,
    pub cwd: PathBuf,
    /// The session's cwd and its additional directories: the workspace.
    pub roots: Vec<PathBuf>,
    pub host: Arc<dyn Host>,
    pub config: Arc<Config>,
    pub cancel: CancellationToken,
    pub http: Option<reqwest::Client>,
    /// Whether sandboxed commands may use the network (the session's `/network` switch).
    pub network: bool,
    pub progress: Box<dyn Fn(Progress) + Send + Sync>,
}

impl ToolContext {
    /// Resolves a path argument against the session's cwd.
    pub fn resolve(&self, raw: &str) -> PathBuf {
        paths::resolve(&self.cwd, raw)
    }

    /// A path as the user reads it: relative to the cwd when inside it.
    pub fn display(&self, path: &Path) -> String {
        paths::display(&self.cwd, path)
    }
}

/// One tool.
pub trait ToolHandler: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// The name the model calls it by.
    fn name(&self) -> &'static str;

    /// Not shown as a tool call (its effect is shown instead, e.g. the plan).
    fn hidden(&self) -> bool {
        false
    }

    /// Checks the arguments and works out what the call will do, without doing it.
    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>>;
}

/// The tools offered to the model, after the `[tools]` policy.
pub struct Registry {
    tools: Vec<Arc<dyn ToolHandler>>,
}

impl Registry {
    /// Every built-in tool the policy allows.
    pub fn new(policy: &policy::ToolPolicy) -> Self {
        let all: Vec<Arc<dyn ToolHandler>> = vec![
            Arc::new(read::Read),
            Arc::new(write::Write),
            Arc::new(edit::Edit),
            Arc::new(apply_patch::ApplyPatch),
            Arc::new(exec::Exec),
            Arc::new(grep::Grep),
            Arc::new(glob::Glob),
            Arc::new(ls::Ls),
            Arc::new(web_fetch::WebFetch),
            Arc::new(plan::UpdatePlan),
        ];
        Self { tools: all.into_iter().filter(|t| policy.allows(t.name())).collect() }
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn ToolHandler>> {
        self.tools.iter().find(|t| t.name() == name).cloned()
    }
}

/// Reads a string argument.
pub(crate) fn arg_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
        None => Err(format!("missing required argument `{key}`")),
    }
}

/// Reads an optional string argument.
pub(crate) fn arg_opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
    }
}

/// Reads an optional non-negative integer argument (numbers written as strings are accepted).
pub(crate) fn arg_opt_u64(args: &Value, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_u64().map(Some).ok_or_else(|| format!("`{key}` must be a non-negative integer, got {n}"))
        }
        Some(Value::String(s)) => {
            s.trim().parse().map(Some).map_err(|_| format!("`{key}` must be a non-negative integer, got {s:?}"))
        }
        Some(other) => Err(format!("`{key}` must be a non-negative integer, got {other}")),
    }
}

/// Reads an optional boolean argument.
pub(crate) fn arg_opt_bool(args: &Value, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
        Some(other) => Err(format!("`{key}` must be true or false, got {other}")),
    }
}
