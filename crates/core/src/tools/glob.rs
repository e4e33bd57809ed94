//! `glob`: files whose path (relative to the search root) matches a glob, honouring `.gitignore`
//! and skipping hidden files unless the pattern names them; sorted, capped.

use std::path::PathBuf;

use globset::GlobBuilder;
use ignore::WalkBuilder;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput};

const MAX_FILES: usize = 1000;

pub struct Glob;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// Glob pattern
    pattern: String,
    /// Directory to search (default: the workspace root)
    path: Option<String>,
}

impl Tool for Glob {
    const NAME: &'static str = "glob";
    type Args = GlobArgs;

    fn description(&self) -> String {
        format!(
            "Find files by name with a glob such as `**/*.rs` or `src/**/test_*.py` (matched against the path \
         relative to `path`, default the workspace root). Skips .gitignored and hidden files. At most \
         {MAX_FILES} paths, sorted."
        )
    }

    async fn prepare(&self, args: GlobArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let pattern = args.pattern;
        GlobBuilder::new(&pattern).literal_separator(true).build().map_err(|e| format!("invalid glob: {e}"))?;
        let root = args.path.as_deref().map_or_else(|| ctx.cwd.clone(), |p| ctx.resolve(p));
        Ok(Prepared {
            title: format!("Find `{pattern}`"),
            kind: ToolKind::Search,
            locations: vec![Location::file(root.clone())],
            preview: Vec::new(),
            access: Access { reads: vec![root.clone()], ..Access::default() },
            action: Box::new(GlobAction { pattern, root }),
        })
    }
}

struct GlobAction {
    pattern: String,
    root: PathBuf,
}

impl Action for GlobAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
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
