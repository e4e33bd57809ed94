//! `grep`: a regex search over the workspace with ripgrep's engine — `ignore` walks the tree in
//! parallel honouring `.gitignore` (and skipping hidden and binary files, as `rg` does),
//! `grep-searcher` + `grep-regex` search each file, `globset` globs narrow it. Results are sorted
//! by path and capped, with a marker when the cap was hit.

use crate::sync::lock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::{WalkBuilder, WalkState, overrides::OverrideBuilder};

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{Flag, Int};
use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, truncate};

pub const DEFAULT_MAX_MATCHES: usize = 200;
pub const MAX_MATCHES: usize = 5000;
const MAX_LINE: usize = 300;

pub struct Grep;

/// A search, independent of how results are shown (also used by the benchmark).
#[derive(Debug, Clone)]
pub struct Search {
    pub pattern: String,
    pub root: PathBuf,
    pub globs: Vec<String>,
    pub case_insensitive: bool,
    pub fixed_strings: bool,
    pub context: usize,
    pub max_matches: usize,
    pub files_only: bool,
}

/// One line of a result: a match or a context line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub number: u64,
    pub text: String,
    pub is_match: bool,
}

#[derive(Debug, Default)]
pub struct Found {
    /// Per file, sorted by path.
    pub files: Vec<(PathBuf, Vec<Line>)>,
    pub matches: usize,
    /// The cap was reached; there may be more.
    pub capped: bool,
}

impl Search {
    /// Runs the search on the calling thread (use a blocking task); `stop` aborts it.
    pub fn run(&self, stop: &AtomicBool) -> Result<Found, String> {
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(self.case_insensitive)
            .fixed_strings(self.fixed_strings)
            .line_terminator(Some(b'\n'))
            .build(&self.pattern)
            .map_err(|e| format!("invalid pattern: {e}"))?;
        let mut walk = WalkBuilder::new(&self.root);
        // .gitignore counts in any workspace, not only inside a git repository.
        walk.require_git(false);
        if !self.globs.is_empty() {
            let mut overrides = OverrideBuilder::new(&self.root);
            for g in &self.globs {
                overrides.add(g).map_err(|e| format!("invalid glob {g:?}: {e}"))?;
            }
            walk.overrides(overrides.build().map_err(|e| e.to_string())?);
        }
        let matches = AtomicUsize::new(0);
        let capped = AtomicBool::new(false);
        let results: Mutex<Vec<(PathBuf, Vec<Line>)>> = Mutex::default();
        let (max, context, files_only) = (self.max_matches, self.context, self.files_only);
        walk.build_parallel().run(|| {
            let matcher = matcher.clone();
            let mut searcher = SearcherBuilder::new()
                .binary_detection(BinaryDetection::quit(b'\x00'))
                .line_number(true)
                .before_context(context)
                .after_context(context)
                .build();
            let (matches, capped, results) = (&matches, &capped, &results);
            Box::new(move |entry| {
                if stop.load(Ordering::Relaxed) || capped.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else { return WalkState::Continue };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                // A file stops being searched once the matches found so far reach the limit (a
                // log of a million matching lines is not held whole), or the search is stopped.
                let room = max.saturating_sub(matches.load(Ordering::Relaxed));
                let mut sink = Collect { lines: Vec::new(), matches: 0, files_only, room, stop };
                if searcher.search_path(&matcher, entry.path(), &mut sink).is_err() || sink.matches == 0 {
                    return WalkState::Continue;
                }
                let total = matches.fetch_add(sink.matches, Ordering::Relaxed) + sink.matches;
                lock(results).push((entry.into_path(), sink.lines));
                if total >= max {
                    capped.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                WalkState::Continue
            })
        });
        let mut files = crate::sync::into_inner(results);
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Found { files, matches: matches.into_inner(), capped: capped.into_inner() })
    }
}

struct Collect<'a> {
    lines: Vec<Line>,
    matches: usize,
    files_only: bool,
    /// Matches this file may still add.
    room: usize,
    stop: &'a AtomicBool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        if self.files_only {
            return Ok(false); // one match is enough to list the file
        }
        let first = mat.line_number().unwrap_or(0);
        for (i, line) in mat.lines().enumerate() {
            self.lines.push(Line { number: first + i as u64, text: text_of(line), is_match: true });
        }
        Ok(self.matches < self.room && !self.stop.load(Ordering::Relaxed))
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if !self.files_only {
            self.lines.push(Line {
                number: ctx.line_number().unwrap_or(0),
                text: text_of(ctx.bytes()),
                is_match: false,
            });
        }
        Ok(true)
    }
}

fn text_of(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    truncate::line(s.trim_end_matches(['\n', '\r']), MAX_LINE).into_owned()
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regular expression (or literal text with fixed_strings)
    pattern: String,
    /// Directory or file to search (default: the workspace root)
    path: Option<String>,
    /// Only files matching this glob, e.g. "*.rs" or "!*.min.js"
    glob: Option<String>,
    case_insensitive: Option<Flag>,
    /// Treat the pattern as literal text
    fixed_strings: Option<Flag>,
    /// Lines of context around each match
    #[schemars(range(min = 0))]
    context: Option<Int>,
    /// List matching files only
    files_only: Option<Flag>,
    #[schemars(range(min = 1))]
    max_results: Option<Int>,
}

impl Tool for Grep {
    const NAME: &'static str = "grep";
    type Args = GrepArgs;

    fn description(&self) -> String {
        format!(
            "Search file contents with a regular expression (Rust regex syntax, like ripgrep). Skips files ignored \
         by .gitignore, hidden files and binary files. Returns `path:line:text` for matches (and \
         `path-line-text` for context lines), sorted by path, at most `max_results` matches \
         (default {DEFAULT_MAX_MATCHES})."
        )
    }

    async fn prepare(&self, args: GrepArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let pattern = args.pattern;
        let root = match args.path.as_deref() {
            Some(p) => ctx.resolve(p),
            None => ctx.cwd.clone(),
        };
        let search = Search {
            pattern,
            globs: args.glob.into_iter().collect(),
            case_insensitive: args.case_insensitive.unwrap_or_default().0,
            fixed_strings: args.fixed_strings.unwrap_or_default().0,
            context: args.context.map_or(0, |c| c.0).min(20) as usize,
            max_matches: (args.max_results.map_or(DEFAULT_MAX_MATCHES as u64, |m| m.0) as usize).clamp(1, MAX_MATCHES),
            files_only: args.files_only.unwrap_or_default().0,
            root: root.clone(),
        };
        let where_ = if root == ctx.cwd { String::new() } else { format!(" in {}", ctx.display(&root)) };
        Ok(Prepared {
            title: format!("Search `{}`{where_}", search.pattern),
            kind: ToolKind::Search,
            locations: vec![Location::file(root.clone())],
            preview: Vec::new(),
            access: Access { reads: vec![root], ..Access::default() },
            action: Box::new(GrepAction(search)),
        })
    }
}

struct GrepAction(Search);

impl Action for GrepAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let search = self.0;
        if !search.root.exists() {
            return ToolOutput::error(format!("{} does not exist", ctx.display(&search.root)));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let job = {
            let (search, stop) = (search.clone(), stop.clone());
            tokio::task::spawn_blocking(move || search.run(&stop))
        };
        let found = tokio::select! {
            r = job => match r {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => return ToolOutput::error(e),
                Err(e) => return ToolOutput::error(format!("the search failed: {e}")),
            },
            () = ctx.cancel.cancelled() => {
                stop.store(true, Ordering::Relaxed);
                return ToolOutput::error("cancelled");
            }
        };
        render(ctx, &search, &found)
    }
}

fn render(ctx: &ToolContext, search: &Search, found: &Found) -> ToolOutput {
    if found.files.is_empty() {
        return ToolOutput::ok("No matches.", vec![ToolContent::Text("No matches".into())]);
    }
    let show = |p: &Path| ctx.display(p);
    let mut out = String::new();
    if search.files_only {
        for (path, _) in &found.files {
            out.push_str(&show(path));
            out.push('\n');
        }
    } else {
        for (path, lines) in &found.files {
            let shown = show(path);
            let mut previous: Option<u64> = None;
            for line in lines {
                if search.context > 0 && previous.is_some_and(|p| line.number > p + 1) {
                    out.push_str("--\n");
                }
                let sep = if line.is_match { ':' } else { '-' };
                out.push_str(&format!("{shown}{sep}{}{sep}{}\n", line.number, line.text));
                previous = Some(line.number);
            }
        }
    }
    let summary = format!(
        "{} match{} in {} file{}",
        found.matches,
        if found.matches == 1 { "" } else { "es" },
        found.files.len(),
        if found.files.len() == 1 { "" } else { "s" }
    );
    if found.capped {
        out.push_str(&format!(
            "[stopped at {} matches; there may be more — narrow the pattern, or use `path`, `glob` or a larger `max_results`]\n",
            search.max_matches
        ));
    }
    let for_model = truncate::for_model(&out, truncate::MODEL_BUDGET, "narrow the search with `path` or `glob`");
    ToolOutput::ok(for_model, vec![ToolContent::Text(summary)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_full_of_matches_is_searched_only_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.log"), "match me\n".repeat(200_000)).unwrap();
        let search = Search {
            pattern: "match".into(),
            root: dir.path().to_path_buf(),
            globs: Vec::new(),
            case_insensitive: false,
            fixed_strings: false,
            context: 0,
            max_matches: 10,
            files_only: false,
        };
        let found = search.run(&AtomicBool::new(false)).unwrap();
        assert!(found.capped);
        assert_eq!(found.matches, 10);
        assert_eq!(found.files[0].1.len(), 10, "only the lines within the limit are held");
    }
}
