//! The `acp` command line: parses arguments, sends logs to stderr, and runs the chosen entry point.
//! `acp` with no subcommand is `acp serve`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
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
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve(args));
    // Do not wait for blocked stdin reads or idle connections.
    runtime.shutdown_background();
    code
}

async fn serve(args: ServeArgs) -> ExitCode {
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
            tracing::error!(error = %e, "could not start the stdio threads");
            return ExitCode::FAILURE;
        }
    };
    let (runtime, events) = acp::runtime::Runtime::new(config);
    let ended = acp::acp::serve(rpc, runtime, events, shutdown_signal()).await;
    tracing::debug!(?ended, "exiting");
    ExitCode::SUCCESS
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => tracing::info!("SIGINT: cancelling and exiting"),
                    _ = term.recv() => tracing::info!("SIGTERM: cancelling and exiting"),
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
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
