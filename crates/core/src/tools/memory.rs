//! `memory_search` and `memory_get`: the agent's memory files (`crate::memory`) searched by
//! meaning of their words, and read a range of lines at a time. They read nothing but memory
//! files — `MEMORY.md`, `memory/**/*.md`, `[memory] extra_paths` — so they run without asking.

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::Int;
use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput};
use crate::memory::Memory;
use crate::memory::embed::Embedder;

/// Results when the model does not say.
const DEFAULT_RESULTS: u64 = 6;
const MAX_RESULTS: u64 = 20;
/// Lines `memory_get` returns when the model does not say, and at most.
const DEFAULT_LINES: u64 = 200;
const MAX_LINES: u64 = 2000;

pub struct MemorySearch;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemorySearchArgs {
    /// Words to look for (any language)
    query: String,
    /// Most results (default 6)
    #[serde(rename = "maxResults")]
    #[schemars(range(min = 1))]
    max_results: Option<Int>,
    /// Leave out results scoring under this (0–1)
    #[serde(rename = "minScore")]
    min_score: Option<f64>,
}

impl Tool for MemorySearch {
    const NAME: &'static str = "memory_search";
    type Args = MemorySearchArgs;

    fn description(&self) -> String {
        "Search your memory files (MEMORY.md and memory/*.md) for notes from earlier sessions. Returns matching \
         snippets with path, lines and score; read more with memory_get."
            .into()
    }

    async fn prepare(&self, args: MemorySearchArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let query = args.query.trim().to_owned();
        if query.is_empty() {
            return Err("`query` is empty".into());
        }
        let max = args.max_results.map_or(DEFAULT_RESULTS, |n| n.0).clamp(1, MAX_RESULTS) as usize;
        let min_score = args.min_score.unwrap_or(0.0).clamp(0.0, 1.0);
        let memory = Memory::of(&ctx.config);
        let embedder = Embedder::of(&ctx.config);
        Ok(Prepared {
            title: format!("Search memory for {query:?}"),
            kind: ToolKind::Search,
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access::default(),
            action: Box::new(SearchAction { memory, embedder, query, max, min_score }),
        })
    }
}

struct SearchAction {
    memory: Memory,
    embedder: Option<Result<Embedder, String>>,
    query: String,
    max: usize,
    min_score: f64,
}

impl Action for SearchAction {
    async fn run(self, _ctx: &ToolContext) -> ToolOutput {
        let Self { memory, embedder, query, max, min_score } = self;
        let found = match memory.find(embedder, &query, max, min_score).await {
            Ok(found) => found,
            Err(e) => return ToolOutput::error(format!("memory search failed: {e}")),
        };
        let (hits, note) = (found.hits, found.note.map(|n| format!("({n}.)\n\n")).unwrap_or_default());
        if hits.is_empty() {
            return ToolOutput::ok(format!("{note}No memory matches."), vec![ToolContent::Text("no matches".into())]);
        }
        let mut out = note;
        for hit in &hits {
            out.push_str(&format!(
                "{}:{}-{} (score {:.2})\n{}\n\n",
                hit.path, hit.start_line, hit.end_line, hit.score, hit.snippet
            ));
        }
        let summary = format!("{} match{}", hits.len(), if hits.len() == 1 { "" } else { "es" });
        ToolOutput::ok(out.trim_end().to_owned(), vec![ToolContent::Text(summary)])
    }
}

pub struct MemoryGet;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryGetArgs {
    /// A memory file, as memory_search names it (e.g. MEMORY.md, memory/2026-01-31.md)
    path: String,
    /// First line (1-based)
    #[schemars(range(min = 1))]
    from: Option<Int>,
    /// How many lines (default 200)
    #[schemars(range(min = 1))]
    lines: Option<Int>,
}

impl Tool for MemoryGet {
    const NAME: &'static str = "memory_get";
    type Args = MemoryGetArgs;

    fn description(&self) -> String {
        "Read lines of a memory file (MEMORY.md, memory/*.md); no other files.".into()
    }

    async fn prepare(&self, args: MemoryGetArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let memory = Memory::of(&ctx.config);
        let raw = args.path.clone();
        let path = tokio::task::spawn_blocking(move || memory.resolve(&raw)).await.ok().flatten().ok_or_else(|| {
            format!("{} is not a memory file (MEMORY.md, memory/*.md or an extra memory path)", args.path)
        })?;
        let from = args.from.map_or(1, |n| n.0).max(1);
        let lines = args.lines.map_or(DEFAULT_LINES, |n| n.0).clamp(1, MAX_LINES);
        Ok(Prepared {
            title: format!("Read memory {} (lines {from}–{})", args.path, from.saturating_add(lines - 1)),
            kind: ToolKind::Read,
            locations: vec![Location { path: path.clone(), line: u32::try_from(from).ok() }],
            preview: Vec::new(),
            access: Access::default(),
            action: Box::new(GetAction { path, shown: args.path, from, lines }),
        })
    }
}

struct GetAction {
    path: std::path::PathBuf,
    shown: String,
    from: u64,
    lines: u64,
}

impl Action for GetAction {
    async fn run(self, _ctx: &ToolContext) -> ToolOutput {
        let path = self.path.clone();
        let read =
            tokio::task::spawn_blocking(move || crate::files::read_capped(&path, crate::memory::index::MAX_FILE_BYTES))
                .await;
        let text = match read {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Err(e)) => return ToolOutput::error(format!("cannot read {}: {e}", self.shown)),
            Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", self.shown)),
        };
        let total = text.lines().count() as u64;
        let skip = usize::try_from(self.from - 1).unwrap_or(usize::MAX);
        let take = usize::try_from(self.lines).unwrap_or(usize::MAX);
        let mut out = String::new();
        for (i, line) in text.lines().enumerate().skip(skip).take(take) {
            out.push_str(&format!("{}\t{line}\n", i + 1));
        }
        let last = (self.from + self.lines - 1).min(total);
        if out.is_empty() {
            return ToolOutput::ok(
                format!("{} has {total} lines; none from line {}.", self.shown, self.from),
                vec![ToolContent::Text("no lines there".into())],
            );
        }
        if last < total {
            out.push_str(&format!("[{} more lines; read on from line {}]\n", total - last, last + 1));
        }
        ToolOutput::ok(out, vec![ToolContent::Text(format!("lines {}–{last} of {total}", self.from))])
    }
}
