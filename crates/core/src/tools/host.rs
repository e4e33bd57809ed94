//! What tools need from the outside world: text files as the user sees them, the user's approval,
//! and (when the editor offers them) terminals. A surface implements [`Host`]: the ACP layer goes
//! through the editor where the client offers it; [`LocalHost`] is plain disk access.

use std::path::Path;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use super::media::ChatFile;

/// Why a file could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    Other(String),
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound => f.write_str("no such file"),
            Self::Other(e) => f.write_str(e),
        }
    }
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound,
            _ => Self::Other(e.to_string()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

impl OptionKind {
    pub fn allows(self) -> bool {
        matches!(self, Self::AllowOnce | Self::AllowAlways)
    }
}

/// One choice offered to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionOption {
    pub id: String,
    /// Says what the choice covers, e.g. "Always allow `cargo test`".
    pub label: String,
    pub kind: OptionKind,
}

/// A question to the user about one tool call (already announced to them).
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// The call as announced: id, title, kind, input, locations and the diff it would make.
    pub call: super::call::ToolCallState,
    pub options: Vec<PermissionOption>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Selected(String),
    /// The turn was cancelled (the user said so in the question itself, or cancelled the turn).
    Cancelled,
    /// No choice came back: the user could not be asked, or the answer made no sense.
    NoAnswer,
    /// The surface has no way to ask anyone; says why, and what to change instead.
    Unaskable(String),
}

/// A question with a form, from a tool's server (MCP elicitation) to the user.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitRequest {
    /// Who asks (the MCP server's name).
    pub server: String,
    pub message: String,
    /// The form: a flat JSON Schema object of strings, numbers, booleans and enums.
    pub schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// The filled form.
    Accept(serde_json::Map<String, serde_json::Value>),
    Decline,
    Cancel,
}

/// A command to run in an editor terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: std::path::PathBuf,
    pub output_byte_limit: Option<u64>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitStatus {
    pub code: Option<i64>,
    pub signal: Option<String>,
}

impl ExitStatus {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    pub fn describe(&self) -> String {
        match (&self.code, &self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by {sig}"),
            (None, None) => "no exit status".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TerminalOutput {
    pub output: String,
    pub truncated: bool,
    pub exit: Option<ExitStatus>,
}

/// Lines `line ..= line + limit - 1` (1-based) of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub line: u32,
    pub limit: u32,
}

/// What tools reach the outside world through. Every call ends, whatever the editor does: the
/// ones a turn waits on end when `cancel` fires, and each has a time limit (so does the cleanup).
/// Tools hold it as `dyn` [`AnyHost`], which every `Host` is.
pub trait Host: Send + Sync + 'static {
    /// Reads a text file — or a range of its lines — as the user sees it (an editor includes
    /// unsaved changes).
    fn read_text_file(
        &self,
        session: &str,
        path: &Path,
        range: Option<LineRange>,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<String, FsError>> + Send;

    /// Writes a text file (an editor shows the change for review).
    fn write_text_file(
        &self,
        session: &str,
        path: &Path,
        content: &str,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<(), FsError>> + Send;

    /// Asks the user; resolves to `Cancelled` when `cancel` fires.
    fn request_permission(
        &self,
        session: &str,
        request: &PermissionRequest,
        cancel: &CancellationToken,
    ) -> impl Future<Output = PermissionAnswer> + Send;

    /// Asks the user to fill a form for a running call; resolves to `Cancel` when `cancel` fires.
    /// Without a way to ask, declined.
    fn elicit(
        &self,
        _session: &str,
        _call_id: &str,
        _request: &ElicitRequest,
        _cancel: &CancellationToken,
    ) -> impl Future<Output = ElicitAnswer> + Send {
        async { ElicitAnswer::Decline }
    }

    /// Whether the agent can send messages to chats here (the gateway with a messaging channel):
    /// then the `message` tool is offered.
    fn can_message(&self) -> bool {
        false
    }

    /// The chat session `session` talks in, if it came from one.
    fn own_chat(&self, _session: &str) -> Option<ChatTarget> {
        None
    }

    /// Sends `text` to a chat, with `file` if given (`text` is then its caption); the send
    /// policy decides whether it may go there.
    fn send_message(
        &self,
        _session: &str,
        _target: &ChatTarget,
        _text: &str,
        _file: Option<&ChatFile>,
    ) -> impl Future<Output = Result<(), String>> + Send {
        async { Err(NO_CHANNELS.to_owned()) }
    }

    /// Whether the agent's cron jobs are kept here (the gateway): then the `cron` tool is
    /// offered.
    fn can_schedule(&self) -> bool {
        false
    }

    /// Calls the gateway's cron method `method` (`cron.list`, `cron.add`, …) with `params`
    /// (the wire's); its result as the wire has it.
    fn cron(
        &self,
        _session: &str,
        _method: &str,
        _params: serde_json::Value,
    ) -> impl Future<Output = Result<serde_json::Value, String>> + Send {
        async { Err(NO_CRON.to_owned()) }
    }

    /// Whether the editor offers terminals it creates and shows (the `*_terminal` methods).
    fn has_terminals(&self) -> bool {
        false
    }

    fn create_terminal(
        &self,
        _session: &str,
        _spec: &TerminalSpec,
        _cancel: &CancellationToken,
    ) -> impl Future<Output = Result<String, String>> + Send {
        async { Err(NO_TERMINALS.to_owned()) }
    }

    fn wait_for_terminal_exit(
        &self,
        _session: &str,
        _id: &str,
        _cancel: &CancellationToken,
    ) -> impl Future<Output = Result<ExitStatus, String>> + Send {
        async { Err(NO_TERMINALS.to_owned()) }
    }

    fn terminal_output(
        &self,
        _session: &str,
        _id: &str,
    ) -> impl Future<Output = Result<TerminalOutput, String>> + Send {
        async { Err(NO_TERMINALS.to_owned()) }
    }

    fn kill_terminal(&self, _session: &str, _id: &str) -> impl Future<Output = Result<(), String>> + Send {
        async { Err(NO_TERMINALS.to_owned()) }
    }

    fn release_terminal(&self, _session: &str, _id: &str) -> impl Future<Output = Result<(), String>> + Send {
        async { Err(NO_TERMINALS.to_owned()) }
    }
}

const NO_TERMINALS: &str = "the editor offers no terminals";
const NO_CHANNELS: &str = "no messaging channel is served here";
const NO_CRON: &str = "cron jobs are kept by the gateway (acp gateway); this agent is not running in one";

/// A chat on a messaging channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTarget {
    /// `telegram`, …
    pub channel: String,
    /// The chat's id on it.
    pub to: String,
    /// A forum topic.
    pub thread: Option<String>,
}

impl ChatTarget {
    /// `channel[@account]:chat[:topic]` (`telegram:123456`, `telegram@family:123456:7`); a
    /// Matrix room id keeps its own `:` (`matrix:!room:example.org`). The channel of an account
    /// other than the default is `channel:account`, as the gateway sends through it.
    pub fn parse(given: &str) -> Result<Self, String> {
        let wrong = || format!("`{given}` is not a chat: write it as channel[@account]:chat (telegram:123456)");
        let (channel, rest) = given.trim().split_once(':').ok_or_else(wrong)?;
        let channel = match channel.split_once('@') {
            Some((base, account)) if !base.is_empty() && !account.is_empty() => format!("{base}:{account}"),
            Some(_) => return Err(wrong()),
            None => channel.to_owned(),
        };
        let (to, thread) = if channel == "matrix" || channel.starts_with("matrix:") {
            (rest, None)
        } else {
            match rest.split_once(':') {
                Some((to, thread)) => (to, Some(thread).filter(|t| !t.is_empty())),
                None => (rest, None),
            }
        };
        if channel.is_empty() || to.is_empty() {
            return Err(wrong());
        }
        Ok(Self { channel, to: to.to_owned(), thread: thread.map(str::to_owned) })
    }
}

/// [`Host`] as an object: the one place its futures are boxed.
pub trait AnyHost: Send + Sync {
    fn read_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        range: Option<LineRange>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, FsError>>;
    fn write_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        content: &'a str,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), FsError>>;
    fn request_permission<'a>(
        &'a self,
        session: &'a str,
        request: &'a PermissionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, PermissionAnswer>;
    fn elicit<'a>(
        &'a self,
        session: &'a str,
        call_id: &'a str,
        request: &'a ElicitRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, ElicitAnswer>;
    fn can_message(&self) -> bool;
    fn own_chat(&self, session: &str) -> Option<ChatTarget>;
    fn send_message<'a>(
        &'a self,
        session: &'a str,
        target: &'a ChatTarget,
        text: &'a str,
        file: Option<&'a ChatFile>,
    ) -> BoxFuture<'a, Result<(), String>>;
    fn can_schedule(&self) -> bool;
    fn cron<'a>(
        &'a self,
        session: &'a str,
        method: &'a str,
        params: serde_json::Value,
    ) -> BoxFuture<'a, Result<serde_json::Value, String>>;
    fn has_terminals(&self) -> bool;
    fn create_terminal<'a>(
        &'a self,
        session: &'a str,
        spec: &'a TerminalSpec,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, String>>;
    fn wait_for_terminal_exit<'a>(
        &'a self,
        session: &'a str,
        id: &'a str,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ExitStatus, String>>;
    fn terminal_output<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<TerminalOutput, String>>;
    fn kill_terminal<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>>;
    fn release_terminal<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

impl<H: Host> AnyHost for H {
    fn read_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        range: Option<LineRange>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, FsError>> {
        Box::pin(Host::read_text_file(self, session, path, range, cancel))
    }

    fn write_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        content: &'a str,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), FsError>> {
        Box::pin(Host::write_text_file(self, session, path, content, cancel))
    }

    fn request_permission<'a>(
        &'a self,
        session: &'a str,
        request: &'a PermissionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, PermissionAnswer> {
        Box::pin(Host::request_permission(self, session, request, cancel))
    }

    fn elicit<'a>(
        &'a self,
        session: &'a str,
        call_id: &'a str,
        request: &'a ElicitRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, ElicitAnswer> {
        Box::pin(Host::elicit(self, session, call_id, request, cancel))
    }

    fn can_message(&self) -> bool {
        Host::can_message(self)
    }

    fn own_chat(&self, session: &str) -> Option<ChatTarget> {
        Host::own_chat(self, session)
    }

    fn send_message<'a>(
        &'a self,
        session: &'a str,
        target: &'a ChatTarget,
        text: &'a str,
        file: Option<&'a ChatFile>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(Host::send_message(self, session, target, text, file))
    }

    fn can_schedule(&self) -> bool {
        Host::can_schedule(self)
    }

    fn cron<'a>(
        &'a self,
        session: &'a str,
        method: &'a str,
        params: serde_json::Value,
    ) -> BoxFuture<'a, Result<serde_json::Value, String>> {
        Box::pin(Host::cron(self, session, method, params))
    }

    fn has_terminals(&self) -> bool {
        Host::has_terminals(self)
    }

    fn create_terminal<'a>(
        &'a self,
        session: &'a str,
        spec: &'a TerminalSpec,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(Host::create_terminal(self, session, spec, cancel))
    }

    fn wait_for_terminal_exit<'a>(
        &'a self,
        session: &'a str,
        id: &'a str,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ExitStatus, String>> {
        Box::pin(Host::wait_for_terminal_exit(self, session, id, cancel))
    }

    fn terminal_output<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<TerminalOutput, String>> {
        Box::pin(Host::terminal_output(self, session, id))
    }

    fn kill_terminal<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(Host::kill_terminal(self, session, id))
    }

    fn release_terminal<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(Host::release_terminal(self, session, id))
    }
}

/// Plain disk access; nobody to ask, so every question is answered "no".
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalHost;

impl Host for LocalHost {
    async fn read_text_file(
        &self,
        _session: &str,
        path: &Path,
        range: Option<LineRange>,
        cancel: &CancellationToken,
    ) -> Result<String, FsError> {
        until_cancelled(cancel, async move {
            match range {
                None => read_local(path).await,
                Some(range) => read_local_lines(path, range).await,
            }
        })
        .await
    }

    async fn write_text_file(
        &self,
        _session: &str,
        path: &Path,
        content: &str,
        cancel: &CancellationToken,
    ) -> Result<(), FsError> {
        until_cancelled(cancel, write_local(path, content)).await
    }

    async fn request_permission(
        &self,
        _session: &str,
        request: &PermissionRequest,
        _cancel: &CancellationToken,
    ) -> PermissionAnswer {
        let reject = request.options.iter().find(|o| o.kind == OptionKind::RejectOnce).map(|o| o.id.clone());
        reject.map_or(PermissionAnswer::NoAnswer, PermissionAnswer::Selected)
    }
}

/// `work`, or an error as soon as `cancel` fires.
async fn until_cancelled<T>(
    cancel: &CancellationToken,
    work: impl std::future::Future<Output = Result<T, FsError>>,
) -> Result<T, FsError> {
    tokio::select! {
        done = work => done,
        () = cancel.cancelled() => Err(FsError::Other("cancelled".into())),
    }
}

/// The largest file read or rewritten whole (by `write` and `edit`, for their diffs).
pub const MAX_WHOLE_FILE: u64 = 32 << 20;

/// The most of one line `read` holds: a file with a 1 GiB line costs no more than this.
pub const MAX_LINE_KEPT: usize = 8 << 10;

/// Refuses what is not a regular file (a FIFO would block the read forever, a device would never
/// end); a missing file is fine here.
pub async fn ensure_regular(path: &Path) -> Result<(), FsError> {
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) if meta.is_dir() => Err(FsError::Other(format!("{} is a directory", path.display()))),
        Ok(_) => Err(FsError::Other(format!(
            "{} is not a regular file (a FIFO, socket or device); it is not read or written",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Reads a UTF-8 file from disk (at most [`MAX_WHOLE_FILE`] bytes).
pub async fn read_local(path: &Path) -> Result<String, FsError> {
    let owned = path.to_path_buf();
    let bytes = tokio::task::spawn_blocking(move || crate::files::read_capped(&owned, MAX_WHOLE_FILE))
        .await
        .map_err(|e| FsError::Other(e.to_string()))??;
    String::from_utf8(bytes).map_err(|_| FsError::Other(format!("{} is not UTF-8 text", path.display())))
}

/// Reads a range of lines without loading the whole file, or any whole line: each line is kept
/// to its first [`MAX_LINE_KEPT`] bytes (a 1 GB log, or a 1 GB line, is fine).
pub async fn read_local_lines(path: &Path, range: LineRange) -> Result<String, FsError> {
    use tokio::io::AsyncBufReadExt;
    ensure_regular(path).await?;
    let file = tokio::fs::File::open(path).await?;
    let mut reader = tokio::io::BufReader::with_capacity(256 * 1024, file);
    let first = u64::from(range.line.max(1));
    let last = first + u64::from(range.limit) - 1;
    let mut out = String::new();
    let mut line = Vec::new();
    let mut n = 1u64;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if !line.is_empty() {
                push_line(&mut out, &line, path)?;
            }
            break;
        }
        let (chunk, ends) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], true),
            None => (available, false),
        };
        let used = chunk.len() + usize::from(ends);
        if n >= first && line.len() < MAX_LINE_KEPT {
            line.extend_from_slice(&chunk[..chunk.len().min(MAX_LINE_KEPT - line.len())]);
        }
        reader.consume(used);
        if ends {
            if n >= first {
                push_line(&mut out, &line, path)?;
            }
            line.clear();
            n += 1;
            if n > last {
                break;
            }
        }
    }
    Ok(out)
}

/// Appends a kept line (cut to whole characters) and its newline.
fn push_line(out: &mut String, line: &[u8], path: &Path) -> Result<(), FsError> {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        // Cut in the middle of a character by MAX_LINE_KEPT.
        Err(e) if e.error_len().is_none() && line.len() >= MAX_LINE_KEPT => {
            std::str::from_utf8(&line[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return Err(FsError::Other(format!("{} is not UTF-8 text", path.display()))),
    };
    out.push_str(text);
    out.push('\n');
    Ok(())
}

/// Writes a file to disk, creating its directory if needed, through a temporary file and a rename
/// so a reader never sees half a file.
pub async fn write_local(path: &Path, content: &str) -> Result<(), FsError> {
    ensure_regular(path).await?;
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.acp-{}", uuid::Uuid::new_v4().simple()));
    tokio::fs::write(&tmp, content).await?;
    // Keep the original's permissions (e.g. an executable script).
    if let Ok(meta) = tokio::fs::metadata(path).await {
        let _ = tokio::fs::set_permissions(&tmp, meta.permissions()).await;
    }
    if let Err(e) = tokio::fs::rename(&tmp, path).await {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(e.into());
    }
    Ok(())
}
