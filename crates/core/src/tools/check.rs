//! What checks the files the edit tools write (the language servers, `lsp/`), seen through a
//! narrow trait so the tools do not learn LSP: a file is shown to the checker before it changes,
//! and after the write the checker says which problems are new in it — appended to the result
//! the model reads and to the call the user sees. A checker that is slow or absent adds nothing.

use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{ToolContent, ToolContext, ToolOutput};

pub trait Checker: Send + Sync {
    /// The model is looking at `path` (a read): a checker may get ready for it.
    fn warm(&self, path: &Path);

    /// `path` is about to change; `text` is what it holds now (so what was wrong before can be
    /// told apart later).
    fn before(&self, path: &Path, text: &str);

    /// The files were written (`None`: deleted). The problems new in them, as text for the
    /// model, if any came in time.
    fn after<'a>(
        &'a self,
        written: &'a [(PathBuf, Option<String>)],
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<String>>;
}

/// Shows the checker the file before it changes.
pub fn before(ctx: &ToolContext, path: &Path, text: Option<&str>) {
    if let (Some(checker), Some(text)) = (&ctx.checker, text) {
        checker.before(path, text);
    }
}

/// Adds what the checker found in the written files to a successful result.
pub async fn after(ctx: &ToolContext, written: &[(PathBuf, Option<String>)], mut output: ToolOutput) -> ToolOutput {
    let Some(checker) = &ctx.checker else { return output };
    if output.is_error || written.is_empty() {
        return output;
    }
    if let Some(found) = checker.after(written, &ctx.cancel).await {
        output.for_model.push_str("\n\n");
        output.for_model.push_str(&found);
        output.content.push(ToolContent::Text(found));
    }
    output
}
