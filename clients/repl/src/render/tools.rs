//! Tool calls, plans and the end of a turn on screen: one status line per tool call, updated in
//! place on a terminal (spinner, then ✓/✗ with the duration), its diff and output below it;
//! plans as checklists; and the footer with tokens and the context's fill.

use std::io::Write;
use std::time::{Duration, Instant};

use crossterm::terminal::ClearType;
use serde_json::Value;

use super::{Block, Renderer};
use crate::look::Look;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const DIFF_LINES: usize = 40;
const OUTPUT_LINES: usize = 10;

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

impl<W: Write> Renderer<W> {
    pub(super) fn tool_call(&mut self, update: &Value) {
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

    pub(super) fn tool_call_update(&mut self, update: &Value) {
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
        let (g, red, y, r) =
            (self.style(Look::GREEN), self.style(Look::RED), self.style(Look::YELLOW), self.style(Look::RESET));
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
                self.erase(ClearType::CurrentLine);
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
        let (d, r) = (self.style(Look::DIM), self.style(Look::RESET));
        let time = took.map(|t| format!(" {d}({}){r}", duration(t))).unwrap_or_default();
        if self.color && self.live.as_deref() == Some(id) {
            self.erase(ClearType::CurrentLine);
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
                } else if item["content"]["type"] == "image" {
                    // A terminal shows what it is, not the picture.
                    let mime = item["content"]["mimeType"].as_str().unwrap_or("image");
                    let bytes = item["content"]["data"].as_str().map_or(0, |d| d.len() * 3 / 4);
                    self.output_tail(&format!("[image: {mime}, {:.1} KB]", bytes as f64 / 1024.0));
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
        let (d, r) = (self.style(Look::DIM), self.style(Look::RESET));
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
        let (b, g, red, c, r) = (
            self.style(Look::BOLD),
            self.style(Look::GREEN),
            self.style(Look::RED),
            self.style(Look::CYAN),
            self.style(Look::RESET),
        );
        self.w(&format!("  {b}{path}{r}\n"));
        for (sign, text) in lines.iter().take(DIFF_LINES) {
            let colour = match sign {
                '+' => g,
                '-' => red,
                '@' => c,
                _ => Look::Plain,
            };
            let shown = if *sign == '@' { text.clone() } else { format!("{sign}{text}") };
            self.w(&format!("  {colour}{}{r}\n", shown.trim_end_matches('\n')));
        }
        if lines.len() > DIFF_LINES {
            let d = self.style(Look::DIM);
            self.w(&format!("  {d}… {} more lines{r}\n", lines.len() - DIFF_LINES));
        }
    }

    /// Clears a running tool's status line (on a terminal) so a block can be printed in its place;
    /// the line is drawn again below it with [`Self::resume_live`].
    pub(super) fn suspend_live(&mut self) -> Option<String> {
        if !self.color || self.block != Block::None {
            return None;
        }
        let id = self.live.take()?;
        self.erase(ClearType::CurrentLine);
        self.col = 0;
        Some(id)
    }

    fn resume_live(&mut self, id: Option<String>) {
        if let Some(id) = id {
            self.status_line(&id);
        }
    }

    pub(super) fn plan(&mut self, update: &Value) {
        let live = self.suspend_live();
        self.start_block(Block::None);
        let (d, g, y, r) =
            (self.style(Look::DIM), self.style(Look::GREEN), self.style(Look::YELLOW), self.style(Look::RESET));
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
        let (d, r) = (self.style(Look::DIM), self.style(Look::RESET));
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

/// The longest head of `line` that fits in `columns`.
pub(super) fn fit(line: &str, columns: usize) -> &str {
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

    use super::super::Thoughts;
    use super::super::testing::{chunk, plain, text_of};
    use super::*;

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
    fn images_are_named_not_drawn() {
        let mut r = plain();
        r.update(
            &json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Get Tiny Image Tool (everything)",
            "kind": "read", "status": "pending"}),
        );
        r.update(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "content": [
            {"type": "content", "content": {"type": "text", "text": "Here is an image:"}},
            {"type": "content", "content": {"type": "image", "mimeType": "image/png", "data": "A".repeat(4096)}}]}));
        let out = text_of(r);
        assert!(out.contains("Here is an image:"), "{out}");
        assert!(out.contains("[image: image/png, 3.0 KB]"), "{out}");
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
}
