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
#[command(
    name = "acp",
    version,
    about = "An Agent Client Protocol agent server for editors",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `acp` is `acp serve`, and takes its options.
    #[command(flatten)]
    serve: ServeArgs,
    /// Debug logging to stderr (RUST_LOG, when set, takes precedence).
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Speak ACP over stdin/stdout (what editors spawn). The default.
    Serve(ServeArgs),
    /// An interactive terminal client for any ACP agent (this one by default).
    Client(ClientArgs),
    /// Run one prompt in process and print the reply (for scripts and CI).
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
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
    Show {
        /// The session's id, as `acp sessions list` shows it.
        id: String,
    },
    /// A session as a Markdown document or as JSON.
    Export {
        /// The session's id, as `acp sessions list` shows it.
        id: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Deletes a session and its transcript (deleting one that is not there is not an error).
    Delete {
        /// The session's id, as `acp sessions list` shows it.
        id: String,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExportFormat {
    Md,
    Json,
}

const RUN_HELP: &str = "\
Exit codes: 0 the reply finished (end_turn) · 1 other failure (the agent stopped mid-turn) · \
2 bad usage (arguments, unknown model or mode, empty prompt, bad directory) · 3 the model provider failed · \
4 authentication: no usable provider, or the provider rejected the key (HTTP 401/403) · 5 the model refused · \
6 the reply stopped early (token or request limit) · 7 the configuration file is broken · \
130 cancelled (Ctrl-C, SIGTERM).

Anything that would ask for permission is refused unless --allow names it: a tool (edit, write, \
apply_patch, exec, web_fetch, …) or a kind (edit, execute, fetch, …), `*` as a wildcard, or `all`.";

#[derive(clap::Args, Debug)]
struct ClientArgs {
    /// The agent to run, as a command line (default: this acp's `serve`), e.g. "npx some-agent --acp".
    #[arg(long, value_name = "COMMAND")]
    agent: Option<String>,
    /// The working directory of the session (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<std::path::PathBuf>,
    /// Load this stored session (its history is shown) instead of starting a new one.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// The permission mode to start in (acp: ask, code, auto).
    #[arg(long)]
    mode: Option<String>,
    /// The model to start with, as the agent names it (acp: provider/model).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Allow every "allow once" permission question without asking (for demos).
    #[arg(long)]
    yes: bool,
    /// Show one "(thinking…)" line instead of the model's thoughts.
    #[arg(long)]
    hide_thoughts: bool,
    /// Show every file write the agent asks the client for as a diff, and ask before writing.
    #[arg(long)]
    review: bool,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The prompt; `-` reads it from stdin.
    prompt: String,
    /// Print every session/update and then the result as NDJSON instead of the reply's text.
    #[arg(long)]
    json: bool,
    /// The working directory the session works in (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<std::path::PathBuf>,
    /// The model, as provider/model.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// The permission mode: ask, code (default) or auto.
    #[arg(long)]
    mode: Option<String>,
    /// Continue the stored session with this id (created if it does not exist).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Tools (or kinds) that may run when they would ask; repeat or separate with commas.
    #[arg(long, value_name = "TOOL", action = clap::ArgAction::Append)]
    allow: Vec<String>,
}

#[derive(clap::Args, Debug, Default)]
struct ServeArgs {
    /// Largest accepted input line in bytes (default 16 MiB, or `max_line_bytes` in config.toml).
    #[arg(long, value_name = "BYTES")]
    max_line_bytes: Option<usize>,
}

fn main() -> ExitCode {
    // The exec sandbox's launcher: before anything else starts (it must stay single-threaded).
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == acp::sandbox::LAUNCHER_ARG) {
        return acp::sandbox::launch::main(args);
    }
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        Some(Command::Sessions { command }) => return sessions(command),
        Some(Command::Run(args)) => return run(args, cli.verbose),
        Some(Command::Client(args)) => return client(args, cli.verbose),
        None => cli.serve,
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
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Started by hand: say what this is, rather than sit silent.
        let _ = writeln!(
            std::io::stderr(),
            "acp serve speaks the Agent Client Protocol (JSON-RPC, one message per line) on stdin and stdout, \
             for editors to start. To chat in this terminal, run `acp client`. Ctrl-D quits."
        );
    }
    let rpc = match acp::rpc::start(std::io::stdin(), std::io::stdout(), config.max_line_bytes) {
        Ok(rpc) => rpc,
        Err(e) => {
            tracing::error!(error = %e, "could not start the stdin reader");
            return ExitCode::FAILURE;
        }
    };
    let ended = acp::acp::serve(rpc, config, "acp", shutdown.cancelled_owned()).await;
    tracing::debug!(?ended, "exiting");
    ExitCode::SUCCESS
}

/// `acp client`: the terminal REPL, with this binary's `serve` as the default agent.
fn client(args: ClientArgs, verbose: bool) -> ExitCode {
    use acp_repl::repl::{ClientOptions, exit};
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "acp client: {message}");
        ExitCode::from(exit::USAGE)
    };
    let agent = match &args.agent {
        Some(line) => match shlex::split(line) {
            Some(words) if !words.is_empty() => words,
            _ => return fail(format!("--agent: cannot parse `{line}` as a command line")),
        },
        None => match std::env::current_exe() {
            Ok(exe) => vec![exe.display().to_string(), "serve".into()],
            Err(e) => return fail(format!("cannot find this program to start `acp serve`: {e}")),
        },
    };
    let cwd = match args.cwd.map_or_else(std::env::current_dir, std::fs::canonicalize) {
        Ok(dir) if dir.is_dir() => dir,
        Ok(dir) => return fail(format!("--cwd {}: not a directory", dir.display())),
        Err(e) => return fail(format!("--cwd: {e}")),
    };
    let home = Config::home_dir();
    let options = ClientOptions {
        agent,
        cwd,
        session: args.session,
        mode: args.mode,
        model: args.model,
        yes: args.yes,
        review: args.review,
        verbose,
        thoughts: if args.hide_thoughts { acp_repl::render::Thoughts::Fold } else { acp_repl::render::Thoughts::Show },
        history: Some(home.join("client_history")),
        agent_log: if verbose { None } else { Some(home.join("client-agent.log")) },
    };
    if !verbose {
        let _ = std::fs::create_dir_all(&home);
    }
    ExitCode::from(acp_repl::repl::run(&options))
}

/// `acp run`: the agent runs in this process, over in-memory pipes, driven by the same client code
/// as `acp client`; the outcome is the exit code.
fn run(args: RunArgs, verbose: bool) -> ExitCode {
    use acp_repl::run::{Output, RunOptions, exit};
    let usage = |message: String| {
        let _ = writeln!(std::io::stderr(), "acp run: {message}");
        ExitCode::from(exit::USAGE)
    };
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            return usage(format!("could not read the prompt from stdin: {e}"));
        }
        text
    } else {
        args.prompt
    };
    if prompt.trim().is_empty() {
        return usage("the prompt is empty".into());
    }
    let cwd = match args.cwd.map_or_else(std::env::current_dir, |dir| {
        std::fs::canonicalize(&dir).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
    }) {
        Ok(dir) if dir.is_dir() => dir,
        Ok(dir) => return usage(format!("--cwd {}: not a directory", dir.display())),
        Err(e) => return usage(format!("--cwd {e}")),
    };
    let allow: Vec<String> =
        args.allow.iter().map(|a| if a.eq_ignore_ascii_case("all") { "*".into() } else { a.clone() }).collect();
    let options = RunOptions {
        prompt,
        cwd,
        model: args.model,
        mode: args.mode,
        session: args.session,
        json: args.json,
        policy: acp_repl::policy::Policy::allow(allow),
    };

    let config = Config::load();
    if let Some(err) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp run: the configuration file is broken: {err}");
        return ExitCode::from(exit::CONFIG);
    }
    let pipes = std::io::pipe().and_then(|a| std::io::pipe().map(|b| (a, b)));
    let ((agent_in, client_out), (client_in, agent_out)) = match pipes {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp run: could not create pipes: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let agent = std::thread::Builder::new().name("agent".into()).spawn(move || {
        let max_line = config.max_line_bytes;
        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => {
                runtime.block_on(async move {
                    match acp::rpc::start(agent_in, agent_out, max_line) {
                        Ok(rpc) => {
                            acp::acp::serve(rpc, config, "run", std::future::pending::<()>()).await;
                        }
                        Err(e) => tracing::error!(error = %e, "could not start the agent"),
                    }
                });
                runtime.shutdown_background();
            }
            Err(e) => tracing::error!(error = %e, "could not start the async runtime"),
        }
        let _ = done_tx.send(());
    });
    if let Err(e) = agent {
        let _ = writeln!(std::io::stderr(), "acp run: could not start the agent: {e}");
        return ExitCode::from(exit::FAILED);
    }
    let (tx, rx) = match acp_repl::conn::connect(client_in, client_out, verbose) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp run: could not start: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let interrupter = rx.interrupter();
    if let Err(e) = forward_signals(move || interrupter.interrupt()) {
        tracing::warn!(error = %e, "could not install signal handlers");
    }
    let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr());
    let code = acp_repl::run::run(&tx, &rx, &options, &mut Output { out: &mut stdout, err: &mut stderr });
    // End of input: the agent finishes, saves the session and exits.
    drop(tx);
    if done_rx.recv_timeout(Duration::from_secs(5)).is_err() {
        tracing::warn!("the agent did not finish within 5 s of the end of the run");
    }
    ExitCode::from(code)
}

/// Calls `on_signal` for each SIGINT/SIGTERM: the runner cancels the turn on the first and stops
/// waiting on the second; if the process is still here 450 ms after a second signal, it exits 130.
fn forward_signals(on_signal: impl Fn() + Send + 'static) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for (seen, _) in signals.forever().enumerate() {
            on_signal();
            if seen == 1 {
                std::thread::spawn(|| {
                    std::thread::sleep(Duration::from_millis(450));
                    std::process::exit(i32::from(acp_repl::run::exit::CANCELLED));
                });
            }
        }
    })?;
    Ok(())
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
            // As `session/delete`: deleting what is not there succeeds (scripts may delete twice).
            if !acp::store::valid_id(&id) || store.get(&id)?.is_none() {
                writeln!(out, "No session `{id}` in {}; nothing to delete.", config.home.display())?;
            } else {
                store.delete_if_closed(&id)?;
                writeln!(out, "Deleted {id}.")?;
            }
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
