//! `edit`: exact-string replacement in one file, checked for uniqueness. The pending call carries
//! the diff; the result gives the model a unified diff of what changed.

use std::path::PathBuf;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    Access, Action, Location, Prepared, ToolContext, ToolHandler, ToolKind, ToolOutput, arg_opt_bool, arg_str, diff,
    truncate, write::current,
};
use crate::tools::ToolSpec;

pub struct Edit;

impl ToolHandler for Edit {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Replace an exact piece of text in a file. `old_string` must match the file exactly \
                          (whitespace and indentation included, without the line numbers `read` shows) and must \
                          occur exactly once, unless `replace_all` is true. Include enough surrounding lines to make \
                          it unique."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit"},
                    "old_string": {"type": "string", "description": "The exact text to replace"},
                    "new_string": {"type": "string", "description": "The text to put in its place"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let path = ctx.resolve(arg_str(args, "path")?);
            let old_string = arg_str(args, "old_string")?;
            let new_string = arg_str(args, "new_string")?;
            let replace_all = arg_opt_bool(args, "replace_all")?.unwrap_or(false);
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
            let (new, count) =
                replace(&old, old_string, new_string, replace_all).map_err(|e| format!("{shown}: {e}"))?;
            let change = diff::change(&path, &shown, Some(&old), &new);
            Ok(Prepared {
                title: format!("Edit {shown}"),
                kind: ToolKind::Edit,
                locations: vec![Location { path: path.clone(), line: change.first_line }],
                preview: change.contents.clone(),
                access: Access { writes: vec![path.clone()], ..Access::default() },
                action: Box::new(EditAction { path, new, count, change }),
            })
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
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let shown = ctx.display(&self.path);
            if let Err(e) = ctx.host.write_text_file(&ctx.session, &self.path, &self.new, &ctx.cancel).await {
                return ToolOutput::error(format!("could not write {shown}: {e}"));
            }
            let plural = if self.count == 1 { "" } else { "s" };
            let text = format!("Edited {shown} ({} replacement{plural}):\n{}", self.count, self.change.unified);
            let for_model = truncate::for_model(&text, truncate::MODEL_BUDGET, &format!("read {shown}"));
            ToolOutput::ok(for_model, self.change.contents)
        })
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
