//! `acp pairing list|approve|reject` and `acp channels status`: they ask the running gateway
//! (`pairing.*`, `channels.status`) over its protocol, with this installation's device identity —
//! at `--gateway` (default: the gateway running for this `$ACP_HOME`, which leaves its address in
//! `gateway.json`, else `[gateway] listen`, else ws://127.0.0.1:18789) with `--token-file` or
//! `--token` (default: that gateway's owner token, else `$ACP_GATEWAY_TOKEN`, else `[gateway]
//! token`). Output on stdout; problems on stderr, exit code 1.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use acp_protocol::gateway::Method;
use acp_protocol::gateway::methods::{
    ChannelsStatus, NoParams, PairingApprove, PairingList, PairingParams, PairingReject,
};

use crate::config::Config;

#[derive(clap::Args, Debug)]
pub struct GatewayTarget {
    /// The gateway (default: the one running for this $ACP_HOME, else `[gateway] listen` in
    /// config.toml, else ws://127.0.0.1:18789).
    #[arg(long, value_name = "URL", global = true)]
    pub gateway: Option<String>,
    /// Its token (default: the running gateway's owner token from $ACP_HOME/gateway.json, else
    /// $ACP_GATEWAY_TOKEN, else `[gateway] token`). Prefer --token-file: a command line is visible
    /// to every local user in the process list.
    #[arg(long, value_name = "TOKEN", global = true, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line).
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<std::path::PathBuf>,
}

/// Whether two gateway URLs name the same place (a trailing `/` aside).
pub fn same_gateway(a: &str, b: &str) -> bool {
    a.trim_end_matches('/').eq_ignore_ascii_case(b.trim_end_matches('/'))
}

#[derive(clap::Subcommand, Debug)]
pub enum PairingCommand {
    /// The pairing codes waiting for approval.
    List,
    /// Lets the sender of this code talk to the agent on this channel.
    Approve {
        /// The channel the code came from (`telegram`).
        channel: String,
        /// The code the sender was given (as `acp pairing list` shows it).
        code: String,
    },
    /// Drops this code.
    Reject {
        /// The channel the code came from (`telegram`).
        channel: String,
        /// The code the sender was given.
        code: String,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum ChannelsCommand {
    /// Each channel's state on the running gateway.
    Status,
}

pub(super) fn target(config: &Config, t: &GatewayTarget) -> Result<crate::remote::Options, String> {
    let running = crate::gateway::discovery::find(&config.home);
    let url = t.gateway.clone().or_else(|| running.as_ref().map(|r| r.url.clone())).unwrap_or_else(|| {
        format!("ws://{}", config.gateway.listen.clone().unwrap_or_else(|| super::gateway::DEFAULT_LISTEN.to_owned()))
    });
    let given = match (&t.token, &t.token_file) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(file)) => Some(super::gateway::read_token_file(file)?),
        (None, None) => None,
    };
    // The gateway running here takes its owner token, whatever its shared token is.
    let owner = running.filter(|r| same_gateway(&r.url, &url)).map(|r| r.token);
    let token = given
        .or(owner)
        .or_else(|| std::env::var("ACP_GATEWAY_TOKEN").ok())
        .or_else(|| config.gateway.token.clone())
        .filter(|t| !t.is_empty());
    Ok(crate::remote::Options {
        url,
        token,
        password: None,
        home: config.home.clone(),
        scopes: vec!["operator.admin".into()],
        client: acp_protocol::gateway::methods::ClientInfo {
            id: "cli".into(),
            display_name: Some("acp".into()),
            version: env!("CARGO_PKG_VERSION").into(),
            platform: std::env::consts::OS.into(),
            mode: "cli".into(),
            ..Default::default()
        },
        caps: Vec::new(),
    })
}

/// Asks the running gateway method `M`; its answer, or why not.
pub(super) fn ask<M: Method>(options: crate::remote::Options, params: M::Params) -> Result<M::Result, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let identity = crate::remote::identity::Identity::load_or_create(&options.home)?;
        let (tx, _notices) = tokio::sync::mpsc::unbounded_channel();
        let gateway = crate::remote::GatewayClient::start(options, identity, tx);
        let answer = gateway.call::<M>(&params, Duration::from_secs(10)).await.map_err(|e| e.to_string());
        gateway.stop();
        answer
    })
}

pub(super) fn finish(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(text) => {
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `acp pairing …`.
pub fn pairing(command: PairingCommand, t: &GatewayTarget) -> ExitCode {
    let config = Config::load();
    let options = match target(&config, t) {
        Ok(options) => options,
        Err(e) => return finish(Err(e)),
    };
    finish(match command {
        PairingCommand::List => ask::<PairingList>(options, NoParams {}).map(|r| {
            if r.pending.is_empty() {
                return "No pairing codes are waiting.".to_owned();
            }
            r.pending
                .iter()
                .map(|p| format!("{}  {}  {} ({})", p.code, p.channel, p.name, p.peer))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        PairingCommand::Approve { channel, code } => ask::<PairingApprove>(options, PairingParams { channel, code })
            .map(|r| format!("Approved: {} ({}) may talk to the agent on {}.", r.name, r.peer, r.channel)),
        PairingCommand::Reject { channel, code } => ask::<PairingReject>(options, PairingParams { channel, code })
            .map(|r| format!("Rejected the code of {} ({}).", r.name, r.peer)),
    })
}

/// `acp channels status`.
pub fn channels(command: ChannelsCommand, t: &GatewayTarget) -> ExitCode {
    let config = Config::load();
    let ChannelsCommand::Status = command;
    let options = match target(&config, t) {
        Ok(options) => options,
        Err(e) => return finish(Err(e)),
    };
    finish(ask::<ChannelsStatus>(options, NoParams {}).map(|r| {
        let accounts: Vec<&serde_json::Value> = r.channel_accounts.values().flatten().collect();
        if accounts.is_empty() {
            return "No channels are configured on the gateway ([channels.telegram] in its config.toml).".to_owned();
        }
        accounts
            .into_iter()
            .map(|c| {
                let account = match c["accountId"].as_str() {
                    None | Some("default") => String::new(),
                    Some(name) => format!(" ({name})"),
                };
                let mut line = format!(
                    "{}{account}: {}",
                    c["id"].as_str().unwrap_or_default(),
                    c["state"].as_str().unwrap_or("unknown")
                );
                for (key, label) in [
                    ("bot", "bot"),
                    ("dmPolicy", "dm policy"),
                    ("messagesIn", "messages in"),
                    ("lastError", "last error"),
                ] {
                    if let Some(v) = c.get(key).filter(|v| !v.is_null()) {
                        line.push_str(&format!(
                            " · {label} {}",
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                        ));
                    }
                }
                line
            })
            .collect::<Vec<_>>()
            .join("\n")
    }))
}
