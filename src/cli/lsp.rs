//! `acp lsp test FILE`: starts the language server that serves FILE (as a session in its
//! directory would, in the sandbox), opens the file, and prints what it reports; `acp lsp list`:
//! the servers configured and whether their programs are here.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::lsp::pool::{Servers, find_program};
use crate::lsp::server::State;

#[derive(clap::Subcommand, Debug)]
pub enum LspCommand {
    /// The language servers configured (built-in and `[lsp.NAME]`) and whether each is found.
    List,
    /// Start the server for FILE, open it, and print its diagnostics.
    Test {
        file: PathBuf,
        /// Seconds to wait for the server and its diagnostics.
        #[arg(long, default_value_t = 60)]
        wait: u64,
    },
}

pub fn lsp(command: LspCommand) -> ExitCode {
    let config = Config::load();
    if let Some(e) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp: the configuration file is broken: {e}");
        return ExitCode::from(acp_repl::run::exit::CONFIG);
    }
    match command {
        LspCommand::List => {
            if !config.lsp.enabled {
                let _ = writeln!(std::io::stderr(), "language servers are off (`[lsp] enabled = false`)");
            }
            let mut out = String::new();
            for s in &config.lsp.servers {
                let found = match find_program(&s.command) {
                    Some(p) => p.display().to_string(),
                    None => "not found".into(),
                };
                let command = std::iter::once(s.command.as_str()).chain(s.args.iter().map(String::as_str));
                let command = command.collect::<Vec<_>>().join(" ");
                out.push_str(&format!("{}\t.{}\t{command}\t{found}\n", s.name, s.extensions.join(",.")));
            }
            let _ = std::io::stdout().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        LspCommand::Test { file, wait } => test(config, file, Duration::from_secs(wait.max(1))),
    }
}

fn test(config: Config, file: PathBuf, wait: Duration) -> ExitCode {
    let fail = |e: String| {
        let _ = writeln!(std::io::stderr(), "acp lsp test: {e}");
        ExitCode::FAILURE
    };
    let file = match std::path::absolute(&file) {
        Ok(f) => f,
        Err(e) => return fail(format!("{}: {e}", file.display())),
    };
    let content = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => return fail(format!("{}: {e}", file.display())),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(format!("could not start: {e}")),
    };
    // The current directory is the workspace, as for a session started here; a file elsewhere is
    // its own directory's.
    let cwd = std::env::current_dir().ok().and_then(|d| std::fs::canonicalize(d).ok());
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    let root = match cwd {
        Some(cwd) if file.starts_with(&cwd) => cwd,
        _ => file.parent().map(PathBuf::from).unwrap_or_default(),
    };
    let servers = Servers::new(Arc::default(), Arc::new(config), vec![root]);
    let Some(server) = servers.for_file(&file) else {
        let config = servers.config();
        let why = if !config.lsp.enabled {
            "language servers are off (`[lsp] enabled = false`)".to_owned()
        } else {
            let missing: Vec<String> = config
                .lsp
                .servers
                .iter()
                .filter(|s| s.serves(&file))
                .map(|s| format!("`{}` ({}) is not found", s.name, s.command))
                .collect();
            if missing.is_empty() {
                "no server is configured for its extension (add one as [lsp.NAME])".to_owned()
            } else {
                missing.join("; ")
            }
        };
        return fail(format!("no language server serves {} here: {why}", file.display()));
    };
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        let version = server.sync(&file, &content);
        if !server.ready(wait, &cancel).await {
            let why = match server.state() {
                State::Failed { error, .. } => error,
                _ => format!("it did not start within {} s", wait.as_secs()),
            };
            return fail(format!("`{}` is not available: {why}", server.spec.name));
        }
        let _ = writeln!(
            std::io::stderr(),
            "`{}` ({}) for {} ready in {} ms",
            server.spec.name,
            server.spec.command,
            server.root.display(),
            started.elapsed().as_millis()
        );
        let deadline = tokio::time::Instant::now() + wait;
        let Some(found) = server.wait_diagnostics(&file, version, deadline, &cancel).await else {
            return fail(format!("`{}` published no diagnostics within {} s", server.spec.name, wait.as_secs()));
        };
        let shown = file.display().to_string();
        let mut out = String::new();
        let mut found: Vec<_> = found.iter().collect();
        found.sort_by_key(|d| (d.range.start.line, d.range.start.character));
        for d in &found {
            out.push_str(&crate::lsp::text::diagnostic(&shown, d, Some(&content)));
            out.push('\n');
        }
        if found.is_empty() {
            out.push_str("no problems\n");
        }
        let _ = std::io::stdout().write_all(out.as_bytes());
        ExitCode::SUCCESS
    })
}
