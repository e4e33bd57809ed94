//! Async JSON-RPC 2.0 core over NDJSON: a reader thread → the dispatcher (an `Incoming` channel) →
//! the writer. Only the writer touches the output. Bidirectional: the agent's own requests to the
//! client wait in a pending map, are failed all at once when input closes, and can be cancelled
//! with `$/cancel_request` (which works in both directions).
//!
//! The reader is a plain thread doing blocking reads (tokio's stdin goes through the blocking pool
//! anyway) — or, with a peer in the same process (`acp run`), the peer's own thread as it writes
//! ([`Input`]); the writer writes inline under a lock (see `writer.rs` for why). A connection's
//! state and handles (`Connection`, `Responder`, `Incoming`) are `connection.rs`.

mod connection;
mod reader;
mod writer;

pub use connection::{Connection, Incoming, IncomingRequest, RequestError, Responder};
pub use reader::Input;

use connection::FromReader;
use tokio::sync::mpsc;
/// The running connection: the reader thread's receiving end for the dispatcher, and the handle
/// for sending.
pub struct Rpc {
    pub conn: Connection,
    pub incoming: IncomingRx,
}

/// Messages read but not yet dispatched, at most. When the dispatcher falls behind (its answers
/// cannot be written because the peer does not read them), the reader stops reading: a peer that
/// floods input without reading output is held back instead of filling memory.
const INCOMING_QUEUE: usize = 16;

/// The dispatcher's end: yields messages in input order, answering rejected lines on the way.
#[derive(Debug)]
pub struct IncomingRx {
    rx: mpsc::Receiver<FromReader>,
    conn: Connection,
}

impl IncomingRx {
    /// The next message; `None` once input has ended and everything before it was delivered.
    pub async fn recv(&mut self) -> Option<Incoming> {
        loop {
            match self.rx.recv().await? {
                FromReader::Message(m) => return Some(m),
                FromReader::Reject { line } => self.conn.send_line(line),
            }
        }
    }
}

/// Starts the reader thread over a blocking byte source, writing answers to `output`.
pub fn start(
    input: impl std::io::Read + Send + 'static,
    output: impl std::io::Write + Send + 'static,
    max_line_bytes: usize,
) -> std::io::Result<Rpc> {
    let (rpc, incoming_tx) = connection(output);
    reader::spawn(input, max_line_bytes, rpc.conn.clone(), incoming_tx)?;
    Ok(rpc)
}

/// A connection to a peer in the same process: it writes its lines to the returned [`Input`]
/// (read as they are written, on its own thread), and reads ours from `output`.
pub fn start_in_process(output: impl std::io::Write + Send + 'static, max_line_bytes: usize) -> (Rpc, Input) {
    let (rpc, incoming_tx) = connection(output);
    let input = reader::input(max_line_bytes, rpc.conn.clone(), incoming_tx);
    (rpc, input)
}

fn connection(output: impl std::io::Write + Send + 'static) -> (Rpc, mpsc::Sender<FromReader>) {
    let (incoming_tx, rx) = mpsc::channel(INCOMING_QUEUE);
    let conn = connection::new(output);
    (Rpc { incoming: IncomingRx { rx, conn: conn.clone() }, conn }, incoming_tx)
}

#[cfg(test)]
mod tests;
