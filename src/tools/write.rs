//! `write`: creates or replaces a whole file; the pending call carries the diff against what is
//! there now, so the user can review it before it is written.

use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::host::FsError;
use super::{
    Access, Action, Location, Prepared, ToolContent, ToolContext, ToolHandler, ToolKind, ToolOutput, arg_str, diff,
};
use crate::tools::ToolSpec;

pub struct Write;

impl ToolHandler for Write {
    fn name(&self) -> &'static str {
        "write"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Create a file, or replace a file's whole content. Prefer `edit` for changes to part of an \
                          existing file. Parent directories are created as needed."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write"},
                    "content": {"type": "string", "description": "The complete new content"}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let path = ctx.resolve(arg_str(args, "path")?);
            let content = arg_str(args, "content")?.to_owned();
            let old = current(ctx, &path).await?;
            let shown = ctx.display(&path);
            let title = if old.is_some() { format!("Write {shown}") } else { format!("Create {shown}") };
            let change = diff::change(&path, &shown, old.as_deref(), &content);
            let preview = change.contents;
            let line = if old.is_some() { change.first_line } else { Some(1) };
            Ok(Prepared {
                title,
                kind: ToolKind::Edit,
                locations: vec![Location { path: path.clone(), line }],
                preview: preview.clone(),
                access: Access { writes: vec![path.clone()], ..Access::default() },
                action: Box::new(WriteAction { path, old, content, preview }),
            })
        })
    }
}

/// The file as the user sees it now; `None` when it does not exist.
pub(crate) async fn current(ctx: &ToolContext, path: &std::path::Path) -> Result<Option<String>, String> {
    if tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir()) {
        return Err(format!("{} is a directory", ctx.display(path)));
    }
    match ctx.host.read_text_file(&ctx.session, path, None, &ctx.cancel).await {
        Ok(text) => Ok(Some(text)),
        Err(FsError::NotFound) => Ok(None),
        Err(FsError::Other(e)) => Err(format!("cannot read {}: {e}", ctx.display(path))),
    }
}

struct WriteAction {
    path: PathBuf,
    old: Option<String>,
    content: String,
    preview: Vec<ToolContent>,
}

impl Action for WriteAction {
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let shown = ctx.display(&self.path);
            if let Err(e) = ctx.host.write_text_file(&ctx.session, &self.path, &self.content, &ctx.cancel).await {
                return ToolOutput::error(format!("could not write {shown}: {e}"));
            }
            let lines = self.content.lines().count();
            let verb = if self.old.is_some() { "Wrote" } else { "Created" };
            ToolOutput::ok(format!("{verb} {shown} ({lines} lines)."), self.preview)
        })
    }
}
