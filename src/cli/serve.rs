//! `acp serve`: ACP on stdin and stdout, until input ends or a signal arrives.

use std::io::Write as _;

use tokio_util::sync::CancellationToken;

use super::signals;
use crate::config::Config;

/// `acp serve --gateway URL`: the editor's sessions live in a gateway (`acp gateway` or
/// OpenClaw's) instead of this process.
#[derive(clap::Args, Debug, Default)]
pub struct BridgeArgs {
    /// Bridge to the gateway at this URL (ws:// or wss://) instead of running the agent here.
    #[arg(long, value_name = "URL")]
    pub gateway: Option<String>,
    /// The gateway's shared token (else the owner token of the `acp gateway` running for this
    /// $ACP_HOME at that URL, else $ACP_GATEWAY_TOKEN). Prefer --token-file or the variable: a
    /// command line is visible to every local user in the process list.
    #[arg(long, value_name = "TOKEN", requires = "gateway", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the gateway token from this file (its first line).
    #[arg(long, value_name = "FILE", requires = "gateway")]
    pub token_file: Option<std::path::PathBuf>,
    /// The gateway's password, for gateways that use one (else $ACP_GATEWAY_PASSWORD).
    #[arg(long, value_name = "PASSWORD", requires = "gateway")]
    pub password: Option<String>,
    /// The gateway session new ACP sessions use (default: a new one per ACP session).
    #[arg(long = "session", value_name = "KEY", requires = "gateway", conflicts_with = "session_label")]
    pub session_key: Option<String>,
    /// The gateway session with this label (resolved by the gateway).
    #[arg(long, value_name = "LABEL", requires = "gateway")]
    pub session_label: Option<String>,
    /// Fail unless the session key or label exists on the gateway.
    #[arg(long, requires = "gateway")]
    pub require_existing: bool,
    /// Reset the gateway session before its first use.
    #[arg(long, requires = "gateway")]
    pub reset_session: bool,
    /// Do not start prompts with `[Working directory: …]`.
    #[arg(long, requires = "gateway")]
    pub no_prefix_cwd: bool,
}

impl BridgeArgs {
    /// The bridge's options, if `--gateway` was given.
    fn options(&self) -> Result<Option<crate::acp::bridge::BridgeOptions>, String> {
        let Some(url) = self.gateway.clone() else { return Ok(None) };
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "ws" | "wss") && u.host_str().is_some() => {}
            _ => return Err(format!("--gateway: `{url}` is not a ws:// or wss:// URL (e.g. ws://127.0.0.1:18789)")),
        }
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(file)) => Some(super::gateway::read_token_file(file)?),
            // `acp gateway` running for this $ACP_HOME at that URL takes its owner token.
            (None, None) => crate::gateway::discovery::find(&Config::home_dir())
                .filter(|r| super::pairing::same_gateway(&r.url, &url))
                .map(|r| r.token)
                .or_else(|| std::env::var("ACP_GATEWAY_TOKEN").ok()),
        }
        .filter(|t| !t.is_empty());
        let password =
            self.password.clone().or_else(|| std::env::var("ACP_GATEWAY_PASSWORD").ok()).filter(|p| !p.is_empty());
        Ok(Some(crate::acp::bridge::BridgeOptions {
            url,
            token,
            password,
            session: self.session_key.clone(),
            session_label: self.session_label.clone(),
            require_existing: self.require_existing,
            reset_session: self.reset_session,
            prefix_cwd: !self.no_prefix_cwd,
        }))
    }
}

/// Serves one editor on stdio; `max_line_bytes` overrides the configured limit.
pub fn serve(max_line_bytes: Option<usize>, bridge: &BridgeArgs) -> std::process::ExitCode {
    let bridge = match bridge.options() {
        Ok(b) => b,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("acp serve: {e}");
            }
            return std::process::ExitCode::from(2);
        }
    };
    // SIGINT/SIGTERM: running turns end `cancelled` and the server exits; a second signal exits at once.
    let shutdown = CancellationToken::new();
    let cancel = shutdown.clone();
    let on_signal = move |seen: usize| {
        if seen > 1 {
            std::process::exit(0);
        }
        cancel.cancel();
    };
    let signals = signals::install(on_signal, 1, 0)
        .inspect_err(|e| tracing::warn!(error = %e, "could not install signal handlers"))
        .ok();
    // One thread runs everything async: the work is I/O-bound, a single thread starts faster,
    // uses less memory and hands events along without cross-thread wake-ups. Blocking work goes to
    // the blocking pool.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve_stdio(max_line_bytes, bridge, shutdown, signals));
    // Do not wait for the blocked stdin read or idle connections.
    runtime.shutdown_background();
    code
}

async fn serve_stdio(
    max_line_bytes: Option<usize>,
    bridge: Option<crate::acp::bridge::BridgeOptions>,
    shutdown: CancellationToken,
    signals: Option<signals::Installed>,
) -> std::process::ExitCode {
    let mut config = Config::load();
    if let Some(max) = max_line_bytes {
        config.max_line_bytes = max;
    }
    if let Some(err) = &config.load_error {
        tracing::error!("{err}");
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Started by hand: say what this is, rather than sit silent.
        let _ = writeln!(
            std::io::stderr(),
            "acp serve speaks the Agent Client Protocol (JSON-RPC, one message per line) on stdin and stdout, \
             for editors to start. To chat in this terminal, run `acp client`. Ctrl-D quits."
        );
    }
    let rpc = match crate::rpc::start(std::io::stdin(), std::io::stdout(), config.max_line_bytes) {
        Ok(rpc) => rpc,
        Err(e) => {
            tracing::error!(error = %e, "could not start the stdin reader");
            return std::process::ExitCode::FAILURE;
        }
    };
    // The signal thread starts beside the handling of the first input, off the path to its answer.
    if let Some(signals) = signals {
        signals.start_on_first_input(&rpc.conn);
    }
    let ended = match bridge {
        Some(options) => {
            match crate::acp::bridge::serve(rpc, config.home.clone(), options, shutdown.cancelled_owned()).await {
                Ok(ended) => ended,
                Err(e) => {
                    tracing::error!("{e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        None => crate::acp::serve(rpc, config, "acp", shutdown.cancelled_owned()).await,
    };
    tracing::debug!(?ended, "exiting");
    std::process::ExitCode::SUCCESS
}
