//! `acp sessions …`: the session store from the command line — a table (or JSON lines) of stored
//! sessions, one shown or exported as Markdown or JSON, one deleted. Output on stdout; problems on
//! stderr with exit code 1.

use std::io::Write as _;
use std::process::ExitCode;

use std::sync::Arc;

use crate::config::Config;
use crate::store::backend::{SessionStore, Sqlite};
use crate::store::{Cursor, Store, export};

#[derive(clap::Args, Debug)]
pub struct SessionsArgs {
    /// The PostgreSQL store gateways share (`postgres://user@host/db`), else $ACP_GATEWAY_STORE;
    /// without one, the sessions under $ACP_HOME.
    #[arg(long, value_name = "URL", global = true)]
    pub store: Option<String>,
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum SessionsCommand {
    /// Sessions, most recently updated first.
    List {
        /// Only sessions in this working directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<std::path::PathBuf>,
        /// Only the sessions of this agent (keys `agent:<id>:…`).
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
        /// How many to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A session's details and conversation, as Markdown.
    Show {
        /// The session's id, as `acp sessions list` shows it (a gateway key without `agent:<id>:` is the default agent's).
        id: String,
    },
    /// A session as a Markdown document or as JSON.
    Export {
        /// The session's id, as `acp sessions list` shows it (a gateway key without `agent:<id>:` is the default agent's).
        id: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Deletes a session and its transcript (deleting one that is not there is not an error).
    Delete {
        /// The session's id, as `acp sessions list` shows it (a gateway key without `agent:<id>:` is the default agent's).
        id: String,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ExportFormat {
    Md,
    Json,
}

/// `acp sessions …`: output on stdout, problems on stderr with exit code 1.
pub fn sessions(args: SessionsArgs) -> ExitCode {
    let ran = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
        .and_then(|rt| rt.block_on(run_sessions(args)));
    match ran {
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

async fn run_sessions(args: SessionsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load();
    let url = args.store.or_else(|| std::env::var("ACP_GATEWAY_STORE").ok()).filter(|u| !u.trim().is_empty());
    let store: Arc<dyn SessionStore> = match url {
        Some(url) => Arc::new(crate::store::postgres::Postgres::connect(&url).await?),
        None => Arc::new(Sqlite(Arc::new(Store::open(&config.home)?))),
    };
    let place = store.describe();
    let mut out = std::io::stdout().lock();
    // A gateway's key may be given as the gateway takes it: `trial1` for `agent:<default>:trial1`.
    let resolve = async |id: &str| -> Result<Option<String>, Box<dyn std::error::Error>> {
        let keyed = config.agent_key(id);
        for id in [id.to_owned(), keyed] {
            if crate::store::valid_id(&id) && store.get(id.clone()).await?.is_some() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    };
    let find = async |id: &str| -> Result<_, Box<dyn std::error::Error>> {
        let found = match resolve(id).await? {
            Some(id) => store.read_session(id).await?,
            None => None,
        };
        found.ok_or_else(|| format!("no session `{id}` in {place}").into())
    };
    match args.command {
        SessionsCommand::List { cwd, agent, limit, json } => {
            let agent = agent.map(|a| a.trim().to_lowercase());
            if let Some(a) = &agent
                && !config.has_agent(a)
            {
                return Err(format!("no agent `{a}` (agents: {})", config.agent_ids().join(", ")).into());
            }
            let theirs = |id: &str| agent.as_deref().is_none_or(|a| crate::config::agents::agent_of(id) == Some(a));
            let cwd = cwd.map(|c| std::path::absolute(&c).unwrap_or(c));
            let mut rows = Vec::new();
            let mut cursor: Option<Cursor> = None;
            while rows.len() < limit {
                let want = if agent.is_some() { 500 } else { (limit - rows.len()).min(500) };
                let (page, next) = store.list(cwd.clone(), cursor.take(), want).await?;
                rows.extend(page.into_iter().filter(|r| theirs(&r.id)));
                rows.truncate(limit);
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
                let of = agent.map(|a| format!(" of agent {a}")).unwrap_or_default();
                writeln!(out, "No sessions{of}{}.", cwd.map(|c| format!(" in {}", c.display())).unwrap_or_default())?;
            } else {
                let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(2).max(2);
                writeln!(
                    out,
                    "{:width$}  {:16}  {:7}  {:>15}  TITLE (CWD)",
                    "ID", "UPDATED", "ORIGIN", "TOKENS IN/OUT"
                )?;
                for r in &rows {
                    let tokens = format!("{}/{}", r.input_tokens, r.output_tokens);
                    let title = r.title.as_deref().unwrap_or("(untitled)");
                    let when = export::local_time(r.updated_at);
                    let origin = &r.origin;
                    writeln!(
                        out,
                        "{:width$}  {when:16}  {origin:7}  {tokens:>15}  {title} ({})",
                        r.id,
                        r.cwd.display()
                    )?;
                }
            }
        }
        SessionsCommand::Show { id } => {
            let (row, replay) = find(&id).await?;
            write!(out, "{}", export::to_markdown(&row, &replay))?;
            writeln!(out, "\n---\nTranscript: {}", store.location(&row.id))?;
        }
        SessionsCommand::Export { id, format, output } => {
            let (row, replay) = find(&id).await?;
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
            match resolve(&id).await? {
                None => writeln!(out, "No session `{id}` in {place}; nothing to delete.")?,
                Some(id) => {
                    store.delete_if_closed(id.clone()).await?;
                    writeln!(out, "Deleted {id}.")?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}
