//! The gateway's agents as the wire has them: `agents.list` (each agent with its identity,
//! workspace and model) and `agent.identity.get` (who an agent, or a session's agent, is).

use serde::{Deserialize, Serialize};

use super::Schema;
use super::method::{Method, NoParams, any, method};

method!(AgentsList = "agents.list", NoParams => AgentList, any());
method!(AgentIdentityGet = "agent.identity.get", AgentIdentityParams => AgentIdentity, Schema::object(&[
    ("agentId", Schema::String, false),
    ("sessionKey", Schema::String, false),
]));

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentIdentityParams {
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
}

/// `agents.list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentList {
    pub default_id: String,
    /// `explicit` when config.toml names agents, else `legacy` (one agent, `main`).
    pub ownership: String,
    pub selection_required: bool,
    pub main_key: String,
    pub scope: String,
    pub agents: Vec<AgentSummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentSummary {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityShown>,
    pub workspace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<AgentModel>,
    pub is_default: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IdentityShown {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentModel {
    pub primary: String,
    pub fallbacks: Vec<String>,
}

/// `agent.identity.get`: the agent's name (`nameSource`: `agent` when config.toml gives it, else
/// `default`), avatar and emoji.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentIdentity {
    pub agent_id: String,
    pub name: String,
    pub name_source: String,
    pub avatar: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
}
