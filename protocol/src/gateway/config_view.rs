//! What `config.get` shows of this gateway's configuration, every secret replaced.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What this gateway shows of its configuration in [`ConfigView::config`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConfigShown {
    pub providers: BTreeMap<String, ProviderShown>,
    pub gateway: GatewayShown,
    pub agents: AgentsShown,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProviderShown {
    pub base_url: String,
    /// Replaced when set.
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayShown {
    pub auth: AuthShown,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthShown {
    pub mode: String,
    /// Replaced.
    pub token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentsShown {
    pub defaults: AgentDefaultsShown,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentDefaultsShown {
    pub model: Option<String>,
    pub workspace: String,
}

/// What a secret is shown as.
pub const REDACTED: &str = "__OPENCLAW_REDACTED__";
