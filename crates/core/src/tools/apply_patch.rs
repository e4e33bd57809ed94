//! `apply_patch`: the multi-file patch format codex models emit (`*** Begin Patch`, `*** Add File:`,
//! `*** Update File:` with `*** Move to:` and `@@` hunks, `*** Delete File:`, `*** End Patch`).
//! Every change is worked out before anything is written: a patch that does not apply fails with
//! a message saying which hunk and why, and changes nothing.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, diff, truncate,
    write::current,
};

pub struct ApplyPatch;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    Add { path: String, content: String },
    Delete { path: String },
    Update { path: String, move_to: Option<String>, hunks: Vec<Hunk> },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hunk {
    /// Text after `@@`: a line to find before the hunk's context (e.g. a function signature).
    pub anchor: Option<String>,
    /// (old lines, new lines): context lines appear in both.
    pub old: Vec<String>,
    pub new: Vec<String>,
    /// `*** End of File`: the hunk must match at the end of the file.
    pub at_end: bool,
}

/// Parses a patch. Lines before `*** Begin Patch` and after `*** End Patch` (a shell heredoc
/// around it, say) are ignored.
pub fn parse(patch: &str) -> Result<Vec<FileOp>, String> {
    let lines: Vec<&str> = patch.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let begin = lines.iter().position(|l| l.trim() == "*** Begin Patch").ok_or("missing `*** Begin Patch`")?;
    let end = lines.iter().rposition(|l| l.trim() == "*** End Patch").ok_or("missing `*** End Patch`")?;
    if end <= begin {
        return Err("`*** End Patch` comes before `*** Begin Patch`".into());
    }
    let body = &lines[begin + 1..end];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let n = begin + i + 2; // 1-based line number in the patch, for messages
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            i += 1;
            while i < body.len() && !body[i].starts_with("*** ") {
                let l = body[i].strip_prefix('+').ok_or_else(|| {
                    format!("line {}: every line of an added file must start with `+`", begin + i + 2)
                })?;
                content.push_str(l);
                content.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add { path: path.trim().to_owned(), content });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            ops.push(FileOp::Delete { path: path.trim().to_owned() });
            i += 1;
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = body.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_owned());
                i += 1;
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            while i < body.len() && (!body[i].starts_with("*** ") || body[i] == "*** End of File") {
                let l = body[i];
                if let Some(anchor) = l.strip_prefix("@@") {
                    let anchor = anchor.trim();
                    hunks.push(Hunk { anchor: (!anchor.is_empty()).then(|| anchor.to_owned()), ..Hunk::default() });
                } else if l == "*** End of File" {
                    hunks
                        .last_mut()
                        .ok_or_else(|| format!("line {}: `*** End of File` outside a hunk", begin + i + 2))?
                        .at_end = true;
                } else {
                    if hunks.is_empty() {
                        // A first hunk without `@@` is allowed.
                        hunks.push(Hunk::default());
                    }
                    let hunk = hunks.last_mut().ok_or("no hunk")?;
                    match l.chars().next() {
                        Some('+') => hunk.new.push(l[1..].to_owned()),
                        Some('-') => hunk.old.push(l[1..].to_owned()),
                        Some(' ') => {
                            hunk.old.push(l[1..].to_owned());
                            hunk.new.push(l[1..].to_owned());
                        }
                        None => {
                            // A blank line inside a hunk is a blank context line.
                            hunk.old.push(String::new());
                            hunk.new.push(String::new());
                        }
                        Some(_) => {
                            return Err(format!(
                                "line {}: a hunk line must start with ' ', '+' or '-': {l:?}",
                                begin + i + 2
                            ));
                        }
                    }
                }
                i += 1;
            }
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!("line {n}: `*** Update File: {}` has no hunks", path.trim()));
            }
            ops.push(FileOp::Update { path: path.trim().to_owned(), move_to, hunks });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "line {n}: expected `*** Add File:`, `*** Update File:` or `*** Delete File:`, got {line:?}"
            ));
        }
    }
    if ops.is_empty() {
        return Err("the patch changes no files".into());
    }
    Ok(ops)
}

/// Applies hunks to `text`, in order; each must match after the previous one.
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<String, String> {
    let crlf = text.contains("\r\n");
    let trailing_newline = text.ends_with('\n') || text.is_empty();
    let mut lines: Vec<String> = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned()).collect();
    let mut from = 0;
    for (k, hunk) in hunks.iter().enumerate() {
        let number = k + 1;
        if let Some(anchor) = &hunk.anchor {
            // Seek the anchor line (exact, then ignoring surrounding whitespace); keep going if absent
            // only when the hunk has context of its own.
            let found = (from..lines.len())
                .find(|&i| lines[i] == *anchor)
                .or_else(|| (from..lines.len()).find(|&i| lines[i].trim() == anchor.trim()));
            match found {
                Some(i) => from = i,
                None if hunk.old.is_empty() => return Err(format!("hunk {number}: `@@ {anchor}` was not found")),
                None => {}
            }
        }
        let at = if hunk.old.is_empty() {
            // Pure insertion: after the anchor, or at the end.
            if hunk.anchor.is_some() && !hunk.at_end { (from + 1).min(lines.len()) } else { lines.len() }
        } else {
            find(&lines, &hunk.old, from, hunk.at_end).ok_or_else(|| {
                let first = hunk.old.iter().find(|l| !l.trim().is_empty()).map_or("", String::as_str);
                format!(
                    "hunk {number} does not apply: its {} context/removed lines (starting with {first:?}) were not found{}",
                    hunk.old.len(),
                    if from > 0 { " after the previous hunk" } else { "" }
                )
            })?
        };
        lines.splice(at..at + hunk.old.len(), hunk.new.iter().cloned());
        from = at + hunk.new.len();
    }
    let sep = if crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(sep);
    if trailing_newline && !out.is_empty() {
        out.push_str(sep);
    }
    Ok(out)
}

/// Finds `needle` in `lines` at or after `from`: exactly, then ignoring trailing whitespace, then
/// ignoring all surrounding whitespace.
fn find(lines: &[String], needle: &[String], from: usize, at_end: bool) -> Option<usize> {
    if needle.len() > lines.len() {
        return None;
    }
    let last = lines.len() - needle.len();
    let candidates: Vec<usize> = if at_end { vec![last] } else { (from.min(last + 1)..=last).collect() };
    let passes: [fn(&str, &str) -> bool; 3] =
        [|a, b| a == b, |a, b| a.trim_end() == b.trim_end(), |a, b| a.trim() == b.trim()];
    passes.iter().find_map(|eq| {
        candidates.iter().copied().find(|&i| needle.iter().enumerate().all(|(j, n)| eq(&lines[i + j], n)))
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyPatchArgs {
    /// The whole patch, from *** Begin Patch to *** End Patch
    #[schemars(required)]
    patch: Option<String>,
    /// What some models call it.
    #[schemars(skip)]
    input: Option<String>,
}

impl Tool for ApplyPatch {
    const NAME: &'static str = "apply_patch";
    type Args = ApplyPatchArgs;

    fn description(&self) -> String {
        "Apply a patch that adds, updates, moves or deletes files. Format:\n\
                  *** Begin Patch\n\
                  *** Add File: path/new.txt\n+line 1\n+line 2\n\
                  *** Update File: path/old.rs\n*** Move to: path/renamed.rs   (optional)\n\
                  @@ fn some_function()   (optional: a line to find first)\n \
                  context line\n-removed line\n+added line\n \
                  context line\n\
                  *** Delete File: path/gone.txt\n\
                  *** End Patch\n\
                  Give 3 lines of context around each change. Either every change applies or none does."
            .into()
    }

    async fn prepare(&self, args: ApplyPatchArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        // codex calls the argument `input`.
        let patch = args.patch.or(args.input).ok_or("missing field `patch`")?;
        let patch = patch.as_str();
        let ops = parse(patch).map_err(|e| format!("the patch is malformed: {e}"))?;
        let mut changes = Vec::new();
        for op in ops {
            changes
                .push(plan(ctx, op).await.map_err(|e| format!("the patch does not apply (nothing was changed): {e}"))?);
        }
        let mut preview = Vec::new();
        let mut access = Access::default();
        let mut locations = Vec::new();
        for c in &mut changes {
            let target = c.new_path.as_ref().unwrap_or(&c.path);
            let change = diff::change(target, &ctx.display(target), c.old.as_deref(), c.new.as_deref().unwrap_or(""));
            preview.extend(change.contents.iter().cloned());
            access.writes.push(c.path.clone());
            if let Some(to) = &c.new_path {
                access.writes.push(to.clone());
            }
            let line = if c.old.is_some() && c.new.is_some() { change.first_line } else { None };
            locations.push(Location { path: target.clone(), line });
            c.unified = change.unified;
            // A move is checked where it ends up, against what it held before.
            super::check::before(ctx, target, c.old.as_deref());
        }
        let (title, kind) = title_and_kind(ctx, &changes);
        Ok(Prepared {
            title,
            kind,
            locations,
            preview: preview.clone(),
            access,
            action: Box::new(PatchAction { changes, preview }),
        })
    }
}

/// One file's change, fully worked out.
#[derive(Debug, Clone)]
struct Change {
    path: PathBuf,
    /// Where it ends up, if moved.
    new_path: Option<PathBuf>,
    old: Option<String>,
    /// `None`: deleted.
    new: Option<String>,
    /// The unified diff, for the model.
    unified: String,
}

async fn plan(ctx: &ToolContext, op: FileOp) -> Result<Change, String> {
    match op {
        FileOp::Add { path, content } => {
            let path = ctx.resolve(&path);
            if current(ctx, &path).await?.is_some() {
                return Err(format!("{} already exists; use `*** Update File:` to change it", ctx.display(&path)));
            }
            Ok(Change { path, new_path: None, old: None, new: Some(content), unified: String::new() })
        }
        FileOp::Delete { path } => {
            let path = ctx.resolve(&path);
            let old = current(ctx, &path).await?.ok_or_else(|| format!("{} does not exist", ctx.display(&path)))?;
            Ok(Change { path, new_path: None, old: Some(old), new: None, unified: String::new() })
        }
        FileOp::Update { path, move_to, hunks } => {
            let path = ctx.resolve(&path);
            let shown = ctx.display(&path);
            let old = current(ctx, &path).await?.ok_or_else(|| format!("{shown} does not exist"))?;
            // Finding where hunks go is CPU work that grows with file × hunk: off the async thread,
            // and given up on when the turn is cancelled.
            let search = tokio::task::spawn_blocking(move || {
                let new = apply_hunks(&old, &hunks);
                (old, new)
            });
            let (old, new) = tokio::select! {
                done = search => done.map_err(|e| format!("{shown}: {e}"))?,
                () = ctx.cancel.cancelled() => return Err("cancelled".into()),
            };
            let new = new.map_err(|e| format!("{shown}: {e}"))?;
            let new_path = match move_to {
                Some(to) => {
                    let to = ctx.resolve(&to);
                    if to != path && current(ctx, &to).await?.is_some() {
                        return Err(format!("cannot move {shown} to {}: it already exists", ctx.display(&to)));
                    }
                    Some(to)
                }
                None => None,
            };
            Ok(Change { path, new_path, old: Some(old), new: Some(new), unified: String::new() })
        }
    }
}

fn title_and_kind(ctx: &ToolContext, changes: &[Change]) -> (String, ToolKind) {
    let describe = |c: &Change| match (&c.old, &c.new, &c.new_path) {
        (None, _, _) => format!("Create {}", ctx.display(&c.path)),
        (_, None, _) => format!("Delete {}", ctx.display(&c.path)),
        (_, _, Some(to)) => format!("Move {} → {}", ctx.display(&c.path), ctx.display(to)),
        _ => format!("Edit {}", ctx.display(&c.path)),
    };
    let kind = if changes.iter().all(|c| c.new.is_none()) {
        ToolKind::Delete
    } else if changes.iter().all(|c| c.new_path.is_some() && c.old == c.new) {
        ToolKind::Move
    } else {
        ToolKind::Edit
    };
    let title = match changes {
        [one] => describe(one),
        many => format!(
            "Apply patch: {}",
            many.iter().map(|c| ctx.display(c.new_path.as_ref().unwrap_or(&c.path))).collect::<Vec<_>>().join(", ")
        ),
    };
    (title, kind)
}

struct PatchAction {
    changes: Vec<Change>,
    preview: Vec<ToolContent>,
}

impl Action for PatchAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let mut summary = Vec::new();
        let mut diffs = String::new();
        for c in &self.changes {
            let shown = ctx.display(&c.path);
            let result = apply(ctx, c).await;
            if let Err(e) = result {
                let done = if summary.is_empty() {
                    "Nothing was changed".to_owned()
                } else {
                    format!("Already applied: {}", summary.join(", "))
                };
                return ToolOutput::error(format!("could not change {shown}: {e}. {done}."));
            }
            let line = match (&c.old, &c.new, &c.new_path) {
                (None, _, _) => format!("A {shown}"),
                (_, None, _) => format!("D {shown}"),
                (_, _, Some(to)) => format!("R {shown} → {}", ctx.display(to)),
                _ => format!("M {shown}"),
            };
            summary.push(line);
            diffs.push_str(&c.unified);
        }
        let text = format!("Applied the patch:\n{}\n\n{diffs}", summary.join("\n"));
        let output =
            ToolOutput::ok(truncate::for_model(&text, truncate::MODEL_BUDGET, "read the changed files"), self.preview);
        let mut written = Vec::new();
        for c in self.changes {
            match (c.new, c.new_path) {
                (None, _) => written.push((c.path, None)),
                (Some(new), Some(to)) if to != c.path => {
                    written.push((c.path, None));
                    written.push((to, Some(new)));
                }
                (Some(new), _) => written.push((c.path, Some(new))),
            }
        }
        super::check::after(ctx, &written, output).await
    }
}

async fn apply(ctx: &ToolContext, c: &Change) -> Result<(), String> {
    match (&c.new, &c.new_path) {
        (None, _) => tokio::fs::remove_file(&c.path).await.map_err(|e| e.to_string()),
        (Some(new), Some(to)) => {
            ctx.host.write_text_file(&ctx.session, to, new, &ctx.cancel).await.map_err(|e| e.to_string())?;
            if to != &c.path {
                tokio::fs::remove_file(&c.path).await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        (Some(new), None) => {
            ctx.host.write_text_file(&ctx.session, &c.path, new, &ctx.cancel).await.map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "*** Begin Patch
*** Add File: hello.txt
+Hello
+world
*** Update File: src/lib.rs
*** Move to: src/main.rs
@@ fn add
 fn add(a: i32, b: i32) -> i32 {
-    a - b
+    a + b
 }
*** Delete File: old.txt
*** End Patch";

    #[test]
    fn parses_every_operation() {
        let ops = parse(PATCH).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0], FileOp::Add { path: "hello.txt".into(), content: "Hello\nworld\n".into() });
        match &ops[1] {
            FileOp::Update { path, move_to, hunks } => {
                assert_eq!(path, "src/lib.rs");
                assert_eq!(move_to.as_deref(), Some("src/main.rs"));
                assert_eq!(hunks[0].anchor.as_deref(), Some("fn add"));
                assert_eq!(hunks[0].old, vec!["fn add(a: i32, b: i32) -> i32 {", "    a - b", "}"]);
                assert_eq!(hunks[0].new, vec!["fn add(a: i32, b: i32) -> i32 {", "    a + b", "}"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ops[2], FileOp::Delete { path: "old.txt".into() });
    }

    #[test]
    fn malformed_patches_say_where() {
        assert!(parse("*** Update File: a\n").unwrap_err().contains("Begin Patch"));
        assert!(parse("*** Begin Patch\n*** End Patch").unwrap_err().contains("no files"));
        let e = parse("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch").unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
        let e = parse("*** Begin Patch\n*** Frobnicate: a\n*** End Patch").unwrap_err();
        assert!(e.contains("expected"), "{e}");
        // A heredoc around the patch is fine.
        assert!(parse("cat <<'EOF'\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF\n").is_ok());
    }

    #[test]
    fn hunks_apply_in_order_with_fuzz() {
        let text = "fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\nfn sub() {}\n";
        let FileOp::Update { hunks, .. } = &parse(PATCH).unwrap()[1] else { panic!() };
        assert_eq!(apply_hunks(text, hunks).unwrap(), "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nfn sub() {}\n");
        // Trailing whitespace in the file does not stop a match.
        let text_ws = "fn add(a: i32, b: i32) -> i32 {   \n    a - b\n}\n";
        assert!(apply_hunks(text_ws, hunks).unwrap().contains("a + b"));
        // CRLF files stay CRLF.
        let crlf = "fn add(a: i32, b: i32) -> i32 {\r\n    a - b\r\n}\r\n";
        assert_eq!(apply_hunks(crlf, hunks).unwrap(), "fn add(a: i32, b: i32) -> i32 {\r\n    a + b\r\n}\r\n");
    }

    #[test]
    fn a_hunk_that_does_not_match_is_reported() {
        let FileOp::Update { hunks, .. } = &parse(PATCH).unwrap()[1] else { panic!() };
        let e = apply_hunks("fn other() {}\n", hunks).unwrap_err();
        assert!(e.starts_with("hunk 1 does not apply"), "{e}");
    }

    #[test]
    fn end_of_file_anchor_and_pure_insertions() {
        let hunks = vec![Hunk { anchor: None, old: vec!["b".into()], new: vec!["b".into(), "c".into()], at_end: true }];
        assert_eq!(apply_hunks("b\na\nb\n", &hunks).unwrap(), "b\na\nb\nc\n");
        let insert = vec![Hunk { anchor: Some("a".into()), old: vec![], new: vec!["x".into()], at_end: false }];
        assert_eq!(apply_hunks("a\nb\n", &insert).unwrap(), "a\nx\nb\n");
    }
}
