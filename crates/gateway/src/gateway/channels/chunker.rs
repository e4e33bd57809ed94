//! Block streaming for channels that cannot edit a message: the reply, as it streams, is cut into
//! messages of `min_chars..=max_chars` characters. A cut prefers, within that window, a paragraph
//! break, then a line break, then a sentence end, then a space; never inside a code fence — when
//! a fence is longer than a message, it is closed at the cut and reopened (with its language) in
//! the next message, so every message is valid Markdown. The channel's hard limit caps
//! `max_chars`.

/// Where to cut, in order of preference.
const BREAKS: [&str; 3] = ["\n\n", "\n", ". "];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nothing is sent before this many characters have gathered (unless the reply ends).
    pub min_chars: usize,
    /// No message is longer.
    pub max_chars: usize,
}

impl Limits {
    /// `min..=max`, with `max` capped by the channel's hard limit (and `min` by `max`).
    pub fn new(min_chars: usize, max_chars: usize, hard_limit: usize) -> Self {
        // Room for a fence closed and reopened at a forced cut.
        let max_chars = max_chars.min(hard_limit).max(32);
        Self { min_chars: min_chars.min(max_chars), max_chars }
    }
}

#[derive(Debug)]
pub struct Chunker {
    limits: Limits,
    buf: String,
    /// The fence open at the start of `buf` (its opening line, e.g. "```rust"), carried over from
    /// a forced cut.
    reopen: Option<String>,
}

/// `text` as messages of at most `limit` characters (as it is, if it fits): for what was not
/// cut as it streamed (a question, a command's answer, `send`).
pub fn cut(text: &str, limit: usize) -> Vec<String> {
    if text.chars().count() <= limit {
        return vec![text.to_owned()];
    }
    let mut chunker = Chunker::new(Limits::new(limit, limit, limit));
    let mut pieces = chunker.push(text);
    pieces.extend(chunker.finish());
    pieces
}

impl Chunker {
    pub fn new(limits: Limits) -> Self {
        Self { limits, buf: String::new(), reopen: None }
    }

    /// Adds streamed text; returns the messages now ready.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.buf.push_str(text);
        self.drain(false)
    }

    /// Adds text to send when the reply ends (nothing is cut now).
    pub fn push_held(&mut self, text: &str) {
        self.buf.push_str(text);
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The reply paused (the model is running a tool, say): what has gathered goes out now,
    /// unless it ends inside an open code fence (then it waits for the fence to close) or stops
    /// mid-line.
    pub fn idle(&mut self) -> Vec<String> {
        let open = fence_spans(&self.buf).last().is_some_and(|(_, end)| *end == usize::MAX);
        if open || self.buf.trim().is_empty() || !self.buf.trim_end_matches(' ').ends_with(['\n', '.', '!', '?', ':']) {
            return Vec::new();
        }
        self.drain(true)
    }

    /// The reply ended: everything left, as messages.
    pub fn finish(&mut self) -> Vec<String> {
        let out = self.drain(true);
        self.buf.clear();
        self.reopen = None;
        out
    }

    fn drain(&mut self, ending: bool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let chars = self.buf.chars().count();
            if chars == 0 || (!ending && chars < self.limits.min_chars) {
                break;
            }
            if ending && chars <= self.limits.max_chars {
                let last = std::mem::take(&mut self.buf);
                if !last.trim().is_empty() {
                    out.push(last.trim_end().to_owned());
                }
                break;
            }
            let before = self.buf.len();
            match self.cut(ending) {
                // Every cut takes text off the front; should one not, cut plainly at the limit.
                Some(_) if self.buf.len() >= before && self.reopen.is_some() => {
                    self.reopen = None;
                    let at = byte_at(&self.buf, self.limits.max_chars);
                    out.push(self.split(at, None));
                }
                Some(message) => {
                    if !message.trim().is_empty() {
                        out.push(message);
                    }
                }
                None => break,
            }
        }
        out
    }

    /// Takes one message off the front of the buffer, if one is due.
    fn cut(&mut self, ending: bool) -> Option<String> {
        let max = byte_at(&self.buf, self.limits.max_chars);
        let min = byte_at(&self.buf, self.limits.min_chars.max(1));
        let fences = fence_spans(&self.buf);
        let outside = |at: usize| !fences.iter().any(|(start, end)| *start < at && at < *end);
        // The best break in the window, by preference, the latest of its kind.
        for pattern in BREAKS {
            let found = self.buf[..max]
                .match_indices(pattern)
                .map(|(i, p)| i + p.len())
                .filter(|&at| at >= min && outside(at))
                .last();
            if let Some(at) = found {
                return Some(self.split(at, None));
            }
        }
        // No paragraph, line or sentence end yet: wait for one while there is room, rather than
        // cut mid-sentence; a full buffer is cut at its last space.
        let full = self.buf.len() > max;
        if !full && !ending {
            return None;
        }
        if let Some(at) = self.buf[..max]
            .char_indices()
            .rev()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())
            .find(|&at| at >= min && outside(at))
        {
            return Some(self.split(at, None));
        }
        // Forced: cut at the limit; inside a fence, close it here and reopen it after.
        let open = fences.iter().find(|(start, end)| *start < max && max < *end).map(|(start, _)| *start);
        if let Some(start) = open {
            let opener_end = self.buf[start..].find('\n').map_or(self.buf.len(), |i| start + i + 1);
            // Room for the closing line; whole lines when one fits, else mid-line.
            let limit = byte_at(&self.buf, self.limits.max_chars.saturating_sub(4));
            if limit > opener_end {
                let opener = self.buf[start..opener_end].trim_end().to_owned();
                let at = self.buf[..limit].rfind('\n').map(|n| n + 1).filter(|&at| at > opener_end).unwrap_or(limit);
                return Some(self.split(at, Some(opener)));
            }
            // The fence opens too near the limit to hold anything: cut before it.
            if start > 0 {
                return Some(self.split(start, None));
            }
        }
        Some(self.split(max, None))
    }

    /// The first `at` bytes as a message; `reopen`: the fence open at the cut.
    fn split(&mut self, at: usize, reopen: Option<String>) -> String {
        let rest = self.buf.split_off(at);
        let mut message = std::mem::replace(&mut self.buf, rest);
        if let Some(opener) = &reopen {
            if !message.ends_with('\n') {
                message.push('\n');
            }
            message.push_str("```");
            self.buf.insert_str(0, &format!("{opener}\n"));
        }
        self.reopen = reopen;
        message.trim_end().to_owned()
    }
}

/// The byte offset of character `n` (or the end).
fn byte_at(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// The byte spans of code fences in `text`, from the start of the opening line to the end of the
/// closing one (or the end of the text while open). Text carried over from a forced cut begins
/// with its reopened fence, so it needs no special case.
fn fence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            match open {
                None => open = Some(at),
                Some(start) => {
                    spans.push((start, at + line.len()));
                    open = None;
                }
            }
        }
        at += line.len();
    }
    if let Some(start) = open {
        spans.push((start, usize::MAX));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(limits: Limits, pieces: &[&str]) -> Vec<String> {
        let mut c = Chunker::new(limits);
        let mut out: Vec<String> = pieces.iter().flat_map(|p| c.push(p)).collect();
        out.extend(c.finish());
        out
    }

    fn fences_balanced(message: &str) -> bool {
        message.lines().filter(|l| l.trim_start().starts_with("```")).count() % 2 == 0
    }

    #[test]
    fn streaming_never_cuts_mid_sentence_while_a_sentence_end_can_still_come() {
        let sentence = "This sentence says a little more than nothing at all. ";
        let paragraph = sentence.repeat(20);
        let text = format!("{paragraph}\n\n{paragraph}\n\n{paragraph}");
        let pieces: Vec<String> = text.chars().collect::<Vec<_>>().chunks(50).map(|c| c.iter().collect()).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let out = all(Limits::new(800, 1200, 4096), &refs);
        for message in &out[..out.len() - 1] {
            assert!(message.ends_with('.'), "cut mid-sentence: …{}", &message[message.len().saturating_sub(40)..]);
            assert!((800..=1200).contains(&message.chars().count()), "{}", message.len());
        }
        assert_eq!(out.join(" ").split_whitespace().count(), text.split_whitespace().count());
    }

    #[test]
    fn a_pause_sends_what_gathered_unless_mid_fence_or_mid_line() {
        let mut c = Chunker::new(Limits::new(800, 1200, 4096));
        assert!(c.push("Let me look at the file.").is_empty());
        assert_eq!(c.idle(), vec!["Let me look at the file.".to_owned()]);
        assert!(c.idle().is_empty(), "nothing is sent twice");
        assert!(c.push("It says").is_empty());
        assert!(c.idle().is_empty(), "mid-line text waits");
        assert!(c.push(":\n```rust\nfn main() {\n").is_empty());
        assert!(c.idle().is_empty(), "an open fence waits for its end");
        c.push("}\n```\n");
        assert_eq!(c.idle(), vec!["It says:\n```rust\nfn main() {\n}\n```".to_owned()]);
        assert!(c.finish().is_empty());
    }

    #[test]
    fn paragraphs_beat_lines_beat_sentences_beat_spaces() {
        let limits = Limits::new(10, 60, 4096);
        let text = "First paragraph here.\n\nSecond one, rather longer than the first. It goes on and on.";
        let out = all(limits, &[text]);
        assert_eq!(out[0], "First paragraph here.");
        assert!(out.iter().all(|m| m.chars().count() <= 60), "{out:?}");
        let text = "line one is here\nline two is here\nline three is here\nline four is here";
        let out = all(Limits::new(10, 40, 4096), &[text]);
        assert_eq!(out[0], "line one is here\nline two is here");
        let text = "One sentence is here. Another sentence follows it, and then some words without end";
        let out = all(Limits::new(10, 40, 4096), &[text]);
        assert_eq!(out[0], "One sentence is here.");
    }

    #[test]
    fn nothing_is_sent_before_min_chars_unless_the_reply_ends() {
        let mut c = Chunker::new(Limits::new(50, 100, 4096));
        assert!(c.push("Short. ").is_empty());
        assert!(c.push("Still short.\n\n").is_empty());
        assert_eq!(c.finish(), ["Short. Still short."]);
    }

    #[test]
    fn streamed_text_is_cut_the_same_and_nothing_is_lost() {
        let text = "Alpha beta gamma. Delta epsilon zeta.\n\nEta theta iota kappa lambda mu nu xi omicron pi rho sigma tau.\nUpsilon phi chi psi omega.";
        let limits = Limits::new(15, 45, 4096);
        let pieces: Vec<String> = text.chars().collect::<Vec<_>>().chunks(3).map(|c| c.iter().collect()).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let out = all(limits, &refs);
        assert!(out.iter().all(|m| m.chars().count() <= 45), "{out:?}");
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&out.join(" ")), words(text), "every word, in order");
    }

    #[test]
    fn a_code_fence_is_never_split_when_it_fits() {
        let text = "Intro text here.\n\n```rust\nfn main() {\n    let x = 1;\n}\n```\n\nAfter the code, more words.";
        let out = all(Limits::new(10, 70, 4096), &[text]);
        assert!(out.iter().all(|m| fences_balanced(m)), "{out:#?}");
        assert!(out.iter().any(|m| m.contains("fn main() {\n    let x = 1;\n}")), "{out:#?}");
    }

    #[test]
    fn a_fence_longer_than_a_message_is_closed_and_reopened() {
        let body: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here:\n\n```rust\n{body}```\n\nDone.");
        let limits = Limits::new(20, 120, 4096);
        let out = all(limits, &[&text]);
        assert!(out.len() > 3, "{out:#?}");
        for m in &out {
            assert!(m.chars().count() <= 120, "{m}");
            assert!(fences_balanced(m), "every message is valid Markdown:\n{m}");
        }
        let reopened = out.iter().filter(|m| m.starts_with("```rust\n")).count();
        assert!(reopened >= 2, "{out:#?}");
        // The code survives whole: every line once, in order.
        let code: Vec<&str> = out.iter().flat_map(|m| m.lines()).filter(|l| l.starts_with("let x")).collect();
        let expected: Vec<String> = (0..40).map(|i| format!("let x{i} = {i};")).collect();
        assert_eq!(code, expected);
    }

    #[test]
    fn a_word_longer_than_a_message_is_cut_at_the_limit_and_the_hard_limit_caps_max() {
        let limits = Limits::new(5, 10_000, 50);
        assert_eq!(limits.max_chars, 50);
        let word = "x".repeat(120);
        let out = all(limits, &[&word]);
        assert_eq!(out.iter().map(|m| m.chars().count()).collect::<Vec<_>>(), [50, 50, 20]);
        // Characters, not bytes.
        let out = all(Limits::new(5, 40, 4096), &["é".repeat(100).as_str()]);
        assert!(out.iter().all(|m| m.chars().count() <= 40), "{out:?}");
        assert_eq!(out.concat().chars().count(), 100);
    }

    #[test]
    fn any_text_in_any_pieces_gives_valid_bounded_messages_with_every_word() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let words = [
            "alpha",
            "beta.",
            "gamma\n",
            "delta\n\n",
            "ε",
            "```py\n",
            "```\n",
            "x = 1\n",
            "long-word-without-any-break",
        ];
        for _ in 0..1_000 {
            let mut text = String::new();
            let mut fence_open = false;
            for _ in 0..next(120) {
                let w = words[next(words.len() as u64) as usize];
                if w.starts_with("```") {
                    // Fences open and close properly, each on its own line.
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(if fence_open { "```\n" } else { "```py\n" });
                    fence_open = !fence_open;
                } else {
                    text.push_str(w);
                    text.push(' ');
                }
            }
            if fence_open {
                text.push_str("\n```\n");
            }
            let max = 32 + next(200) as usize;
            let limits = Limits::new(next(max as u64) as usize, max, 4096);
            let mut pieces = Vec::new();
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let n = byte_at(rest, 1 + next(40) as usize);
                pieces.push(&rest[..n]);
                rest = &rest[n..];
            }
            let out = all(limits, &pieces);
            for m in &out {
                assert!(m.chars().count() <= limits.max_chars, "{limits:?} {m:?}");
                assert!(fences_balanced(m), "{m:?}\nfrom {text:?}");
            }
            let strip =
                |s: &str| s.split_whitespace().filter(|w| !w.starts_with("```")).map(str::to_owned).collect::<String>();
            assert_eq!(strip(&out.join("\n")), strip(&text), "{limits:?}\n{text:?}\n{out:#?}");
        }
    }
}
