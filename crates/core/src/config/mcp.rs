//! MCP servers: what a session connects to. They come from `[mcp_servers.NAME]` in config.toml
//! (codex-style) and from the editor (`mcpServers` of `session/new|load|resume`); the editor's win
//! by name. One [`McpServer`] describes either, so the two lists merge into one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// How long a server may take to start and answer `initialize`, unless its section says otherwise.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take, unless the server's section says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(600);

/// One MCP server a session uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct McpServer {
    pub name: String,
    pub transport: McpTransport,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// Why it cannot be reached although its section is well formed (a variable it needs is not
    /// set): the server is listed, and its state says this, while the others work.
    pub unavailable: Option<String>,
}

/// How to reach it. Two servers with equal transports are one server (one process, shared by the
/// sessions that use it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Option<PathBuf> },
    /// Streamable HTTP.
    Http { url: String, headers: Vec<(String, String)> },
    /// The older HTTP + server-sent events transport.
    Sse { url: String, headers: Vec<(String, String)> },
}

impl McpServer {
    pub fn new(name: impl Into<String>, transport: McpTransport) -> Self {
        Self {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            unavailable: None,
        }
    }
}

/// The servers of a session: `configured` ones, with the editor's `given` ones replacing any of the
/// same name.
pub fn merge(configured: &[McpServer], given: Vec<McpServer>) -> Vec<McpServer> {
    let mut all: Vec<McpServer> =
        configured.iter().filter(|c| !given.iter().any(|g| g.name == c.name)).cloned().collect();
    all.extend(given);
    all
}

/// A `[mcp_servers.NAME]` section as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMcpServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    /// `http` (streamable HTTP, the default for a `url`) or `sse`.
    transport: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// A variable holding a bearer token, sent as `Authorization: Bearer …`.
    bearer_token_env_var: Option<String>,
    enabled: Option<bool>,
    startup_timeout_sec: Option<f64>,
    tool_timeout_sec: Option<f64>,
}

impl FileMcpServer {
    /// The server this section describes (`None` if it is disabled), or what is wrong with it.
    pub(super) fn resolve(
        self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
        seconds: &mut dyn FnMut(&str, Option<f64>) -> Option<Duration>,
    ) -> Result<Option<McpServer>, String> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err("a server's name may hold only letters, digits, `_` and `-`".into());
        }
        let startup = seconds("startup_timeout_sec", self.startup_timeout_sec);
        let tool = seconds("tool_timeout_sec", self.tool_timeout_sec);
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let mut headers: Vec<(String, String)> = self.headers.into_iter().collect();
        let mut unavailable = None;
        if let Some(var) = &self.bearer_token_env_var {
            match env(var) {
                Some(token) => headers.push(("Authorization".into(), format!("Bearer {token}"))),
                None => unavailable = Some(format!("{var} is not set (its `bearer_token_env_var`)")),
            }
        }
        let transport = match (self.command, self.url) {
            (Some(_), Some(_)) => return Err("give either `command` or `url`, not both".into()),
            (None, None) => return Err("give `command` (a local server) or `url` (a remote one)".into()),
            (Some(command), None) => {
                if self.transport.is_some() || !headers.is_empty() {
                    return Err("`transport` and `headers` are for servers with a `url`".into());
                }
                McpTransport::Stdio { command, args: self.args, env: self.env.into_iter().collect(), cwd: self.cwd }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err("`args`, `env` and `cwd` are for servers with a `command`".into());
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` must be http:// or https://, not {url:?}"));
                }
                match self.transport.as_deref() {
                    None | Some("http") => McpTransport::Http { url, headers },
                    Some("sse") => McpTransport::Sse { url, headers },
                    Some(other) => return Err(format!("`transport` must be \"http\" or \"sse\", not {other:?}")),
                }
            }
        };
        let mut server = McpServer::new(name, transport);
        server.startup_timeout = startup.unwrap_or(DEFAULT_STARTUP_TIMEOUT);
        server.tool_timeout = tool.unwrap_or(DEFAULT_TOOL_TIMEOUT);
        server.unavailable = unavailable;
        Ok(Some(server))
    }
}
