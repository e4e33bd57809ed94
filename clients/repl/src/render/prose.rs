//! Reply and thought text as it streams in, Markdown-aware: code fences set apart (dim, `│ `
//! on a terminal, never wrapped), headings bold, `**bold**` and `` `code` `` styled, prose
//! word-wrapped to the terminal's width by the columns characters take. Text that may still turn
//! out to be a fence, a heading or a word too long for the line is held back until it is known.

use std::fmt::Write as _;
use std::io::Write;

use super::{Block, Renderer, Thoughts};
use crate::look::Look;

/// Where streamed text stands between chunks.
#[derive(Debug)]
pub(super) struct Prose {
    /// Text held back: the start of a line that may be a fence, or a word that may need wrapping.
    pub(super) pending: String,
    pub(super) in_fence: bool,
    /// The rest of a fence line (its info string) is being printed.
    pub(super) fence_info: bool,
    /// A space to print before the next word (terminals, where words wrap).
    pub(super) space: bool,
    /// Inside `**…**` / `` `…` `` (terminals only).
    pub(super) bold: bool,
    pub(super) code: bool,
    pub(super) at_line_start: bool,
    pub(super) heading: bool,
}

impl Default for Prose {
    fn default() -> Self {
        Self {
            pending: String::new(),
            in_fence: false,
            fence_info: false,
            space: false,
            bold: false,
            code: false,
            at_line_start: true,
            heading: false,
        }
    }
}

impl<W: Write> Renderer<W> {
    /// A thought: dim and italic, or a single `(thinking…)` when thoughts are folded.
    pub(super) fn thought(&mut self, text: &str) {
        if self.thoughts == Thoughts::Fold {
            if self.block != Block::Thought {
                self.start_block(Block::Thought);
                let (d, r) = (self.style(Look::DIM), self.style(Look::RESET));
                self.w(&format!("{d}(thinking…){r}"));
                self.col = 11;
            }
            return;
        }
        self.start_block(Block::Thought);
        let (d, i, r) = (self.style(Look::DIM), self.style(Look::ITALIC), self.style(Look::RESET));
        self.w(&format!("{d}{i}"));
        self.stream(text);
        self.set(r);
    }

    /// Reply text, Markdown-aware.
    pub fn text(&mut self, text: &str) {
        self.start_block(Block::Text);
        self.stream(text);
    }

    /// Streams text: fences toggled at line starts, headings bold, words wrapped.
    fn stream(&mut self, text: &str) {
        for ch in text.chars() {
            if self.prose.at_line_start {
                // What is held at a line start is `#`s, then maybe backticks: it is all `#`s when it
                // does not end in a backtick (checked in O(1): a run of a million `#` stays linear).
                let heading_mark = ch == '#' && !self.prose.in_fence && !self.prose.pending.ends_with('`');
                if ch == '`' || heading_mark {
                    self.prose.pending.push(ch);
                    if self.prose.pending == "```" {
                        self.fence_line_start();
                    }
                    continue;
                }
                if ch != '\n' {
                    self.prose.at_line_start = false;
                    let held = std::mem::take(&mut self.prose.pending);
                    if self.prose.in_fence {
                        if self.color {
                            self.w(&format!("{}│ ", Look::CYAN));
                            self.col = 2;
                        }
                        self.raw(&held);
                    } else {
                        if held.starts_with('#') && ch == ' ' {
                            self.prose.heading = true;
                            let b = self.style(Look::BOLD);
                            self.set(b);
                        }
                        self.prose.pending = held;
                    }
                }
            }
            if ch == '\n' {
                self.newline();
                continue;
            }
            if self.prose.in_fence {
                let mut b = [0u8; 4];
                self.raw(ch.encode_utf8(&mut b));
            } else if ch == ' ' {
                self.release_word();
                if !self.color {
                    self.raw(" ");
                } else if self.col > 0 {
                    // Printed before the next word, if that word fits on this line.
                    self.prose.space = true;
                }
            } else {
                self.prose.pending.push(ch);
            }
        }
    }

    /// "```" at the start of a line: the rest of the line is the fence's info string.
    fn fence_line_start(&mut self) {
        self.prose.pending.clear();
        self.prose.in_fence = !self.prose.in_fence;
        self.prose.at_line_start = false;
        let (d, r) = (self.style(Look::DIM), self.style(Look::RESET));
        if self.prose.in_fence {
            self.w(&format!("{d}```"));
        } else {
            self.w(&format!("{r}{d}```"));
        }
        self.col = 3;
        // Mark: the info string (and the rest of the line) is printed dim, then reset at '\n'.
        self.prose.fence_info = true;
    }

    fn newline(&mut self) {
        if !self.prose.at_line_start || !self.prose.pending.is_empty() {
            self.release_pending();
        }
        let r = self.style(Look::RESET);
        if self.prose.heading || self.prose.fence_info || self.prose.in_fence {
            self.set(r);
        }
        if self.prose.bold || self.prose.code {
            self.set(Look::RESET);
            let resume = self.resume_styles_after_line();
            self.w(&resume);
        }
        self.prose.heading = false;
        self.prose.fence_info = false;
        self.prose.space = false;
        self.prose.bold = false;
        self.prose.code = false;
        self.w("\n");
        self.col = 0;
        self.prose.at_line_start = true;
    }

    fn raw(&mut self, s: &str) {
        self.w(s);
        self.col += visible_len(s);
    }

    /// Prints the held word, on a new line if it would not fit.
    fn release_word(&mut self) {
        if self.prose.pending.is_empty() {
            return;
        }
        let mut word = std::mem::take(&mut self.prose.pending);
        if self.color && !self.prose.in_fence {
            word = self.inline_styles(&word);
        }
        let len = visible_len(&word);
        let space = std::mem::take(&mut self.prose.space);
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
            if let Some(after) = rest.strip_prefix("**").filter(|_| !self.prose.code) {
                self.prose.bold = !self.prose.bold;
                let _ = write!(out, "{}", if self.prose.bold { Look::BOLD } else { Look::RESET });
                if !self.prose.bold {
                    out.push_str(&self.resume_styles());
                }
                rest = after;
            } else if let Some(after) = rest.strip_prefix('`') {
                self.prose.code = !self.prose.code;
                let _ = write!(out, "{}", if self.prose.code { Look::CYAN } else { Look::RESET });
                if !self.prose.code {
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
        if self.block == Block::Thought { format!("{}{}", Look::DIM, Look::ITALIC) } else { String::new() }
    }

    /// The styles still in force after a reset.
    fn resume_styles(&self) -> String {
        let mut out = String::new();
        if self.prose.bold || self.prose.heading {
            let _ = write!(out, "{}", Look::BOLD);
        }
        if self.block == Block::Thought {
            let _ = write!(out, "{}{}", Look::DIM, Look::ITALIC);
        }
        out
    }

    /// Prints anything held back (the end of a message, or before other output).
    pub fn release_pending(&mut self) {
        if self.prose.pending.is_empty() {
            return;
        }
        if self.prose.at_line_start {
            let held = std::mem::take(&mut self.prose.pending);
            self.prose.at_line_start = false;
            self.raw(&held);
        } else {
            self.release_word();
        }
    }
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

#[cfg(test)]
mod tests {
    use super::super::testing::{chunk, plain, strip, text_of};
    use super::super::tools::fit;
    use super::*;

    // The bytes terminals have always been sent for these looks.
    const RESET: &str = "\x1b[0m";
    const BOLD: &str = "\x1b[1m";
    const CYAN: &str = "\x1b[36m";

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
}
