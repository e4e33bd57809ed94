//! The schemas the model sees, whole: generated from each tool's `Args`, they must stay what the
//! tool's code reads (a change here is a change every model sees), and tools defined at run time
//! from a JSON schema sit beside the built-in ones.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

#[test]
fn the_schemas_the_model_sees() {
    let expected = [
        (
            "read",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read"}
                },
                "required": ["path"]
            }),
        ),
        (
            "write",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write"},
                    "content": {"type": "string", "description": "The complete new content"}
                },
                "required": ["path", "content"]
            }),
        ),
        (
            "edit",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit"},
                    "old_string": {"type": "string", "description": "The exact text to replace"},
                    "new_string": {"type": "string", "description": "The text to put in its place"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        ),
        (
            "apply_patch",
            json!({
                "type": "object",
                "properties": {"patch": {"type": "string", "description": "The whole patch, from *** Begin Patch to *** End Patch"}},
                "required": ["patch"]
            }),
        ),
        (
            "exec",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line"},
                    "cwd": {"type": "string", "description": "Directory to run in (relative to the workspace root)"},
                    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Time limit in milliseconds"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables"},
                    "sandbox": {"type": "boolean", "description": "false to ask the user to run this command outside the sandbox (default true)"}
                },
                "required": ["command"]
            }),
        ),
        (
            "grep",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (or literal text with fixed_strings)"},
                    "path": {"type": "string", "description": "Directory or file to search (default: the workspace root)"},
                    "glob": {"type": "string", "description": "Only files matching this glob, e.g. \"*.rs\" or \"!*.min.js\""},
                    "case_insensitive": {"type": "boolean"},
                    "fixed_strings": {"type": "boolean", "description": "Treat the pattern as literal text"},
                    "context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match"},
                    "files_only": {"type": "boolean", "description": "List matching files only"},
                    "max_results": {"type": "integer", "minimum": 1}
                },
                "required": ["pattern"]
            }),
        ),
        (
            "glob",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern"},
                    "path": {"type": "string", "description": "Directory to search (default: the workspace root)"}
                },
                "required": ["pattern"]
            }),
        ),
        (
            "ls",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Directory (default: the workspace root)"}}
            }),
        ),
        (
            "web_fetch",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http:// or https:// URL"},
                    "max_bytes": {"type": "integer", "minimum": 1}
                },
                "required": ["url"]
            }),
        ),
        (
            "update_plan",
            json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": "array",
                        "description": "Every step, in order",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "description": "What the step does, in a few words"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                                "priority": {"type": "string", "enum": ["high", "medium", "low"]}
                            },
                            "required": ["step", "status"]
                        }
                    },
                    "explanation": {"type": "string", "description": "Why the plan changed (optional)"}
                },
                "required": ["plan"]
            }),
        ),
    ];
    let registry = Registry::new(&policy::ToolPolicy::default());
    let actual: Vec<(String, Value)> =
        registry.specs().into_iter().map(|s| (s.name, (*s.parameters).clone())).collect();
    let expected: Vec<(String, Value)> = expected.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
    assert_eq!(actual, expected);
}

/// A tool known only at run time, by its JSON schema (as an MCP server describes its tools).
struct Defined(ToolSpec);

impl AnyTool for Defined {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn spec(&self) -> ToolSpec {
        self.0.clone()
    }

    fn prepare<'a>(&'a self, args: &'a Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move { Err(format!("{} was given {args}", self.0.name)) })
    }
}

#[test]
fn tools_defined_at_run_time_join_the_registry_by_their_schema() {
    let mut registry = Registry::new(&policy::ToolPolicy::new(&[], &["*".into()]));
    assert_eq!(registry.specs(), Vec::new());
    let spec = ToolSpec {
        name: "mcp__files__stat".into(),
        description: "File metadata".into(),
        parameters: Arc::new(
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
    };
    registry.add(Arc::new(Defined(spec.clone())));
    assert_eq!(registry.specs(), vec![spec]);
    let tool = registry.get("mcp__files__stat").expect("registered");
    let ctx = ToolContext {
        session: "s".into(),
        call_id: "c".into(),
        cwd: std::env::temp_dir(),
        roots: vec![std::env::temp_dir()],
        host: Arc::new(host::LocalHost),
        config: Arc::new(Config::load_with(&|name| (name == "ACP_HOME").then(|| "/nonexistent/acp-home".into()))),
        cancel: tokio_util::sync::CancellationToken::new(),
        network: false,
        progress: Box::new(|_| {}),
        checker: None,
    };
    let args = json!({"path": "a"});
    let prepared = futures_util::FutureExt::now_or_never(tool.prepare(&args, &ctx)).expect("ready at once");
    assert_eq!(prepared.err(), Some("mcp__files__stat was given {\"path\":\"a\"}".to_owned()));
}

#[test]
fn every_tool_offered_is_a_known_name() {
    let registry = Registry::new(&policy::ToolPolicy::default()).with_messaging(&policy::ToolPolicy::default());
    for spec in registry.specs() {
        assert!(super::TOOL_NAMES.contains(&spec.name.as_str()), "{} is missing from TOOL_NAMES", spec.name);
    }
}
