//! The `acp` command line: parses arguments, sends logs to stderr, and runs the chosen entry point.
//! `acp` with no subcommand is `acp serve`.

use std::io::Write as _;
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
    /// Stored sessions: list, show, export, delete.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
}

#[derive(Subcommand, Debug)]
enum SessionsCommand {
    /// Sessions, most recently updated first.
    List {
        /// Only sessions in this working directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<std::path::PathBuf>,
        /// How many to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A session's details and conversation, as Markdown.
    Show { id: String },
    /// A session as a Markdown document or as JSON.
    Export {
        id: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Deletes a session and its transcript.
    Delete { id: String },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExportFormat {
    Md,
    Json,
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
        Some(Command::Sessions { command }) => return sessions(command),
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

/// `acp sessions …`: output on stdout, problems on stderr with exit code 1.
fn sessions(command: SessionsCommand) -> ExitCode {
    match run_sessions(command) {
        Ok(()) => ExitCode::SUCCESS,
        // `acp sessions list | head` closing the pipe early is not an error.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_sessions(command: SessionsCommand) -> Result<(), Box<dyn std::error::Error>> {
    use acp::store::{Cursor, Store, export};
    let config = Config::load();
    let store = Store::open(&config.home)?;
    let mut out = std::io::stdout().lock();
    let find = |id: &str| -> Result<_, Box<dyn std::error::Error>> {
        store.read_session(id)?.ok_or_else(|| format!("no session `{id}` in {}", config.home.display()).into())
    };
    match command {
        SessionsCommand::List { cwd, limit, json } => {
            let cwd = cwd.map(|c| std::path::absolute(&c).unwrap_or(c));
            let mut rows = Vec::new();
            let mut cursor: Option<Cursor> = None;
            while rows.len() < limit {
                let (page, next) = store.list(cwd.as_deref(), cursor.as_ref(), (limit - rows.len()).min(500))?;
                rows.extend(page);
                match next {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            if json {
                for row in &rows {
                    writeln!(out, "{}", export::row_json(row))?;
                }
            } else if rows.is_empty() {
                writeln!(out, "No sessions{}.", cwd.map(|c| format!(" in {}", c.display())).unwrap_or_default())?;
            } else {
                let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(2).max(2);
                writeln!(out, "{:width$}  {:16}  {:>15}  TITLE (CWD)", "ID", "UPDATED", "TOKENS IN/OUT")?;
                for r in &rows {
                    let tokens = format!("{}/{}", r.input_tokens, r.output_tokens);
                    let title = r.title.as_deref().unwrap_or("(untitled)");
                    let when = export::local_time(r.updated_at);
                    writeln!(out, "{:width$}  {when:16}  {tokens:>15}  {title} ({})", r.id, r.cwd.display())?;
                }
            }
        }
        SessionsCommand::Show { id } => {
            let (row, replay) = find(&id)?;
            write!(out, "{}", export::to_markdown(&row, &replay))?;
            writeln!(out, "\n---\nTranscript: {}", store.transcript_path(&id).display())?;
        }
        SessionsCommand::Export { id, format, output } => {
            let (row, replay) = find(&id)?;
            let text = match format {
                ExportFormat::Md => export::to_markdown(&row, &replay),
                ExportFormat::Json => format!("{:#}\n", export::to_json(&row, &replay)),
            };
            match output {
                Some(path) => std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?,
                None => out.write_all(text.as_bytes())?,
            }
        }
        SessionsCommand::Delete { id } => {
            if !acp::store::valid_id(&id) || store.get(&id)?.is_none() {
                return Err(format!("no session `{id}` in {}", config.home.display()).into());
            }
            store.delete_if_closed(&id)?;
            writeln!(out, "Deleted {id}.")?;
        }
    }
    out.flush()?;
    Ok(())
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
