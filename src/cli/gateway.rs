//! `acp gateway`: the gateway in the foreground until SIGINT or SIGTERM (clients are told
//! `shutdown`, running turns end `cancelled`), logging to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::signals;
use crate::config::Config;
use crate::gateway::Options;

/// The default address: loopback, OpenClaw's port.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:18789";

#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// Address to listen on (default 127.0.0.1:18789, or `[gateway] listen`). Off loopback a token
    /// is required.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// The shared token clients must present (at least 16 characters). Prefer --token-file or
    /// $ACP_GATEWAY_TOKEN: a command line is visible to every local user in the process list.
    /// Else $ACP_GATEWAY_TOKEN, else `[gateway] token`. Without one, on loopback only: local
    /// programs connect freely, browsers with the token in the web chat link printed at start.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The directory sessions work in (default `[gateway] workspace`, else the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Keep sessions in this PostgreSQL database, shared with other gateways
    /// (`postgres://user@host:port/db`; docs/scaling.md). Else $ACP_GATEWAY_STORE, else
    /// `[gateway] store`; without one, SQLite under $ACP_HOME. A password here is visible in the
    /// process list: prefer the environment or config.toml.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Join the other gateways of that store through this NATS server (`nats://host:4222`,
    /// several comma-separated; docs/scaling.md): clients of any gateway see every run, and
    /// requests for a session another gateway holds go there. Else $ACP_GATEWAY_BUS, else
    /// `[gateway] bus`.
    #[arg(long, value_name = "URL")]
    pub bus: Option<String>,
}

fn options(args: GatewayArgs, config: &Config) -> Result<Options, String> {
    let listen = args.listen.or_else(|| config.gateway.listen.clone()).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let listen: SocketAddr =
        listen.parse().map_err(|_| format!("--listen: `{listen}` is not HOST:PORT (an IP address and a port)"))?;
    let token = match (args.token, args.token_file) {
        (Some(t), _) => {
            tracing::warn!(
                "--token on the command line is visible to every local user in the process list; \
                 use --token-file or ACP_GATEWAY_TOKEN"
            );
            Some((t, "--token"))
        }
        (None, Some(file)) => Some((read_token_file(&file)?, "--token-file")),
        (None, None) => match std::env::var("ACP_GATEWAY_TOKEN") {
            Ok(t) => Some((t, "ACP_GATEWAY_TOKEN")),
            Err(_) => config.gateway.token.clone().map(|t| (t, "[gateway] token")),
        },
    };
    // A token given is a token checked: a blank or short one is a mistake, never "no token".
    let token = match token {
        Some((token, from)) => {
            crate::gateway::guard::check_token(&token, from)?;
            Some(token)
        }
        None => None,
    };
    let (workspace, named) = match (args.workspace, &config.gateway.workspace) {
        (Some(dir), _) => (std::path::absolute(&dir).map_err(|e| format!("--workspace: {e}"))?, "--workspace"),
        (None, Some(dir)) => {
            // `~/project` as a shell would read it.
            let dir = crate::config::expand_home(dir).unwrap_or_else(|| dir.clone());
            (std::path::absolute(&dir).map_err(|e| format!("[gateway] workspace: {e}"))?, "[gateway] workspace")
        }
        (None, None) => {
            (std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?, "the current directory")
        }
    };
    if !workspace.is_dir() {
        return Err(format!("{named} {}: not a directory", workspace.display()));
    }
    // Each agent's own workspace is made if it is not there yet.
    for agent in &config.agents {
        if let Some(dir) = &agent.workspace {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("[[agents]] `{}`: workspace {}: {e}", agent.id, dir.display()))?;
        }
    }
    let approval_timeout = match config.gateway.approval_timeout_secs {
        Some(0) => return Err("[gateway] approval_timeout_secs must be at least 1".into()),
        Some(secs) => std::time::Duration::from_secs(secs),
        None => crate::gateway::DEFAULT_APPROVAL_TIMEOUT,
    };
    let mut connections = crate::gateway::guard::ConnLimits::default();
    if let Some(max) = config.gateway.max_connections {
        if max < 16 {
            return Err("[gateway] max_connections must be at least 16".into());
        }
        connections.total = max;
        connections.unauthenticated = connections.unauthenticated.min(max);
    }
    for host in &config.gateway.allowed_hosts {
        if host.is_empty() || host.contains(['/', ' ', ':']) && !host.starts_with('[') {
            return Err(format!("[gateway] allowed_hosts: `{host}` is not a host name (no scheme or port)"));
        }
    }
    let mut allowed_hosts = config.gateway.allowed_hosts.clone();
    // The address it was told to listen on is its own name too.
    if !listen.ip().is_unspecified() {
        allowed_hosts.push(listen.ip().to_string());
    }
    let mut runs = crate::gateway::limits::RunLimits::default();
    let g = &config.gateway;
    let at_least_one = |value: Option<usize>, name: &str| match value {
        Some(0) => Err(format!("[gateway] {name} must be at least 1")),
        other => Ok(other),
    };
    if let Some(n) = at_least_one(g.max_concurrent_runs, "max_concurrent_runs")? {
        runs.concurrent = n;
    }
    if let Some(n) = at_least_one(g.max_queued_runs, "max_queued_runs")? {
        runs.queued_runs = n;
    }
    if let Some(n) = at_least_one(g.max_open_sessions, "max_open_sessions")? {
        runs.open_sessions = n;
    }
    if let Some(minutes) = g.idle_session_minutes {
        if !(minutes.is_finite() && minutes > 0.0) {
            return Err("[gateway] idle_session_minutes must be a positive number".into());
        }
        runs.idle = std::time::Duration::from_secs_f64((minutes * 60.0).min(1e9));
    }
    let store = match args.store {
        Some(url) => {
            if url
                .split_once("://")
                .and_then(|(_, rest)| rest.split_once('@'))
                .is_some_and(|(user, _)| user.contains(':'))
            {
                tracing::warn!(
                    "--store with a password is visible to every local user in the process list; \
                     use ACP_GATEWAY_STORE or [gateway] store"
                );
            }
            Some(url)
        }
        None => std::env::var("ACP_GATEWAY_STORE").ok().or_else(|| config.gateway.store.clone()),
    };
    let store = store.filter(|s| !s.trim().is_empty());
    if let Some(url) = &store
        && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        return Err(format!(
            "--store: `{}` is not a postgres:// URL (the only shared store; without one, sessions are kept under $ACP_HOME)",
            crate::gateway::bus::shown(url)
        ));
    }
    let store_lease = match config.gateway.store_lease_secs {
        None => crate::store::postgres::LEASE,
        Some(secs) if secs.is_finite() && (1.0..=3600.0).contains(&secs) => std::time::Duration::from_secs_f64(secs),
        Some(secs) => return Err(format!("[gateway] store_lease_secs = {secs}: give 1 to 3600 seconds")),
    };
    let bus = args
        .bus
        .or_else(|| std::env::var("ACP_GATEWAY_BUS").ok())
        .or_else(|| config.gateway.bus.clone())
        .filter(|b| !b.trim().is_empty());
    if let Some(url) = &bus {
        crate::gateway::bus::check_url(url).map_err(|e| format!("--bus: {e}"))?;
        if store.is_none() {
            return Err("--bus needs --store: the bus joins gateways that share one PostgreSQL store".into());
        }
    }
    Ok(Options {
        listen,
        token,
        workspace,
        approval_timeout,
        allowed_hosts,
        connections,
        runs,
        store,
        store_lease,
        bus,
    })
}

pub fn gateway(args: GatewayArgs) -> ExitCode {
    let config = Config::load();
    // A gateway runs unattended: it does not start on a configuration it could not read (it
    // would run without its token, channels and limits).
    let checked = match &config.load_error {
        Some(err) => Err(format!("{err}\nfix the configuration and start again")),
        None => options(args, &config),
    };
    let options = match checked {
        Ok(o) => o,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("acp gateway: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    if let Err(e) = signals::watch(
        move |seen: usize| {
            if seen > 1 {
                std::process::exit(1);
            }
            cancel.cancel();
        },
        1,
        0,
    ) {
        tracing::warn!(error = %e, "could not install signal handlers");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(crate::gateway::run(config, options, stop));
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("acp gateway: {e}");
            }
            ExitCode::from(2)
        }
    }
}

/// The first line of a token file, or why it cannot be used.
pub fn read_token_file(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("--token-file {}: {e}", file.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    if token.is_empty() {
        return Err(format!("--token-file {}: the file is empty", file.display()));
    }
    Ok(token)
}
