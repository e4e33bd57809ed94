//! Turns `session/update`s into terminal output as they arrive: reply text and thoughts
//! (`prose.rs`), tool calls, plans and the footer (`tools.rs`), and the notices of the client
//! itself. Without a terminal (`color: false`) the same content comes out as plain text without
//! escape codes.

mod prose;
mod tools;

use std::collections::HashMap;
use std::io::Write;

use crossterm::queue;
use crossterm::style::Print;
use crossterm::terminal::{Clear, ClearType};
use serde_json::Value;

use crate::host::Terminals;
use crate::look::Look;
use prose::Prose;
pub use prose::strip_escapes;
pub use tools::{ToolView, diff_lines};

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

/// The renderer; `W` is the terminal (or a pipe, or a buffer in tests).
pub struct Renderer<W: Write> {
    out: W,
    color: bool,
    width: usize,
    thoughts: Thoughts,
    block: Block,
    /// Current column of the cursor (0 = at the start of a line).
    col: usize,
    /// Where streamed text stands (held text, open fences and styles).
    prose: Prose,
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
            prose: Prose::default(),
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

    /// `look` on a terminal, none without one.
    fn style(&self, look: Look) -> Look {
        look.on(self.color)
    }

    /// Writes what turns `look` on.
    fn set(&mut self, look: Look) {
        let _ = write!(self.out, "{look}");
    }

    /// Back to the start of the line, erasing it from there (`CurrentLine`: all of it).
    fn erase(&mut self, clear: ClearType) {
        let _ = queue!(self.out, Print('\r'), Clear(clear));
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
            // The agent's own words (not the model's): a notice line.
            "agent_message_chunk" if update["_meta"]["notice"] == true => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.notice(text.trim_end());
                }
            }
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
        let (b, r) = (self.style(Look::BOLD), self.style(Look::RESET));
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
        self.prose.space = false;
        if self.block != Block::None || self.live.is_some() || self.col > 0 {
            if self.col > 0 {
                self.w("\n");
            }
            if self.block != Block::None && block != Block::None {
                self.w("\n");
            }
        }
        if self.prose.in_fence || self.prose.heading {
            let r = self.style(Look::RESET);
            self.set(r);
        }
        self.col = 0;
        self.prose.at_line_start = true;
        self.prose.in_fence = false;
        self.prose.heading = false;
        self.live = None;
        self.block = block;
    }

    /// The terminal echoed `^C` where the cursor was: clear it from an empty line.
    pub fn erase_echo(&mut self) {
        if self.color && self.col == 0 && self.live.is_none() {
            self.erase(ClearType::UntilNewLine);
        }
    }

    /// A line from the client itself (errors, notices).
    pub fn notice(&mut self, text: &str) {
        // A question about the running tool replaces its spinner; the answer brings it back.
        self.suspend_live();
        self.start_block(Block::None);
        let (y, r) = (self.style(Look::YELLOW), self.style(Look::RESET));
        self.w(&format!("{y}{text}{r}\n"));
        self.flush();
    }

    pub fn tool(&self, id: &str) -> Option<&ToolView> {
        self.tools.get(id)
    }
}

/// What the renderer's tests share.
#[cfg(test)]
mod testing {
    use serde_json::{Value, json};

    use super::*;

    pub(super) fn plain() -> Renderer<Vec<u8>> {
        Renderer::new(Vec::new(), false, 80, Thoughts::Show)
    }

    pub(super) fn text_of(r: Renderer<Vec<u8>>) -> String {
        String::from_utf8(r.into_inner()).unwrap()
    }

    pub(super) fn chunk(text: &str) -> Value {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    }

    pub(super) fn strip(s: &str) -> String {
        strip_escapes(s)
    }
}
