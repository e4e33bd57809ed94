//! `acp run`: one prompt, the agent in this process. The agent serves ACP on its own thread; the
//! terminal client's runner (`acp_repl::run`) drives it with the same lines it would send a
//! spawned agent, and its outcome is the exit code. Each side reads the other's lines as they are
//! written, on the writer's thread: no pipes and no reader threads in between.

use std::io::Write as _;
use std::time::Duration;

use acp_repl::run::{Output, RunOptions, exit};

use super::signals;
use crate::acp::HeadStart;
use crate::config::Config;
use crate::config::hooks::HookEvent;

/// How long the agent may take to close its session once the run is over, when it must (see the
/// end of [`run`]).
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
    // No provider is usable: the model servers on this machine are looked for before the session
    // starts (a bounded wait a one-shot run can afford; `acp serve` never waits for it).
    let config = match config.wants_discovery().then(|| super::models::look(&config)) {
        Some(Ok(found)) => config.with_found(&found),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "could not look for model servers on this machine");
            config
        }
        None => config,
    };
    // The agent stops the MCP servers it started as it closes its session, and runs the
    // `SessionEnd` hooks (and those `/new` starts).
    let servers = !config.mcp_servers.is_empty()
        || config.hooks.iter().any(|h| matches!(h.event, HookEvent::SessionEnd | HookEvent::SessionStart));
    // First: a new session, its id made up here, begins without waiting for the session store;
    // continuing one (`--session`), the store opens on a thread of its own meanwhile.
    let head = HeadStart::begin(config.home.clone(), options.new_session_id.clone());
    let (tx, rx, rpc) = acp_repl::conn::connect_in_process(verbose, |output| {
        let (rpc, input) = crate::rpc::start_in_process(output, config.max_line_bytes);
        (input, rpc)
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (signals_tx, signals_rx) = tokio::sync::oneshot::channel();
    let agent = std::thread::Builder::new().name("agent".into()).spawn(move || {
        serve_in_process(rpc, config, head, signals_rx, done_tx);
    });
    if let Err(e) = agent {
        return fail(format!("could not start the agent: {e}"));
    }
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
    let ended = acp_repl::run::run(&tx, &rx, options, &mut Output { out: &mut stdout, err: &mut stderr });
    // End of input. With the prompt answered the turn is saved already, and without MCP servers
    // to stop or session hooks to run the process may exit at once; otherwise the agent is given
    // time to save what it has (a cancelled turn's end), stop the servers and run the hooks.
    drop(tx);
    if (!ended.answered || servers) && done_rx.recv_timeout(AGENT_WIND_DOWN).is_err() {
        tracing::warn!("the agent did not finish within {} s of the end of the run", AGENT_WIND_DOWN.as_secs());
    }
    ended.code
}

/// The agent: ACP over `rpc` on a runtime of its own, its sessions stored with origin `run`.
fn serve_in_process(
    rpc: crate::rpc::Rpc,
    config: Config,
    head: HeadStart,
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
    runtime.block_on(async move {
        tokio::spawn(async move {
            if let Ok(signals) = signals.await {
                signals.start_soon();
            }
        });
        // A session is opened straight away: the HTTP client is built (and for `--session` the
        // store opens) while the client initializes.
        crate::acp::serve_eager(rpc, config, "run", head, std::future::pending::<()>()).await;
        // Every session is closed and saved: the process may exit without waiting for the
        // runtime to be taken down.
        let _ = done.send(());
    });
    runtime.shutdown_background();
}
