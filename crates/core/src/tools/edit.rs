//! `edit`: exact-string replacement in one file, checked for uniqueness. The pending call carries
//! the diff; the result gives the model a unified diff of what changed.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::Flag;
use super::{
    Access, Action, Location, Prepared, Tool, ToolContext, ToolKind, ToolOutput, diff, truncate, write::current,
};

pub struct Edit;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditArgs {
    /// File to edit
    path: String,
    /// The exact text to replace
    old_string: String,
    /// The text to put in its place
    new_string: String,
    /// Replace every occurrence (default false)
    replace_all: Option<Flag>,
}

impl Tool for Edit {
    const NAME: &'static str = "edit";
    type Args = EditArgs;

    fn description(&self) -> String {
        "Replace an exact piece of text in a file. `old_string` must match the file exactly \
                  (whitespace and indentation included, without the line numbers `read` shows) and must \
                  occur exactly once, unless `replace_all` is true. Include enough surrounding lines to make \
                  it unique."
            .into()
    }

    async fn prepare(&self, args: EditArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let path = ctx.resolve(&args.path);
        let (old_string, new_string) = (args.old_string.as_str(), args.new_string.as_str());
        let replace_all = args.replace_all.unwrap_or_default().0;
        let shown = ctx.display(&path);
        if old_string.is_empty() {
            return Err("`old_string` is empty; use `write` to create a file".into());
        }
        if old_string == new_string {
            return Err("`old_string` and `new_string` are the same; nothing to change".into());
        }
        let Some(old) = current(ctx, &path).await? else {
            return Err(format!("{shown} does not exist; use `write` to create it"));
        };
        let (new, count) = replace(&old, old_string, new_string, replace_all).map_err(|e| format!("{shown}: {e}"))?;
        super::check::before(ctx, &path, Some(&old));
        let change = diff::change(&path, &shown, Some(&old), &new);
        Ok(Prepared {
            title: format!("Edit {shown}"),
            kind: ToolKind::Edit,
            locations: vec![Location { path: path.clone(), line: change.first_line }],
            preview: change.contents.clone(),
            access: Access { writes: vec![path.clone()], ..Access::default() },
            action: Box::new(EditAction { path, new, count, change }),
        })
    }
}

/// Replaces `from` with `to` in `text`: once (it must be unique) or everywhere. Line endings are
/// forgiven: `\n` in the arguments also matches `\r\n` in a CRLF file.
pub fn replace(text: &str, from: &str, to: &str, all: bool) -> Result<(String, usize), String> {
    let (from, to) = match text.matches(from).count() {
        0 if text.contains("\r\n") && !from.contains('\r') && from.contains('\n') => {
            (from.replace('\n', "\r\n"), to.replace('\n', "\r\n"))
        }
        _ => (from.to_owned(), to.to_owned()),
    };
    let count = text.matches(from.as_str()).count();
    // The result is held whole: an edit may not make a file past the size edits read.
    let grows = to.len().saturating_sub(from.len()).saturating_mul(if all { count } else { 1 });
    if text.len().saturating_add(grows) as u64 > crate::tools::host::MAX_WHOLE_FILE {
        return Err(format!(
            "the edit would make the file larger than {} MiB; make it in smaller steps",
            crate::tools::host::MAX_WHOLE_FILE >> 20
        ));
    }
    match count {
        0 => Err("`old_string` was not found. Read the file again and copy the text exactly (whitespace matters; \
                  leave out the line numbers)."
            .into()),
        n if n > 1 && !all => Err(format!(
            "`old_string` occurs {n} times. Add surrounding lines to make it unique, or set `replace_all` to true."
        )),
        n if all => Ok((text.replace(from.as_str(), &to), n)),
        _ => Ok((text.replacen(from.as_str(), &to, 1), 1)),
    }
}

struct EditAction {
    path: PathBuf,
    new: String,
    count: usize,
    change: diff::Change,
}

impl Action for EditAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let shown = ctx.display(&self.path);
        if let Err(e) = ctx.host.write_text_file(&ctx.session, &self.path, &self.new, &ctx.cancel).await {
            return ToolOutput::error(format!("could not write {shown}: {e}"));
        }
        let plural = if self.count == 1 { "" } else { "s" };
        let text = format!("Edited {shown} ({} replacement{plural}):\n{}", self.count, self.change.unified);
        let for_model = truncate::for_model(&text, truncate::MODEL_BUDGET, &format!("read {shown}"));
        let output = ToolOutput::ok(for_model, self.change.contents);
        super::check::after(ctx, &[(self.path, Some(self.new))], output).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_that_would_blow_a_file_up_is_refused_before_it_is_built() {
        let text = "e".repeat(1 << 20);
        let huge = "x".repeat(1 << 20);
        let err = replace(&text, "e", &huge, true).unwrap_err();
        assert!(err.contains("larger than 32 MiB"), "{err}");
        assert_eq!(replace("a e b", "e", "xyz", true).unwrap(), ("a xyz b".to_owned(), 1));
    }

    #[test]
    fn unique_replacement() {
        assert_eq!(replace("a b c", "b", "B", false), Ok(("a B c".into(), 1)));
        assert!(replace("a b b", "b", "B", false).unwrap_err().contains("occurs 2 times"));
        assert_eq!(replace("a b b", "b", "B", true), Ok(("a B B".into(), 2)));
        assert!(replace("abc", "x", "y", false).unwrap_err().contains("not found"));
    }

    #[test]
    fn crlf_files_match_lf_arguments() {
        let text = "fn a() {\r\n    1\r\n}\r\n";
        let (new, n) = replace(text, "    1\n}", "    2\n}", false).unwrap();
        assert_eq!((new.as_str(), n), ("fn a() {\r\n    2\r\n}\r\n", 1));
    }
}
