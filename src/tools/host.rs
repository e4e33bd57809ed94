//! What tools need from the outside world: text files as the user sees them, the user's approval,
//! and (when the editor offers them) terminals. A surface implements [`Host`]: the ACP layer goes
//! through the editor where the client offers it; [`LocalHost`] is plain disk access.

use std::path::Path;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

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
    pub call: super::ToolCallState,
    pub options: Vec<PermissionOption>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Selected(String),
    /// The prompt was cancelled (or the user could not be asked).
    Cancelled,
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

/// Terminals the editor creates and shows.
pub trait Terminals: Send + Sync {
    fn create<'a>(&'a self, session: &'a str, spec: &'a TerminalSpec) -> BoxFuture<'a, Result<String, String>>;
    fn wait_for_exit<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<ExitStatus, String>>;
    fn output<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<TerminalOutput, String>>;
    fn kill<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>>;
    fn release<'a>(&'a self, session: &'a str, id: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// Lines `line ..= line + limit - 1` (1-based) of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub line: u32,
    pub limit: u32,
}

pub trait Host: Send + Sync {
    /// Reads a text file — or a range of its lines — as the user sees it (an editor includes
    /// unsaved changes).
    fn read_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        range: Option<LineRange>,
    ) -> BoxFuture<'a, Result<String, FsError>>;

    /// Writes a text file (an editor shows the change for review).
    fn write_text_file<'a>(
        &'a self,
        session: &'a str,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), FsError>>;

    /// Asks the user; resolves to `Cancelled` when `cancel` fires.
    fn request_permission<'a>(
        &'a self,
        session: &'a str,
        request: &'a PermissionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, PermissionAnswer>;

    /// Editor terminals, when the editor offers them.
    fn terminals(&self) -> Option<&dyn Terminals> {
        None
    }
}

/// Plain disk access; nobody to ask, so every question is answered "no".
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalHost;

impl Host for LocalHost {
    fn read_text_file<'a>(
        &'a self,
        _session: &'a str,
        path: &'a Path,
        range: Option<LineRange>,
    ) -> BoxFuture<'a, Result<String, FsError>> {
        Box::pin(async move {
            match range {
                None => read_local(path).await,
                Some(range) => read_local_lines(path, range).await,
            }
        })
    }

    fn write_text_file<'a>(
        &'a self,
        _session: &'a str,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), FsError>> {
        Box::pin(write_local(path, content))
    }

    fn request_permission<'a>(
        &'a self,
        _session: &'a str,
        request: &'a PermissionRequest,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, PermissionAnswer> {
        let reject = request.options.iter().find(|o| o.kind == OptionKind::RejectOnce).map(|o| o.id.clone());
        Box::pin(async move { reject.map_or(PermissionAnswer::Cancelled, PermissionAnswer::Selected) })
    }
}

/// Reads a UTF-8 file from disk.
pub async fn read_local(path: &Path) -> Result<String, FsError> {
    let bytes = tokio::fs::read(path).await?;
    String::from_utf8(bytes).map_err(|_| FsError::Other(format!("{} is not UTF-8 text", path.display())))
}

/// Reads a range of lines without loading the whole file (a 1 GB log is fine).
pub async fn read_local_lines(path: &Path, range: LineRange) -> Result<String, FsError> {
    use tokio::io::AsyncBufReadExt;
    let file = tokio::fs::File::open(path).await?;
    let mut lines = tokio::io::BufReader::with_capacity(256 * 1024, file).split(b'\n');
    let first = u64::from(range.line.max(1));
    let last = first + u64::from(range.limit) - 1;
    let mut out = Vec::new();
    let mut n = 0u64;
    while let Some(line) = lines.next_segment().await? {
        n += 1;
        if n > last {
            break;
        }
        if n >= first {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    String::from_utf8(out).map_err(|_| FsError::Other(format!("{} is not UTF-8 text", path.display())))
}

/// Writes a file to disk, creating its directory if needed, through a temporary file and a rename
/// so a reader never sees half a file.
pub async fn write_local(path: &Path, content: &str) -> Result<(), FsError> {
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
