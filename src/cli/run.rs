//! `acp run`: one prompt, the agent in this process. The agent serves ACP on its own thread over
//! two in-memory pipes; the terminal client's runner (`acp_repl::run`) drives it exactly as it
//! would drive a spawned agent, and its outcome is the exit code.

use std::io::Write as _;
use std::time::Duration;

use acp_repl::run::{Output, RunOptions, exit};

use super::signals;
use crate::config::Config;

/// How long the agent may take to save the session once the run is over.
const AGENT_WIND_DOWN: Duration = Duration::from_secs(5);

/// Runs `options` against an agent with `config`; returns the exit code.
pub fn run(options: &RunOptions, config: Config, verbose: bool) -> u8 {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "acp run: {message}");
        exit::FAILED
    };
    if let Some(err) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp run: the configuration file is broken: {err}");
        return exit::CONFIG;
    }
    let pipes = std::io::pipe().and_then(|a| std::io::pipe().map(|b| (a, b)));
    let ((agent_in, client_out), (client_in, agent_out)) = match pipes {
        Ok(p) => p,
        Err(e) => return fail(format!("could not create pipes: {e}")),
    };
    // First, as it takes longest: the session store, opened while everything else starts.
    let begun = crate::acp::begin(&config);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (signals_tx, signals_rx) = tokio::sync::oneshot::channel();
    let agent = std::thread::Builder::new().name("agent".into()).spawn(move || {
        serve_pipes(agent_in, agent_out, config, begun, signals_rx, done_tx);
    });
    if let Err(e) = agent {
        return fail(format!("could not start the agent: {e}"));
    }
    let (tx, rx) = match acp_repl::conn::connect(client_in, client_out, verbose) {
        Ok(c) => c,
        Err(e) => return fail(format!("could not start: {e}")),
    };
    // Each signal cancels the turn; a second stops waiting, and the process exits soon after.
    // The agent's runtime starts the thread that acts on them, once the run is under way.
    let interrupter = rx.interrupter();
    match signals::install(move |_| interrupter.interrupt(), 2, i32::from(exit::CANCELLED)) {
        Ok(installed) => {
            let _ = signals_tx.send(installed);
        }
        Err(e) => tracing::warn!(error = %e, "could not install signal handlers"),
    }
    let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr());
    let code = acp_repl::run::run(&tx, &rx, options, &mut Output { out: &mut stdout, err: &mut stderr });
    // End of input: the agent finishes, saves the session and exits.
    drop(tx);
    if done_rx.recv_timeout(AGENT_WIND_DOWN).is_err() {
        tracing::warn!("the agent did not finish within {} s of the end of the run", AGENT_WIND_DOWN.as_secs());
    }
    code
}

/// The agent: ACP over the pipes on a runtime of its own, its sessions stored with origin `run`.
fn serve_pipes(
    input: std::io::PipeReader,
    output: std::io::PipeWriter,
    config: Config,
    begun: crate::acp::Begun,
    signals: tokio::sync::oneshot::Receiver<signals::Installed>,
    done: std::sync::mpsc::Sender<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            let _ = done.send(());
            return;
        }
    };
    let max_line = config.max_line_bytes;
    runtime.block_on(async move {
        tokio::spawn(async move {
            if let Ok(signals) = signals.await {
                signals.start_soon();
            }
        });
        match crate::rpc::start(input, output, max_line) {
            Ok(rpc) => {
                // A session is opened straight away: the store opens (and the HTTP client is
                // built) while the client initializes.
                crate::acp::serve_eager(rpc, config, "run", begun, std::future::pending::<()>()).await;
            }
            Err(e) => tracing::error!(error = %e, "could not start the agent"),
        }
        // Every session is closed and saved: the process may exit without waiting for the
        // runtime to be taken down.
        let _ = done.send(());
    });
    runtime.shutdown_background();
}
