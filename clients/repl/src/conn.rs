//! The client's end of an ACP connection over any byte streams (a child's stdio), or to an agent
//! in the same process: requests and notifications out, answers, notifications and the agent's
//! own requests in, everything in arrival order on one channel. A reader thread reads a byte
//! stream; an agent in this process writes to an [`AgentOutput`] instead, read as it is written.
//! Lines are framed by the protocol crate's codec and read and written as its JSON-RPC envelope.

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
    rx: mpsc::Receiver<Item>,
    inject: mpsc::Sender<Item>,
    /// For the lines of an agent in this process, read here (see [`message`]).
    writer: Weak<Writer>,
    verbose: bool,
}

/// What the channel carries: a message the reader thread read, or a line an agent in this process
/// wrote, read once it is received (on the receiving thread, not the agent's).
enum Item {
    Message(Incoming),
    Line(Vec<u8>),
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Message(m) => m.fmt(f),
            Self::Line(line) => f.debug_tuple("Line").field(&String::from_utf8_lossy(line)).finish(),
        }
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl Receiver {
    /// The next message; `Closed` once the agent is gone (and forever after).
    pub fn recv(&self) -> Incoming {
        loop {
            let Ok(item) = self.rx.recv() else { return Incoming::Closed(None) };
            if let Some(message) = self.read(item) {
                return message;
            }
        }
    }

    /// The next message, or `None` when nothing arrived within `timeout`.
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Option<Incoming> {
        let Some(deadline) = std::time::Instant::now().checked_add(timeout) else { return Some(self.recv()) };
        loop {
            match self.rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(item) => {
                    if let Some(message) = self.read(item) {
                        return Some(message);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Some(Incoming::Closed(None)),
            }
        }
    }

    fn read(&self, item: Item) -> Option<Incoming> {
        match item {
            Item::Message(message) => Some(message),
            Item::Line(line) => message(&line, self.verbose, &self.writer),
        }
    }

    /// A handle that puts [`Incoming::Interrupt`] into this stream (for signal handlers).
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.inject.clone())
    }
}

/// Delivers an interrupt to the receiving loop.
#[derive(Clone, Debug)]
pub struct Interrupter(mpsc::Sender<Item>);

impl Interrupter {
    pub fn interrupt(&self) {
        let _ = self.0.send(Item::Message(Incoming::Interrupt));
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
    let (items, rx) = mpsc::channel();
    let (tx, rx) = halves(&items, rx, Box::new(to), verbose);
    let reader = Reader { tx: items, writer: rx.writer.clone(), verbose, tap };
    std::thread::Builder::new().name("acp-client-reader".into()).spawn(move || reader.run(from, max_line_bytes))?;
    Ok((tx, rx))
}

/// Connects to an agent in this process: `agent` is given the [`AgentOutput`] to write its lines
/// to, and returns where ours go (and anything else of its own, handed back as the third value).
pub fn connect_in_process<W: Write + Send + 'static, R>(
    verbose: bool,
    agent: impl FnOnce(AgentOutput) -> (W, R),
) -> (Sender, Receiver, R) {
    let (items, rx) = mpsc::channel();
    let output =
        AgentOutput { items: items.clone(), decoder: LineDecoder::new(DEFAULT_MAX_LINE_BYTES), frames: Vec::new() };
    let (to, theirs) = agent(output);
    let (tx, rx) = halves(&items, rx, Box::new(to), verbose);
    (tx, rx, theirs)
}

/// Both ends around a channel whose sending side is `items`, writing to `to`.
fn halves(
    items: &mpsc::Sender<Item>,
    rx: mpsc::Receiver<Item>,
    to: Box<dyn Write + Send>,
    verbose: bool,
) -> (Sender, Receiver) {
    let writer = Arc::new(Writer { out: Mutex::new(to), verbose });
    let rx = Receiver { rx, inject: items.clone(), writer: Arc::downgrade(&writer), verbose };
    (Sender { writer, next_id: Arc::new(AtomicI64::new(0)) }, rx)
}

/// The output of an agent in this process ([`connect_in_process`]): the lines it writes are cut
/// out as they are written, on its thread, and read by the receiving loop. Dropping it reports
/// the agent gone.
pub struct AgentOutput {
    items: mpsc::Sender<Item>,
    decoder: LineDecoder,
    frames: Vec<Frame>,
}

impl std::fmt::Debug for AgentOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOutput").finish_non_exhaustive()
    }
}

impl AgentOutput {
    fn pass_on(&mut self) {
        for frame in self.frames.drain(..) {
            match frame {
                // Nobody listening any more (the run is over): the rest is dropped.
                Frame::Line(line) => {
                    let _ = self.items.send(Item::Line(line));
                }
                Frame::TooLong { limit } => too_long(limit),
            }
        }
    }
}

impl Write for AgentOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.decoder.feed(buf, &mut self.frames);
        self.pass_on();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for AgentOutput {
    fn drop(&mut self) {
        // An unterminated last line still counts.
        self.decoder.finish(&mut self.frames);
        self.pass_on();
        let _ = self.items.send(Item::Message(Incoming::Closed(None)));
    }
}

fn too_long(limit: usize) {
    let _ = writeln!(io::stderr(), "acp client: skipped a line from the agent longer than {limit} bytes");
}

/// The reader thread's state.
struct Reader<T> {
    tx: mpsc::Sender<Item>,
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
        let _ = self.tx.send(Item::Message(Incoming::Closed(why)));
    }

    /// Handles one frame; false once nobody is listening.
    fn frame(&self, frame: Frame) -> bool {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { limit } => {
                too_long(limit);
                return true;
            }
        };
        let Some(message) = message(&line, self.verbose, &self.writer) else { return true };
        (self.tap)(&message);
        self.tx.send(Item::Message(message)).is_ok()
    }
}

/// Reads one line from the agent; `None` if it is not JSON-RPC (skipped, and a request the agent
/// waits for is answered with an error through `writer`).
fn message(line: &[u8], verbose: bool, writer: &Weak<Writer>) -> Option<Incoming> {
    // A stray byte that is not UTF-8 costs a character, not the message.
    let text = String::from_utf8_lossy(line);
    if verbose {
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
                && let Some(writer) = writer.upgrade()
            {
                let _ = writer.line(&jsonrpc::error_line(&invalid.id, &invalid.error));
            }
            return None;
        }
    };
    Some(message)
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

    /// An agent in this process writes to its [`AgentOutput`] from a thread of its own: each line
    /// (one split over writes, and an unterminated last one, included) is read by the receiving
    /// loop, a request that is not JSON-RPC is answered with an error from there, and dropping the
    /// output reports the agent gone.
    #[test]
    fn an_agent_in_this_process_is_read_by_the_receiving_loop() {
        let (agent_in, client_out) = io::pipe().unwrap();
        let (tx, rx, mut output) = connect_in_process(false, |output| (client_out, output));
        let mut agent_in = BufReader::new(agent_in);
        let id = tx.request(&requests::initialize(requests::Client { name: "t", title: "t", host: false })).unwrap();
        assert_eq!(read_json(&mut agent_in)["method"], "initialize");
        let first = format!(r#"{{"jsonrpc":"2.0","id":{id},"res"#);
        let agent = std::thread::spawn(move || {
            output.write_all(first.as_bytes()).unwrap();
            output.write_all(br#"ult":{"protocolVersion":1}}"#).unwrap();
            output.write_all(b"\n").unwrap();
            output
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"y\",\"method\":\"fs/read_text_file\",\"params\":3}\n")
                .unwrap();
            output.write_all(br#"{"jsonrpc":"2.0","method":"last"}"#).unwrap();
        });
        agent.join().unwrap();
        assert!(matches!(rx.recv(), Incoming::Response { id: got, result: Ok(_) } if got == id));
        assert!(matches!(rx.recv(), Incoming::Notification { method, .. } if method == "last"));
        let answer = read_json(&mut agent_in);
        assert_eq!((&answer["id"], &answer["error"]["code"]), (&json!("y"), &json!(-32600)), "{answer}");
        let gone = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert!(matches!(gone, Some(Incoming::Closed(None))), "{gone:?}");
        drop(tx);
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
