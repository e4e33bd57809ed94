//! `read`: a text file (as the editor has it, unsaved changes included), numbered, a range of lines
//! at a time; binary files are refused and huge ones are read a window at a time.

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::Int;
use super::host::{FsError, LineRange};
use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, truncate};

/// Lines returned when no limit is given.
pub const DEFAULT_LIMIT: u32 = 2000;
/// Longest line shown.
const MAX_LINE: usize = 2000;

pub struct Read;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// File to read
    path: String,
    /// First line to read (1-based)
    #[schemars(range(min = 1))]
    offset: Option<Int>,
    /// How many lines to read
    #[schemars(range(min = 1))]
    limit: Option<Int>,
}

impl Tool for Read {
    const NAME: &'static str = "read";
    type Args = ReadArgs;

    fn description(&self) -> String {
        format!(
            "Read a text file. Returns numbered lines (`number<TAB>text`), at most {DEFAULT_LIMIT} lines per call; use \
             `offset` and `limit` to read further. Paths are relative to the workspace root unless absolute. The line \
             numbers are not part of the file."
        )
    }

    async fn prepare(&self, args: ReadArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let path = ctx.resolve(&args.path);
        let offset = args.offset.map_or(1, |n| n.0).max(1);
        // At most DEFAULT_LIMIT lines a call (as the description says): memory stays bounded.
        let limit = args.limit.map_or(u64::from(DEFAULT_LIMIT), |n| n.0).clamp(1, u64::from(DEFAULT_LIMIT));
        let offset = u32::try_from(offset).map_err(|_| "`offset` is too large".to_owned())?;
        let limit = u32::try_from(limit).map_err(|_| "`limit` is too large".to_owned())?;
        let shown = ctx.display(&path);
        let title = if args.offset.is_some() || args.limit.is_some() {
            format!("Read {shown} (lines {offset}–{})", offset.saturating_add(limit - 1))
        } else {
            format!("Read {shown}")
        };
        Ok(Prepared {
            title,
            kind: ToolKind::Read,
            locations: vec![Location { path: path.clone(), line: Some(offset) }],
            preview: Vec::new(),
            access: Access { reads: vec![path.clone()], ..Access::default() },
            action: Box::new(ReadAction { path, offset, limit }),
        })
    }
}

struct ReadAction {
    path: std::path::PathBuf,
    offset: u32,
    limit: u32,
}

impl Action for ReadAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let shown = ctx.display(&self.path);
        if let Some(checker) = &ctx.checker {
            checker.warm(&self.path);
        }
        if let Some(problem) = binary_guard(&self.path).await {
            return ToolOutput::error(format!("{shown}: {problem}"));
        }
        // One extra line tells whether the file goes on.
        let range = LineRange { line: self.offset, limit: self.limit.saturating_add(1) };
        let text = match ctx.host.read_text_file(&ctx.session, &self.path, Some(range), &ctx.cancel).await {
            Ok(text) => text,
            Err(FsError::NotFound) => return ToolOutput::error(format!("{shown}: no such file")),
            Err(FsError::Other(e)) => return ToolOutput::error(format!("{shown}: {e}")),
        };
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let more = lines.len() > self.limit as usize;
        lines.truncate(self.limit as usize);
        if lines.is_empty() {
            let what =
                if self.offset > 1 { format!("has fewer than {} lines", self.offset) } else { "is empty".into() };
            return ToolOutput::ok(format!("{shown} {what}."), Vec::new());
        }
        let mut out = String::with_capacity(text.len() + lines.len() * 8);
        for (i, line) in lines.iter().enumerate() {
            let line = line.strip_suffix('\n').unwrap_or(line);
            let line = line.strip_suffix('\r').unwrap_or(line);
            out.push_str(&format!("{:>6}\t{}\n", self.offset as usize + i, truncate::line(line, MAX_LINE)));
        }
        let last = self.offset as usize + lines.len() - 1;
        if more {
            out.push_str(&format!("[… more lines follow; read with offset={} to continue]\n", last + 1));
        }
        let summary = format!("{} lines ({}–{last})", lines.len(), self.offset);
        let for_model = truncate::for_model(
            &out,
            truncate::MODEL_BUDGET * 2,
            &format!("read {shown} with a smaller offset/limit window"),
        );
        ToolOutput { for_model, content: vec![ToolContent::Text(summary)], is_error: false, raw_output: None }
    }
}

/// Refuses binary files (a NUL byte in the first 8 KiB) that exist on disk.
async fn binary_guard(path: &std::path::Path) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let meta = tokio::fs::metadata(path).await.ok()?;
    if meta.is_dir() {
        return Some("is a directory; use `ls` to list it".to_owned());
    }
    if !meta.is_file() {
        // Opening a FIFO would wait for a writer forever; a device may never end.
        return Some("is not a regular file (a FIFO, socket or device); it is not read".to_owned());
    }
    let mut file = tokio::fs::File::open(path).await.ok()?;
    let mut head = vec![0u8; 8192];
    let n = file.read(&mut head).await.ok()?;
    head[..n].contains(&0).then(|| format!("is a binary file ({} bytes); it is not shown", meta.len()))
}
