//! One append-only JSONL file per session: every record a reloaded session needs, one JSON object
//! per line, each line written with a single `write` (whole or not at all: a crash can only tear
//! the last line, which readers detect, log and skip, and which the next writer cuts off before it
//! appends). One writer per transcript: opening one for writing takes an exclusive `flock`, so a
//! second `acp` process (or a second open in this one) is refused instead of interleaving lines.
//! The lock goes away with the process, so a `kill -9` never leaves a session locked.
//!
//! Reply text is recorded as it streams, merged per burst: consecutive deltas of one message are
//! written as one line at the next flush (the end of each network read), so a crash loses at most
//! the burst being read.

use crate::sync::lock;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::StoreError;
use crate::history::record::Record;
use crate::stream::tool_update;
use crate::tools::plan::PlanEntry;
use crate::tools::{ToolCallState, ToolStatus};

/// Something a live turn shows that a reloaded session must show too.
#[derive(Debug, Clone, Copy)]
pub enum Live<'a> {
    Text { thought: bool, message_id: &'a Arc<str>, text: &'a str },
    ToolCall(&'a ToolCallState),
    ToolCallUpdate(&'a ToolCallState),
    Plan(&'a [PlanEntry]),
}

impl crate::history::Journal for Transcript {
    fn record(&self, record: &Record) {
        Transcript::record(self, record);
    }
}

/// A transcript open for appending. Shared by a session's actor and its running turn.
pub struct Transcript {
    /// The file (empty for rows in a database).
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript").field("path", &self.path).finish_non_exhaustive()
    }
}

struct Inner {
    sink: Sink,
    pending: Option<Pending>,
    /// Tool calls announced and not yet finished, as announced.
    open_calls: HashMap<String, ToolCallState>,
    /// A write failed; reported once.
    failed: bool,
}

/// Where the records go.
enum Sink {
    File(FileSink),
    /// Rows of a database, written by the session's writer task.
    Rows(Box<dyn Rows>),
}

/// A transcript kept as rows of a database (`store/postgres`): records and index updates queued
/// in order for the session's writer.
pub trait Rows: Send {
    /// Queues `records`, in order; an error once the session can no longer be written.
    fn append(&mut self, records: &[&Record]) -> std::io::Result<()>;
    /// Queues `update` of the session's row, in order with the records.
    fn index(&mut self, update: &IndexUpdate);
    /// Completes once everything queued so far is stored (or cannot be).
    fn synced(&mut self) -> futures_util::future::BoxFuture<'static, ()>;
    /// Where the rows are, for people.
    fn location(&self) -> String;
}

struct FileSink {
    file: File,
    /// The file's length after the last whole line.
    len: u64,
    line: Vec<u8>,
}

/// A change to a session's row in the index, kept in order with its records.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexUpdate {
    /// A turn ended: its tokens, the title if the session has none, and whether the model has
    /// answered in it.
    TurnEnded {
        input: u64,
        output: u64,
        context: Option<u64>,
        title: Option<String>,
        prompted: bool,
    },
    Settings {
        model: String,
        mode: String,
        reasoning: Option<String>,
    },
    Title(String),
    Prompted,
}

/// Deltas of one message not written yet.
struct Pending {
    thought: bool,
    id: Arc<str>,
    text: String,
    since: Instant,
}

/// How long streamed text may wait in memory before [`Transcript::flush_due`] writes it: one
/// write per burst of a fast stream would cost a system call per delta, and a crash loses at most
/// this much of a reply that was still streaming (the turn is then shown as interrupted anyway).
pub const TEXT_FLUSH_INTERVAL: Duration = Duration::from_millis(100);

impl Transcript {
    /// Creates a new transcript, starting with `header`. Fails if the file exists.
    pub fn create(path: &Path, header: &Record) -> Result<Self, StoreError> {
        Self::create_with(path, &[header])
    }

    /// [`create`](Self::create), starting with `records` (a header first), written at once.
    pub fn create_with(path: &Path, records: &[&Record]) -> Result<Self, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        lock_file(&file, path)?;
        let t = Self::with(path, file, 0);
        lock(&t.inner).sink.try_append(records).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        Ok(t)
    }

    /// Opens an existing transcript for appending; a torn last line is cut off first.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let err = |e: std::io::Error| StoreError(format!("{}: {e}", path.display()));
        let mut file = OpenOptions::new().read(true).append(true).open(path).map_err(err)?;
        lock_file(&file, path)?;
        let len = file.seek(SeekFrom::End(0)).map_err(err)?;
        let whole = whole_length(&mut file, len).map_err(err)?;
        if whole < len {
            tracing::warn!(
                path = %path.display(),
                bytes = len - whole,
                "transcript ends in a torn line (acp stopped while writing it); cutting it off"
            );
            file.set_len(whole).map_err(err)?;
        }
        Ok(Self::with(path, file, whole))
    }

    fn with(path: &Path, file: File, len: u64) -> Self {
        let sink = Sink::File(FileSink { file, len, line: Vec::with_capacity(4096) });
        Self::over(path.to_path_buf(), sink)
    }

    /// A transcript kept as rows of a database.
    pub fn rows(rows: Box<dyn Rows>) -> Self {
        Self::over(PathBuf::new(), Sink::Rows(rows))
    }

    fn over(path: PathBuf, sink: Sink) -> Self {
        Self { path, inner: Mutex::new(Inner { sink, pending: None, open_calls: HashMap::new(), failed: false }) }
    }

    /// The file (empty for a transcript kept in a database).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the transcript is kept, for people: its file, or the database's rows.
    pub fn location(&self) -> String {
        match &lock(&self.inner).sink {
            Sink::File(_) => format!("`{}`", self.path.display()),
            Sink::Rows(rows) => rows.location(),
        }
    }

    /// Keeps `update` of the session's index row in order with its records, if the transcript's
    /// store does that (true); else the caller applies it to the index itself.
    pub fn index(&self, update: &IndexUpdate) -> bool {
        let mut inner = lock(&self.inner);
        match &mut inner.sink {
            Sink::File(_) => false,
            Sink::Rows(rows) => {
                rows.index(update);
                true
            }
        }
    }

    /// Returns once everything recorded so far is stored (at once for a file, written as it
    /// goes; a database's writer may still be committing).
    pub async fn synced(&self) {
        let wait = {
            let mut inner = lock(&self.inner);
            inner.write_pending(&self.path);
            match &mut inner.sink {
                Sink::File(_) => None,
                Sink::Rows(rows) => Some(rows.synced()),
            }
        };
        if let Some(wait) = wait {
            let _ = wait.await;
        }
    }

    /// Empties the transcript and begins it again with `header` (a file left by a process that
    /// stopped before its session was stored).
    pub fn restart(&self, header: &Record) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        inner.pending = None;
        inner.open_calls.clear();
        let Sink::File(file) = &mut inner.sink else { return Err(StoreError("not a transcript file".into())) };
        file.file.set_len(0).map_err(|e| StoreError(format!("{}: {e}", self.path.display())))?;
        file.len = 0;
        inner.sink.try_append(&[header]).map_err(|e| StoreError(format!("{}: {e}", self.path.display())))
    }

    /// Appends a record (after any pending text).
    pub fn record(&self, record: &Record) {
        let mut inner = lock(&self.inner);
        inner.write_pending(&self.path);
        inner.append(record, &self.path);
    }

    /// Records what a reloaded session must show: text and thoughts (merged until the next
    /// flush), tool calls as announced and as they end, plans.
    pub fn record_live(&self, live: Live<'_>) {
        let mut inner = lock(&self.inner);
        match live {
            Live::Text { thought, message_id, text } => inner.delta(thought, message_id, text, &self.path),
            Live::ToolCall(state) => {
                inner.write_pending(&self.path);
                inner.append(&Record::Tool { state: state.clone() }, &self.path);
                if !matches!(state.status, ToolStatus::Completed | ToolStatus::Failed) {
                    inner.open_calls.insert(state.id.clone(), state.clone());
                }
            }
            Live::ToolCallUpdate(state) if matches!(state.status, ToolStatus::Completed | ToolStatus::Failed) => {
                inner.write_pending(&self.path);
                let Some(announced) = inner.open_calls.remove(&state.id) else { return };
                let patch = tool_update::changes(&announced, state);
                inner.append(&Record::ToolEnd { id: state.id.clone(), patch }, &self.path);
            }
            Live::Plan(entries) => {
                inner.write_pending(&self.path);
                inner.append(&Record::Plan { entries: entries.to_vec() }, &self.path);
            }
            Live::ToolCallUpdate(_) => {}
        }
    }

    /// Writes merged text out.
    pub fn flush(&self) {
        lock(&self.inner).write_pending(&self.path);
    }

    /// Writes merged text out if it has waited [`TEXT_FLUSH_INTERVAL`]; anything else that is
    /// recorded (a tool call, a plan, the turn's end) writes it first in any case.
    pub fn flush_due(&self) {
        let mut inner = lock(&self.inner);
        if inner.pending.as_ref().is_some_and(|p| p.since.elapsed() >= TEXT_FLUSH_INTERVAL) {
            inner.write_pending(&self.path);
        }
    }
}

impl Inner {
    fn delta(&mut self, thought: bool, id: &Arc<str>, text: &str, path: &Path) {
        match &mut self.pending {
            Some(p) if p.thought == thought && p.id == *id => p.text.push_str(text),
            _ => {
                self.write_pending(path);
                self.pending = Some(Pending { thought, id: id.clone(), text: text.to_owned(), since: Instant::now() });
            }
        }
    }

    fn write_pending(&mut self, path: &Path) {
        let Some(p) = self.pending.take() else { return };
        let id = p.id.to_string();
        let record = if p.thought { Record::Thought { id, text: p.text } } else { Record::Text { id, text: p.text } };
        self.append(&record, path);
    }

    fn append(&mut self, record: &Record, path: &Path) {
        if let Err(e) = self.sink.try_append(&[record]) {
            if !self.failed {
                tracing::error!(path = %path.display(), error = %e, "could not write to the session transcript");
            }
            self.failed = true;
        }
    }
}

impl Sink {
    fn try_append(&mut self, records: &[&Record]) -> std::io::Result<()> {
        match self {
            Self::File(file) => file.try_append(records),
            Self::Rows(rows) => rows.append(records),
        }
    }
}

impl FileSink {
    /// Appends `records`, a line each, in one write.
    fn try_append(&mut self, records: &[&Record]) -> std::io::Result<()> {
        self.line.clear();
        for record in records {
            serde_json::to_writer(&mut self.line, record)?;
            self.line.push(b'\n');
        }
        // One write for the whole line (O_APPEND); should it come up short, the rest follows, and
        // should that fail, the partial line is cut off again.
        if let Err(e) = self.file.write_all(&self.line) {
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += self.line.len() as u64;
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::with_capacity(4096);
        }
        Ok(())
    }
}

fn lock_file(file: &File, path: &Path) -> Result<(), StoreError> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError(format!(
            "the session is open in another acp process ({} is locked); close it there first",
            path.display()
        ))),
        Err(e) => Err(StoreError(format!("{}: could not lock: {e}", path.display()))),
    }
}

/// The length of the file up to and including its last newline.
fn whole_length(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut buf = [0u8; 8192];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = memchr::memrchr(b'\n', chunk) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// The longest transcript line that is loaded: far above any record this build writes (a reply's
/// text is capped by `max_reply_bytes`, tool arguments by `MAX_ARGUMENTS_BYTES`); a longer one
/// (from a hostile or broken writer) is skipped without being held in memory.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

enum Line {
    End,
    /// A line (with its newline, unless it is the torn last one) is in the buffer.
    Read,
    /// A line longer than the limit was skipped: its length.
    TooLong(usize),
}

/// `read_until(b'\n')` that never holds more than `max` bytes: a longer line is read through and
/// dropped.
fn read_line_bounded(reader: &mut impl std::io::BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    let mut skipped: Option<usize> = None;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match skipped {
                Some(n) => Line::TooLong(n),
                None if line.is_empty() => Line::End,
                None => Line::Read,
            });
        }
        let (chunk, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let used = chunk.len();
        match &mut skipped {
            Some(n) => *n += used,
            None if line.len() + used > max => skipped = Some(line.len() + used),
            None => line.extend_from_slice(chunk),
        }
        if skipped.is_some() {
            line.clear();
        }
        reader.consume(used);
        if done {
            return Ok(match skipped {
                Some(n) => Line::TooLong(n),
                None => Line::Read,
            });
        }
    }
}

/// A transcript as read back.
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    /// Bytes of a torn last line that were skipped.
    pub torn_bytes: usize,
    /// Whole lines that could not be read (damaged, or written by a newer acp).
    pub skipped_lines: usize,
}

/// Reads a whole transcript; a torn last line and unreadable lines are logged and skipped.
pub fn read(path: &Path) -> Result<Loaded, StoreError> {
    let mut records = open_records(path)?;
    let all: Vec<Record> = records.by_ref().collect();
    Ok(Loaded { records: all, torn_bytes: records.torn_bytes, skipped_lines: records.skipped_lines })
}

/// Reads a transcript record by record (nothing is held but the current line).
pub fn open_records(path: &Path) -> Result<Records<std::io::BufReader<File>>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
    Ok(Records::new(std::io::BufReader::with_capacity(256 * 1024, file), path))
}

/// Parses transcript bytes.
pub fn parse(bytes: &[u8], path: &Path) -> Loaded {
    let mut records = Records::new(bytes, path);
    let all: Vec<Record> = records.by_ref().collect();
    Loaded { records: all, torn_bytes: records.torn_bytes, skipped_lines: records.skipped_lines }
}

/// The records of a transcript, in order. A torn last line ends them (logged); an unreadable
/// whole line is logged and skipped.
pub struct Records<R> {
    reader: R,
    path: PathBuf,
    line: Vec<u8>,
    number: usize,
    pub torn_bytes: usize,
    pub skipped_lines: usize,
}

impl<R: std::io::BufRead> Records<R> {
    pub fn new(reader: R, path: &Path) -> Self {
        Self { reader, path: path.to_path_buf(), line: Vec::new(), number: 0, torn_bytes: 0, skipped_lines: 0 }
    }
}

impl<R: std::io::BufRead> Iterator for Records<R> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            self.line.clear();
            match read_line_bounded(&mut self.reader, &mut self.line, MAX_RECORD_BYTES) {
                Ok(Line::End) => return None,
                Ok(Line::Read) => {}
                Ok(Line::TooLong(bytes)) => {
                    self.number += 1;
                    self.skipped_lines += 1;
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.number,
                        bytes,
                        "skipping a transcript line too long to load"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "could not read the transcript to its end");
                    return None;
                }
            }
            self.number += 1;
            if self.line.last() != Some(&b'\n') {
                self.torn_bytes = self.line.len();
                tracing::warn!(
                    path = %self.path.display(),
                    bytes = self.torn_bytes,
                    "transcript ends in a torn line (acp stopped while writing it); skipping it"
                );
                return None;
            }
            let line = &self.line[..self.line.len() - 1];
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Record>(line) {
                Ok(record) => return Some(record),
                Err(e) => {
                    self.skipped_lines += 1;
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.number,
                        error = %e,
                        "skipping an unreadable transcript line"
                    );
                }
            }
        }
    }
}
