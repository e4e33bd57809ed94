//! What the client offers the agent: files on disk (`fs/*`) and terminals that are real child
//! processes (`terminal/*`), each answered on its own thread where it may wait.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use acp_protocol::acp::client_methods as m;
use acp_protocol::jsonrpc::{ErrorObject, RequestId, code};

use crate::conn::Sender;

/// Output kept per terminal when the agent sets no limit.
const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, message)
}

fn failed(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::INTERNAL_ERROR, message)
}

/// The largest file the client reads for the agent.
const MAX_READ: u64 = 64 << 20;

/// A whole regular file of at most [`MAX_READ`] bytes, as text: a FIFO (which would block the
/// client) or a file that never ends is refused.
pub fn read_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file (a directory, FIFO, socket or device)"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_READ + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_READ {
        return Err(std::io::Error::other(format!("larger than {} MiB", MAX_READ >> 20)));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Reads a text file, optionally from 1-based `line` for `limit` lines.
pub fn read_text_file(params: &Value) -> Result<Value, ErrorObject> {
    let path = params["path"].as_str().ok_or_else(|| invalid("`path` is required"))?;
    let content = read_file(Path::new(path)).map_err(|e| failed(format!("{path}: {e}")))?;
    let line = params["line"].as_u64().map(|l| l.max(1) as usize);
    let limit = params["limit"].as_u64().map(|l| l as usize);
    let content = match (line, limit) {
        (None, None) => content,
        (line, limit) => {
            let start = line.unwrap_or(1) - 1;
            content.split_inclusive('\n').skip(start).take(limit.unwrap_or(usize::MAX)).collect()
        }
    };
    Ok(json!({"content": content}))
}

/// Writes a text file (creating its directory).
pub fn write_text_file(params: &Value) -> Result<Value, ErrorObject> {
    let path = params["path"].as_str().ok_or_else(|| invalid("`path` is required"))?;
    let content = params["content"].as_str().ok_or_else(|| invalid("`content` is required"))?;
    if let Some(dir) = Path::new(path).parent() {
        std::fs::create_dir_all(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
    }
    std::fs::write(path, content).map_err(|e| failed(format!("{path}: {e}")))?;
    Ok(Value::Null)
}

/// One terminal: a child process and what it printed.
struct Terminal {
    child: Mutex<Child>,
    state: Mutex<TermState>,
    exited: Condvar,
}

struct TermState {
    output: String,
    truncated: bool,
    limit: usize,
    /// Both output pipes are drained.
    streams_done: usize,
    /// When the command was first seen to have exited (its pipes may stay open in the hands of
    /// something it left running; the exit is reported anyway soon after).
    exited_at: Option<std::time::Instant>,
    exit: Option<Value>,
    command: String,
}

/// The terminals of this client, by id.
#[derive(Default, Clone)]
pub struct Terminals {
    map: Arc<Mutex<HashMap<String, Arc<Terminal>>>>,
    next: Arc<Mutex<u64>>,
    /// What released terminals showed last (agents release a terminal before reporting the tool
    /// call finished, and the screen still shows its output then).
    released: Arc<Mutex<std::collections::VecDeque<(String, Snapshot)>>>,
}

/// A terminal's command line, output and exit status.
pub type Snapshot = (String, String, Option<Value>);

/// Released terminals remembered for display, and how much of each one's output.
const RELEASED_KEPT: usize = 32;
const RELEASED_TAIL: usize = 16 * 1024;

impl std::fmt::Debug for Terminals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminals").finish_non_exhaustive()
    }
}

impl Terminals {
    /// `terminal/create`: starts the command; answers at once with its id.
    pub fn create(&self, params: &Value) -> Result<Value, ErrorObject> {
        let command = params["command"].as_str().ok_or_else(|| invalid("`command` is required"))?;
        let args: Vec<&str> =
            params["args"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let mut cmd = if args.is_empty() && command.contains(char::is_whitespace) {
            // A whole command line: let the shell parse it.
            let mut c = Command::new("sh");
            c.arg("-c").arg(command);
            c
        } else {
            let mut c = Command::new(command);
            c.args(&args);
            c
        };
        if let Some(cwd) = params["cwd"].as_str() {
            cmd.current_dir(PathBuf::from(cwd));
        }
        for var in params["env"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (var["name"].as_str(), var["value"].as_str()) {
                cmd.env(name, value);
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Its own process group, so a kill reaches whatever it started.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| failed(format!("could not start `{command}`: {e}")))?;
        let limit = params["outputByteLimit"].as_u64().map_or(DEFAULT_OUTPUT_LIMIT, |l| l as usize);
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let shown = std::iter::once(command).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        let terminal = Arc::new(Terminal {
            child: Mutex::new(child),
            state: Mutex::new(TermState {
                output: String::new(),
                truncated: false,
                limit,
                streams_done: 0,
                exited_at: None,
                exit: None,
                command: shown,
            }),
            exited: Condvar::new(),
        });
        let id = {
            let mut next = lock(&self.next);
            *next += 1;
            format!("term_{}", *next)
        };
        for stream in [stdout.map(|s| Box::new(s) as Box<dyn Read + Send>), stderr.map(|s| Box::new(s) as _)]
            .into_iter()
            .flatten()
        {
            let t = terminal.clone();
            std::thread::spawn(move || pump(stream, &t));
        }
        lock(&self.map).insert(id.clone(), terminal);
        Ok(json!({"terminalId": id}))
    }

    fn get(&self, params: &Value) -> Result<Arc<Terminal>, ErrorObject> {
        let id = params["terminalId"].as_str().ok_or_else(|| invalid("`terminalId` is required"))?;
        lock(&self.map).get(id).cloned().ok_or_else(|| invalid(format!("no terminal `{id}`")))
    }

    /// `terminal/output`: what it printed so far, and its exit status once it has one.
    pub fn output(&self, params: &Value) -> Result<Value, ErrorObject> {
        let t = self.get(params)?;
        t.poll_exit();
        let s = lock(&t.state);
        let mut out = json!({"output": s.output, "truncated": s.truncated});
        if let Some(exit) = &s.exit {
            out["exitStatus"] = exit.clone();
        }
        Ok(out)
    }

    /// `terminal/wait_for_exit`: blocks, so the caller answers it from its own thread.
    pub fn wait_for_exit(&self, params: &Value) -> Result<Value, ErrorObject> {
        let t = self.get(params)?;
        loop {
            t.poll_exit();
            let s = lock(&t.state);
            if let Some(exit) = &s.exit {
                return Ok(exit.clone());
            }
            let _ = t.exited.wait_timeout(s, std::time::Duration::from_millis(50));
        }
    }

    /// `terminal/kill`: stops the command; the terminal stays for `output`.
    pub fn kill(&self, params: &Value) -> Result<Value, ErrorObject> {
        let t = self.get(params)?;
        t.kill();
        Ok(Value::Null)
    }

    /// `terminal/release`: kills it if needed and forgets it.
    pub fn release(&self, params: &Value) -> Result<Value, ErrorObject> {
        let t = self.get(params)?;
        t.kill();
        let _ = lock(&t.child).wait();
        t.poll_exit();
        if let Some(id) = params["terminalId"].as_str() {
            lock(&self.map).remove(id);
            let s = lock(&t.state);
            let mut cut = s.output.len().saturating_sub(RELEASED_TAIL);
            while !s.output.is_char_boundary(cut) {
                cut += 1;
            }
            let mut released = lock(&self.released);
            if released.len() == RELEASED_KEPT {
                released.pop_front();
            }
            released.push_back((id.to_owned(), (s.command.clone(), s.output[cut..].to_owned(), s.exit.clone())));
        }
        Ok(Value::Null)
    }

    /// The command line and output of a terminal, for display.
    pub fn snapshot(&self, id: &str) -> Option<Snapshot> {
        let live = lock(&self.map).get(id).cloned();
        let Some(t) = live else {
            return lock(&self.released).iter().find(|(rid, _)| rid == id).map(|(_, snap)| snap.clone());
        };
        t.poll_exit();
        let s = lock(&t.state);
        Some((s.command.clone(), s.output.clone(), s.exit.clone()))
    }

    /// Kills every terminal (the client is leaving).
    pub fn kill_all(&self) {
        for t in lock(&self.map).values() {
            t.kill();
        }
    }
}

impl Terminal {
    /// Kills the command and its process group.
    fn kill(&self) {
        let mut child = lock(&self.child);
        #[cfg(unix)]
        if let Some(pid) = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = child.kill();
    }

    fn poll_exit(&self) {
        let mut s = lock(&self.state);
        if s.exit.is_some() {
            return;
        }
        if let Ok(Some(status)) = lock(&self.child).try_wait() {
            // Wait for the pipes too, so the output is complete when the exit is reported — but
            // not for long: something the command left running may hold them open.
            let since = *s.exited_at.get_or_insert_with(std::time::Instant::now);
            if s.streams_done < 2 && since.elapsed() < std::time::Duration::from_millis(200) {
                return;
            }
            #[cfg(unix)]
            let signal = std::os::unix::process::ExitStatusExt::signal(&status).map(signal_name);
            #[cfg(not(unix))]
            let signal: Option<String> = None;
            s.exit = Some(json!({"exitCode": status.code(), "signal": signal}));
            self.exited.notify_all();
        }
    }
}

fn signal_name(n: i32) -> String {
    match n {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        9 => "SIGKILL".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

fn pump(mut stream: impl Read, t: &Terminal) {
    let mut buf = [0u8; 8192];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        carry.extend_from_slice(&buf[..n]);
        // Keep an incomplete UTF-8 sequence for the next read.
        let valid = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => carry.len(),
        };
        let text = String::from_utf8_lossy(&carry[..valid]).into_owned();
        carry.drain(..valid);
        append(&mut lock(&t.state), &text);
    }
    if !carry.is_empty() {
        append(&mut lock(&t.state), &String::from_utf8_lossy(&carry));
    }
    lock(&t.state).streams_done += 1;
    t.exited.notify_all();
}

/// Appends output, dropping the oldest when over the limit (at a character boundary).
fn append(s: &mut TermState, text: &str) {
    s.output.push_str(text);
    if s.output.len() > s.limit {
        let mut cut = s.output.len() - s.limit;
        while !s.output.is_char_boundary(cut) {
            cut += 1;
        }
        s.output.drain(..cut);
        s.truncated = true;
    }
}

/// Answers one of the agent's fs/terminal requests; blocking ones on their own thread.
pub fn answer(tx: &Sender, terminals: &Terminals, id: RequestId, method: &str, params: Value) {
    let result = match method {
        m::FS_READ_TEXT_FILE => read_text_file(&params),
        m::FS_WRITE_TEXT_FILE => write_text_file(&params),
        m::TERMINAL_CREATE => terminals.create(&params),
        m::TERMINAL_OUTPUT => terminals.output(&params),
        m::TERMINAL_KILL => terminals.kill(&params),
        m::TERMINAL_RELEASE => terminals.release(&params),
        m::TERMINAL_WAIT_FOR_EXIT => {
            let (tx, terminals) = (tx.clone(), terminals.clone());
            std::thread::spawn(move || {
                let _ = tx.respond(&id, terminals.wait_for_exit(&params));
            });
            return;
        }
        other => Err(ErrorObject::new(code::METHOD_NOT_FOUND, format!("the client does not offer `{other}`"))),
    };
    let _ = tx.respond(&id, result);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_regular_file_is_not_read() {
        let dir = tempfile_dir("fifo");
        let fifo = dir.join("pipe");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = read_text_file(&json!({"path": fifo})).unwrap_err();
        assert!(err.message.contains("not a regular file"), "{}", err.message);
        assert!(read_file(Path::new("/dev/zero")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("acp-repl-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn files_are_read_by_line_window_and_written() {
        let dir = std::env::temp_dir().join(format!("acp-repl-host-{}", std::process::id()));
        let path = dir.join("sub/a.txt");
        let p = path.to_str().unwrap();
        write_text_file(&json!({"path": p, "content": "one\ntwo\nthree\n"})).unwrap();
        assert_eq!(read_text_file(&json!({"path": p})).unwrap()["content"], "one\ntwo\nthree\n");
        assert_eq!(read_text_file(&json!({"path": p, "line": 2, "limit": 1})).unwrap()["content"], "two\n");
        assert!(read_text_file(&json!({"path": dir.join("missing").to_str().unwrap()})).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn terminals_run_capture_cap_and_kill() {
        let terms = Terminals::default();
        let id = terms.create(&json!({"command": "printf", "args": ["abcdef"], "outputByteLimit": 4})).unwrap();
        let exit = terms.wait_for_exit(&id).unwrap();
        assert_eq!(exit["exitCode"], 0);
        let out = terms.output(&id).unwrap();
        assert_eq!((out["output"].as_str(), out["truncated"].as_bool()), (Some("cdef"), Some(true)));
        terms.release(&id).unwrap();
        assert!(terms.output(&id).is_err(), "released");
        let shown = terms.snapshot(id["terminalId"].as_str().unwrap()).unwrap();
        assert_eq!((shown.0.as_str(), shown.1.as_str()), ("printf abcdef", "cdef"), "still shown after release");

        let id = terms.create(&json!({"command": "sleep 30"})).unwrap();
        terms.kill(&id).unwrap();
        let exit = terms.wait_for_exit(&id).unwrap();
        assert_eq!(exit["signal"], "SIGKILL");
    }
}
