//! Turns `session/update`s into terminal output as they arrive: reply text (Markdown-aware: code
//! fences set apart, headings bold, prose word-wrapped to the terminal), thoughts dimmed or folded,
//! one status line per tool call updated in place (spinner, then ✓/✗ with the duration) with its
//! diff and output, plans as checklists, and a usage footer. Without a terminal (`color: false`)
//! the same content comes out as plain text without escape codes.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::host::Terminals;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const DIFF_LINES: usize = 40;
const OUTPUT_LINES: usize = 10;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";

/// How thoughts are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thoughts {
    Show,
    /// One "thinking…" line per thought instead of its text.
    Fold,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Text,
    Thought,
}

/// A tool call as the screen shows it.
#[derive(Debug, Clone)]
pub struct ToolView {
    pub title: String,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub status: String,
    pub content: Vec<Value>,
    pub raw_input: Value,
    /// The client terminal the call ran in, once it embedded one.
    pub terminal: Option<String>,
    started: Instant,
}

/// The renderer; `W` is the terminal (or a pipe, or a buffer in tests).
pub struct Renderer<W: Write> {
    out: W,
    color: bool,
    width: usize,
    thoughts: Thoughts,
    block: Block,
    /// Current column of the cursor (0 = at the start of a line).
    col: usize,
    /// Text held back: the start of a line that may be a fence, or a word that may need wrapping.
    pending: String,
    in_fence: bool,
    /// The rest of a fence line (its info string) is being printed.
    fence_info: bool,
    /// A space to print before the next word (terminals, where words wrap).
    space: bool,
    /// Inside `**…**` / `` `…` `` (terminals only).
    bold: bool,
    code: bool,
    at_line_start: bool,
    heading: bool,
    tools: HashMap<String, ToolView>,
    /// The tool whose status line is the last thing on screen (updated in place).
    live: Option<String>,
    frame: usize,
    pub terminals: Option<Terminals>,
    usage: Option<(u64, u64)>,
    /// Tool calls whose diff the user saw already (in a permission question): not shown again.
    diff_shown: std::collections::HashSet<String>,
}

impl<W: Write> std::fmt::Debug for Renderer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer").field("color", &self.color).field("width", &self.width).finish_non_exhaustive()
    }
}

impl<W: Write> Renderer<W> {
    pub fn new(out: W, color: bool, width: usize, thoughts: Thoughts) -> Self {
        Self {
            out,
            color,
            width: width.max(20),
            thoughts,
            block: Block::None,
            col: 0,
            pending: String::new(),
            in_fence: false,
            fence_info: false,
            space: false,
            bold: false,
            code: false,
            at_line_start: true,
            heading: false,
            tools: HashMap::new(),
            live: None,
            frame: 0,
            terminals: None,
            usage: None,
            diff_shown: std::collections::HashSet::new(),
        }
    }

    /// The user saw this call's diff already (it was the subject of a question).
    pub fn diff_was_shown(&mut self, call_id: &str) {
        self.diff_shown.insert(call_id.to_owned());
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    pub fn set_width(&mut self, width: usize) {
        self.width = width.max(20);
    }

    fn style(&self, code: &'static str) -> &'static str {
        if self.color { code } else { "" }
    }

    fn w(&mut self, s: &str) {
        let _ = self.out.write_all(s.as_bytes());
    }

    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }

    /// One `session/update` (the `update` object).
    pub fn update(&mut self, update: &Value) {
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "agent_message_chunk" => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.text(text);
                }
            }
            "agent_thought_chunk" => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.thought(text);
                }
            }
            "user_message_chunk" => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.user(text);
                }
            }
            "tool_call" => self.tool_call(update),
            "tool_call_update" => self.tool_call_update(update),
            "plan" => self.plan(update),
            "usage_update" => {
                if let (Some(used), Some(size)) = (update["used"].as_u64(), update["size"].as_u64()) {
                    self.usage = Some((used, size));
                }
            }
            _ => {}
        }
        self.flush();
    }

    /// A prompt the user typed (shown when a loaded session replays it).
    pub fn user(&mut self, text: &str) {
        self.start_block(Block::None);
        let (b, r) = (self.style(BOLD), self.style(RESET));
        let shown = text.trim_end().replace('\n', "\n  ");
        self.w(&format!("{b}›{r} {shown}\n"));
        self.col = 0;
    }

    /// Ends whatever is being streamed and makes sure the cursor is at the start of a line.
    fn start_block(&mut self, block: Block) {
        if self.block == block && block != Block::None {
            return;
        }
        self.release_pending();
        self.space = false;
        if self.block != Block::None || self.live.is_some() || self.col > 0 {
            if self.col > 0 {
                self.w("\n");
            }
            if self.block != Block::None && block != Block::None {
                self.w("\n");
            }
        }
        if self.in_fence || self.heading {
            let r = self.style(RESET);
            self.w(r);
        }
        self.col = 0;
        self.at_line_start = true;
        self.in_fence = false;
        self.heading = false;
        self.live = None;
        self.block = block;
    }

    fn thought(&mut self, text: &str) {
        if self.thoughts == Thoughts::Fold {
            if self.block != Block::Thought {
                self.start_block(Block::Thought);
                let (d, r) = (self.style(DIM), self.style(RESET));
                self.w(&format!("{d}(thinking…){r}"));
                self.col = 11;
            }
            return;
        }
        self.start_block(Block::Thought);
        let (d, i, r) = (self.style(DIM), self.style(ITALIC), self.style(RESET));
        self.w(&format!("{d}{i}"));
        self.prose(text);
        self.w(r);
    }

    /// Reply text, Markdown-aware.
    pub fn text(&mut self, text: &str) {
        self.start_block(Block::Text);
        self.prose(text);
    }

    /// Streams text: fences toggled at line starts, headings bold, words wrapped.
    fn prose(&mut self, text: &str) {
        for ch in text.chars() {
            if self.at_line_start {
                // What is held at a line start is `#`s, then maybe backticks: it is all `#`s when it
                // does not end in a backtick (checked in O(1): a run of a million `#` stays linear).
                let heading_mark = ch == '#' && !self.in_fence && !self.pending.ends_with('`');
                if ch == '`' || heading_mark {
                    self.pending.push(ch);
                    if self.pending == "```" {
                        self.fence_line_start();
                    }
                    continue;
                }
                if ch != '\n' {
                    self.at_line_start = false;
                    let held = std::mem::take(&mut self.pending);
                    if self.in_fence {
                        if self.color {
                            self.w(&format!("{CYAN}│ "));
                            self.col = 2;
                        }
                        self.raw(&held);
                    } else {
                        if held.starts_with('#') && ch == ' ' {
                            self.heading = true;
                            let b = self.style(BOLD);
                            self.w(b);
                        }
                        self.pending = held;
                    }
                }
            }
            if ch == '\n' {
                self.newline();
                continue;
            }
            if self.in_fence {
                let mut b = [0u8; 4];
                self.raw(ch.encode_utf8(&mut b));
            } else if ch == ' ' {
                self.release_word();
                if !self.color {
                    self.raw(" ");
                } else if self.col > 0 {
                    // Printed before the next word, if that word fits on this line.
                    self.space = true;
                }
            } else {
                self.pending.push(ch);
            }
        }
    }

    /// "```" at the start of a line: the rest of the line is the fence's info string.
    fn fence_line_start(&mut self) {
        self.pending.clear();
        self.in_fence = !self.in_fence;
        self.at_line_start = false;
        let (d, r) = (self.style(DIM), self.style(RESET));
        if self.in_fence {
            self.w(&format!("{d}```"));
        } else {
            self.w(&format!("{r}{d}```"));
        }
        self.col = 3;
        // Mark: the info string (and the rest of the line) is printed dim, then reset at '\n'.
        self.fence_info = true;
    }

    fn newline(&mut self) {
        if !self.at_line_start || !self.pending.is_empty() {
            self.release_pending();
        }
        let r = self.style(RESET);
        if self.heading || self.fence_info || self.in_fence {
            self.w(r);
        }
        if self.bold || self.code {
            self.w(RESET);
            let resume = self.resume_styles_after_line();
            self.w(&resume);
        }
        self.heading = false;
        self.fence_info = false;
        self.space = false;
        self.bold = false;
        self.code = false;
        self.w("\n");
        self.col = 0;
        self.at_line_start = true;
    }

    fn raw(&mut self, s: &str) {
        self.w(s);
        self.col += visible_len(s);
    }

    /// Prints the held word, on a new line if it would not fit.
    fn release_word(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut word = std::mem::take(&mut self.pending);
        if self.color && !self.in_fence {
            word = self.inline_styles(&word);
        }
        let len = visible_len(&word);
        let space = std::mem::take(&mut self.space);
        if self.color && self.col > 0 && self.col + usize::from(space) + len > self.width {
            self.w("\n");
            self.col = 0;
        } else if space {
            self.raw(" ");
        }
        self.w(&word);
        self.col += len;
    }

    /// `**bold**` and `` `code` `` on a terminal: the markers become styles.
    fn inline_styles(&mut self, word: &str) -> String {
        let mut out = String::with_capacity(word.len() + 16);
        let mut rest = word;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("**").filter(|_| !self.code) {
                self.bold = !self.bold;
                out.push_str(if self.bold { BOLD } else { RESET });
                if !self.bold {
                    out.push_str(&self.resume_styles());
                }
                rest = after;
            } else if let Some(after) = rest.strip_prefix('`') {
                self.code = !self.code;
                out.push_str(if self.code { CYAN } else { RESET });
                if !self.code {
                    out.push_str(&self.resume_styles());
                }
                rest = after;
            } else {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    fn resume_styles_after_line(&self) -> String {
        if self.block == Block::Thought { format!("{DIM}{ITALIC}") } else { String::new() }
    }

    /// The styles still in force after a reset.
    fn resume_styles(&self) -> String {
        let mut out = String::new();
        if self.bold || self.heading {
            out.push_str(BOLD);
        }
        if self.block == Block::Thought {
            out.push_str(DIM);
            out.push_str(ITALIC);
        }
        out
    }

    /// Prints anything held back (the end of a message, or before other output).
    pub fn release_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.at_line_start {
            let held = std::mem::take(&mut self.pending);
            self.at_line_start = false;
            self.raw(&held);
        } else {
            self.release_word();
        }
    }

    fn tool_call(&mut self, update: &Value) {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_owned();
        let view = ToolView {
            title: update["title"].as_str().unwrap_or("tool").to_owned(),
            kind: update["kind"].as_str().map(str::to_owned),
            name: update["_meta"]["toolName"].as_str().map(str::to_owned),
            status: update["status"].as_str().unwrap_or("pending").to_owned(),
            content: update["content"].as_array().cloned().unwrap_or_default(),
            raw_input: update["rawInput"].clone(),
            terminal: None,
            started: Instant::now(),
        };
        let finished = matches!(view.status.as_str(), "completed" | "failed");
        self.tools.insert(id.clone(), view);
        self.note_terminal(&id);
        self.start_block(Block::None);
        if finished {
            self.finish_tool(&id, None);
        } else {
            self.status_line(&id);
        }
    }

    fn tool_call_update(&mut self, update: &Value) {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_owned();
        let Some(view) = self.tools.get_mut(&id) else { return };
        if let Some(title) = update["title"].as_str() {
            title.clone_into(&mut view.title);
        }
        if let Some(status) = update["status"].as_str() {
            status.clone_into(&mut view.status);
        }
        if let Some(content) = update["content"].as_array() {
            view.content.clone_from(content);
            self.note_terminal(&id);
        }
        let Some(view) = self.tools.get_mut(&id) else { return };
        if matches!(view.status.as_str(), "completed" | "failed") {
            let took = view.started.elapsed();
            self.start_block_keep_live(&id);
            self.finish_tool(&id, Some(took));
        } else if self.live.as_deref() == Some(id.as_str()) {
            self.status_line(&id);
        }
    }

    /// Like `start_block`, but keeps the tool's live status line to overwrite.
    fn start_block_keep_live(&mut self, id: &str) {
        if self.live.as_deref() == Some(id) && self.block == Block::None {
            return;
        }
        self.start_block(Block::None);
    }

    fn tool_symbol(&self, status: &str) -> String {
        let (g, red, y, r) = (self.style(GREEN), self.style(RED), self.style(YELLOW), self.style(RESET));
        match status {
            "completed" => format!("{g}✓{r}"),
            "failed" => format!("{red}✗{r}"),
            _ if self.color => format!("{y}{}{r}", SPINNER[self.frame % SPINNER.len()]),
            _ => "·".into(),
        }
    }

    /// (Re)draws a running tool's status line in place (terminals), or prints it once (plain).
    fn status_line(&mut self, id: &str) {
        let Some(view) = self.tools.get(id) else { return };
        let line = format!("{} {}", self.tool_symbol(&view.status), view.title);
        if self.color {
            if self.live.as_deref() == Some(id) {
                self.w("\r\x1b[2K");
            }
            self.w(&line);
            self.col = 1;
            self.live = Some(id.to_owned());
        } else if self.live.as_deref() != Some(id) {
            self.w(&line);
            self.w("\n");
            self.live = Some(id.to_owned());
        }
    }

    /// Advances spinners of a running tool's status line.
    pub fn tick(&mut self) {
        self.frame += 1;
        if let Some(id) = self.live.clone()
            && self.color
            && self.tools.get(&id).is_some_and(|t| !matches!(t.status.as_str(), "completed" | "failed"))
        {
            self.status_line(&id);
            self.flush();
        }
    }

    fn finish_tool(&mut self, id: &str, took: Option<Duration>) {
        let Some(view) = self.tools.get(id).cloned() else { return };
        let (d, r) = (self.style(DIM), self.style(RESET));
        let time = took.map(|t| format!(" {d}({}){r}", duration(t))).unwrap_or_default();
        if self.color && self.live.as_deref() == Some(id) {
            self.w("\r\x1b[2K");
        }
        let symbol = self.tool_symbol(&view.status);
        self.w(&format!("{symbol} {}{time}\n", view.title));
        self.col = 0;
        self.live = None;
        let embeds_terminal = view.content.iter().any(|c| c["type"] == "terminal");
        match (&view.terminal, embeds_terminal) {
            // The terminal's output instead of a summary of it.
            (Some(term), false) => {
                if let Some((_, output, _)) = self.terminals.as_ref().and_then(|t| t.snapshot(term)) {
                    self.output_tail(&output);
                }
                for item in view.content.iter().filter(|c| c["type"] != "content") {
                    self.content(item);
                }
            }
            _ => {
                let seen = self.diff_shown.remove(id);
                for item in view.content.iter().filter(|c| !(seen && c["type"] == "diff")) {
                    self.content(item);
                }
            }
        }
    }

    /// Remembers which client terminal a tool call showed (its final content may drop it).
    fn note_terminal(&mut self, id: &str) {
        if let Some(view) = self.tools.get_mut(id) {
            for item in &view.content {
                if let Some(term) = item["terminalId"].as_str() {
                    view.terminal = Some(term.to_owned());
                }
            }
        }
    }

    /// A tool's content: diffs, terminal output, text.
    fn content(&mut self, item: &Value) {
        match item["type"].as_str() {
            Some("diff") => {
                let path = item["path"].as_str().unwrap_or_default();
                let old = item["oldText"].as_str().unwrap_or_default();
                let new = item["newText"].as_str().unwrap_or_default();
                let lines = diff_lines(old, new);
                self.diff(path, &lines);
            }
            Some("terminal") => {
                let id = item["terminalId"].as_str().unwrap_or_default();
                if let Some((_, output, _)) = self.terminals.as_ref().and_then(|t| t.snapshot(id)) {
                    self.output_tail(&output);
                }
            }
            Some("content") => {
                if let Some(text) = item["content"]["text"].as_str() {
                    let text = text.trim_start_matches("```\n").trim_end_matches("\n```").to_owned();
                    self.output_tail(&text);
                }
            }
            _ => {}
        }
    }

    fn output_tail(&mut self, text: &str) {
        let lines: Vec<&str> = text.trim_end().lines().collect();
        if lines.is_empty() {
            return;
        }
        let (d, r) = (self.style(DIM), self.style(RESET));
        let skip = lines.len().saturating_sub(OUTPUT_LINES);
        if skip > 0 {
            self.w(&format!("  {d}… {skip} lines above{r}\n"));
        }
        for line in &lines[skip..] {
            let line = fit(line, self.width.saturating_sub(4));
            self.w(&format!("  {d}│ {line}{r}\n"));
        }
    }

    /// A coloured unified diff, cut to a screenful.
    pub fn diff(&mut self, path: &str, lines: &[(char, String)]) {
        let (b, g, red, c, r) =
            (self.style(BOLD), self.style(GREEN), self.style(RED), self.style(CYAN), self.style(RESET));
        self.w(&format!("  {b}{path}{r}\n"));
        for (sign, text) in lines.iter().take(DIFF_LINES) {
            let colour = match sign {
                '+' => g,
                '-' => red,
                '@' => c,
                _ => "",
            };
            let shown = if *sign == '@' { text.clone() } else { format!("{sign}{text}") };
            self.w(&format!("  {colour}{}{r}\n", shown.trim_end_matches('\n')));
        }
        if lines.len() > DIFF_LINES {
            let d = self.style(DIM);
            self.w(&format!("  {d}… {} more lines{r}\n", lines.len() - DIFF_LINES));
        }
    }

    /// Clears a running tool's status line (on a terminal) so a block can be printed in its place;
    /// the line is drawn again below it with [`Self::resume_live`].
    fn suspend_live(&mut self) -> Option<String> {
        if !self.color || self.block != Block::None {
            return None;
        }
        let id = self.live.take()?;
        self.w("\r\x1b[2K");
        self.col = 0;
        Some(id)
    }

    fn resume_live(&mut self, id: Option<String>) {
        if let Some(id) = id {
            self.status_line(&id);
        }
    }

    fn plan(&mut self, update: &Value) {
        let live = self.suspend_live();
        self.start_block(Block::None);
        let (d, g, y, r) = (self.style(DIM), self.style(GREEN), self.style(YELLOW), self.style(RESET));
        self.w(&format!("{d}Plan{r}\n"));
        for entry in update["entries"].as_array().into_iter().flatten() {
            let text = entry["content"].as_str().unwrap_or_default();
            let line = match entry["status"].as_str() {
                Some("completed") => format!("  {g}☑{r} {d}{text}{r}"),
                Some("in_progress") => format!("  {y}◐{r} {text}"),
                _ => format!("  ☐ {text}"),
            };
            self.w(&line);
            self.w("\n");
        }
        self.resume_live(live);
    }

    /// The end of a turn: the footer with tokens and the context's fill.
    pub fn turn_end(&mut self, stop_reason: Option<&str>, usage: Option<&Value>) {
        self.start_block(Block::None);
        let (d, r) = (self.style(DIM), self.style(RESET));
        let mut parts = Vec::new();
        if let Some(reason) = stop_reason.filter(|r| *r != "end_turn") {
            parts.push(format!("stopped: {reason}"));
        }
        if let Some(u) = usage {
            let (i, o) = (u["inputTokens"].as_u64().unwrap_or(0), u["outputTokens"].as_u64().unwrap_or(0));
            parts.push(format!("{} in · {} out", thousands(i), thousands(o)));
        }
        if let Some((used, size)) = self.usage.filter(|(_, s)| *s > 0) {
            parts.push(format!("context {}% of {}", (used * 100).div_ceil(size), thousands(size)));
        }
        if !parts.is_empty() {
            self.w(&format!("{d}── {} ──{r}\n", parts.join(" · ")));
        }
        self.flush();
    }

    /// The terminal echoed `^C` where the cursor was: clear it from an empty line.
    pub fn erase_echo(&mut self) {
        if self.color && self.col == 0 && self.live.is_none() {
            self.w("\r\x1b[K");
        }
    }

    /// A line from the client itself (errors, notices).
    pub fn notice(&mut self, text: &str) {
        // A question about the running tool replaces its spinner; the answer brings it back.
        self.suspend_live();
        self.start_block(Block::None);
        let (y, r) = (self.style(YELLOW), self.style(RESET));
        self.w(&format!("{y}{text}{r}\n"));
        self.flush();
    }

    pub fn tool(&self, id: &str) -> Option<&ToolView> {
        self.tools.get(id)
    }
}

/// Unified diff lines of `old` → `new`: ('@', header), ('+'/'-'/' ', text).
pub fn diff_lines(old: &str, new: &str) -> Vec<(char, String)> {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push(('@', hunk.header().to_string()));
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            out.push((sign, change.value().to_owned()));
        }
    }
    out
}

/// The text without its escape sequences.
pub fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Columns the text takes on a terminal: escape sequences none, CJK and most emoji two.
fn visible_len(s: &str) -> usize {
    use unicode_width::UnicodeWidthStr;
    if s.contains('\x1b') { strip_escapes(s).width() } else { s.width() }
}

/// The longest head of `line` that fits in `columns`.
fn fit(line: &str, columns: usize) -> &str {
    use unicode_width::UnicodeWidthChar;
    let mut used = 0;
    for (i, c) in line.char_indices() {
        used += c.width().unwrap_or(0);
        if used > columns {
            return &line[..i];
        }
    }
    line
}

fn duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{}ms", d.as_millis()) } else { format!("{:.1}s", d.as_secs_f64()) }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plain() -> Renderer<Vec<u8>> {
        Renderer::new(Vec::new(), false, 80, Thoughts::Show)
    }

    fn text_of(r: Renderer<Vec<u8>>) -> String {
        String::from_utf8(r.into_inner()).unwrap()
    }

    fn chunk(text: &str) -> Value {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    }

    #[test]
    fn plain_output_is_the_text_itself() {
        let mut r = plain();
        for piece in ["Hel", "lo wor", "ld\n``", "`rust\nfn main() {}\n", "```\n# Done", " now"] {
            r.update(&chunk(piece));
        }
        r.turn_end(Some("end_turn"), None);
        assert_eq!(text_of(r), "Hello world\n```rust\nfn main() {}\n```\n# Done now\n");
    }

    #[test]
    fn a_run_of_hashes_costs_its_length_not_its_square() {
        // Quadratic handling took seconds for a few hundred thousand; this finishes at once.
        let mut r = plain();
        r.update(&chunk(&"#".repeat(300_000)));
        r.update(&chunk(" heading\n"));
        r.turn_end(None, None);
        assert!(text_of(r).ends_with(" heading\n"));
    }

    #[test]
    fn wide_characters_wrap_by_the_columns_they_take() {
        use unicode_width::UnicodeWidthStr;
        let mut r = Renderer::new(Vec::new(), true, 20, Thoughts::Show);
        // Six CJK words of 4 columns each (2 characters), and emoji, which take two columns too.
        r.update(&chunk("漢字 漢字 漢字 漢字 漢字 漢字 👋👋 👋👋 👋👋 👋👋\n"));
        r.turn_end(None, None);
        let visible = strip(&text_of(r));
        let lines: Vec<&str> = visible.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
        for line in &lines {
            assert!(line.width() <= 20, "{line:?} is {} columns in {visible:?}", line.width());
        }
        assert_eq!(lines[0], "漢字 漢字 漢字 漢字", "four words of 4 columns and 3 spaces: 19 columns");
        assert_eq!(fit("漢字漢字", 5), "漢字", "a wide character never straddles the edge");
    }

    #[test]
    fn terminals_get_wrapped_prose_and_fenced_code_apart() {
        let mut r = Renderer::new(Vec::new(), true, 20, Thoughts::Show);
        r.update(&chunk("alpha beta gamma delta epsilon zeta\n```\nlet a_long_line_of_code = 1;\n```\n"));
        r.turn_end(None, None);
        let out = text_of(r);
        let visible = strip(&out);
        for line in visible.lines().take(2) {
            assert!(line.chars().count() <= 20, "{line:?} in {visible:?}");
        }
        assert!(visible.contains("alpha beta gamma\ndelta epsilon zeta\n"), "{visible:?}");
        assert!(visible.contains("│ let a_long_line_of_code = 1;"), "code is not wrapped: {visible:?}");
        assert!(out.contains(CYAN));

        let mut r = Renderer::new(Vec::new(), true, 80, Thoughts::Show);
        r.update(&chunk("Use **bold** and `co"));
        r.update(&chunk("de` here"));
        r.turn_end(None, None);
        let out = text_of(r);
        assert_eq!(strip(&out), "Use bold and code here\n");
        assert!(out.contains(&format!("{BOLD}bold{RESET}")) && out.contains(&format!("{CYAN}code{RESET}")), "{out:?}");
    }

    #[test]
    fn tool_calls_show_status_diff_and_duration() {
        let mut r = plain();
        r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Edit a.rs", "kind": "edit",
            "status": "pending", "content": [{"type": "diff", "path": "/w/a.rs", "oldText": "a\nb\n", "newText": "a\nc\n"}]}));
        r.update(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}));
        r.update(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}));
        r.update(&json!({"sessionUpdate": "plan", "entries": [
            {"content": "Fix", "status": "completed", "priority": "high"},
            {"content": "Test", "status": "in_progress", "priority": "high"}]}));
        let out = text_of(r);
        assert!(out.starts_with("· Edit a.rs\n✓ Edit a.rs ("), "{out}");
        assert!(out.contains("  /w/a.rs\n  @@ -1,2 +1,2 @@\n   a\n  -b\n  +c\n"), "{out}");
        assert!(out.contains("Plan\n  ☑ Fix\n  ◐ Test\n"), "{out}");
    }

    #[test]
    fn thoughts_fold_and_the_footer_counts() {
        let mut r = Renderer::new(Vec::new(), false, 80, Thoughts::Fold);
        r.update(
            &json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "secret musing"}}),
        );
        r.update(&chunk("Answer."));
        r.update(&json!({"sessionUpdate": "usage_update", "used": 50_000, "size": 200_000}));
        r.turn_end(Some("end_turn"), Some(&json!({"inputTokens": 1234, "outputTokens": 56})));
        let out = text_of(r);
        assert!(!out.contains("secret"));
        assert_eq!(out, "(thinking…)\n\nAnswer.\n── 1,234 in · 56 out · context 25% of 200,000 ──\n");
    }

    fn strip(s: &str) -> String {
        strip_escapes(s)
    }
}
