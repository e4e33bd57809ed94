//! The gateway's agents (`[[agents]]`, docs/agents.md): session keys with their agent,
//! `agents.list`, `agent.identity.get`, and the agents in `health`.

// `ErrorShape` is the wire's error, made once per failed request.
#![allow(clippy::result_large_err)]

use acp_protocol::gateway::methods::{
    AgentHealth, AgentIdentity, AgentIdentityParams, AgentList, AgentModel, AgentSummary, IdentityShown, SessionCounts,
};
use acp_protocol::gateway::{ErrorShape, code};

use super::Gateway;
use crate::config::agents::agent_of;

impl Gateway {
    /// `key` with its agent: as it is if it names one (`agent:<id>:…`), else the default
    /// agent's.
    pub fn key(&self, key: &str) -> String {
        self.runtime.config().agent_key(key)
    }

    /// The agent messages and keys without one go to.
    pub fn default_agent(&self) -> String {
        self.runtime.config().default_agent().to_owned()
    }

    /// `agents.list`: each agent, the default first.
    pub(super) fn agents_list(&self) -> AgentList {
        let config = self.runtime.config();
        let default = config.default_agent().to_owned();
        let agents = config
            .agent_ids()
            .into_iter()
            .map(|id| {
                let own = self.runtime.config_for(&format!("agent:{id}:main"));
                let agent = config.agent(id);
                AgentSummary {
                    id: id.to_owned(),
                    name: agent.map(|a| a.display_name().to_owned()),
                    identity: agent.filter(|a| a.identity != Default::default()).map(|a| IdentityShown {
                        name: a.identity.name.clone(),
                        emoji: a.identity.emoji.clone(),
                        avatar: a.identity.avatar.clone(),
                    }),
                    workspace: self.workspace_of(&own).display().to_string(),
                    model: own
                        .default_model_ref()
                        .ok()
                        .map(|m| AgentModel { primary: m.to_string(), fallbacks: own.fallbacks.clone() }),
                    is_default: id == default,
                }
            })
            .collect();
        AgentList {
            default_id: default,
            ownership: if config.agents.is_empty() { "legacy" } else { "explicit" }.into(),
            selection_required: false,
            main_key: "main".into(),
            scope: "per-sender".into(),
            agents,
        }
    }

    /// `agent.identity.get`: the agent named, or the session's, or the default.
    pub(super) fn agent_identity(&self, p: &AgentIdentityParams) -> Result<AgentIdentity, ErrorShape> {
        let config = self.runtime.config();
        let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
        let named = given(&p.agent_id).map(|a| a.to_lowercase());
        let of_key = match given(&p.session_key) {
            None => None,
            Some(key) if key.starts_with("agent:") => match agent_of(&key) {
                Some(agent) => Some(agent.to_owned()),
                None => {
                    return Err(ErrorShape::invalid(format!(
                        "invalid agent.identity.get params: malformed session key \"{key}\""
                    )));
                }
            },
            Some(_) => Some(config.default_agent().to_owned()),
        };
        if let (Some(named), Some(of_key)) = (&named, &of_key)
            && named != of_key
        {
            return Err(ErrorShape::invalid(format!(
                "invalid agent.identity.get params: agent \"{named}\" does not match session key agent \"{of_key}\""
            )));
        }
        let id = of_key.or(named).unwrap_or_else(|| config.default_agent().to_owned());
        if !config.has_agent(&id) {
            return Err(ErrorShape::new(code::INVALID_REQUEST, format!("agent \"{id}\" not found")));
        }
        let agent = config.agent(&id);
        let identity = agent.map(|a| a.identity.clone()).unwrap_or_default();
        let name = identity.name.clone().or_else(|| agent.and_then(|a| a.name.clone()));
        Ok(AgentIdentity {
            agent_id: id,
            name_source: if name.is_some() { "agent" } else { "default" }.into(),
            name: name.unwrap_or_else(|| "Assistant".into()),
            avatar: identity.avatar.clone().or_else(|| identity.emoji.clone()).unwrap_or_else(|| "A".into()),
            emoji: identity.emoji,
        })
    }

    /// Each agent's sessions open, for `health`.
    pub(super) fn agent_health(&self) -> Vec<AgentHealth> {
        let config = self.runtime.config();
        let default = config.default_agent();
        let keys = self.open.keys();
        config
            .agent_ids()
            .into_iter()
            .map(|id| {
                let count = keys.iter().filter(|k| agent_of(k) == Some(id)).count();
                AgentHealth {
                    agent_id: id.to_owned(),
                    is_default: id == default,
                    sessions: SessionCounts { count: count as u64, recent: Vec::new() },
                }
            })
            .collect()
    }
}

/// A binding naming an account its channel does not have never matches: said at start.
pub fn check_bindings(config: &crate::config::Config) -> Result<(), String> {
    for b in &config.bindings {
        let never = |what: &str| format!("[[bindings]] for `{}`: {what}, so it could never match", b.agent);
        if b.guild.is_some() && b.channel.as_deref().is_some_and(|c| c != "discord") {
            return Err(never("`guild` is a Discord server's, and its channel is not discord"));
        }
        if b.team.is_some() && b.channel.as_deref().is_some_and(|c| c != "slack") {
            return Err(never("`team` is a Slack workspace's, and its channel is not slack"));
        }
        if let Some(guild) = b.guild.as_deref().filter(|g| g.is_empty() || !g.bytes().all(|c| c.is_ascii_digit())) {
            return Err(never(&format!("`guild` is a server's id (digits), not `{guild}`")));
        }
        let (Some(channel), Some(account)) = (b.channel.as_deref(), b.account.as_deref()) else { continue };
        let accounts: Option<Vec<&str>> = match channel {
            "telegram" => config.channels.telegram.as_ref().map(|t| t.accounts.keys().map(String::as_str).collect()),
            "matrix" => config.channels.matrix.as_ref().map(|m| m.accounts.keys().map(String::as_str).collect()),
            "discord" => config.channels.discord.as_ref().map(|d| d.accounts.keys().map(String::as_str).collect()),
            "slack" => config.channels.slack.as_ref().map(|d| d.accounts.keys().map(String::as_str).collect()),
            _ => None,
        };
        let Some(accounts) = accounts else {
            return Err(format!("[[bindings]] for `{}`: channel `{channel}` is not configured here", b.agent));
        };
        if account != "default" && !accounts.contains(&account) {
            return Err(format!(
                "[[bindings]] for `{}`: [channels.{channel}] has no account `{account}` (accounts: default{})",
                b.agent,
                accounts.iter().map(|a| format!(", {a}")).collect::<String>()
            ));
        }
    }
    Ok(())
}
