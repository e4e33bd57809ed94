//! NDJSON framing: splits a byte stream into '\n'-terminated lines with a maximum line size.
//! Never panics on bad bytes; an oversized line is reported once and then skipped up to its newline
//! without being buffered, so the connection lives on.

/// Default maximum size of one line: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One framing result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its terminator (a trailing '\r' is removed too). Never empty.
    Line(Vec<u8>),
    /// A line grew past the limit. It is reported as soon as the limit is crossed; the rest of it,
    /// up to the next '\n', is discarded.
    TooLong { limit: usize },
}

/// Incremental line splitter (sans I/O): feed it chunks as they arrive.
#[derive(Debug)]
pub struct LineDecoder {
    max_line_bytes: usize,
    buf: Vec<u8>,
    discarding: bool,
}

impl Default for LineDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl LineDecoder {
    pub fn new(max_line_bytes: usize) -> Self {
        Self { max_line_bytes: max_line_bytes.max(1), buf: Vec::new(), discarding: false }
    }

    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Splits `chunk` into frames, appending them to `out`. A partial line is kept for the next call.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            match memchr::memchr(b'\n', chunk) {
                Some(i) => {
                    self.piece(&chunk[..i], true, out);
                    chunk = &chunk[i + 1..];
                }
                None => {
                    self.piece(chunk, false, out);
                    break;
                }
            }
        }
    }

    /// Call at end of input: an unterminated last line is still delivered.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if self.discarding {
            self.discarding = false;
        } else if !self.buf.is_empty() {
            self.piece(&[], true, out);
        }
    }

    fn piece(&mut self, piece: &[u8], complete: bool, out: &mut Vec<Frame>) {
        if self.discarding {
            if complete {
                self.discarding = false;
            }
            return;
        }
        // A '\r' before the '\n' does not count against the limit.
        let effective = if complete && piece.last() == Some(&b'\r') { piece.len() - 1 } else { piece.len() };
        if self.buf.len() + effective > self.max_line_bytes {
            out.push(Frame::TooLong { limit: self.max_line_bytes });
            self.buf = Vec::new();
            self.discarding = !complete;
            return;
        }
        self.buf.extend_from_slice(piece);
        if complete {
            let mut line = std::mem::take(&mut self.buf);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                out.push(Frame::Line(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut d = LineDecoder::new(max);
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        d.finish(&mut out);
        out
    }

    fn line(s: &str) -> Frame {
        Frame::Line(s.as_bytes().to_vec())
    }

    #[test]
    fn splits_lines_across_chunks() {
        assert_eq!(frames(100, &[b"ab", b"c\nde", b"f\n"]), vec![line("abc"), line("def")]);
    }

    #[test]
    fn crlf_and_blank_lines() {
        assert_eq!(frames(100, &[b"a\r\n\r\n\n  \nb\r", b"\n"]), vec![line("a"), line("b")]);
    }

    #[test]
    fn unterminated_last_line_is_delivered() {
        assert_eq!(frames(100, &[b"a\nb"]), vec![line("a"), line("b")]);
    }

    #[test]
    fn oversized_line_is_reported_once_and_skipped() {
        let out = frames(4, &[b"ok\n12", b"345", b"6789\nnext\n"]);
        assert_eq!(out, vec![line("ok"), Frame::TooLong { limit: 4 }, line("next")]);
    }

    #[test]
    fn line_of_exactly_the_limit_passes() {
        assert_eq!(frames(4, &[b"1234\r\n1234\n"]), vec![line("1234"), line("1234")]);
        assert_eq!(frames(4, &[b"12345\n"]), vec![Frame::TooLong { limit: 4 }]);
    }

    #[test]
    fn invalid_utf8_passes_through_as_bytes() {
        assert_eq!(frames(100, &[b"\xff\xfe\n"]), vec![Frame::Line(vec![0xff, 0xfe])]);
    }

    #[test]
    fn oversized_unterminated_tail_is_dropped_at_eof() {
        assert_eq!(frames(2, &[b"abcdef"]), vec![Frame::TooLong { limit: 2 }]);
    }
}
