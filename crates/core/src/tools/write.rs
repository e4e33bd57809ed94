//! `write`: creates or replaces a whole file; the pending call carries the diff against what is
//! there now, so the user can review it before it is written.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::host::FsError;
use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, diff};

pub struct Write;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// File to write
    path: String,
    /// The complete new content
    content: String,
}

impl Tool for Write {
    const NAME: &'static str = "write";
    type Args = WriteArgs;

    fn description(&self) -> String {
        "Create a file, or replace a file's whole content. Prefer `edit` for changes to part of an \
                  existing file. Parent directories are created as needed."
            .into()
    }

    async fn prepare(&self, args: WriteArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let path = ctx.resolve(&args.path);
        let content = args.content;
        let old = current(ctx, &path).await?;
        super::check::before(ctx, &path, old.as_deref());
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
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let shown = ctx.display(&self.path);
        if let Err(e) = ctx.host.write_text_file(&ctx.session, &self.path, &self.content, &ctx.cancel).await {
            return ToolOutput::error(format!("could not write {shown}: {e}"));
        }
        let lines = self.content.lines().count();
        let verb = if self.old.is_some() { "Wrote" } else { "Created" };
        let output = ToolOutput::ok(format!("{verb} {shown} ({lines} lines)."), self.preview);
        super::check::after(ctx, &[(self.path, Some(self.content))], output).await
    }
}
