//! The writer: the only code that writes to the output. Each line is written whole, followed by
//! '\n', by the thread that sends it, under a lock (so lines never interleave and leave in the
//! order they were sent), and flushed at once — except streamed updates sent as a batch, which are
//! flushed together at the end of the batch. Writing inline instead of handing lines to a writer
//! thread saves a thread wake-up per message, which on an idle machine costs more than the rest of
//! forwarding a streamed delta (see tests/bench). A peer that stops reading blocks the sender;
//! shutdown does not depend on it (`main` has a signal thread with an exit deadline).

use crate::sync::lock;
use std::io::Write;
use std::sync::Mutex;

pub(super) struct Writer {
    out: Mutex<Option<std::io::BufWriter<Box<dyn Write + Send>>>>,
}

impl Writer {
    pub(super) fn new(output: impl Write + Send + 'static) -> Self {
        let output: Box<dyn Write + Send> = Box::new(output);
        Self { out: Mutex::new(Some(std::io::BufWriter::with_capacity(64 * 1024, output))) }
    }

    /// Writes one line, and flushes it (with anything written unflushed before) if `flush`.
    /// After a write error (the peer went away) everything is dropped.
    pub(super) fn line(&self, line: &str, flush: bool) {
        let mut guard = lock(&self.out);
        let Some(out) = guard.as_mut() else { return };
        let mut written = out.write_all(line.as_bytes()).and_then(|()| out.write_all(b"\n"));
        if flush {
            written = written.and_then(|()| out.flush());
        }
        if let Err(e) = written {
            tracing::warn!(error = %e, "writing output failed; the peer is gone");
            *guard = None;
        }
    }

    pub(super) fn flush(&self) {
        let mut guard = lock(&self.out);
        if let Some(Err(e)) = guard.as_mut().map(Write::flush) {
            tracing::warn!(error = %e, "writing output failed; the peer is gone");
            *guard = None;
        }
    }
}
