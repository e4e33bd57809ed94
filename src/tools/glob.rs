//! `glob`: files whose path (relative to the search root) matches a glob, honouring `.gitignore`
//! and skipping hidden files unless the pattern names them; sorted, capped.

use std::path::PathBuf;

use futures_util::future::BoxFuture;
use globset::GlobBuilder;
use ignore::WalkBuilder;
use serde_json::{Value, json};

use super::{
    Access, Action, Location, Prepared, ToolContent, ToolContext, ToolHandler, ToolKind, ToolOutput, arg_opt_str,
    arg_str,
};
use crate::tools::ToolSpec;

const MAX_FILES: usize = 1000;

pub struct Glob;

impl ToolHandler for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Find files by name with a glob such as `**/*.rs` or `src/**/test_*.py` (matched against the path \
                 relative to `path`, default the workspace root). Skips .gitignored and hidden files. At most \
                 {MAX_FILES} paths, sorted."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern"},
                    "path": {"type": "string", "description": "Directory to search (default: the workspace root)"}
                },
                "required": ["pattern"]
            }),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let pattern = arg_str(args, "pattern")?.to_owned();
            GlobBuilder::new(&pattern).literal_separator(true).build().map_err(|e| format!("invalid glob: {e}"))?;
            let root = arg_opt_str(args, "path")?.map_or_else(|| ctx.cwd.clone(), |p| ctx.resolve(p));
            Ok(Prepared {
                title: format!("Find `{pattern}`"),
                kind: ToolKind::Search,
                locations: vec![Location::file(root.clone())],
                preview: Vec::new(),
                access: Access { reads: vec![root.clone()], ..Access::default() },
                action: Box::new(GlobAction { pattern, root }),
            })
        })
    }
}

struct GlobAction {
    pattern: String,
    root: PathBuf,
}

impl Action for GlobAction {
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let (pattern, root) = (self.pattern, self.root);
            if !root.is_dir() {
                return ToolOutput::error(format!("{} is not a directory", ctx.display(&root)));
            }
            let walk_root = root.clone();
            let found = tokio::task::spawn_blocking(move || find(&pattern, &walk_root)).await;
            let (mut paths, capped) = match found {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => return ToolOutput::error(e),
                Err(e) => return ToolOutput::error(format!("the search failed: {e}")),
            };
            paths.sort();
            if paths.is_empty() {
                return ToolOutput::ok("No files match.", vec![ToolContent::Text("No files match".into())]);
            }
            let mut out: String = paths.iter().map(|p| format!("{}\n", ctx.display(p))).collect();
            if capped {
                out.push_str(&format!("[stopped at {MAX_FILES} files; use a narrower pattern or `path`]\n"));
            }
            let summary = format!("{} file{}", paths.len(), if paths.len() == 1 { "" } else { "s" });
            ToolOutput::ok(out, vec![ToolContent::Text(summary)])
        })
    }
}

fn find(pattern: &str, root: &std::path::Path) -> Result<(Vec<PathBuf>, bool), String> {
    let glob = GlobBuilder::new(pattern).literal_separator(true).build().map_err(|e| e.to_string())?.compile_matcher();
    // A pattern that names hidden files (".github/**") should find them.
    let wants_hidden = pattern.split('/').any(|part| part.starts_with('.') && part != "." && part != "..");
    let mut out = Vec::new();
    for entry in WalkBuilder::new(root).hidden(!wants_hidden).require_git(false).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        if glob.is_match(rel) || (!pattern.contains('/') && entry.path().file_name().is_some_and(|n| glob.is_match(n)))
        {
            out.push(entry.into_path());
            if out.len() >= MAX_FILES {
                return Ok((out, true));
            }
        }
    }
    Ok((out, false))
}
