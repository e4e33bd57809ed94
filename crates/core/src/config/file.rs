//! The shape of `config.toml` as read (unknown keys refused), how it becomes a [`Config`]
//! (`Config::load_with`), and how a `[providers.NAME]` section overrides a built-in provider or
//! defines a new one.

use std::collections::BTreeMap;

use super::*;

impl Config {
    /// Loads with a custom environment lookup (for tests).
    pub fn load_with(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let home = Self::home_with(env);
        let path = home.join("config.toml");
        let (file, load_error) = match read_config(&path) {
            Ok(text) => match toml::from_str::<FileConfig>(&text) {
                Ok(file) => (file, None),
                Err(e) => (FileConfig::default(), Some(toml_error(&path, &text, &e))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (FileConfig::default(), None),
            Err(e) => (FileConfig::default(), Some(format!("{}: {e}", path.display()))),
        };
        Self::resolve(home, file, load_error, env)
    }

    fn resolve(
        home: PathBuf,
        file: FileConfig,
        mut load_error: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let mut providers = builtin_providers(env);
        for provider in &mut providers {
            own_profile(provider);
        }
        for (id, section) in file.providers {
            let result = match providers.iter_mut().find(|p| p.id == id) {
                Some(existing) => apply_section(section, existing, env),
                None => new_provider(id.clone(), section, env).map(|p| providers.push(p)),
            };
            if let Err(e) = result {
                load_error.get_or_insert(format!("{}: [providers.{id}]: {e}", home.join("config.toml").display()));
            }
        }
        let t = file.timeouts.unwrap_or_default();
        let defaults = Timeouts::default();
        let file_path = home.join("config.toml");
        let mut secs = |section: &str, key: &str, value: Option<f64>, max: u64| {
            let checked = seconds(value, max);
            if checked.is_err() {
                load_error.get_or_insert(format!(
                    "{}: [{section}] {key} = {}: must be a number of seconds above 0 and at most {max}",
                    file_path.display(),
                    value.unwrap_or_default()
                ));
            }
            checked.ok().flatten()
        };
        let timeouts = Timeouts {
            connect: secs("timeouts", "connect", t.connect, DAY).unwrap_or(defaults.connect),
            first_event: secs("timeouts", "first_event", t.first_event, DAY).unwrap_or(defaults.first_event),
            idle: secs("timeouts", "idle", t.idle, DAY).unwrap_or(defaults.idle),
        };
        let r = file.retry.unwrap_or_default();
        let rd = RetryConfig::default();
        let retry = RetryConfig {
            max_retries: r.max_retries.unwrap_or(rd.max_retries).min(MAX_RETRIES),
            initial_delay: secs("retry", "initial_delay", r.initial_delay, HOUR).unwrap_or(rd.initial_delay),
            max_backoff: secs("retry", "max_backoff", r.max_backoff, HOUR).unwrap_or(rd.max_backoff),
            max_retry_after: secs("retry", "max_retry_after", r.max_retry_after, DAY).unwrap_or(rd.max_retry_after),
        };
        let mut mcp_servers = Vec::new();
        let mut mcp_error = None;
        for (name, section) in file.mcp_servers {
            let mut timeout = |key: &str, value: Option<f64>| secs(&format!("mcp_servers.{name}"), key, value, DAY);
            match section.resolve(&name, env, &mut timeout) {
                Ok(Some(server)) => mcp_servers.push(server),
                Ok(None) => {}
                Err(e) => {
                    mcp_error.get_or_insert(format!("{}: [mcp_servers.{name}]: {e}", file_path.display()));
                }
            }
        }
        if let Some(e) = mcp_error {
            load_error.get_or_insert(e);
        }
        let c = file.compaction.unwrap_or_default();
        let cd = CompactionConfig::default();
        let mut compaction = CompactionConfig {
            auto: c.auto.unwrap_or(cd.auto),
            threshold: c.threshold.unwrap_or(cd.threshold),
            keep_recent: c.keep_recent.unwrap_or(cd.keep_recent),
        };
        if !(0.1..=1.0).contains(&compaction.threshold) || !(0.0..=0.9).contains(&compaction.keep_recent) {
            load_error.get_or_insert(format!(
                "{}: [compaction]: `threshold` must be between 0.1 and 1 and `keep_recent` between 0 and 0.9",
                home.join("config.toml").display()
            ));
            compaction = cd;
        }
        let default_mode = match file.mode.as_deref() {
            None => crate::settings::Mode::default(),
            Some(id) => crate::settings::Mode::parse(id).unwrap_or_else(|| {
                load_error.get_or_insert(format!(
                    "{}: `mode` must be \"ask\", \"code\" or \"auto\", not \"{id}\"",
                    home.join("config.toml").display()
                ));
                crate::settings::Mode::Ask
            }),
        };
        let reasoning = match file.reasoning.as_deref() {
            None | Some("default") => None,
            Some(level) => {
                let parsed = ReasoningEffort::parse(level);
                if parsed.is_none() {
                    load_error.get_or_insert(format!(
                        "{}: `reasoning` must be \"default\" or one of {}, not \"{level}\"",
                        home.join("config.toml").display(),
                        ReasoningEffort::CHOICES
                    ));
                }
                parsed
            }
        };
        let lsp = match file.lsp.map(super::lsp::FileLsp::resolve) {
            None => super::lsp::LspConfig::default(),
            Some(Ok(lsp)) => lsp,
            Some(Err(e)) => {
                load_error.get_or_insert(format!("{}: {e}", file_path.display()));
                super::lsp::LspConfig::default()
            }
        };
        let agents = match super::agents::resolve(file.agents) {
            Ok(agents) => agents,
            Err(e) => {
                load_error.get_or_insert(format!("{}: {e}", file_path.display()));
                Vec::new()
            }
        };
        let mut bindings = file.bindings;
        if let Err(e) = super::agents::check_bindings(&mut bindings, &agents) {
            load_error.get_or_insert(format!("{}: {e}", file_path.display()));
        }
        Self {
            home,
            default_model_from_env: env("ACP_MODEL").is_some(),
            default_model: env("ACP_MODEL").or(file.model),
            default_mode,
            reasoning,
            providers,
            timeouts,
            retry,
            max_line_bytes: file.max_line_bytes.unwrap_or(acp_protocol::codec::DEFAULT_MAX_LINE_BYTES),
            tools: file.tools.unwrap_or_default(),
            max_turn_requests: file.max_turn_requests.unwrap_or(DEFAULT_MAX_TURN_REQUESTS).max(1),
            max_reply_bytes: file.max_reply_bytes.unwrap_or(DEFAULT_MAX_REPLY_BYTES).max(1024),
            bootstrap_max_chars: file.bootstrap_max_chars.unwrap_or(DEFAULT_BOOTSTRAP_MAX_CHARS).max(100),
            compaction,
            permissions: file.permissions,
            sandbox: file.sandbox.unwrap_or_default(),
            web_fetch: file.web_fetch.unwrap_or_default(),
            mcp_servers,
            gateway: file.gateway.unwrap_or_default(),
            channels: file.channels.unwrap_or_default(),
            session: file.session.unwrap_or_default(),
            messages: file.messages.unwrap_or_default(),
            skills: file.skills.unwrap_or_default(),
            subagents: file.subagents.unwrap_or_default(),
            memory: file.memory.unwrap_or_default(),
            cron: file.cron.unwrap_or_default(),
            heartbeat: file.heartbeat.unwrap_or_default(),
            hooks: file.hooks,
            fallbacks: file.fallbacks,
            models: file.models.unwrap_or_default(),
            ollama_host: env("OLLAMA_HOST"),
            lsp,
            agents,
            bindings,
            agent_scope: None,
            load_error,
        }
        .checked()
    }

    /// A fallback or alias that names no provider is a mistake in the file, said at once (one
    /// whose provider lacks a key is not: it is skipped while it does).
    fn checked(mut self) -> Self {
        let path = self.config_path();
        let mut wrong = None;
        for (alias, target) in &self.models.aliases {
            let problem = if alias.contains('/') || alias.trim().is_empty() {
                Some("an alias is a name without '/' (it would hide a provider/model)".to_owned())
            } else if ModelRef::parse(target).is_none() {
                Some("an alias names a provider/model".to_owned())
            } else {
                self.resolve_model(alias).err().filter(|e| !e.setup).map(|e| e.message)
            };
            if let Some(problem) = problem {
                wrong.get_or_insert(format!("{}: [models.aliases] {alias} = \"{target}\": {problem}", path.display()));
            }
        }
        for fallback in &self.fallbacks {
            if let Err(e) = self.resolve_model(fallback)
                && !e.setup
            {
                wrong.get_or_insert(format!("{}: fallbacks: {e}", path.display()));
            }
        }
        for agent in &self.agents {
            let models = agent.model.iter().chain(agent.fallbacks.iter().flatten());
            for model in models {
                if let Err(e) = self.resolve_model(model)
                    && !e.setup
                {
                    wrong.get_or_insert(format!("{}: [[agents]] `{}`: {e}", path.display(), agent.id));
                }
            }
        }
        if let Some(e) = wrong {
            self.load_error.get_or_insert(e);
        }
        self
    }
}

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
    pub(super) memory: Option<super::memory::MemoryConfig>,
    pub(super) cron: Option<super::cron::CronConfig>,
    pub(super) heartbeat: Option<super::cron::HeartbeatConfig>,
    #[serde(default)]
    pub(super) hooks: Vec<super::hooks::HookConfig>,
    #[serde(default)]
    pub(super) fallbacks: Vec<String>,
    pub(super) models: Option<super::models::ModelsConfig>,
    pub(super) lsp: Option<super::lsp::FileLsp>,
    #[serde(default)]
    pub(super) agents: Vec<super::agents::FileAgent>,
    #[serde(default)]
    pub(super) bindings: Vec<super::agents::Binding>,
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
    #[serde(default)]
    pub(super) profiles: Vec<super::models::FileProfile>,
    pub(super) rotation: Option<super::models::Rotation>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum FileModel {
    Id(String),
    Detailed { id: String, name: Option<String>, context_window: Option<u64>, max_tokens: Option<u32> },
}

impl FileProvider {
    fn parse(value: toml::Value) -> Result<Self, String> {
        value.try_into::<FileProvider>().map_err(|e| e.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
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
            "gemini" => "GEMINI_BASE_URL",
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
    own_profile(provider);
    add_profiles(provider, &section, env)?;
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
    let api =
        section.api.ok_or("missing `api` (\"anthropic\", \"openai-chat\", \"openai-responses\" or \"gemini\")")?;
    let base_url = section.base_url.as_deref().map(trim_base).ok_or("missing `base_url`")?;
    let api_key = section.api_key.clone().or_else(|| section.api_key_env.as_deref().and_then(env));
    let key_required = section.api_key.is_some() || section.api_key_env.is_some() || !section.profiles.is_empty();
    let models = section.models(api).unwrap_or_default();
    if models.is_empty() {
        return Err("missing `models` (a list of model ids)".into());
    }
    let mut provider = ProviderConfig {
        id,
        api,
        base_url,
        api_key,
        api_key_env: section.api_key_env.clone(),
        key_required,
        headers: section.headers(),
        models,
        prompt_cache_key: section.prompt_cache_key.unwrap_or(false),
        profiles: Vec::new(),
        rotation: models::Rotation::default(),
        discovered: false,
    };
    own_profile(&mut provider);
    add_profiles(&mut provider, &section, env)?;
    Ok(provider)
}

/// The provider's own key as its first credential, `default` (or none, without a key).
fn own_profile(provider: &mut ProviderConfig) {
    provider.profiles.retain(|p| p.id != "default");
    if let Some(key) = &provider.api_key {
        let source = provider.api_key_env.clone().unwrap_or_else(|| "config.toml".into());
        let profile =
            models::AuthProfile::new("default".into(), Some(key.clone()), provider.api_key_env.clone(), source);
        provider.profiles.insert(0, profile);
    }
}

/// `[[providers.NAME.profiles]]`, after the provider's own key; `api_key` becomes the first key
/// of them all.
fn add_profiles(
    provider: &mut ProviderConfig,
    section: &FileProvider,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let Some(rotation) = section.rotation {
        provider.rotation = rotation;
    }
    for (i, profile) in section.profiles.iter().enumerate() {
        let profile = profile.resolve(i + 1, env)?;
        if profile.id == "default" {
            return Err(format!(
                "a profile may not be called `default`: that is the provider's own key ({})",
                provider.api_key_env.as_deref().unwrap_or("api_key")
            ));
        }
        if provider.profiles.iter().any(|p| p.id == profile.id) {
            return Err(format!("two profiles are called `{}`", profile.id));
        }
        provider.profiles.push(profile);
    }
    if provider.api_key.is_none() {
        provider.api_key = provider.profiles.iter().find_map(|p| p.key.clone());
    }
    Ok(())
}
