//! Tools the model can call, one per file behind [`Tool`]; policy (`policy.rs`) and approval
//! (`approval.rs`) live in one place each, not in the tools. A call is prepared first — arguments
//! decoded into the tool's typed `Args` (whose derive is also the schema the model sees, see
//! `args.rs`), title, kind, locations and a preview (the diff of an edit) computed, the paths and
//! commands it touches listed — so it can be shown and approved before its [`Action`] runs.
//! The registry holds tools as [`AnyTool`]: every `Tool`, and tools defined at run time from a
//! JSON schema. A call as surfaces show it is `call.rs`; kinds and locations `kind.rs`. Nothing
//! here knows ACP: the editor is reached through [`host::Host`].

pub mod apply_patch;
pub mod approval;
pub mod args;
pub mod call;
pub mod check;
pub mod cron;
pub mod diff;
pub mod edit;
pub mod exec;
pub mod fetch_guard;
pub mod glob;
pub mod grep;
pub mod host;
pub mod kind;
pub mod ls;
pub mod media;
pub mod memory;
pub mod message;
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
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use call::{PlanEntry, PlanPriority, PlanStatus, Progress, ToolCallState, ToolContent, ToolStatus};
pub use kind::{Location, ToolKind};

use crate::config::Config;
use host::AnyHost;

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object (shared: specs are cloned for every turn).
    pub parameters: Arc<serde_json::Value>,
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
    /// A tool of an MCP server: it may do anything its server does.
    pub mcp: Option<McpAccess>,
    /// A message to a chat other than the session's own (`telegram chat -100…`).
    pub message: Option<String>,
    /// A change to what the agent does on its own (a cron job): asked in every mode.
    pub control: Option<String>,
}

/// A call of a tool an MCP server provides.
#[derive(Debug, Clone, PartialEq)]
pub struct McpAccess {
    /// The server, as the session names it.
    pub server: String,
    /// The rule name that covers every tool of the server (`mcp__<server>__*`).
    pub every_tool: String,
    /// The server says the tool only reads (`readOnlyHint`).
    pub read_only: bool,
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
        !self.writes.is_empty() || self.exec.is_some() || self.mcp.as_ref().is_some_and(|m| !m.read_only)
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
    pub action: Box<dyn AnyAction>,
}

/// The effect of a prepared call.
pub trait Action: Send + 'static {
    fn run(self, ctx: &ToolContext) -> impl Future<Output = ToolOutput> + Send;
}

/// [`Action`] as an object: the one place its future is boxed.
pub trait AnyAction: Send {
    fn run_boxed<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

impl<A: Action> AnyAction for A {
    fn run_boxed<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin((*self).run(ctx))
    }
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

/// Everything a tool may use while it is prepared and run.
pub struct ToolContext {
    pub session: Arc<str>,
    pub call_id: String,
    pub cwd: PathBuf,
    /// The session's cwd and its additional directories: the workspace.
    pub roots: Vec<PathBuf>,
    pub host: Arc<dyn AnyHost>,
    pub config: Arc<Config>,
    pub cancel: CancellationToken,
    /// Whether sandboxed commands may use the network (the session's `/network` switch).
    pub network: bool,
    pub progress: Box<dyn Fn(Progress) + Send + Sync>,
    /// Checks written files (the session's language servers), if any.
    pub checker: Option<Arc<dyn check::Checker>>,
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

/// One tool, typed: the model calls it by `NAME` with arguments that decode into `Args`, whose
/// derived schema is what the model is shown.
pub trait Tool: Send + Sync + 'static {
    const NAME: &'static str;
    type Args: DeserializeOwned + JsonSchema + Send;

    /// What the model is told the tool does.
    fn description(&self) -> String;

    /// Not shown as a tool call (its effect is shown instead, e.g. the plan).
    fn hidden(&self) -> bool {
        false
    }

    /// Works out what the call will do, without doing it (the arguments are decoded already).
    fn prepare(&self, args: Self::Args, ctx: &ToolContext) -> impl Future<Output = Result<Prepared, String>> + Send;
}

/// Any tool, as the registry holds it: every [`Tool`] (through the impl below, the one place its
/// futures are boxed), or a tool defined at run time that brings its own JSON schema and reads its
/// arguments as JSON (an MCP server's).
pub trait AnyTool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    fn spec(&self) -> ToolSpec;

    fn hidden(&self) -> bool {
        false
    }

    /// Checks the arguments and works out what the call will do, without doing it.
    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>>;
}

impl<T: Tool> AnyTool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec { name: T::NAME.into(), description: self.description(), parameters: args::schema_for::<T::Args>() }
    }

    fn hidden(&self) -> bool {
        Tool::hidden(self)
    }

    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move { Tool::prepare(self, args::decode(args)?, ctx).await })
    }
}

/// A tool the registry offers, with its spec (built once).
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn AnyTool>,
    spec: ToolSpec,
}

impl Entry {
    fn new(tool: Arc<dyn AnyTool>) -> Self {
        Self { spec: tool.spec(), tool }
    }
}

/// Generates the built-in tools' schemas, if they are not yet (ahead of a first turn).
pub fn prewarm() {
    let _ = builtin();
}

/// The built-in tools, their schemas generated once per process.
/// Every tool name acp may offer the model besides MCP servers' (`mcp__<server>__<tool>`), for
/// checking what a user allows or denies by name.
pub const TOOL_NAMES: &[&str] = &[
    "read",
    "write",
    "edit",
    "apply_patch",
    "exec",
    "grep",
    "glob",
    "ls",
    "web_fetch",
    "update_plan",
    "message",
    "memory_search",
    "memory_get",
    "sessions_list",
    "sessions_history",
    "sessions_spawn",
    "sessions_send",
    "agents_list",
    "lsp",
];

/// The kinds ACP gives tool calls; permissions may name them too.
pub const TOOL_KINDS: &[&str] =
    &["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"];

fn builtin() -> &'static [Entry] {
    static TOOLS: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    TOOLS.get_or_init(|| {
        let all: [Arc<dyn AnyTool>; 10] = [
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
        all.into_iter().map(Entry::new).collect()
    })
}

/// The tools offered to the model, after the `[tools]` policy.
pub struct Registry {
    tools: Vec<Entry>,
}

impl Registry {
    /// Every built-in tool the policy allows.
    pub fn new(policy: &policy::ToolPolicy) -> Self {
        Self { tools: builtin().iter().filter(|e| policy.allows(e.tool.name())).cloned().collect() }
    }

    /// Adds `message` (where the host can deliver to chats), if the policy allows it.
    pub fn with_messaging(mut self, policy: &policy::ToolPolicy) -> Self {
        static MESSAGE: std::sync::OnceLock<Entry> = std::sync::OnceLock::new();
        let entry = MESSAGE.get_or_init(|| Entry::new(Arc::new(message::Message)));
        if policy.allows(entry.tool.name()) {
            self.tools.push(entry.clone());
        }
        self
    }

    /// Adds `cron` (the agent runs in a gateway, which keeps its jobs), as far as the policy
    /// allows it.
    pub fn with_scheduling(mut self, policy: &policy::ToolPolicy) -> Self {
        static CRON: std::sync::OnceLock<Entry> = std::sync::OnceLock::new();
        let entry = CRON.get_or_init(|| Entry::new(Arc::new(cron::Cron)));
        if policy.allows(entry.tool.name()) {
            self.tools.push(entry.clone());
        }
        self
    }

    /// Adds `memory_search` and `memory_get` (a session that reads the private memory), as far as
    /// the policy allows them.
    pub fn with_memory(mut self, policy: &policy::ToolPolicy) -> Self {
        static MEMORY: std::sync::OnceLock<[Entry; 2]> = std::sync::OnceLock::new();
        let entries = MEMORY
            .get_or_init(|| [Entry::new(Arc::new(memory::MemorySearch)), Entry::new(Arc::new(memory::MemoryGet))]);
        self.tools.extend(entries.iter().filter(|e| policy.allows(e.tool.name())).cloned());
        self
    }

    /// Adds a tool defined at run time (replacing a tool of the same name).
    pub fn add(&mut self, tool: Arc<dyn AnyTool>) {
        let entry = Entry::new(tool);
        self.tools.retain(|e| e.spec.name != entry.spec.name);
        self.tools.push(entry);
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|e| e.spec.clone()).collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn AnyTool>> {
        self.tools.iter().find(|e| e.spec.name == name).map(|e| e.tool.clone())
    }
}

#[cfg(test)]
mod tests;
