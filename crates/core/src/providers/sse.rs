//! A spec-exact Server-Sent Events parser (WHATWG "event stream interpretation"), sans I/O: leading
//! BOM, CR / LF / CRLF line ends (a CR at the end of a chunk may be half of a CRLF), UTF-8 split
//! across chunks, comments, multi-line data, and a maximum event size. Fields the spec ignores are
//! kept in `other`, because some servers (llama.cpp) report errors in an `error:` field.

/// Default maximum size of one event's data: 8 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with '\n'.
    pub data: String,
    /// Whether any `data:` line was seen (the spec dispatches only then).
    pub has_data: bool,
    /// Non-standard fields, in order (e.g. llama.cpp's `error:`).
    pub other: Vec<(String, String)>,
}

impl SseEvent {
    pub fn event_type(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    EventTooLarge { limit: usize },
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EventTooLarge { limit } => write!(f, "an event exceeded the {limit}-byte limit"),
        }
    }
}

#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended in '\r': a '\n' at the start of the next one belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a BOM may follow).
    at_start: bool,
    current: SseEvent,
    event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            current: SseEvent::default(),
            event_bytes: 0,
        }
    }

    /// Parses a chunk, appending every completed event to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.at_start {
            // The BOM may itself arrive split across chunks.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            let have = self.line.len();
            let take = (BOM.len() - have).min(chunk.len());
            if BOM[have..have + take] == chunk[..take] {
                if have + take == BOM.len() {
                    self.line.clear();
                    self.at_start = false;
                    chunk = &chunk[take..];
                } else {
                    self.line.extend_from_slice(&chunk[..take]);
                    return Ok(());
                }
            } else {
                // Not a BOM: what was held back is ordinary line content.
                self.at_start = false;
            }
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(i) = memchr::memchr2(b'\r', b'\n', chunk) {
            self.line.extend_from_slice(&chunk[..i]);
            self.check_line_size()?;
            self.end_line(out)?;
            if chunk[i] == b'\r' {
                if i + 1 == chunk.len() {
                    self.after_cr = true;
                    return Ok(());
                }
                if chunk[i + 1] == b'\n' {
                    chunk = &chunk[i + 2..];
                    continue;
                }
            }
            chunk = &chunk[i + 1..];
        }
        self.line.extend_from_slice(chunk);
        self.check_line_size()
    }

    /// End of stream: an unfinished event is discarded, as the spec says.
    pub fn finish(&mut self) {
        self.line.clear();
        self.current = SseEvent::default();
        self.event_bytes = 0;
    }

    fn check_line_size(&self) -> Result<(), SseError> {
        if self.event_bytes + self.line.len() > self.max_event_bytes {
            return Err(SseError::EventTooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let raw = std::mem::take(&mut self.line);
        if raw.is_empty() {
            let event = std::mem::take(&mut self.current);
            self.event_bytes = 0;
            if event.has_data || !event.other.is_empty() {
                let mut event = event;
                if event.data.ends_with('\n') {
                    event.data.pop();
                }
                out.push(event);
            }
            return Ok(());
        }
        self.event_bytes += raw.len();
        if raw[0] == b':' {
            return Ok(()); // comment (e.g. OpenRouter's keep-alives)
        }
        let line = String::from_utf8_lossy(&raw);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.current.event = Some(value.to_owned()),
            "data" => {
                self.current.data.push_str(value);
                self.current.data.push('\n');
                self.current.has_data = true;
            }
            "id" | "retry" => {} // reconnection machinery: never used for model APIs
            other => self.current.other.push((other.to_owned(), value.to_owned())),
        }
        if self.event_bytes > self.max_event_bytes {
            return Err(SseError::EventTooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).unwrap();
        }
        p.finish();
        out
    }

    /// The data of the events a spec-compliant consumer would see.
    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().filter(|e| e.has_data).map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn named_event() {
        let ev = parse(&[b"event: ping\ndata: {\"type\": \"ping\"}\n\n"]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event.as_deref(), Some("ping"));
        assert_eq!(ev[0].data, "{\"type\": \"ping\"}");
    }

    #[test]
    fn multi_line_data_and_comments() {
        assert_eq!(data(&parse(&[b"data: a\ndata: b\n\n"])), vec!["a\nb"]);
        assert_eq!(data(&parse(&[b": OPENROUTER PROCESSING\n\ndata: x\n\n"])), vec!["x"]);
    }

    #[test]
    fn line_endings() {
        assert_eq!(data(&parse(&[b"data: x\r\n\r\ndata: y\r\n\r\n"])), vec!["x", "y"]);
        assert_eq!(data(&parse(&[b"data: A\r\ndata: B\r", b"\ndata: C\r\n", b"\r\n"])), vec!["A\nB\nC"]);
        assert_eq!(data(&parse(&[b"data: x\r\rdata: y\r\r"])), vec!["x", "y"]);
        // A lone CR at a chunk end followed by a non-LF byte.
        assert_eq!(data(&parse(&[b"data: x\r", b"\rdata: y\n\n"])), vec!["x", "y"]);
    }

    #[test]
    fn space_after_colon() {
        assert_eq!(data(&parse(&[b"data:x\n\n"])), vec!["x"]);
        assert_eq!(data(&parse(&[b"data:  x\n\n"])), vec![" x"]);
    }

    #[test]
    fn unfinished_event_is_discarded_at_eof() {
        assert!(parse(&[b"data: last"]).is_empty());
        assert!(parse(&[b"data: last\n"]).is_empty());
    }

    #[test]
    fn utf8_split_across_chunks() {
        assert_eq!(data(&parse(&[b"data: \xC3", b"\xA9\n\n"])), vec!["é"]);
    }

    #[test]
    fn bom_is_stripped_even_when_split() {
        assert_eq!(data(&parse(&[b"\xEF\xBB\xBFdata: bom\n\n"])), vec!["bom"]);
        assert_eq!(data(&parse(&[b"\xEF", b"\xBB", b"\xBFdata: bom\n\n"])), vec!["bom"]);
        // Only one BOM, and only at the start.
        assert_eq!(data(&parse(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"])), vec!["a"]);
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let input = b"\xEF\xBB\xBFevent: e\r\ndata: h\xC3\xA9llo\r\n\r\n: c\rdata: 2\r\r";
        let whole = parse(&[input]);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(parse(&bytes), whole);
        assert_eq!(data(&whole), vec!["héllo", "2"]);
    }

    #[test]
    fn unknown_fields_are_kept_and_events_without_data_are_not_dispatched() {
        let ev = parse(&[b"error: {\"code\":400}\n\n"]);
        assert_eq!(ev.len(), 1);
        assert!(!ev[0].has_data);
        assert_eq!(ev[0].other, vec![("error".to_owned(), "{\"code\":400}".to_owned())]);
        assert!(parse(&[b"event: response.created\n\n"]).is_empty());
        assert_eq!(parse(&[b"data\n\n"])[0].data, "");
    }

    #[test]
    fn default_event_type_is_message() {
        assert_eq!(parse(&[b"data: x\n\n"])[0].event_type(), "message");
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut p = SseParser::new(16);
        let mut out = Vec::new();
        assert!(p.feed(b"data: 0123456789\n", &mut out).is_ok());
        assert_eq!(p.feed(b"data: 0123456789\n", &mut out), Err(SseError::EventTooLarge { limit: 16 }));
        let mut p = SseParser::new(16);
        assert!(p.feed(&[b'x'; 40], &mut out).is_err());
    }
}
