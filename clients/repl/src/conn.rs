//! The client's end of an ACP connection over any byte streams (a child's stdio, or pipes to an
//! agent in the same process): requests and notifications out, answers, notifications and the
//! agent's own requests in, one reader thread, everything in arrival order on one channel. Lines
//! are framed by the protocol crate's codec and read and written as its JSON-RPC envelope.

use std::io::{self, ErrorKind, Read, Write};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak, mpsc};

use acp_protocol::acp::schema::{ClientNotification, ClientRequest};
use acp_protocol::codec::{DEFAULT_MAX_LINE_BYTES, Frame, LineDecoder};
use acp_protocol::jsonrpc::{self, ErrorObject, Message, RequestId};
use serde_json::Value;

/// What arrives from the agent (or from this process: an interrupt).
#[derive(Debug)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The agent asks something of the client; answer with [`Sender::respond`].
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    /// Ctrl-C or a signal, injected by the process.
    Interrupt,
    /// The agent's output ended (it exited or closed stdout); the text says why when known.
    Closed(Option<String>),
}

/// Where lines to the agent go: the only writer, one whole line at a time.
struct Writer {
    out: Mutex<Box<dyn Write + Send>>,
    verbose: bool,
}

impl Writer {
    fn line(&self, line: &str) -> io::Result<()> {
        if self.verbose {
            let _ = writeln!(io::stderr(), "→ {line}");
        }
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// Sends to the agent; cheap to clone. Dropping the last one closes the agent's input.
#[derive(Clone)]
pub struct Sender {
    writer: Arc<Writer>,
    next_id: Arc<AtomicI64>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl Sender {
    /// Sends a request (its method is the one the schema names for it); its answer arrives as
    /// [`Incoming::Response`] with the returned id.
    pub fn request(&self, request: &ClientRequest) -> io::Result<RequestId> {
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.writer.line(&jsonrpc::request_line(&id, request.method(), request)?)?;
        Ok(id)
    }

    pub fn notify(&self, notification: &ClientNotification) -> io::Result<()> {
        self.writer.line(&jsonrpc::notification_line(notification.method(), notification)?)
    }

    /// Answers one of the agent's requests.
    pub fn respond(&self, id: &RequestId, result: Result<Value, ErrorObject>) -> io::Result<()> {
        match result {
            Ok(result) => self.writer.line(&jsonrpc::result_line(id, &result)?),
            Err(error) => self.writer.line(&jsonrpc::error_line(id, &error)),
        }
    }
}

/// The receiving half: everything the agent sends, in order.
pub struct Receiver {
    rx: mpsc::Receiver<Incoming>,
    inject: mpsc::Sender<Incoming>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl Receiver {
    /// The next message; `Closed` once the agent is gone (and forever after).
    pub fn recv(&self) -> Incoming {
        self.rx.recv().unwrap_or(Incoming::Closed(None))
    }

    /// The next message, or `None` when nothing arrived within `timeout`.
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Option<Incoming> {
        match self.rx.recv_timeout(timeout) {
            Ok(message) => Some(message),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Incoming::Closed(None)),
        }
    }

    /// A handle that puts [`Incoming::Interrupt`] into this stream (for signal handlers).
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.inject.clone())
    }
}

/// Delivers an interrupt to the receiving loop.
#[derive(Clone, Debug)]
pub struct Interrupter(mpsc::Sender<Incoming>);

impl Interrupter {
    pub fn interrupt(&self) {
        let _ = self.0.send(Incoming::Interrupt);
    }
}

/// Starts reading `from` on its own thread; `to` is where requests go.
pub fn connect(
    from: impl Read + Send + 'static,
    to: impl Write + Send + 'static,
    verbose: bool,
) -> io::Result<(Sender, Receiver)> {
    connect_with_tap(from, to, verbose, |_| {})
}

/// Like [`connect`], with `tap` seeing every message on the reader thread as it arrives (before
/// the receiving loop does): for state that must be current even while that loop is busy.
pub fn connect_with_tap(
    from: impl Read + Send + 'static,
    to: impl Write + Send + 'static,
    verbose: bool,
    tap: impl Fn(&Incoming) + Send + 'static,
) -> io::Result<(Sender, Receiver)> {
    start(from, to, verbose, DEFAULT_MAX_LINE_BYTES, tap)
}

fn start(
    from: impl Read + Send + 'static,
    to: impl Write + Send + 'static,
    verbose: bool,
    max_line_bytes: usize,
    tap: impl Fn(&Incoming) + Send + 'static,
) -> io::Result<(Sender, Receiver)> {
    let (tx, rx) = mpsc::channel();
    let inject = tx.clone();
    let writer = Arc::new(Writer { out: Mutex::new(Box::new(to)), verbose });
    let reader = Reader { tx, writer: Arc::downgrade(&writer), verbose, tap };
    std::thread::Builder::new().name("acp-client-reader".into()).spawn(move || reader.run(from, max_line_bytes))?;
    Ok((Sender { writer, next_id: Arc::new(AtomicI64::new(0)) }, Receiver { rx, inject }))
}

/// The reader thread's state.
struct Reader<T> {
    tx: mpsc::Sender<Incoming>,
    /// To answer a request that is not valid JSON-RPC. Weak: dropping the last [`Sender`] must
    /// still close the agent's input.
    writer: Weak<Writer>,
    verbose: bool,
    tap: T,
}

impl<T: Fn(&Incoming)> Reader<T> {
    /// Frames lines until the end of input (or a read error), then reports the agent gone.
    fn run(&self, mut from: impl Read, max_line_bytes: usize) {
        let mut decoder = LineDecoder::new(max_line_bytes);
        let mut buf = vec![0u8; 64 * 1024];
        let mut frames = Vec::new();
        let why = loop {
            match from.read(&mut buf) {
                Ok(0) => {
                    // An unterminated last line still counts.
                    decoder.finish(&mut frames);
                    break None;
                }
                Ok(n) => decoder.feed(&buf[..n], &mut frames),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Some(format!("reading from the agent failed: {e}")),
            }
            for frame in frames.drain(..) {
                if !self.frame(frame) {
                    return;
                }
            }
        };
        for frame in frames.drain(..) {
            if !self.frame(frame) {
                return;
            }
        }
        let _ = self.tx.send(Incoming::Closed(why));
    }

    /// Handles one frame; false once nobody is listening.
    fn frame(&self, frame: Frame) -> bool {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { limit } => {
                let _ = writeln!(io::stderr(), "acp client: skipped a line from the agent longer than {limit} bytes");
                return true;
            }
        };
        // A stray byte that is not UTF-8 costs a character, not the message.
        let text = String::from_utf8_lossy(&line);
        if self.verbose {
            let _ = writeln!(io::stderr(), "← {text}");
        }
        let message = match jsonrpc::parse_line(text.as_bytes()) {
            Ok(Message::Request { id, method, params }) => {
                Incoming::Request { id, method, params: params.unwrap_or(Value::Null) }
            }
            Ok(Message::Notification { method, params }) => {
                Incoming::Notification { method, params: params.unwrap_or(Value::Null) }
            }
            Ok(Message::Response { id, result }) => Incoming::Response { id, result },
            // A broken answer (an `error` that is not an error object, say) still ends the wait for it.
            Err(invalid) if !invalid.respond && invalid.id != RequestId::Null => {
                Incoming::Response { id: invalid.id, result: Err(invalid.error) }
            }
            Err(invalid) => {
                let _ = writeln!(
                    io::stderr(),
                    "acp client: ignoring a line from the agent that is not JSON-RPC: {}",
                    clip(&text)
                );
                // A request the agent waits for gets its error.
                if invalid.respond
                    && invalid.id != RequestId::Null
                    && let Some(writer) = self.writer.upgrade()
                {
                    let _ = writer.line(&jsonrpc::error_line(&invalid.id, &invalid.error));
                }
                return true;
            }
        };
        (self.tap)(&message);
        self.tx.send(message).is_ok()
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 200 { s.to_owned() } else { format!("{}…", s.chars().take(200).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};

    use serde_json::json;

    use super::*;
    use crate::requests;

    /// A connection to a pretend agent: what the client writes, and where to write as the agent.
    fn pair(max_line_bytes: usize) -> (Sender, Receiver, BufReader<io::PipeReader>, io::PipeWriter) {
        let (agent_in, client_out) = io::pipe().unwrap();
        let (client_in, agent_out) = io::pipe().unwrap();
        let (tx, rx) = start(client_in, client_out, false, max_line_bytes, |_| {}).unwrap();
        (tx, rx, BufReader::new(agent_in), agent_out)
    }

    fn read_json(from: &mut impl BufRead) -> Value {
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn requests_go_out_as_lines_and_answers_come_back() {
        let (tx, rx, mut agent_in, mut agent_out) = pair(DEFAULT_MAX_LINE_BYTES);
        let id = tx.request(&requests::initialize(requests::Client { name: "t", title: "t", host: false })).unwrap();
        let sent = read_json(&mut agent_in);
        assert_eq!((&sent["jsonrpc"], &sent["id"], &sent["method"]), (&json!("2.0"), &json!(0), &json!("initialize")));
        writeln!(agent_out, r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":1}}}}"#).unwrap();
        assert!(matches!(rx.recv(), Incoming::Response { id: got, result: Ok(_) } if got == id));
        drop(agent_out);
        assert!(matches!(rx.recv(), Incoming::Closed(None)));
    }

    #[test]
    fn what_the_agent_sends_is_sorted_and_lines_that_are_not_json_rpc_are_skipped() {
        let (tx, rx, mut agent_in, mut agent_out) = pair(DEFAULT_MAX_LINE_BYTES);
        let lines = [
            r#"not json"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"auth"}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}"#,
            // A broken answer still ends the wait for it.
            r#"{"jsonrpc":"2.0","id":5,"error":"boom"}"#,
            // A request that is not valid JSON-RPC gets an error answer rather than none.
            r#"{"jsonrpc":"2.0","id":"y","method":"fs/read_text_file","params":3}"#,
            // The last line needs no newline.
            r#"{"jsonrpc":"2.0","method":"last"}"#,
        ];
        agent_out.write_all(lines.join("\n").as_bytes()).unwrap();
        drop(agent_out);
        let Incoming::Response { id, result: Err(e) } = rx.recv() else { panic!("an error answer") };
        assert_eq!((id, e.code, e.message.as_str()), (RequestId::Number(4), -32000, "auth"));
        let Incoming::Notification { method, params } = rx.recv() else { panic!("a notification") };
        assert_eq!((method.as_str(), &params), ("session/update", &json!({"a": 1})));
        assert!(matches!(rx.recv(), Incoming::Request { id: RequestId::Str(id), .. } if id == "x"));
        assert!(matches!(rx.recv(), Incoming::Response { id: RequestId::Number(5), result: Err(_) }));
        assert!(matches!(rx.recv(), Incoming::Notification { method, params: Value::Null } if method == "last"));
        assert!(matches!(rx.recv(), Incoming::Closed(None)));
        let answer = read_json(&mut agent_in);
        assert_eq!((&answer["id"], &answer["error"]["code"]), (&json!("y"), &json!(-32600)), "{answer}");
        drop(tx);
    }

    #[test]
    fn a_line_too_long_is_skipped_and_the_connection_lives_on() {
        let (_tx, rx, _agent_in, mut agent_out) = pair(64);
        let long = format!(r#"{{"jsonrpc":"2.0","method":"long","params":{{"t":"{}"}}}}"#, "x".repeat(1000));
        writeln!(agent_out, "{long}").unwrap();
        writeln!(agent_out, r#"{{"jsonrpc":"2.0","method":"next"}}"#).unwrap();
        drop(agent_out);
        assert!(matches!(rx.recv(), Incoming::Notification { method, .. } if method == "next"));
        assert!(matches!(rx.recv(), Incoming::Closed(None)));
    }

    #[test]
    fn dropping_the_sender_closes_the_agents_input() {
        let (tx, _rx, mut agent_in, _agent_out) = pair(DEFAULT_MAX_LINE_BYTES);
        tx.notify(&requests::cancel("s")).unwrap();
        assert_eq!(read_json(&mut agent_in)["method"], "session/cancel");
        drop(tx);
        // The reader thread is still running (the agent has not closed its output): it must not
        // keep the agent's input open.
        let mut rest = String::new();
        assert_eq!(agent_in.read_line(&mut rest).unwrap(), 0, "end of input");
    }
}
