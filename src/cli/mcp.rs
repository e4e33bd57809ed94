//! `acp mcp …`: the MCP servers of config.toml from the command line — `list` shows them, `test
//! NAME` connects to one as a session would (same client, same timeouts), lists what it offers
//! under the names the model sees, and exits. Output on stdout; problems on stderr, exit code 1.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::config::mcp::McpServer;
use crate::mcp::{HttpSource, Pool, State, describe_transport, tool};

#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// The servers configured in config.toml (`[mcp_servers.NAME]`), as sessions get them.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Connects to a configured server, lists its tools, prompts and resources, and exits.
    Test {
        /// The server's name in config.toml.
        name: String,
        /// The workspace it is started in and offered as its root (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<std::path::PathBuf>,
    },
}

/// `acp mcp …`.
pub fn mcp(command: McpCommand) -> ExitCode {
    let config = Config::load();
    let result = match command {
        McpCommand::List { json } => list(&config, json),
        McpCommand::Test { name, cwd } => test(&config, &name, cwd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn checked(config: &Config) -> Result<(), String> {
    match &config.load_error {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

fn list(config: &Config, json: bool) -> Result<ExitCode, String> {
    checked(config)?;
    let mut out = std::io::stdout().lock();
    let servers = &config.mcp_servers;
    let write = |out: &mut std::io::StdoutLock<'_>, line: String| writeln!(out, "{line}").map_err(|e| e.to_string());
    if json {
        for s in servers {
            let line = serde_json::json!({
                "name": s.name,
                "transport": describe_transport(&s.transport),
                "startupTimeoutSec": s.startup_timeout.as_secs_f64(),
                "toolTimeoutSec": s.tool_timeout.as_secs_f64(),
                "unavailable": s.unavailable,
            });
            write(&mut out, line.to_string())?;
        }
    } else if servers.is_empty() {
        write(&mut out, format!("No MCP servers in {}.", config.config_path().display()))?;
    } else {
        let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(4).max(4);
        write(&mut out, format!("{:width$}  SERVER", "NAME"))?;
        for s in servers {
            let mut line = format!("{:width$}  {}", s.name, describe_transport(&s.transport));
            if let Some(why) = &s.unavailable {
                line.push_str(&format!("  (not available: {why})"));
            }
            write(&mut out, line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn test(config: &Config, name: &str, cwd: Option<std::path::PathBuf>) -> Result<ExitCode, String> {
    checked(config)?;
    let server: McpServer = config.mcp_servers.iter().find(|s| s.name == name).cloned().ok_or_else(|| {
        let known: Vec<&str> = config.mcp_servers.iter().map(|s| s.name.as_str()).collect();
        format!(
            "no MCP server `{name}` in {} (configured: {})",
            config.config_path().display(),
            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
        )
    })?;
    let cwd = match cwd {
        Some(dir) => std::path::absolute(&dir).map_err(|e| format!("--cwd: {e}"))?,
        None => std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("could not start the async runtime: {e}"))?;
    let timeouts = config.timeouts;
    let http: HttpSource = Arc::new(move || {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::http::build_http(&timeouts)).await.map_err(|e| e.to_string())?
        })
    });
    runtime.block_on(async move {
        let started = Instant::now();
        let pool = Pool::default();
        let servers = pool.acquire(std::slice::from_ref(&server), &[cwd], &http);
        let state = servers[0].settled(&tokio_util::sync::CancellationToken::new()).await;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        let mut out = std::io::stdout().lock();
        let transport = describe_transport(&server.transport);
        match state {
            State::Ready(lists) => {
                let mut text = format!("`{name}`: ready in {elapsed:.0} ms — {} ({transport})\n", lists.server_info);
                let names = tool::names(lists.tools.iter().map(|t| (name, t.name.as_ref())), &Default::default());
                text.push_str(&format!("\ntools ({}):\n", lists.tools.len()));
                for (shown, t) in names.iter().zip(&lists.tools) {
                    let kind = serde_json::to_value(tool::kind_of(t)).ok();
                    let kind = kind.as_ref().and_then(|k| k.as_str()).unwrap_or("other");
                    let about = t.title.as_deref().or(t.description.as_deref()).unwrap_or("");
                    text.push_str(&format!("  {shown}  [{kind}]  {}\n", crate::tools::truncate::line(about, 100)));
                }
                text.push_str(&format!("\nprompts ({}):\n", lists.prompts.len()));
                for p in &lists.prompts {
                    let about = p.description.as_deref().unwrap_or("");
                    text.push_str(&format!("  /{name}:{}  {}\n", p.name, crate::tools::truncate::line(about, 100)));
                }
                text.push_str(&format!("\nresources ({}):\n", lists.resources.len()));
                for r in &lists.resources {
                    text.push_str(&format!("  {}  {}\n", r.uri, r.name));
                }
                write!(out, "{text}").map_err(|e| e.to_string())?;
                Ok(ExitCode::SUCCESS)
            }
            State::Failed { error, .. } => Err(format!("`{name}` ({transport}): {error}")),
            State::Connecting => Err(format!("`{name}` ({transport}): still starting")),
        }
    })
}
