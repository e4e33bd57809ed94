//! The reader: frames input into lines, parses the envelope, answers protocol errors itself,
//! routes answers to our pending requests and `$/cancel_request`s, and hands everything else to the
//! dispatcher. At end of input it fails our pending requests and closes the dispatcher channel.
//! It runs on a thread of its own reading a byte stream, or, for a client in the same process, on
//! the client's thread as it writes ([`Input`]).

use std::io::{ErrorKind, Read, Write};

use acp_protocol::acp::CANCEL_REQUEST;
use acp_protocol::codec::{Frame, LineDecoder};
use acp_protocol::jsonrpc::{self, ErrorObject, Message, RequestId};
use serde_json::Value;
use tokio::sync::mpsc;

use super::connection::{Connection, FromReader, Incoming, IncomingRequest, Responder};

pub(super) fn spawn(
    input: impl Read + Send + 'static,
    max_line_bytes: usize,
    conn: Connection,
    incoming: mpsc::Sender<FromReader>,
) -> std::io::Result<()> {
    std::thread::Builder::new().name("rpc-reader".into()).spawn(move || {
        let mut reader = Reader { conn, incoming };
        reader.run(input, max_line_bytes);
    })?;
    Ok(())
}

pub(super) fn input(max_line_bytes: usize, conn: Connection, incoming: mpsc::Sender<FromReader>) -> Input {
    Input { reader: Reader { conn, incoming }, decoder: LineDecoder::new(max_line_bytes), frames: Vec::new() }
}

/// The input of a connection whose peer is in the same process (`rpc::start_in_process`):
/// what is written to it is read as it is written, on the writer's thread, with no reader thread
/// and no pipe in between. Dropping it ends the input.
///
/// A write waits while the dispatcher's queue is full, as a reader thread would: it must not be
/// written from a thread of an async runtime.
pub struct Input {
    reader: Reader,
    decoder: LineDecoder,
    frames: Vec<Frame>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").finish_non_exhaustive()
    }
}

impl Write for Input {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.reader.conn.input_arrived();
        self.decoder.feed(buf, &mut self.frames);
        for frame in self.frames.drain(..) {
            self.reader.handle(frame);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        self.reader.end(&mut self.decoder, &mut self.frames);
    }
}

struct Reader {
    conn: Connection,
    incoming: mpsc::Sender<FromReader>,
}

impl Reader {
    fn run(&mut self, mut input: impl Read, max_line_bytes: usize) {
        let mut decoder = LineDecoder::new(max_line_bytes);
        let mut buf = vec![0u8; 64 * 1024];
        let mut frames = Vec::new();
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reading input failed; treating it as end of input");
                    break;
                }
            };
            // Before handling it: handing it on can block while the dispatcher is behind.
            self.conn.input_arrived();
            decoder.feed(&buf[..n], &mut frames);
            for frame in frames.drain(..) {
                self.handle(frame);
            }
        }
        self.end(&mut decoder, &mut frames);
        // Dropping `self.incoming` (with `self`) closes the dispatcher's channel.
    }

    /// The end of input: an unterminated last line still counts; our pending requests fail.
    fn end(&mut self, decoder: &mut LineDecoder, frames: &mut Vec<Frame>) {
        decoder.finish(frames);
        for frame in frames.drain(..) {
            self.handle(frame);
        }
        tracing::debug!("end of input");
        self.conn.input_arrived();
        self.conn.close_input();
    }

    fn handle(&mut self, frame: Frame) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { limit } => {
                tracing::warn!(limit, "input line over the size limit; skipped");
                let error = ErrorObject::invalid_request(format!(
                    "message exceeds the maximum line size of {limit} bytes; it was skipped"
                ))
                .with_data(serde_json::json!({ "maxLineBytes": limit }));
                self.reject(&RequestId::Null, &error);
                return;
            }
        };
        match jsonrpc::parse_line(&line) {
            Err(invalid) => {
                tracing::warn!(error = %invalid.error, "invalid input line");
                if invalid.respond {
                    self.reject(&invalid.id, &invalid.error);
                }
            }
            Ok(Message::Request { id, method, params }) => self.request(id, method, params),
            Ok(Message::Notification { method, params }) => {
                if method == CANCEL_REQUEST {
                    self.cancel_request(params);
                } else {
                    let _ = self.incoming.blocking_send(FromReader::Message(Incoming::Notification { method, params }));
                }
            }
            Ok(Message::Response { id, result }) => {
                if !self.conn.resolve_pending(&id, result) {
                    tracing::debug!(%id, "answer to a request that is no longer pending; ignored");
                }
            }
        }
    }

    fn request(&mut self, id: RequestId, method: String, params: Option<Value>) {
        let Some(cancel) = self.conn.begin_inflight(&id) else {
            let error = ErrorObject::invalid_request(format!("request id {id} is already in use by a pending request"));
            self.reject(&id, &error);
            return;
        };
        let responder = Responder { id, conn: self.conn.clone(), cancel, answered: false };
        // If the dispatcher is gone the responder is dropped here and answers with an error.
        let _ = self.incoming.blocking_send(FromReader::Message(Incoming::Request(IncomingRequest {
            method,
            params,
            responder,
        })));
    }

    fn reject(&self, id: &RequestId, error: &ErrorObject) {
        let _ = self.incoming.blocking_send(FromReader::Reject { line: jsonrpc::error_line(id, error) });
    }

    fn cancel_request(&mut self, params: Option<Value>) {
        let id = params
            .as_ref()
            .and_then(|p| p.get("requestId"))
            .and_then(|raw| serde_json::from_value::<RequestId>(raw.clone()).ok());
        match id {
            Some(id) => {
                if !self.conn.cancel_inflight(&id) {
                    tracing::debug!(%id, "$/cancel_request for a request that is not in flight");
                }
            }
            None => tracing::warn!("$/cancel_request without a usable `requestId`; ignored"),
        }
    }
}
