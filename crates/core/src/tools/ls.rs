//! `ls`: one directory's entries — directories first, then files with their sizes.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput};

const MAX_ENTRIES: usize = 1000;

pub struct Ls;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsArgs {
    /// Directory (default: the workspace root)
    path: Option<String>,
}

impl Tool for Ls {
    const NAME: &'static str = "ls";
    type Args = LsArgs;

    fn description(&self) -> String {
        format!(
            "List a directory: subdirectories (with a trailing /) then files with their sizes. At most {MAX_ENTRIES} \
         entries."
        )
    }

    async fn prepare(&self, args: LsArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let dir = args.path.as_deref().map_or_else(|| ctx.cwd.clone(), |p| ctx.resolve(p));
        Ok(Prepared {
            title: format!("List {}", ctx.display(&dir)),
            kind: ToolKind::Read,
            locations: vec![Location::file(dir.clone())],
            preview: Vec::new(),
            access: Access { reads: vec![dir.clone()], ..Access::default() },
            action: Box::new(LsAction(dir)),
        })
    }
}

struct LsAction(PathBuf);

impl Action for LsAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let dir = self.0;
        let mut reader = match tokio::fs::read_dir(&dir).await {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(format!("cannot list {}: {e}", ctx.display(&dir))),
        };
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut more = false;
        while let Ok(Some(entry)) = reader.next_entry().await {
            if dirs.len() + files.len() >= MAX_ENTRIES {
                more = true;
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.metadata().await {
                Ok(m) if m.is_dir() => dirs.push(format!("{name}/")),
                Ok(m) => files.push((name, m.len())),
                Err(_) => files.push((name, 0)),
            }
        }
        dirs.sort();
        files.sort();
        let mut out: String = dirs.iter().map(|d| format!("{d}\n")).collect();
        for (name, size) in &files {
            out.push_str(&format!("{name}  ({})\n", human(*size)));
        }
        if out.is_empty() {
            out = "(empty directory)\n".into();
        }
        if more {
            out.push_str(&format!("[stopped at {MAX_ENTRIES} entries; use `glob` to narrow]\n"));
        }
        let summary = format!("{} directories, {} files", dirs.len(), files.len());
        ToolOutput::ok(out, vec![ToolContent::Text(summary)])
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}
