//! `acp serve`: ACP on stdin and stdout, until input ends or a signal arrives.

use std::io::Write as _;

use tokio_util::sync::CancellationToken;

use super::signals;
use crate::config::Config;

/// Serves one editor on stdio; `max_line_bytes` overrides the configured limit.
pub fn serve(max_line_bytes: Option<usize>) -> std::process::ExitCode {
    // SIGINT/SIGTERM: running turns end `cancelled` and the server exits; a second signal exits at once.
    let shutdown = CancellationToken::new();
    let cancel = shutdown.clone();
    let on_signal = move |seen: usize| {
        if seen > 1 {
            std::process::exit(0);
        }
        cancel.cancel();
    };
    if let Err(e) = signals::watch(on_signal, 1, 0) {
        tracing::warn!(error = %e, "could not install signal handlers");
    }
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
    let code = runtime.block_on(serve_stdio(max_line_bytes, shutdown));
    // Do not wait for the blocked stdin read or idle connections.
    runtime.shutdown_background();
    code
}

async fn serve_stdio(max_line_bytes: Option<usize>, shutdown: CancellationToken) -> std::process::ExitCode {
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
    let ended = crate::acp::serve(rpc, config, "acp", shutdown.cancelled_owned()).await;
    tracing::debug!(?ended, "exiting");
    std::process::ExitCode::SUCCESS
}
