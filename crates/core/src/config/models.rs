//! Which model a name means and what stands behind it: `[models]` in config.toml (aliases, the
//! search for local servers), `fallbacks`, and a provider's credentials (`[[providers.NAME.profiles]]`).
//! docs/models.md tells the user the same.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Aliases every configuration knows; `[models.aliases]` may redefine them.
pub const BUILTIN_ALIASES: &[(&str, &str)] = &[
    ("sonnet", "anthropic/claude-sonnet-4-5"),
    ("opus", "anthropic/claude-opus-4-6"),
    ("haiku", "anthropic/claude-haiku-4-5"),
    ("gpt", "openai/gpt-5"),
    ("gemini", "gemini/gemini-2.5-pro"),
    ("flash", "gemini/gemini-2.5-flash"),
];

/// `[models]` in config.toml.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Short names for model references: `fast = "anthropic/claude-haiku-4-5"`.
    pub aliases: BTreeMap<String, String>,
    /// Whether acp looks for model servers on this machine (Ollama, llama.cpp, LM Studio, vLLM)
    /// when no provider is usable; `acp models` always looks.
    pub discover: bool,
    /// Where it looks for OpenAI-compatible servers (`/v1/models`), besides Ollama (`OLLAMA_HOST`,
    /// else 127.0.0.1:11434).
    pub local: Vec<String>,
}

/// The OpenAI-compatible servers looked for by default: (provider id, base URL).
pub const DEFAULT_LOCAL: &[(&str, &str)] = &[
    ("llamacpp", "http://127.0.0.1:8080/v1"),
    ("lmstudio", "http://127.0.0.1:1234/v1"),
    ("vllm", "http://127.0.0.1:8000/v1"),
];

impl Default for ModelsConfig {
    fn default() -> Self {
        Self { aliases: BTreeMap::new(), discover: true, local: Vec::new() }
    }
}

impl ModelsConfig {
    /// What `name` is an alias of: the user's aliases first, then the built-in ones.
    pub fn alias(&self, name: &str) -> Option<&str> {
        self.aliases
            .get(name)
            .map(String::as_str)
            .or_else(|| BUILTIN_ALIASES.iter().find(|(alias, _)| *alias == name).map(|(_, target)| *target))
    }

    /// Every alias in force, the user's over the built-in ones, by name.
    pub fn all_aliases(&self) -> BTreeMap<&str, &str> {
        let mut all: BTreeMap<&str, &str> = BUILTIN_ALIASES.iter().copied().collect();
        all.extend(self.aliases.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        all
    }
}

/// How new sessions are given one of a provider's credentials; a session then keeps its
/// credential until it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rotation {
    /// Each new session the next credential in turn: the load is spread.
    #[default]
    RoundRobin,
    /// Each new session the credential that last answered.
    LastGood,
}

impl Rotation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RoundRobin => "round-robin",
            Self::LastGood => "last-good",
        }
    }
}

/// One credential of a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthProfile {
    /// `default` for the provider's own key; the profile's `id` (or its place, from 1) otherwise.
    pub id: String,
    pub key: Option<String>,
    /// The environment variable the key comes from.
    pub key_env: Option<String>,
    /// Where the key comes from, for the user: `ANTHROPIC_API_KEY`, `~/.keys/work`.
    pub source: String,
    /// Why there is no key (the variable is unset, the file unreadable).
    pub missing: Option<String>,
    /// Eight hex digits of the key's SHA-256: enough to tell that a key changed (and its saved
    /// cool-down no longer applies), never enough to learn anything of it.
    pub fingerprint: String,
}

impl AuthProfile {
    pub(super) fn new(id: String, key: Option<String>, key_env: Option<String>, source: String) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, key.as_deref().unwrap_or("").as_bytes());
        let fingerprint = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
        Self { id, key, key_env, source, missing: None, fingerprint }
    }
}

/// `[[providers.NAME.profiles]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileProfile {
    pub(super) id: Option<String>,
    pub(super) api_key_env: Option<String>,
    /// A file holding the key (its first line; `~` is the home directory).
    pub(super) key_file: Option<PathBuf>,
    pub(super) api_key: Option<String>,
}

impl FileProfile {
    pub(super) fn resolve(&self, place: usize, env: &dyn Fn(&str) -> Option<String>) -> Result<AuthProfile, String> {
        let id = self.id.clone().unwrap_or_else(|| place.to_string());
        let sources = [self.api_key_env.is_some(), self.key_file.is_some(), self.api_key.is_some()];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(format!("profile `{id}`: give exactly one of `api_key_env`, `key_file` and `api_key`"));
        }
        let (key, key_env, source, missing) = if let Some(var) = &self.api_key_env {
            let key = env(var);
            let missing = key.is_none().then(|| format!("{var} is not set"));
            (key, Some(var.clone()), var.clone(), missing)
        } else if let Some(path) = &self.key_file {
            let (key, missing) = match super::expand_home(path).map(|p| read_key(&p)) {
                Some(Ok(key)) => (Some(key), None),
                Some(Err(e)) => (None, Some(format!("{}: {e}", path.display()))),
                None => (None, Some(format!("{}: no home directory", path.display()))),
            };
            (key, None, path.display().to_string(), missing)
        } else {
            (self.api_key.clone(), None, "config.toml".to_owned(), None)
        };
        let mut profile = AuthProfile::new(id, key, key_env, source);
        profile.missing = missing;
        Ok(profile)
    }
}

/// A key file's first line, trimmed; at most 64 KiB read (it is a key, not a document).
fn read_key(path: &std::path::Path) -> Result<String, String> {
    let bytes = crate::files::read_capped(path, 64 << 10).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let key = text.lines().next().unwrap_or("").trim();
    if key.is_empty() {
        return Err("the file is empty".into());
    }
    Ok(key.to_owned())
}
