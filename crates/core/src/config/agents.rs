//! `[[agents]]` and `[[bindings]]`: several agents behind one gateway (docs/agents.md). An agent
//! has its own workspace, model and fallbacks, approval mode, tools, sandbox settings and
//! identity; what it does not set it takes from the rest of the file. A session is an agent's by
//! its key (`agent:<id>:…`), and [`Config::for_agent`] is the configuration its turns run with.
//! Bindings say which agent a channel's messages go to.

use std::path::PathBuf;

use serde::Deserialize;

use super::{Config, SandboxConfig, expand_home};

/// The agent of a configuration without `[[agents]]`.
pub const MAIN: &str = "main";

/// `[[agents]]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAgent {
    id: String,
    #[serde(default)]
    default: bool,
    /// A display name (else `identity.name`).
    name: Option<String>,
    workspace: Option<PathBuf>,
    model: Option<String>,
    fallbacks: Option<Vec<String>>,
    mode: Option<String>,
    tools: Option<FileAgentTools>,
    sandbox: Option<AgentSandbox>,
    identity: Option<Identity>,
    subagents: Option<AgentSubagents>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAgentTools {
    /// Replaces the file's `[tools] allow` for this agent.
    allow: Option<Vec<String>>,
    /// Added to the file's `[tools] deny`.
    #[serde(default)]
    deny: Vec<String>,
}

/// `[agents.sandbox]`: what differs from `[sandbox]` for this agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSandbox {
    pub enabled: Option<bool>,
    pub network: Option<bool>,
    pub namespaces: Option<bool>,
    /// Replaces `[sandbox] writable`.
    pub writable: Option<Vec<PathBuf>>,
    /// Added to `[sandbox] deny_read`.
    #[serde(default)]
    pub deny_read: Vec<String>,
    /// Replaces `[sandbox] env_allow`.
    pub env_allow: Option<Vec<String>>,
    pub max_processes: Option<u32>,
}

/// How an agent presents itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub name: Option<String>,
    pub emoji: Option<String>,
    /// An image URL or a short text shown in place of one.
    pub avatar: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSubagents {
    /// Agents this one may start subagents of (`sessions_spawn` with `agentId`); `*` any.
    allow_agents: Vec<String>,
}

/// One agent, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub id: String,
    pub name: Option<String>,
    /// Where its sessions work (`~` expanded); `None`: the gateway's workspace.
    pub workspace: Option<PathBuf>,
    pub model: Option<String>,
    pub fallbacks: Option<Vec<String>>,
    pub mode: Option<crate::settings::Mode>,
    pub tools_allow: Option<Vec<String>>,
    pub tools_deny: Vec<String>,
    pub sandbox: AgentSandbox,
    pub identity: Identity,
    /// `None`: `[subagents] allow_agents`.
    pub allow_agents: Option<Vec<String>>,
}

impl Agent {
    /// The name it is shown by.
    pub fn display_name(&self) -> &str {
        self.identity.name.as_deref().or(self.name.as_deref()).unwrap_or(&self.id)
    }
}

/// A rule sending a channel's matching messages to an agent (`[[bindings]]`). Every field given
/// must match; the most specific rule wins: peer, then guild (Discord), then team (Slack), then
/// account, then channel; among equals the first in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub agent: String,
    pub channel: Option<String>,
    pub account: Option<String>,
    /// A chat: a user (direct chats), a group, a room or a channel.
    pub peer: Option<String>,
    /// A Discord server.
    pub guild: Option<String>,
    /// A Slack workspace.
    pub team: Option<String>,
}

/// The channels a binding may name.
const CHANNELS: &[&str] = &["telegram", "matrix", "discord", "slack"];

/// Words session keys use for what they are: never an agent's id (a key's kind is read from them).
const RESERVED: &[&str] = &["dm", "group", "channel", "topic", "thread", "cron", "subagent", "boot", "run"];

/// Whether `id` may name an agent: letters, digits, `_` and `-`, at most 64, not a key's word.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !RESERVED.contains(&id)
}

/// Whether `name` may name a channel account: as an agent id (it goes into keys and file names),
/// and not `default`.
pub fn valid_account(name: &str) -> bool {
    valid_id(name) && name != "default" && !name.chars().any(|c| c.is_ascii_uppercase())
}

/// The agents of the file, checked: ids valid and unique, at most one default, models parse.
pub(super) fn resolve(file: Vec<FileAgent>) -> Result<Vec<Agent>, String> {
    let mut agents: Vec<Agent> = Vec::with_capacity(file.len());
    let mut defaults = 0;
    for a in file {
        let id = a.id.trim().to_lowercase();
        if !valid_id(&id) {
            return Err(format!(
                "[[agents]] id `{}`: use letters, digits, _ and - (at most 64), and not one of {}",
                a.id,
                RESERVED.join(", ")
            ));
        }
        if agents.iter().any(|b| b.id == id) {
            return Err(format!("[[agents]] id `{id}` is given twice"));
        }
        let mode = match a.mode.as_deref() {
            None => None,
            Some(m) => Some(
                crate::settings::Mode::parse(m)
                    .ok_or_else(|| format!("[[agents]] `{id}`: mode `{m}`: use ask, code or auto"))?,
            ),
        };
        let workspace = match a.workspace {
            None => None,
            Some(w) => Some(expand_home(&w).ok_or_else(|| format!("[[agents]] `{id}`: workspace needs $HOME"))?),
        };
        if let Some(w) = &workspace
            && !w.is_absolute()
        {
            return Err(format!("[[agents]] `{id}`: workspace `{}` must be an absolute path", w.display()));
        }
        if a.default && defaults > 0 {
            // The one that said it first is the first agent.
            return Err(format!("[[agents]]: `{}` and `{id}` both say `default = true`", agents[0].id));
        }
        defaults += usize::from(a.default);
        let tools = a.tools.unwrap_or_default();
        let agent = Agent {
            id,
            name: a.name,
            workspace,
            model: a.model,
            fallbacks: a.fallbacks,
            mode,
            tools_allow: tools.allow,
            tools_deny: tools.deny,
            sandbox: a.sandbox.unwrap_or_default(),
            identity: a.identity.unwrap_or_default(),
            allow_agents: a.subagents.map(|s| s.allow_agents.iter().map(|x| x.trim().to_lowercase()).collect()),
        };
        if a.default {
            agents.insert(0, agent);
        } else {
            agents.push(agent);
        }
    }
    for a in &agents {
        let unknown = a.allow_agents.iter().flatten().find(|x| *x != "*" && !agents.iter().any(|b| b.id == **x));
        if let Some(x) = unknown {
            return Err(format!("[[agents]] `{}`: subagents.allow_agents names `{x}`, not an agent here", a.id));
        }
    }
    Ok(agents)
}

/// Checks the bindings against the agents (their agent ids lowercased, as the agents' are).
pub(super) fn check_bindings(bindings: &mut [Binding], agents: &[Agent]) -> Result<(), String> {
    for b in bindings.iter_mut() {
        b.agent = b.agent.trim().to_lowercase();
        if let Some(channel) = &b.channel
            && !CHANNELS.contains(&channel.as_str())
        {
            return Err(format!(
                "[[bindings]] for `{}`: no channel `{channel}` (channels: {})",
                b.agent,
                CHANNELS.join(", ")
            ));
        }
        let known = if agents.is_empty() { b.agent == MAIN } else { agents.iter().any(|a| a.id == b.agent) };
        if !known {
            let ids: Vec<&str> =
                if agents.is_empty() { vec![MAIN] } else { agents.iter().map(|a| a.id.as_str()).collect() };
            return Err(format!("[[bindings]] agent `{}` is not an agent here ({})", b.agent, ids.join(", ")));
        }
        if b.channel.is_none() && (b.account.is_some() || b.peer.is_some()) {
            return Err(format!(
                "[[bindings]] for `{}`: an `account` or `peer` belongs to a channel; give `channel` too",
                b.agent
            ));
        }
    }
    Ok(())
}

/// The id of `key`'s agent, if it is an agent's key (`agent:<id>:…`).
pub fn agent_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("agent:")?;
    let (id, tail) = rest.split_once(':')?;
    (!id.is_empty() && !tail.is_empty()).then_some(id)
}

/// The agent of `key` (`main` for a key without one).
pub fn agent_or_main(key: &str) -> &str {
    agent_of(key).unwrap_or(MAIN)
}

impl Config {
    /// The agents: those of `[[agents]]`, the default first; without any, `main` alone.
    pub fn agent_ids(&self) -> Vec<&str> {
        if self.agents.is_empty() { vec![MAIN] } else { self.agents.iter().map(|a| a.id.as_str()).collect() }
    }

    /// The agent messages that match no binding go to, and keys without an agent belong to: the
    /// one with `default = true`, else the first.
    pub fn default_agent(&self) -> &str {
        self.agents.first().map_or(MAIN, |a| a.id.as_str())
    }

    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// Whether `id` is an agent here.
    pub fn has_agent(&self, id: &str) -> bool {
        if self.agents.is_empty() { id == MAIN } else { self.agent(id).is_some() }
    }

    /// `key` with its agent: as it is if it names one (`agent:<id>:…`), else the default
    /// agent's (`x` → `agent:<default>:x`).
    pub fn agent_key(&self, key: &str) -> String {
        let key = key.trim();
        if key.starts_with("agent:") { key.to_owned() } else { format!("agent:{}:{key}", self.default_agent()) }
    }

    /// The configuration agent `id`'s sessions run with: this one with what the agent sets in
    /// place (its model, fallbacks, mode, tools, sandbox, memory); `None` if no agent `id`.
    pub fn for_agent(&self, id: &str) -> Option<Config> {
        let agent = self.agent(id)?;
        let mut c = self.clone();
        if let Some(model) = &agent.model {
            c.default_model = Some(model.clone());
            c.default_model_from_env = false;
        }
        if let Some(fallbacks) = &agent.fallbacks {
            c.fallbacks = fallbacks.clone();
        }
        if let Some(mode) = agent.mode {
            c.default_mode = mode;
        }
        if let Some(allow) = &agent.tools_allow {
            c.tools.allow = allow.clone();
        }
        c.tools.deny.extend(agent.tools_deny.iter().cloned());
        let s = &agent.sandbox;
        c.sandbox = SandboxConfig {
            enabled: s.enabled.unwrap_or(c.sandbox.enabled),
            network: s.network.unwrap_or(c.sandbox.network),
            namespaces: s.namespaces.unwrap_or(c.sandbox.namespaces),
            writable: s.writable.clone().unwrap_or(c.sandbox.writable),
            deny_read: c.sandbox.deny_read.into_iter().chain(s.deny_read.iter().cloned()).collect(),
            env_allow: s.env_allow.clone().unwrap_or(c.sandbox.env_allow),
            max_processes: s.max_processes.or(c.sandbox.max_processes),
        };
        if let Some(allow) = &agent.allow_agents {
            c.subagents.allow_agents = allow.clone();
        }
        // Other agents' own workspaces are not this one's to read (its own, or one it works
        // inside, stays readable).
        let mine = agent.workspace.as_deref();
        for other in self.agents.iter().filter(|o| o.id != agent.id) {
            if let Some(theirs) = other.workspace.as_deref()
                && mine.is_none_or(|m| !m.starts_with(theirs))
            {
                c.sandbox.deny_read.push(theirs.display().to_string());
            }
        }
        c.agent_scope = Some(AgentScope { id: agent.id.clone(), workspace: agent.workspace.clone() });
        Some(c)
    }

    /// The directory of the agent's own files (`MEMORY.md`, `memory/`, `SOUL.md`, `HEARTBEAT.md`,
    /// …): `$ACP_HOME/workspace` for the default agent (and without `[[agents]]`),
    /// `$ACP_HOME/agents/<id>` for another. Inside `$ACP_HOME`, so never the working directory:
    /// what protects them (no command reads them, a session writes only its own memory files, a
    /// group chat none) holds for every agent.
    pub fn agent_dir(&self) -> PathBuf {
        match &self.agent_scope {
            Some(agent) if agent.id != self.default_agent() => self.home.join("agents").join(&agent.id),
            _ => self.home.join("workspace"),
        }
    }

    /// Whether agent `from` may start subagents of agent `to` (itself always).
    pub fn may_spawn(&self, from: &str, to: &str) -> bool {
        from == to || self.subagents.allow_agents.iter().any(|a| a == "*" || a == to)
    }
}

/// The agent a configuration from [`Config::for_agent`] is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentScope {
    pub id: String,
    /// Its workspace, if it has its own.
    pub workspace: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        let home = dir.path().to_str().unwrap().to_owned();
        let c = Config::load_with(&|name| (name == "ACP_HOME").then(|| home.clone()));
        drop(dir);
        c
    }

    #[test]
    fn an_agent_takes_what_it_does_not_set_from_the_file() {
        let c = config(
            r#"
            model = "anthropic/claude-sonnet-4-5"
            fallbacks = ["openai/gpt-5"]
            [tools]
            deny = ["web_fetch"]
            [sandbox]
            network = false
            [[agents]]
            id = "work"
            workspace = "/srv/work"
            model = "openai/gpt-5-mini"
            fallbacks = []
            mode = "ask"
            tools = { allow = ["read", "grep"], deny = ["exec"] }
            sandbox = { network = true, deny_read = ["/srv/secrets"] }
            identity = { name = "Worker", emoji = "🛠" }
            [[agents]]
            id = "Home"
            default = true
            subagents = { allow_agents = ["work"] }
            "#,
        );
        assert_eq!(c.load_error, None);
        assert_eq!(c.agent_ids(), ["home", "work"]);
        assert_eq!(c.default_agent(), "home");
        assert_eq!(c.agent_key("main"), "agent:home:main");
        assert_eq!(c.agent_key("agent:work:x"), "agent:work:x");
        let work = c.for_agent("work").unwrap();
        assert_eq!(work.default_model.as_deref(), Some("openai/gpt-5-mini"));
        assert!(work.fallbacks.is_empty());
        assert_eq!(work.default_mode, crate::settings::Mode::Ask);
        assert_eq!(work.tools.allow, ["read", "grep"]);
        assert_eq!(work.tools.deny, ["web_fetch", "exec"]);
        assert!(work.sandbox.network);
        assert!(work.sandbox.deny_read.contains(&"/srv/secrets".to_owned()));
        assert!(work.sandbox.deny_read.contains(&"~/.ssh".to_owned()));
        assert_eq!(work.agent_scope.as_ref().unwrap().workspace, Some(PathBuf::from("/srv/work")));
        let home = c.for_agent("home").unwrap();
        assert_eq!(home.default_model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        assert_eq!(home.fallbacks, ["openai/gpt-5"]);
        assert!(home.may_spawn("home", "work") && !work.may_spawn("work", "home") && work.may_spawn("work", "work"));
        assert!(c.for_agent("nobody").is_none());
        assert_eq!(c.agent("work").unwrap().display_name(), "Worker");
    }

    #[test]
    fn without_agents_there_is_main() {
        let c = config("");
        assert_eq!(c.agent_ids(), ["main"]);
        assert!(c.has_agent("main") && !c.has_agent("work"));
        assert_eq!(c.agent_key("x"), "agent:main:x");
        assert!(c.for_agent("main").is_none());
    }

    #[test]
    fn mistakes_are_named() {
        for (text, says) in [
            ("[[agents]]\nid = \"a b\"", "id `a b`"),
            ("[[agents]]\nid = \"a\"\n[[agents]]\nid = \"A\"", "given twice"),
            ("[[agents]]\nid = \"a\"\ndefault = true\n[[agents]]\nid = \"b\"\ndefault = true", "`a` and `b` both"),
            ("[[agents]]\nid = \"group\"", "not one of"),
            ("[[agents]]\nid = \"a\"\nsubagents = { allow_agents = [\"zz\"] }", "names `zz`"),
            ("[[bindings]]\nagent = \"main\"\nchannel = \"telegrm\"", "no channel `telegrm`"),
            ("[[agents]]\nid = \"a\"\nmode = \"yolo\"", "mode `yolo`"),
            ("[[agents]]\nid = \"a\"\nworkspace = \"rel\"", "absolute"),
            ("[[agents]]\nid = \"a\"\n[[bindings]]\nagent = \"b\"\nchannel = \"telegram\"", "agent `b`"),
            ("[[bindings]]\nagent = \"main\"\npeer = \"1\"", "give `channel`"),
            ("[[agents]]\nid = \"a\"\nmodel = \"nope/x\"", "unknown provider"),
            ("[[agents]]\nid = \"a\"\ncolour = 1", "colour"),
        ] {
            let c = config(text);
            let error = c.load_error.unwrap_or_default();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn keys_name_their_agent() {
        assert_eq!(agent_of("agent:work:main"), Some("work"));
        assert_eq!(agent_of("agent:work:telegram:dm:1"), Some("work"));
        assert_eq!(agent_of("agent:work"), None);
        assert_eq!(agent_of("sess_1"), None);
    }
}
