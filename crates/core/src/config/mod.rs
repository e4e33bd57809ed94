//! Configuration: `$ACP_HOME/config.toml` (default `~/.acp/config.toml`), environment variables and
//! flags → [`Config`]. Model references are `provider/model`, split at the first '/'.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::settings::ReasoningEffort;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum WireApi {
    /// Anthropic Messages (`POST {base}/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions (`POST {base}/chat/completions`); also Ollama, vLLM, llama.cpp, LM Studio,
    /// OpenRouter and other compatible servers.
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// OpenAI Responses (`POST {base}/responses`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Google Gemini (`POST {base}/models/{model}:streamGenerateContent?alt=sse`).
    #[serde(rename = "gemini")]
    Gemini,
}

impl WireApi {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAiChat => "openai-chat",
            Self::OpenAiResponses => "openai-responses",
            Self::Gemini => "gemini",
        }
    }
}

/// One model a provider offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub id: String,
    pub name: Option<String>,
    /// Context window in tokens.
    pub context_window: u64,
    /// Output token limit sent with each request (required by Anthropic; optional elsewhere).
    pub max_output_tokens: Option<u32>,
}

/// The configuration in force, shared by the runtime and the surface that serves it; replaced
/// whole (after `authenticate` re-reads the file), read as a snapshot.
#[derive(Debug, Clone)]
pub struct ConfigCell(std::sync::Arc<std::sync::RwLock<Held>>);

#[derive(Debug)]
struct Held {
    base: std::sync::Arc<Config>,
    /// Each agent's configuration ([`Config::for_agent`]).
    agents: Vec<(String, std::sync::Arc<Config>)>,
}

impl Held {
    fn new(config: Config) -> Self {
        let agents = config
            .agents
            .iter()
            .filter_map(|a| config.for_agent(&a.id).map(|c| (a.id.clone(), std::sync::Arc::new(c))))
            .collect();
        Self { base: std::sync::Arc::new(config), agents }
    }
}

impl ConfigCell {
    pub fn new(config: Config) -> Self {
        Self(std::sync::Arc::new(std::sync::RwLock::new(Held::new(config))))
    }

    pub fn get(&self) -> std::sync::Arc<Config> {
        crate::sync::read(&self.0).base.clone()
    }

    /// The configuration session `key` runs with: its agent's, if the key names one of
    /// `[[agents]]` (`agent:<id>:…`), else the file's.
    pub fn for_session(&self, key: &str) -> std::sync::Arc<Config> {
        let held = crate::sync::read(&self.0);
        agents::agent_of(key)
            .and_then(|id| held.agents.iter().find(|(a, _)| a == id))
            .map_or_else(|| held.base.clone(), |(_, c)| c.clone())
    }

    /// Running turns keep the snapshot they started with.
    pub fn set(&self, config: Config) {
        *crate::sync::write(&self.0) = Held::new(config);
    }

    /// Replaces the configuration with `f` of it, nothing replacing it meanwhile.
    pub fn update(&self, f: impl FnOnce(&Config) -> Config) {
        let mut held = crate::sync::write(&self.0);
        *held = Held::new(f(&held.base));
    }
}

/// A resolved provider: built-in defaults, the config file and the environment merged.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub id: String,
    pub api: WireApi,
    /// Base URL without a trailing '/'. OpenAI-style bases include `/v1`; Anthropic-style ones do not.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The environment variable the key is read from, if any.
    pub api_key_env: Option<String>,
    /// Whether the provider needs a key at all (local servers usually do not).
    pub key_required: bool,
    pub headers: Vec<(String, String)>,
    pub models: Vec<ModelInfo>,
    /// Send OpenAI's `prompt_cache_key` (the session id): on for the built-in OpenAI providers,
    /// off for other servers unless `prompt_cache_key = true` (a strict server may refuse fields
    /// it does not know).
    pub prompt_cache_key: bool,
    /// Its credentials, in order: its own key (`default`), then `[[providers.NAME.profiles]]`.
    /// `api_key` is the first of them that has a key.
    pub profiles: Vec<models::AuthProfile>,
    pub rotation: models::Rotation,
    /// Found on this machine rather than configured (`[models] discover`).
    pub discovered: bool,
}

impl ProviderConfig {
    pub fn is_usable(&self) -> bool {
        !self.key_required || self.api_key.is_some()
    }

    /// Why the provider cannot be used, in words that say how to fix it.
    pub fn unusable_reason(&self) -> Option<String> {
        if self.is_usable() {
            return None;
        }
        let mut reason = match &self.api_key_env {
            Some(var) => format!("provider `{}` needs an API key: set {var}", self.id),
            None => format!("provider `{}` needs an API key: set `api_key_env` or `api_key` in config.toml", self.id),
        };
        let broken: Vec<String> = self
            .profiles
            .iter()
            .filter_map(|p| p.missing.as_ref().map(|why| format!("profile `{}`: {why}", p.id)))
            .collect();
        if !broken.is_empty() {
            reason.push_str(&format!(", or mend its profiles ({})", broken.join("; ")));
        }
        Some(reason)
    }

    pub fn model(&self, id: &str) -> ModelInfo {
        self.models.iter().find(|m| m.id == id).cloned().unwrap_or_else(|| ModelInfo {
            id: id.to_owned(),
            name: None,
            context_window: default_context_window(id),
            max_output_tokens: default_max_output(self.api),
        })
    }
}

/// A `provider/model` reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl ModelRef {
    /// Splits at the first '/', so `openrouter/anthropic/claude-sonnet-4.5` is provider `openrouter`,
    /// model `anthropic/claude-sonnet-4.5`.
    pub fn parse(reference: &str) -> Option<Self> {
        let (provider, model) = reference.trim().split_once('/')?;
        if provider.is_empty() || model.is_empty() {
            return None;
        }
        Some(Self { provider: provider.to_owned(), model: model.to_owned() })
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Network timeouts for model requests. There is deliberately no total deadline: long generations
/// are fine as long as bytes keep arriving.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    /// From sending the request to the first byte of the event stream.
    pub first_event: Duration,
    /// Longest silence between two reads of the stream.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { connect: Duration::from_secs(10), first_event: Duration::from_secs(300), idle: Duration::from_secs(300) }
    }
}

/// How failed model requests are retried (see `providers::retry`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub initial_delay: Duration,
    pub max_backoff: Duration,
    /// A server-requested delay longer than this is not waited for; the turn fails instead.
    pub max_retry_after: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_delay: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// The `[tools]` section: which tools the model is offered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The `[sandbox]` section: how `exec` commands are confined (see docs/tools.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// `false` runs every command unconfined, so each one asks first (as on a kernel without
    /// Landlock).
    pub enabled: bool,
    /// Whether sandboxed commands may use the network; `/network on|off` changes it per session.
    pub network: bool,
    /// `false`: Landlock alone, without user, PID and network namespaces (as where the kernel does
    /// not let unprivileged users create them).
    pub namespaces: bool,
    /// More directories sandboxed commands may write (the workspace roots and the temp dir always).
    pub writable: Vec<PathBuf>,
    /// Paths sandboxed commands may not read (`~` is the home directory). `$ACP_HOME` is never
    /// readable, whatever this says.
    pub deny_read: Vec<String>,
    /// Variables commands get although their names say they are credentials (`NPM_TOKEN` for a
    /// build that needs it); see docs/tools.md for what is withheld.
    pub env_allow: Vec<String>,
    /// Processes (threads count) a sandboxed command may run at once (default 1024).
    pub max_processes: Option<u32>,
}

/// Credentials a command has no business reading.
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.docker/config.json",
    "~/.gnupg",
    "~/.kube",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
];

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            network: false,
            namespaces: true,
            writable: Vec::new(),
            deny_read: DEFAULT_DENY_READ.iter().map(|s| (*s).to_owned()).collect(),
            env_allow: Vec::new(),
            max_processes: None,
        }
    }
}

/// The `[web_fetch]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebFetchConfig {
    /// Hosts `web_fetch` may reach although they are on this machine or a private network
    /// (`localhost`, `intranet.example`, `10.0.0.5`).
    pub allow_private_hosts: Vec<String>,
}

/// A remembered "always" answer, for one workspace (`[[permissions]]` in config.toml).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionEntry {
    pub workspace: PathBuf,
    pub tool: String,
    #[serde(default)]
    pub command: Option<String>,
    pub decision: Decision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Reject,
}

/// Model requests one prompt may make before the turn stops with `max_turn_requests`.
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 100;

/// Bytes of text and thoughts one model reply may stream: far above any model's output limit (a
/// 128k-token reply is about 0.5 MiB), so only a runaway or hostile server reaches it.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 4 << 20;

/// Characters of each instruction or agent-workspace file injected into the system prompt.
pub const DEFAULT_BOOTSTRAP_MAX_CHARS: usize = 20_000;

/// When and how the conversation is summarised to fit the context window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// Compact automatically when the context nears the window.
    pub auto: bool,
    /// The fill (fraction of the window, output reserve included) at which it compacts.
    pub threshold: f64,
    /// The share of the window recent messages may keep verbatim.
    pub keep_recent: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self { auto: true, threshold: 0.85, keep_recent: 0.25 }
    }
}

/// Everything the server needs to know, resolved once at start (and again on `authenticate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub home: PathBuf,
    /// `ACP_MODEL`, else `model` from the file.
    pub default_model: Option<String>,
    /// Whether `default_model` came from `ACP_MODEL`.
    pub default_model_from_env: bool,
    /// The approval mode new sessions start in (`mode` in the file; `code` by default).
    pub default_mode: crate::settings::Mode,
    /// How much new sessions ask the model to reason (`None`: the provider's default, which for
    /// Anthropic means no extended thinking).
    pub reasoning: Option<ReasoningEffort>,
    pub providers: Vec<ProviderConfig>,
    pub timeouts: Timeouts,
    pub retry: RetryConfig,
    pub max_line_bytes: usize,
    pub tools: ToolsConfig,
    pub max_turn_requests: u32,
    /// Bytes of text and thoughts one model reply may stream before it is stopped.
    pub max_reply_bytes: usize,
    pub bootstrap_max_chars: usize,
    pub compaction: CompactionConfig,
    pub permissions: Vec<PermissionEntry>,
    pub sandbox: SandboxConfig,
    pub web_fetch: WebFetchConfig,
    /// `[mcp_servers.NAME]`, enabled ones, by name.
    pub mcp_servers: Vec<mcp::McpServer>,
    /// `[gateway]`: defaults for `acp gateway`.
    pub gateway: GatewayConfig,
    /// `[channels.*]`: the messaging channels `acp gateway` serves.
    pub channels: ChannelsConfig,
    /// `[session]`: how channel messages map to sessions.
    pub session: SessionConfig,
    /// `[messages]`: how channel messages are batched and queued.
    pub messages: MessagesConfig,
    /// `[skills]`: which skills are offered.
    pub skills: SkillsConfig,
    /// `[subagents]`: sessions the agent spawns.
    pub subagents: SubagentsConfig,
    /// `[memory]`: the memory files and their search.
    pub memory: memory::MemoryConfig,
    /// `[cron]`: the gateway's scheduled jobs.
    pub cron: cron::CronConfig,
    /// `[heartbeat]`: the gateway's periodic turn in the main session.
    pub heartbeat: cron::HeartbeatConfig,
    /// `[[hooks]]`: the user's programs at the agent's lifecycle points.
    pub hooks: Vec<hooks::HookConfig>,
    /// `fallbacks`: the models a turn moves to, in order, when the session's model fails.
    pub fallbacks: Vec<String>,
    /// `[models]`: aliases and the search for local model servers.
    pub models: models::ModelsConfig,
    /// `OLLAMA_HOST`: where Ollama listens, as Ollama reads it.
    pub ollama_host: Option<String>,
    /// `[lsp]`: language servers for the files the agent edits.
    pub lsp: lsp::LspConfig,
    /// `[[agents]]`: the gateway's agents, the default first (none: `main` alone).
    pub agents: Vec<agents::Agent>,
    /// `[[bindings]]`: which agent a channel's messages go to.
    pub bindings: Vec<agents::Binding>,
    /// Set in the configuration of one agent's sessions ([`Config::for_agent`]).
    pub agent_scope: Option<agents::AgentScope>,
    /// Set when the config file exists but could not be read or parsed.
    pub load_error: Option<String>,
}

/// `~` or `~/rest` as the home directory (`$HOME`); other paths as they are. `None`: the path
/// starts with `~` and there is no home directory.
pub fn expand_home(raw: &std::path::Path) -> Option<PathBuf> {
    match raw.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest)),
        Err(_) => Some(raw.to_path_buf()),
    }
}

/// Why no model can be used; the message says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoModel {
    pub message: String,
    /// Credentials or a provider are missing, or the file is broken (setting up is what helps);
    /// otherwise the model reference itself is wrong.
    pub setup: bool,
}

impl NoModel {
    fn setup(message: String) -> Self {
        Self { message, setup: true }
    }

    fn wrong(message: String) -> Self {
        Self { message, setup: false }
    }
}

impl std::fmt::Display for NoModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Config {
    /// Loads from the real environment and `$ACP_HOME/config.toml`.
    pub fn load() -> Self {
        Self::load_with(&|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// `$ACP_HOME`, or `~/.acp`.
    pub fn home_dir() -> PathBuf {
        Self::home_with(&|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    fn home_with(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
        match env("ACP_HOME") {
            Some(dir) => PathBuf::from(dir),
            None => env("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".acp"),
        }
    }

    pub fn config_path(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    pub fn provider(&self, id: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.id == id)
    }

    pub fn any_usable(&self) -> bool {
        self.providers.iter().any(ProviderConfig::is_usable)
    }

    /// Whether acp should look for model servers on this machine: nothing else is usable, the
    /// file does not say no, and the file is not broken.
    pub fn wants_discovery(&self) -> bool {
        self.models.discover
            && self.load_error.is_none()
            && !self.providers.iter().any(|p| p.is_usable() && !p.discovered)
    }

    /// This configuration with `found` (servers found on this machine) as providers, in place of
    /// those found before; a configured provider of the same name wins.
    #[must_use]
    pub fn with_found(&self, found: &[ProviderConfig]) -> Config {
        let mut config = self.clone();
        config.providers.retain(|p| !p.discovered);
        for provider in found {
            if config.provider(&provider.id).is_none() {
                config.providers.push(provider.clone());
            }
        }
        config
    }

    /// Resolves a model reference to a usable provider and model: `provider/model`, an alias
    /// (`sonnet`, `[models.aliases]`), or a bare model id that one usable provider offers (more
    /// than one is an error that names them).
    pub fn resolve_model(&self, reference: &str) -> Result<(ModelRef, &ProviderConfig), NoModel> {
        let name = reference.trim();
        let target = self.models.alias(name).unwrap_or(name);
        let via = if target == name { String::new() } else { format!(" (the alias `{name}`)") };
        let parsed = match ModelRef::parse(target) {
            Some(r) => r,
            None => self.bare_model(target)?,
        };
        let Some(provider) = self.provider(&parsed.provider) else {
            let known: Vec<&str> = self.providers.iter().map(|p| p.id.as_str()).collect();
            // A model server this machine runs is offered only while no provider has a key.
            let local =
                if models::DEFAULT_LOCAL.iter().any(|(id, _)| *id == parsed.provider) || parsed.provider == "ollama" {
                    format!(
                        " (a model server found on this machine is offered only while no provider has a key: name it \
                     with a [providers.{}] section to use it beside them)",
                        parsed.provider
                    )
                } else {
                    String::new()
                };
            return Err(NoModel::wrong(format!(
                "unknown provider `{}` in `{parsed}`{via}; known providers: {}{local}",
                parsed.provider,
                known.join(", ")
            )));
        };
        if let Some(reason) = provider.unusable_reason() {
            let what =
                if via.is_empty() && target.contains('/') { String::new() } else { format!("`{parsed}`{via}: ") };
            return Err(NoModel::setup(format!("{what}{reason}")));
        }
        Ok((parsed, provider))
    }

    /// The one usable provider that lists model `name`; with none, the one provider (without
    /// its key yet) that does.
    fn bare_model(&self, name: &str) -> Result<ModelRef, NoModel> {
        let lists = |p: &&ProviderConfig| p.models.iter().any(|m| m.id == name);
        let mut offering: Vec<&ProviderConfig> =
            self.providers.iter().filter(|p| p.is_usable()).filter(lists).collect();
        if offering.is_empty() {
            offering = self.providers.iter().filter(lists).collect();
        }
        match offering.as_slice() {
            [p] => Ok(ModelRef { provider: p.id.clone(), model: name.to_owned() }),
            [] => Err(NoModel::wrong(format!(
                "`{name}` is neither a model a configured provider offers nor an alias: write it as provider/model, \
                 e.g. anthropic/claude-sonnet-4-5, or use an alias ({})",
                self.models.all_aliases().keys().copied().collect::<Vec<_>>().join(", ")
            ))),
            several => Err(NoModel::wrong(format!(
                "`{name}` is offered by more than one provider; write one of {}",
                several.iter().map(|p| format!("`{}/{name}`", p.id)).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// The model new sessions start with.
    pub fn default_model_ref(&self) -> Result<ModelRef, NoModel> {
        if let Some(err) = &self.load_error {
            return Err(NoModel::setup(format!("the configuration file is broken: {err}")));
        }
        if let Some(reference) = &self.default_model {
            return self.resolve_model(reference).map(|(r, _)| r).map_err(|e| match e.setup {
                true => e,
                false => NoModel::wrong(format!("{}: {}", self.default_model_origin(), e.message)),
            });
        }
        self.providers
            .iter()
            .find(|p| p.is_usable())
            .and_then(|p| p.models.first().map(|m| ModelRef { provider: p.id.clone(), model: m.id.clone() }))
            .ok_or_else(|| NoModel::setup(self.setup_help()))
    }

    /// Where the default model was named: `ACP_MODEL=…` or the file's `model = …`.
    fn default_model_origin(&self) -> String {
        let model = self.default_model.as_deref().unwrap_or_default();
        match self.default_model_from_env {
            true => format!("ACP_MODEL={model}"),
            false => format!("{}: model = \"{model}\"", self.config_path().display()),
        }
    }

    /// Every model of every usable provider, as (reference, display name).
    pub fn model_choices(&self) -> Vec<(ModelRef, String)> {
        self.providers
            .iter()
            .filter(|p| p.is_usable())
            .flat_map(|p| {
                p.models.iter().map(|m| {
                    let r = ModelRef { provider: p.id.clone(), model: m.id.clone() };
                    let name = m.name.clone().unwrap_or_else(|| r.to_string());
                    (r, name)
                })
            })
            .collect()
    }

    /// What to do when no provider is usable.
    pub fn setup_help(&self) -> String {
        format!(
            "no model provider is configured. Set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY in acp's environment \
             (your shell's, or the one your editor starts acp with), or add a provider to {} — for example\n\n\
             [providers.ollama]\napi = \"openai-chat\"\nbase_url = \"http://localhost:11434/v1\"\nmodels = [\"qwen3:8b\"]\n\n\
             then choose it with ACP_MODEL=ollama/qwen3:8b or `model = \"ollama/qwen3:8b\"` in that file{}",
            self.config_path().display(),
            if self.models.discover {
                ". acp also looks for a model server on this machine (Ollama at OLLAMA_HOST or 127.0.0.1:11434, \
                 llama.cpp, LM Studio, vLLM) and has found none so far: one started now is found on the next try"
            } else {
                ""
            }
        )
    }
}

/// The config file's text: a regular file of at most 16 MiB (a FIFO in its place must not hang
/// the agent).
pub(crate) fn read_config(path: &Path) -> std::io::Result<String> {
    let bytes = crate::files::read_capped(path, 16 << 20)?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8 text"))
}

/// A TOML error as an editor's error line: `file:line:column: what is wrong`.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{}:{line}:{column}: {message}", path.display())
        }
        None => format!("{}: {message}", path.display()),
    }
}

const HOUR: u64 = 60 * 60;
const DAY: u64 = 24 * HOUR;
/// Retries per model request at most, whatever the file says.
const MAX_RETRIES: u32 = 100;

/// A duration in seconds from the file: absent is `Ok(None)`; anything not above 0 and at most
/// `max` seconds (NaN, infinity, 1e300) is an error rather than a panic or an eternity.
fn seconds(value: Option<f64>, max: u64) -> Result<Option<Duration>, ()> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 && v <= max as f64 => {
            Duration::try_from_secs_f64(v).map(Some).map_err(|_| ())
        }
        Some(_) => Err(()),
    }
}

fn trim_base(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

fn default_context_window(model: &str) -> u64 {
    let m = model.to_ascii_lowercase();
    if m.contains("claude") {
        200_000
    } else if m.starts_with("gemini") {
        1_048_576
    } else if m.starts_with("gpt-5") {
        400_000
    } else if m.starts_with("gpt-4.1") {
        1_047_576
    } else {
        128_000
    }
}

fn default_max_output(api: WireApi) -> Option<u32> {
    match api {
        WireApi::Anthropic => Some(16_384),
        WireApi::OpenAiChat | WireApi::OpenAiResponses | WireApi::Gemini => None,
    }
}

fn model_list(api: WireApi, ids: &[&str]) -> Vec<ModelInfo> {
    ids.iter()
        .map(|id| ModelInfo {
            id: (*id).to_owned(),
            name: None,
            context_window: default_context_window(id),
            max_output_tokens: default_max_output(api),
        })
        .collect()
}

fn builtin_providers(env: &dyn Fn(&str) -> Option<String>) -> Vec<ProviderConfig> {
    let openai_base =
        env("OPENAI_BASE_URL").map(|u| trim_base(&u)).unwrap_or_else(|| "https://api.openai.com/v1".into());
    vec![
        ProviderConfig {
            id: "anthropic".into(),
            api: WireApi::Anthropic,
            base_url: env("ANTHROPIC_BASE_URL")
                .map(|u| trim_base(&u))
                .unwrap_or_else(|| "https://api.anthropic.com".into()),
            api_key: env("ANTHROPIC_API_KEY"),
            api_key_env: Some("ANTHROPIC_API_KEY".into()),
            key_required: true,
            headers: Vec::new(),
            models: model_list(WireApi::Anthropic, &["claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-4-5"]),
            prompt_cache_key: false,
            profiles: Vec::new(),
            rotation: models::Rotation::default(),
            discovered: false,
        },
        ProviderConfig {
            id: "openai".into(),
            api: WireApi::OpenAiChat,
            base_url: openai_base.clone(),
            api_key: env("OPENAI_API_KEY"),
            api_key_env: Some("OPENAI_API_KEY".into()),
            key_required: true,
            headers: Vec::new(),
            models: model_list(WireApi::OpenAiChat, &["gpt-5", "gpt-5-mini", "gpt-4.1"]),
            prompt_cache_key: true,
            profiles: Vec::new(),
            rotation: models::Rotation::default(),
            discovered: false,
        },
        ProviderConfig {
            id: "openai-responses".into(),
            api: WireApi::OpenAiResponses,
            base_url: openai_base,
            api_key: env("OPENAI_API_KEY"),
            api_key_env: Some("OPENAI_API_KEY".into()),
            key_required: true,
            headers: Vec::new(),
            models: model_list(WireApi::OpenAiResponses, &["gpt-5-codex", "gpt-5", "gpt-5-mini"]),
            prompt_cache_key: true,
            profiles: Vec::new(),
            rotation: models::Rotation::default(),
            discovered: false,
        },
        ProviderConfig {
            id: "gemini".into(),
            api: WireApi::Gemini,
            base_url: env("GEMINI_BASE_URL")
                .map(|u| trim_base(&u))
                .unwrap_or_else(|| "https://generativelanguage.googleapis.com/v1beta".into()),
            api_key: env("GEMINI_API_KEY"),
            api_key_env: Some("GEMINI_API_KEY".into()),
            key_required: true,
            headers: Vec::new(),
            models: model_list(WireApi::Gemini, &["gemini-2.5-pro", "gemini-2.5-flash"]),
            prompt_cache_key: false,
            profiles: Vec::new(),
            rotation: models::Rotation::default(),
            discovered: false,
        },
    ]
}

pub mod agents;
mod channels;
mod file;
pub use channels::*;
pub mod cron;
pub mod hooks;
pub mod lsp;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod rules;

#[cfg(test)]
mod tests;
