//! The `acp` command line: parses arguments, sends logs to stderr, and runs the chosen entry point.
//! `acp` with no subcommand is `acp serve`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use acp::config::Config;

#[derive(Parser, Debug, Default)]
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
    #[command(about = RUN_ABOUT, after_help = RUN_HELP)]
    Run(RunArgs),
    /// Stored sessions: list, show, export, delete.
    Sessions(acp::cli::sessions::SessionsArgs),
    /// A long-lived gateway: OpenClaw's gateway protocol over WebSocket, and a web chat.
    Gateway(acp::cli::gateway::GatewayArgs),
    /// MCP servers in config.toml: list them, or test one (connect, list its tools, exit).
    Mcp {
        #[command(subcommand)]
        command: acp::cli::mcp::McpCommand,
    },
    /// The agent's memory files and their index: status, index, search.
    Memory {
        #[command(subcommand)]
        command: acp::cli::memory::MemoryCommand,
    },
    /// Pairing codes of channel senders on the running gateway: list, approve, reject.
    Pairing {
        #[command(subcommand)]
        command: acp::cli::pairing::PairingCommand,
        #[command(flatten)]
        target: acp::cli::pairing::GatewayTarget,
    },
    /// The models acp can use (configured and found on this machine); `status`: credentials and
    /// cool-downs.
    Models(acp::cli::models::ModelsArgs),
    /// Language servers: list those configured and found, or test the one for a file.
    Lsp {
        #[command(subcommand)]
        command: acp::cli::lsp::LspCommand,
    },
    /// The hooks in config.toml: list them, or feed one event to them.
    Hooks {
        #[command(subcommand)]
        command: acp::cli::hooks::HooksCommand,
    },
    /// The running gateway's cron jobs: list, add, rm, run, runs.
    Cron {
        #[command(subcommand)]
        command: acp::cli::cron::CronCommand,
        #[command(flatten)]
        target: acp::cli::pairing::GatewayTarget,
    },
    /// The gateway's agents ([[agents]] in config.toml) and the bindings that route to them.
    Agents {
        #[command(subcommand)]
        command: acp::cli::agents::AgentsCommand,
    },
    /// The running gateway's messaging channels.
    Channels {
        #[command(subcommand)]
        command: acp::cli::pairing::ChannelsCommand,
        #[command(flatten)]
        target: acp::cli::pairing::GatewayTarget,
    },
}

const RUN_ABOUT: &str = "Run one prompt in process and print the reply (for scripts and CI)";

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
    prompt: Option<String>,
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

/// `acp run …` parsed on its own: a script's every run is a fresh process, and building the whole
/// command tree would be most of what `main` does before the run starts. The same arguments,
/// help and errors as `run` in [`Cli`].
#[derive(Parser, Debug)]
#[command(name = "acp run", about = RUN_ABOUT, after_help = RUN_HELP)]
struct RunCli {
    #[command(flatten)]
    args: RunArgs,
    /// Debug logging to stderr (RUST_LOG, when set, takes precedence).
    #[arg(long, short)]
    verbose: bool,
}

#[derive(clap::Args, Debug, Default)]
struct ServeArgs {
    /// Largest accepted input line in bytes (default 16 MiB, or `max_line_bytes` in config.toml).
    #[arg(long, value_name = "BYTES")]
    max_line_bytes: Option<usize>,
    #[command(flatten)]
    bridge: acp::cli::serve::BridgeArgs,
}

fn main() -> ExitCode {
    // The exec sandbox's launcher: before anything else starts (it must stay single-threaded).
    let mut args = std::env::args_os();
    let first = args.nth(1);
    if first.as_ref().is_some_and(|a| a == acp::sandbox::LAUNCHER_ARG) {
        return acp::sandbox::launch::main(args);
    }
    // `acp` or `acp serve` alone, as editors start it: nothing to parse, so the parser's command
    // tree (the largest start-up work of the binary's own) is not built.
    if first.as_ref().is_some_and(|a| a == "run") {
        let cli = RunCli::parse_from(std::iter::once("acp run".into()).chain(args));
        init_tracing(cli.verbose, Quiet::Yes);
        return run(cli.args, cli.verbose);
    }
    let plain_serve = first.as_ref().is_none_or(|a| a == "serve") && args.next().is_none();
    let cli = if plain_serve { Cli::default() } else { Cli::parse() };
    // Servers log warnings (an editor's log, a service's journal); commands a person types say
    // what went wrong in their own words, and log only errors unless asked (`--verbose`).
    let quiet = match &cli.command {
        None | Some(Command::Serve(_) | Command::Gateway(_)) => Quiet::No,
        Some(_) => Quiet::Yes,
    };
    init_tracing(cli.verbose, quiet);
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        Some(Command::Sessions(args)) => return acp::cli::sessions::sessions(args),
        Some(Command::Mcp { command }) => return acp::cli::mcp::mcp(command),
        Some(Command::Memory { command }) => return acp::cli::memory::memory(command),
        Some(Command::Pairing { command, target }) => return acp::cli::pairing::pairing(command, &target),
        Some(Command::Channels { command, target }) => return acp::cli::pairing::channels(command, &target),
        Some(Command::Cron { command, target }) => return acp::cli::cron::cron(command, &target),
        Some(Command::Hooks { command }) => return acp::cli::hooks::hooks(command),
        Some(Command::Lsp { command }) => return acp::cli::lsp::lsp(command),
        Some(Command::Agents { command }) => return acp::cli::agents::agents(command),
        Some(Command::Models(args)) => return acp::cli::models::models(args),
        Some(Command::Gateway(args)) => return acp::cli::gateway::gateway(args),
        Some(Command::Run(args)) => return run(args, cli.verbose),
        Some(Command::Client(args)) => return client(args, cli.verbose),
        None => cli.serve,
    };
    acp::cli::serve::serve(args.max_line_bytes, &args.bridge)
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
    // This acp as the agent: a broken file is said as such, with `acp run`'s code for it; with no
    // usable provider, the model servers on this machine are looked for first (kept, so the agent
    // offers them from its first `session/new`).
    if args.agent.is_none() {
        let config = Config::load();
        if let Some(err) = config.load_error {
            let _ = writeln!(std::io::stderr(), "acp client: the configuration file is broken: {err}");
            return ExitCode::from(acp_repl::run::exit::CONFIG);
        }
        if config.wants_discovery()
            && let Err(e) = acp::cli::models::look(&config)
        {
            tracing::warn!(error = %e, "could not look for model servers on this machine");
        }
    }
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
    use acp_repl::run::{RunOptions, exit};
    let usage = |message: String| {
        let _ = writeln!(std::io::stderr(), "acp run: {message}");
        ExitCode::from(exit::USAGE)
    };
    let Some(prompt) = args.prompt else {
        let hint = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            "give it as an argument (`acp run \"…\"`), or `-` to read it from stdin"
        } else {
            "give it as an argument, or `-` to read it from stdin (`… | acp run -`)"
        };
        return usage(format!("no prompt: {hint}"));
    };
    let prompt = if prompt == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            return usage(format!("could not read the prompt from stdin: {e}"));
        }
        text
    } else {
        prompt
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
    if let Err(e) = check_allowed(&allow) {
        return usage(e);
    }
    let options = RunOptions {
        prompt,
        cwd,
        model: args.model,
        mode: args.mode,
        new_session_id: args.session.is_none().then(acp::acp::new_session_id),
        session: args.session,
        json: args.json,
        policy: acp_repl::policy::Policy::allow(allow),
    };

    ExitCode::from(acp::cli::run::run(&options, Config::load(), verbose))
}

#[derive(Clone, Copy, PartialEq)]
enum Quiet {
    Yes,
    No,
}

/// Every `--allow` pattern names something that can ask: a tool, a kind, an MCP tool, or a glob.
fn check_allowed(patterns: &[String]) -> Result<(), String> {
    use acp::tools::{TOOL_KINDS, TOOL_NAMES};
    for pattern in patterns.iter().flat_map(|p| p.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        let lower = pattern.to_ascii_lowercase();
        let known = lower.contains('*')
            || lower.starts_with("mcp__")
            || TOOL_NAMES.contains(&lower.as_str())
            || TOOL_KINDS.contains(&lower.as_str());
        if !known {
            return Err(format!(
                "--allow {pattern}: no tool or kind of that name. Tools: {}; kinds: {}; MCP tools: \
                 mcp__SERVER__TOOL; `*` matches any run of characters; `all` allows everything",
                TOOL_NAMES.join(", "),
                TOOL_KINDS.join(", ")
            ));
        }
    }
    Ok(())
}

fn init_tracing(verbose: bool, quiet: Quiet) {
    let default = match (verbose, quiet) {
        (true, _) => "acp=debug,info",
        (false, Quiet::No) => "warn",
        (false, Quiet::Yes) => "acp=error",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}
