//! The client's end of an ACP connection over any byte streams (a child's stdio, or pipes to an
//! agent in the same process): requests and notifications out, answers, notifications and the
//! agent's own requests in, one reader thread, everything in arrival order on one channel.

use std::io::{self, BufReader, Read, Write};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use serde_json::{Value, json};

/// A JSON-RPC error as the agent sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    fn from_value(v: &Value) -> Self {
        Self {
            code: v["code"].as_i64().unwrap_or(-32603),
            message: v["message"].as_str().unwrap_or("(no message)").to_owned(),
            data: v.get("data").cloned(),
        }
    }

    pub fn to_value(&self) -> Value {
        let mut v = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            v["data"] = data.clone();
        }
        v
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// What arrives from the agent (or from this process: an interrupt).
#[derive(Debug)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: i64,
        result: Result<Value, RpcError>,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The agent asks something of the client; answer with [`Sender::respond`].
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// Ctrl-C or a signal, injected by the process.
    Interrupt,
    /// The agent's output ended (it exited or closed stdout); the text says why when known.
    Closed(Option<String>),
}

/// Sends to the agent; cheap to clone.
#[derive(Clone)]
pub struct Sender {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    next_id: Arc<AtomicI64>,
    verbose: bool,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl Sender {
    /// Sends a request; its answer arrives as [`Incoming::Response`] with the returned id.
    pub fn request(&self, method: &str, params: Value) -> io::Result<i64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    pub fn notify(&self, method: &str, params: Value) -> io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Answers one of the agent's requests.
    pub fn respond(&self, id: &Value, result: Result<Value, RpcError>) -> io::Result<()> {
        match result {
            Ok(result) => self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(e) => self.send(&json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()})),
        }
    }

    fn send(&self, message: &Value) -> io::Result<()> {
        let line = message.to_string();
        if self.verbose {
            let _ = writeln!(io::stderr(), "→ {line}");
        }
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
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
    let (tx, rx) = mpsc::channel();
    let inject = tx.clone();
    std::thread::Builder::new().name("acp-client-reader".into()).spawn(move || read_loop(from, &tx, verbose, &tap))?;
    let sender = Sender { out: Arc::new(Mutex::new(Box::new(to))), next_id: Arc::new(AtomicI64::new(0)), verbose };
    Ok((sender, Receiver { rx, inject }))
}

/// The longest line taken from an agent; a longer one is skipped (and reported), never held.
const MAX_LINE: usize = 64 << 20;

fn read_loop(from: impl Read, tx: &mpsc::Sender<Incoming>, verbose: bool, tap: &dyn Fn(&Incoming)) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line) {
            Ok(None) => {
                let _ = tx.send(Incoming::Closed(None));
                return;
            }
            Ok(Some(0)) => {}
            Ok(Some(skipped)) => {
                let _ =
                    writeln!(io::stderr(), "acp client: skipped a line of {skipped} bytes from the agent (too long)");
                continue;
            }
            Err(e) => {
                let _ = tx.send(Incoming::Closed(Some(format!("reading from the agent failed: {e}"))));
                return;
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if verbose {
            let _ = writeln!(io::stderr(), "← {text}");
        }
        match classify(text) {
            Some(message) => {
                tap(&message);
                if tx.send(message).is_err() {
                    return;
                }
            }
            None => {
                let _ = writeln!(
                    io::stderr(),
                    "acp client: ignoring a line from the agent that is not JSON-RPC: {}",
                    clip(text)
                );
            }
        }
    }
}

/// Reads one line into `line`: `None` at the end of input, `Some(0)` for a line, `Some(n)` when a
/// line of `n` bytes was longer than [`MAX_LINE`] and skipped.
fn read_line(reader: &mut impl io::BufRead, line: &mut Vec<u8>) -> io::Result<Option<usize>> {
    let mut skipped = 0usize;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if skipped > 0 {
                Some(skipped)
            } else if line.is_empty() {
                None
            } else {
                Some(0)
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let used = chunk.len();
        if skipped > 0 || line.len() + used > MAX_LINE {
            skipped += line.len() + used;
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if done {
            return Ok(Some(skipped));
        }
    }
}

/// One line from the agent → what it is; `None` for anything that is not a JSON-RPC message.
pub fn classify(line: &str) -> Option<Incoming> {
    let v: Value = serde_json::from_str(line).ok()?;
    let method = v.get("method").and_then(Value::as_str);
    let id = v.get("id").filter(|id| !id.is_null());
    match (method, id) {
        (Some(method), Some(id)) => Some(Incoming::Request {
            id: id.clone(),
            method: method.to_owned(),
            params: v.get("params").cloned().unwrap_or(Value::Null),
        }),
        (Some(method), None) => Some(Incoming::Notification {
            method: method.to_owned(),
            params: v.get("params").cloned().unwrap_or(Value::Null),
        }),
        (None, Some(id)) => {
            let id = id.as_i64()?;
            let result = match (v.get("result"), v.get("error")) {
                (_, Some(e)) => Err(RpcError::from_value(e)),
                (Some(r), None) => Ok(r.clone()),
                (None, None) => return None,
            };
            Some(Incoming::Response { id, result })
        }
        (None, None) => None,
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 200 { s.to_owned() } else { format!("{}…", s.chars().take(200).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_too_long_is_skipped_without_being_held() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n");
        let mut reader = io::BufReader::with_capacity(64 * 1024, &input[..]);
        let mut line = Vec::new();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), Some(MAX_LINE + 11));
        assert!(line.capacity() <= MAX_LINE + 64 * 1024, "never grew past the limit");
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), Some(0));
        assert!(classify(std::str::from_utf8(&line).unwrap().trim()).is_some());
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), None);
    }

    #[test]
    fn lines_are_classified() {
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":3,"result":{"a":1}}"#),
            Some(Incoming::Response { id: 3, result: Ok(_) })
        ));
        let Some(Incoming::Response { result: Err(e), .. }) =
            classify(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"auth"}}"#)
        else {
            panic!("an error answer")
        };
        assert_eq!((e.code, e.message.as_str()), (-32000, "auth"));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Some(Incoming::Notification { .. })
        ));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}"#),
            Some(Incoming::Request { .. })
        ));
        assert!(classify("not json").is_none());
        assert!(classify(r#"{"jsonrpc":"2.0"}"#).is_none());
    }

    #[test]
    fn requests_go_out_as_lines_and_answers_come_back() {
        let (agent_in, client_out) = std::io::pipe().unwrap();
        let (client_in, mut agent_out) = std::io::pipe().unwrap();
        let (tx, rx) = connect(client_in, client_out, false).unwrap();
        let id = tx.request("initialize", json!({"protocolVersion": 1})).unwrap();
        let mut line = String::new();
        io::BufRead::read_line(&mut BufReader::new(agent_in), &mut line).unwrap();
        let sent: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(sent["method"], "initialize");
        writeln!(agent_out, r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":1}}}}"#).unwrap();
        assert!(matches!(rx.recv(), Incoming::Response { result: Ok(_), .. }));
        drop(agent_out);
        assert!(matches!(rx.recv(), Incoming::Closed(None)));
    }
}
