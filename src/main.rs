//! The `acp` command line: parses arguments, sends logs to stderr, and runs the chosen entry point.
//! `acp` with no subcommand is `acp serve`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use acp::config::Config;

#[derive(Parser, Debug)]
#[command(name = "acp", version, about = "An Agent Client Protocol agent server for editors")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Debug logging to stderr (RUST_LOG, when set, takes precedence).
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Speak ACP over stdin/stdout (what editors spawn). The default.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug, Default)]
struct ServeArgs {
    /// Largest accepted input line in bytes (default 16 MiB, or `max_line_bytes` in config.toml).
    #[arg(long, value_name = "BYTES")]
    max_line_bytes: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        None => ServeArgs::default(),
    };
    let shutdown = CancellationToken::new();
    if let Err(e) = watch_signals(shutdown.clone()) {
        tracing::warn!(error = %e, "could not install signal handlers");
    }
    // One thread runs everything async: the work is I/O-bound, a single thread starts faster,
    // uses less memory and hands events along without cross-thread wake-ups. Blocking work goes to
    // the blocking pool.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve(args, shutdown));
    // Do not wait for the blocked stdin read or idle connections.
    runtime.shutdown_background();
    code
}

async fn serve(args: ServeArgs, shutdown: CancellationToken) -> ExitCode {
    let mut config = Config::load();
    if let Some(max) = args.max_line_bytes {
        config.max_line_bytes = max;
    }
    if let Some(err) = &config.load_error {
        tracing::error!("{err}");
    }
    let rpc = match acp::rpc::start(std::io::stdin(), std::io::stdout(), config.max_line_bytes) {
        Ok(rpc) => rpc,
        Err(e) => {
            tracing::error!(error = %e, "could not start the stdin reader");
            return ExitCode::FAILURE;
        }
    };
    let ended = acp::acp::serve(rpc, config, shutdown.cancelled_owned()).await;
    tracing::debug!(?ended, "exiting");
    ExitCode::SUCCESS
}

/// SIGINT/SIGTERM cancel `shutdown` (running turns end `cancelled` and the server exits). The
/// signals are caught on their own thread, with a deadline: if the server has not exited 450 ms
/// after the first signal (say, a peer that stopped reading has blocked a write), or a second
/// signal arrives, the process exits anyway.
fn watch_signals(shutdown: CancellationToken) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut seen = 0;
        for signal in signals.forever() {
            seen += 1;
            tracing::info!(signal, "signal: cancelling running turns and exiting");
            if seen > 1 {
                std::process::exit(0);
            }
            shutdown.cancel();
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_millis(450));
                tracing::warn!("did not exit within 450 ms of the signal; exiting now");
                std::process::exit(0);
            });
        }
    })?;
    Ok(())
}

fn init_tracing(verbose: bool) {
    let default = if verbose { "acp=debug,info" } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}
