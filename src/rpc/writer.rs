//! The writer thread: the only code that writes to the output. Lines are written in the order they
//! were queued, each followed by '\n', and flushed whenever the queue runs empty.

use std::io::Write;

use tokio::sync::{mpsc, oneshot};

pub(super) enum Outgoing {
    Line(String),
    /// Write everything queued before this, flush, and stop.
    Close,
}

/// Owned by whoever shuts the connection down.
pub struct WriterHandle {
    tx: mpsc::UnboundedSender<Outgoing>,
    done: oneshot::Receiver<()>,
}

impl std::fmt::Debug for WriterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHandle").finish_non_exhaustive()
    }
}

impl WriterHandle {
    /// Writes out everything queued so far, flushes, and stops the writer.
    pub async fn finish(self) {
        let _ = self.tx.send(Outgoing::Close);
        let _ = self.done.await;
    }
}

pub(super) fn spawn(
    output: impl Write + Send + 'static,
) -> std::io::Result<(WriterHandle, mpsc::UnboundedSender<Outgoing>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (done_tx, done) = oneshot::channel();
    std::thread::Builder::new().name("rpc-writer".into()).spawn(move || {
        run(output, rx);
        let _ = done_tx.send(());
    })?;
    Ok((WriterHandle { tx: tx.clone(), done }, tx))
}

fn run(output: impl Write, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        let mut close = false;
        while let Some(message) = next.take() {
            match message {
                Outgoing::Line(line) => {
                    if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.write_all(b"\n")) {
                        tracing::warn!(error = %e, "writing output failed; the peer is gone");
                        return;
                    }
                }
                Outgoing::Close => close = true,
            }
            if !close {
                next = rx.try_recv().ok();
            }
        }
        if let Err(e) = out.flush() {
            tracing::warn!(error = %e, "flushing output failed; the peer is gone");
            return;
        }
        if close {
            return;
        }
    }
}
