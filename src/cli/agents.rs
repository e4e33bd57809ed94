//! `acp agents list|bindings`: the agents of config.toml (`[[agents]]`; without any, `main`)
//! with their model, mode and workspace, and the bindings that route channel messages to them,
//! most specific first. Read from config.toml; no gateway needed. Output on stdout; a broken
//! file on stderr, exit code 1.

use std::io::Write as _;
use std::process::ExitCode;

use crate::config::Config;
use crate::config::agents::Binding;

#[derive(clap::Subcommand, Debug)]
pub enum AgentsCommand {
    /// The agents, the default first: model, mode, workspace.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The bindings, most specific first (peer, guild, team, account, channel), and where the
    /// rest goes.
    Bindings,
}

pub fn agents(command: AgentsCommand) -> ExitCode {
    let config = Config::load();
    if let Some(e) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp: {e}");
        return ExitCode::FAILURE;
    }
    let text = match command {
        AgentsCommand::List { json } => list(&config, json),
        AgentsCommand::Bindings => bindings(&config),
    };
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error.
    let _ = out.write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// An agent as listed: id, name, model, mode, its own workspace.
type Row = (String, String, String, String, Option<String>);

fn list(config: &Config, json: bool) -> String {
    let default = config.default_agent();
    let rows: Vec<Row> = config
        .agent_ids()
        .into_iter()
        .map(|id| {
            let own = config.for_agent(id);
            let own = own.as_ref().unwrap_or(config);
            // As configured, whether or not its credentials are at hand here.
            let model = match &own.default_model {
                Some(model) => model.clone(),
                None => own.default_model_ref().map_or_else(|e| format!("(none: {e})"), |m| m.to_string()),
            };
            let workspace = config.agent(id).and_then(|a| a.workspace.as_ref()).map(|w| w.display().to_string());
            let name = config.agent(id).map_or_else(|| id.to_owned(), |a| a.display_name().to_owned());
            (id.to_owned(), name, model, own.default_mode.id().to_owned(), workspace)
        })
        .collect();
    if json {
        return rows
            .iter()
            .map(|(id, name, model, mode, workspace)| {
                let fallbacks = config.for_agent(id).map_or_else(|| config.fallbacks.clone(), |c| c.fallbacks);
                format!(
                    "{}\n",
                    serde_json::json!({"id": id, "name": name, "default": id == default, "model": model,
                        "fallbacks": fallbacks, "mode": mode, "workspace": workspace,
                        "agentDir": config.for_agent(id).map_or_else(|| config.agent_dir(), |c| c.agent_dir())})
                )
            })
            .collect();
    }
    let wide = |f: fn(&Row) -> usize, min: usize| rows.iter().map(f).max().unwrap_or(0).max(min) + 2;
    let (w_id, w_name, w_model) =
        (wide(|r| r.0.chars().count() + 1, 2), wide(|r| r.1.chars().count(), 4), wide(|r| r.2.chars().count(), 5));
    let mut out = format!("{:w_id$}{:w_name$}{:w_model$}{:6}WORKSPACE\n", "ID", "NAME", "MODEL", "MODE");
    for (id, name, model, mode, workspace) in rows {
        let id = if id == default { format!("{id}*") } else { id };
        let workspace = workspace.unwrap_or_else(|| "(the gateway's --workspace)".into());
        out.push_str(&format!("{id:w_id$}{name:w_name$}{model:w_model$}{mode:6}{workspace}\n"));
    }
    out.push_str("(* the default: messages no binding matches, and keys without an agent)\n");
    out
}

/// How specific a binding is (0 most), and its name.
fn tier(b: &Binding) -> (usize, &'static str) {
    if b.peer.is_some() {
        (0, "peer")
    } else if b.guild.is_some() {
        (1, "guild")
    } else if b.team.is_some() {
        (2, "team")
    } else if b.account.is_some() {
        (3, "account")
    } else if b.channel.is_some() {
        (4, "channel")
    } else {
        (5, "any")
    }
}

fn bindings(config: &Config) -> String {
    let mut all: Vec<(usize, &Binding)> = config.bindings.iter().enumerate().collect();
    all.sort_by_key(|(i, b)| (tier(b).0, *i));
    let mut out = String::new();
    for (_, b) in all {
        let mut what: Vec<String> = Vec::new();
        for (key, value) in [
            ("channel", &b.channel),
            ("account", &b.account),
            ("guild", &b.guild),
            ("team", &b.team),
            ("peer", &b.peer),
        ] {
            if let Some(v) = value {
                what.push(format!("{key}={v}"));
            }
        }
        let what = if what.is_empty() { "anything".to_owned() } else { what.join(" ") };
        out.push_str(&format!("{:8} {what} → {}\n", tier(b).1, b.agent));
    }
    if config.bindings.is_empty() {
        out.push_str("No bindings ([[bindings]] in config.toml).\n");
    }
    out.push_str(&format!("default  everything else → {}\n", config.default_agent()));
    out
}
