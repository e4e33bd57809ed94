//! Model servers found on this machine: Ollama (`GET /api/tags`, at `OLLAMA_HOST` or
//! 127.0.0.1:11434) and OpenAI-compatible servers (`GET /v1/models`: llama.cpp on 8080, LM Studio
//! on 1234, vLLM on 8000, or the `[models] local` list). Each found server becomes a provider
//! speaking `openai-chat`, needing no key. Every probe is bounded (a closed port answers at once;
//! a silent one is given up on after [`PROBE_TIMEOUT`]) and they run together.

use std::time::Duration;

use serde_json::Value;

use crate::config::models::{DEFAULT_LOCAL, ModelsConfig};
use crate::config::{ModelInfo, ProviderConfig, WireApi};

/// The longest one probe may take, connection and answer together.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1_500);

/// The most models taken from one server (a listing is read up to 1 MiB).
const MAX_MODELS: usize = 200;
const MAX_BODY: usize = 1 << 20;

/// Where to look: (provider id, base URL of its OpenAI-compatible API, whether it is Ollama).
pub fn places(config: &ModelsConfig, ollama_host: Option<&str>) -> Vec<(String, String, bool)> {
    let mut out = vec![("ollama".to_owned(), format!("{}/v1", ollama_base(ollama_host)), true)];
    if config.local.is_empty() {
        out.extend(DEFAULT_LOCAL.iter().map(|(id, url)| ((*id).to_owned(), (*url).to_owned(), false)));
    } else {
        for (i, url) in config.local.iter().enumerate() {
            let base = url.trim().trim_end_matches('/').to_owned();
            let id = if i == 0 { "local".to_owned() } else { format!("local{}", i + 1) };
            out.push((id, base, false));
        }
    }
    out
}

/// Ollama's address: `OLLAMA_HOST` (`host:port`, `http://host:port`, or a bare host), as Ollama
/// itself reads it; `0.0.0.0` (listen everywhere) is reached on loopback.
fn ollama_base(host: Option<&str>) -> String {
    let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
        return "http://127.0.0.1:11434".into();
    };
    let (scheme, rest) = match host.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("http", host),
    };
    let rest = rest.trim_end_matches('/');
    // `0.0.0.0` (every address) and no host at all (`:11434`) are reached on loopback.
    let rest = match rest.strip_prefix("0.0.0.0").or_else(|| rest.starts_with(':').then_some(rest)) {
        Some(port) => format!("127.0.0.1{port}"),
        None => rest.to_owned(),
    };
    let with_port = if rest.rsplit_once(':').is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit())) {
        rest
    } else {
        format!("{rest}:11434")
    };
    format!("{scheme}://{with_port}")
}

/// Servers found on this machine, as last seen (kept with the state, so a session opened before
/// this run's search has ended is offered them already).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Found {
    pub id: String,
    pub base_url: String,
    pub models: Vec<String>,
}

impl Found {
    pub fn of(provider: &ProviderConfig) -> Self {
        Self {
            id: provider.id.clone(),
            base_url: provider.base_url.clone(),
            models: provider.models.iter().map(|m| m.id.clone()).collect(),
        }
    }

    /// As a provider (`openai-chat`, no key).
    pub fn provider(&self) -> ProviderConfig {
        provider(&self.id, &self.base_url, self.models.clone())
    }
}

/// Looks in every place at once; the servers that answered, with their models.
pub async fn discover(http: &reqwest::Client, places: &[(String, String, bool)]) -> Vec<ProviderConfig> {
    let probes = places.iter().map(|(id, base, ollama)| async move {
        let found = tokio::time::timeout(PROBE_TIMEOUT, probe(http, base, *ollama)).await;
        match found {
            Ok(Ok(models)) if !models.is_empty() => Some(provider(id, base, models)),
            Ok(Ok(_)) => None,
            Ok(Err(e)) => {
                tracing::debug!(%base, error = %e, "no model server here");
                None
            }
            Err(_) => {
                tracing::debug!(%base, "a model server did not answer in time");
                None
            }
        }
    });
    futures_util::future::join_all(probes).await.into_iter().flatten().collect()
}

async fn probe(http: &reqwest::Client, base: &str, ollama: bool) -> Result<Vec<String>, String> {
    let url = if ollama { format!("{}/api/tags", base.trim_end_matches("/v1")) } else { format!("{base}/models") };
    let response = http.get(&url).send().await.map_err(|e| crate::http::error_chain(&e))?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response.chunk().await.map_err(|e| crate::http::error_chain(&e))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY {
            return Err("the listing is too large".into());
        }
    }
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("not a model listing: {e}"))?;
    Ok(model_ids(&v, ollama))
}

/// The model ids of a listing: Ollama's `{"models":[{"name"}]}`, OpenAI's `{"data":[{"id"}]}`.
pub fn model_ids(listing: &Value, ollama: bool) -> Vec<String> {
    let (list, field) = if ollama { (&listing["models"], "name") } else { (&listing["data"], "id") };
    let mut ids: Vec<String> = list
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m[field].as_str().or_else(|| m["model"].as_str()))
        .filter(|id| !id.is_empty() && id.len() <= 256 && !id.chars().any(char::is_control))
        // Embedding models cannot chat.
        .filter(|id| !id.contains("embed"))
        .map(str::to_owned)
        .take(MAX_MODELS)
        .collect();
    ids.dedup();
    ids
}

pub(crate) fn provider(id: &str, base: &str, models: Vec<String>) -> ProviderConfig {
    ProviderConfig {
        id: id.to_owned(),
        api: WireApi::OpenAiChat,
        base_url: base.to_owned(),
        api_key: None,
        api_key_env: None,
        key_required: false,
        headers: Vec::new(),
        models: models
            .into_iter()
            .map(|id| ModelInfo { id, name: None, context_window: 32_768, max_output_tokens: None })
            .collect(),
        prompt_cache_key: false,
        profiles: Vec::new(),
        rotation: Default::default(),
        discovered: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ollama_host_is_read_as_ollama_reads_it() {
        assert_eq!(ollama_base(None), "http://127.0.0.1:11434");
        assert_eq!(ollama_base(Some("127.0.0.1:5000")), "http://127.0.0.1:5000");
        assert_eq!(ollama_base(Some("0.0.0.0:5000")), "http://127.0.0.1:5000");
        assert_eq!(ollama_base(Some(":5000")), "http://127.0.0.1:5000");
        assert_eq!(ollama_base(Some("http://box.lan")), "http://box.lan:11434");
        assert_eq!(ollama_base(Some("https://ollama.example:443/")), "https://ollama.example:443");
    }

    #[test]
    fn listings_give_chat_models_only() {
        let ollama = json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b"}, {"name": "nomic-embed-text:latest"}, {"name": ""}]});
        assert_eq!(model_ids(&ollama, true), ["qwen3:8b"]);
        let openai =
            json!({"object": "list", "data": [{"id": "llama-3.1-8b", "object": "model"}, {"id": "bad\nname"}]});
        assert_eq!(model_ids(&openai, false), ["llama-3.1-8b"]);
        assert!(model_ids(&json!({"error": "x"}), false).is_empty());
    }
}
