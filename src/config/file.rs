//! The shape of `config.toml` as read (unknown keys refused), and how a `[providers.NAME]`
//! section overrides a built-in provider or defines a new one.

use std::collections::BTreeMap;

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) model: Option<String>,
    /// The approval mode new sessions start in: `ask`, `code` or `auto`.
    pub(super) mode: Option<String>,
    pub(super) reasoning: Option<String>,
    pub(super) tools: Option<ToolsConfig>,
    pub(super) max_turn_requests: Option<u32>,
    pub(super) max_reply_bytes: Option<usize>,
    pub(super) bootstrap_max_chars: Option<usize>,
    pub(super) compaction: Option<FileCompaction>,
    #[serde(default)]
    pub(super) permissions: Vec<PermissionEntry>,
    pub(super) max_line_bytes: Option<usize>,
    pub(super) timeouts: Option<FileTimeouts>,
    pub(super) retry: Option<FileRetry>,
    pub(super) sandbox: Option<SandboxConfig>,
    pub(super) web_fetch: Option<WebFetchConfig>,
    #[serde(default)]
    pub(super) providers: toml::map::Map<String, toml::Value>,
    #[serde(default)]
    pub(super) mcp_servers: BTreeMap<String, mcp::FileMcpServer>,
    pub(super) gateway: Option<GatewayConfig>,
    pub(super) channels: Option<ChannelsConfig>,
    pub(super) session: Option<SessionConfig>,
    pub(super) messages: Option<MessagesConfig>,
    pub(super) skills: Option<SkillsConfig>,
    pub(super) subagents: Option<SubagentsConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCompaction {
    pub(super) auto: Option<bool>,
    pub(super) threshold: Option<f64>,
    pub(super) keep_recent: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTimeouts {
    pub(super) connect: Option<f64>,
    pub(super) first_event: Option<f64>,
    pub(super) idle: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileRetry {
    pub(super) max_retries: Option<u32>,
    pub(super) initial_delay: Option<f64>,
    pub(super) max_backoff: Option<f64>,
    pub(super) max_retry_after: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileProvider {
    pub(super) api: Option<WireApi>,
    pub(super) base_url: Option<String>,
    pub(super) api_key: Option<String>,
    pub(super) api_key_env: Option<String>,
    #[serde(default)]
    pub(super) headers: std::collections::BTreeMap<String, String>,
    pub(super) models: Option<Vec<FileModel>>,
    pub(super) max_tokens: Option<u32>,
    pub(super) prompt_cache_key: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum FileModel {
    Id(String),
    Detailed { id: String, name: Option<String>, context_window: Option<u64>, max_tokens: Option<u32> },
}

impl FileProvider {
    fn parse(value: toml::Value) -> Result<Self, String> {
        value.try_into::<FileProvider>().map_err(|e| e.to_string().trim().to_owned())
    }

    fn models(&self, api: WireApi) -> Option<Vec<ModelInfo>> {
        self.models.as_ref().map(|models| {
            models
                .iter()
                .map(|m| match m {
                    FileModel::Id(id) => ModelInfo {
                        id: id.clone(),
                        name: None,
                        context_window: default_context_window(id),
                        max_output_tokens: self.max_tokens.or(default_max_output(api)),
                    },
                    FileModel::Detailed { id, name, context_window, max_tokens } => ModelInfo {
                        id: id.clone(),
                        name: name.clone(),
                        context_window: context_window.unwrap_or_else(|| default_context_window(id)),
                        max_output_tokens: max_tokens.or(self.max_tokens).or(default_max_output(api)),
                    },
                })
                .collect()
        })
    }

    fn headers(&self) -> Vec<(String, String)> {
        self.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// A section named like a built-in provider overrides its fields.
pub(super) fn apply_section(
    value: toml::Value,
    provider: &mut ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let section = FileProvider::parse(value)?;
    if let Some(api) = section.api {
        provider.api = api;
    }
    // The environment variable (e.g. ANTHROPIC_BASE_URL) wins over the file for built-ins.
    if let Some(url) = &section.base_url {
        let env_name = match provider.id.as_str() {
            "anthropic" => "ANTHROPIC_BASE_URL",
            _ => "OPENAI_BASE_URL",
        };
        if env(env_name).is_none() {
            provider.base_url = trim_base(url);
        }
    }
    if let Some(var) = &section.api_key_env {
        provider.api_key_env = Some(var.clone());
        provider.api_key = env(var);
    }
    if let Some(key) = &section.api_key {
        provider.api_key = Some(key.clone());
    }
    provider.headers.extend(section.headers());
    if let Some(on) = section.prompt_cache_key {
        provider.prompt_cache_key = on;
    }
    if let Some(models) = section.models(provider.api) {
        provider.models = models;
    } else if let Some(max) = section.max_tokens {
        for m in &mut provider.models {
            m.max_output_tokens = Some(max);
        }
    }
    Ok(())
}

/// A section with a new name defines a provider.
pub(super) fn new_provider(
    id: String,
    value: toml::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderConfig, String> {
    let section = FileProvider::parse(value)?;
    let api = section.api.ok_or("missing `api` (\"anthropic\", \"openai-chat\" or \"openai-responses\")")?;
    let base_url = section.base_url.as_deref().map(trim_base).ok_or("missing `base_url`")?;
    let api_key = section.api_key.clone().or_else(|| section.api_key_env.as_deref().and_then(env));
    let key_required = section.api_key.is_some() || section.api_key_env.is_some();
    let models = section.models(api).unwrap_or_default();
    if models.is_empty() {
        return Err("missing `models` (a list of model ids)".into());
    }
    Ok(ProviderConfig {
        id,
        api,
        base_url,
        api_key,
        api_key_env: section.api_key_env.clone(),
        key_required,
        headers: section.headers(),
        models,
        prompt_cache_key: section.prompt_cache_key.unwrap_or(false),
    })
}
