//! Embeddings for hybrid memory search (`[memory] embeddings = "provider/model"`): texts sent to
//! an OpenAI-compatible `POST {base_url}/embeddings` (OpenAI, Ollama, vLLM, llama.cpp, LM Studio
//! all speak it), vectors back. Requests are batched, bounded in time and size, and every answer is
//! checked (one vector per input, in order, of one dimension, finite numbers) before it is used.

use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{Config, ProviderConfig, WireApi};

/// Texts per request (OpenAI takes up to 2,048; local servers are happier with fewer).
pub const BATCH: usize = 64;
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest answer read.
const MAX_BODY: usize = 64 << 20;
/// The longest text sent (about 8,000 tokens, the common input limit); longer ones are cut.
const MAX_TEXT_CHARS: usize = 24_000;
/// The most dimensions a vector may have (models have at most a few thousand).
const MAX_DIM: usize = 16_384;

/// Where embeddings come from.
#[derive(Debug, Clone)]
pub struct Embedder {
    /// `provider/model`, as configured: vectors are cached under it.
    pub name: String,
    model: String,
    url: String,
    /// The URL as errors show it: no credentials, no query.
    shown: String,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
}

impl Embedder {
    /// The embedder `config` names, if any; `Err` says why the one it names cannot be used.
    pub fn of(config: &Config) -> Option<Result<Self, String>> {
        let name = config.memory.embeddings.as_deref()?.trim();
        Some(Self::resolve(config, name))
    }

    fn resolve(config: &Config, name: &str) -> Result<Self, String> {
        let Some((provider, model)) = name.split_once('/').filter(|(p, m)| !p.is_empty() && !m.is_empty()) else {
            return Err(format!("`[memory] embeddings = \"{name}\"` must be provider/model"));
        };
        let Some(p) = config.provider(provider) else {
            return Err(format!("`[memory] embeddings` names provider `{provider}`, which is not configured"));
        };
        if p.api == WireApi::Anthropic {
            return Err(format!(
                "`[memory] embeddings`: provider `{provider}` speaks Anthropic's API, which has no embeddings; \
                 name an OpenAI-compatible provider"
            ));
        }
        if let Some(why) = p.unusable_reason() {
            return Err(why);
        }
        Ok(Self::new(name, model, p))
    }

    pub fn new(name: &str, model: &str, provider: &ProviderConfig) -> Self {
        // `{base_url}/embeddings`, a query in the base kept after the path.
        let (url, shown) = match reqwest::Url::parse(&provider.base_url) {
            Ok(mut u) => {
                let path = format!("{}/embeddings", u.path().trim_end_matches('/'));
                u.set_path(&path);
                let url = u.to_string();
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.set_query(None);
                (url, u.to_string())
            }
            Err(_) => {
                (format!("{}/embeddings", provider.base_url.trim_end_matches('/')), "the embeddings URL".to_owned())
            }
        };
        Self {
            name: name.to_owned(),
            model: model.to_owned(),
            shown,
            url,
            api_key: provider.api_key.clone(),
            headers: provider.headers.clone(),
        }
    }

    /// The vectors of `texts`, in order, in batches of [`BATCH`].
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let mut out: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            let vectors = self.request(batch).await?;
            if let (Some(first), Some(next)) = (out.first(), vectors.first())
                && first.len() != next.len()
            {
                return Err(format!("{}: vectors of different dimensions", self.shown));
            }
            out.extend(vectors);
        }
        Ok(out)
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let input: Vec<&str> = texts.iter().map(|t| cut(t)).collect();
        let body = serde_json::json!({"model": self.model, "input": input}).to_string();
        let http = client(crate::http::is_plain(&self.url))?;
        let mut request = http
            .post(&self.url)
            .timeout(REQUEST_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| format!("{}: {}", self.shown, crate::http::error_chain(&e.without_url())))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| crate::http::error_chain(&e.without_url()))? {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(format!("{}: the answer passed {} MiB", self.shown, MAX_BODY >> 20));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let text: String = text.chars().take(200).collect();
            return Err(format!("{} answered {status}: {}", self.shown, text.trim()));
        }
        parse(&bytes, texts.len()).map_err(|e| format!("{}: {e}", self.shown))
    }
}

/// A text cut to [`MAX_TEXT_CHARS`] at a character boundary.
fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// The vectors of an answer to `count` inputs, in input order.
fn parse(bytes: &[u8], count: usize) -> Result<Vec<Vec<f32>>, String> {
    let answer: Answer = serde_json::from_slice(bytes).map_err(|e| format!("not an embeddings answer ({e})"))?;
    if answer.data.len() != count {
        return Err(format!("{} vectors for {count} texts", answer.data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; count];
    for (at, item) in answer.data.into_iter().enumerate() {
        let slot = item.index.unwrap_or(at);
        match out.get_mut(slot) {
            Some(s @ None) => *s = Some(item.embedding),
            _ => return Err(format!("vector index {slot} is out of place")),
        }
    }
    let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    let dim = out.first().map_or(0, Vec::len);
    if dim == 0 || out.iter().any(|v| v.len() != dim) {
        return Err("vectors of different (or no) dimensions".into());
    }
    if dim > MAX_DIM {
        return Err(format!("vectors of {dim} dimensions (at most {MAX_DIM})"));
    }
    if out.iter().flatten().any(|x| !x.is_finite()) {
        return Err("a vector holds a number that is not finite".into());
    }
    Ok(out)
}

/// The HTTP clients, built once: one for plain `http://` (loopback servers), one with TLS roots.
fn client(plain: bool) -> Result<reqwest::Client, String> {
    static PLAIN: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    static TLS: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    let timeouts = crate::config::Timeouts::default();
    if plain {
        PLAIN.get_or_init(|| crate::http::build_plain_http(&timeouts)).clone()
    } else {
        TLS.get_or_init(|| crate::http::build_http(&timeouts)).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_put_in_input_order_and_checked() {
        let ok = br#"{"data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":[1,0]}],"model":"m"}"#;
        assert_eq!(parse(ok, 2).unwrap(), vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        let short = br#"{"data":[{"index":0,"embedding":[1,0]}]}"#;
        assert_eq!(parse(short, 2).unwrap_err(), "1 vectors for 2 texts");
        let ragged = br#"{"data":[{"embedding":[1,0]},{"embedding":[1]}]}"#;
        assert!(parse(ragged, 2).unwrap_err().contains("different"));
        let twice = br#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}"#;
        assert!(parse(twice, 2).unwrap_err().contains("out of place"));
        assert!(parse(b"<html>", 1).unwrap_err().contains("not an embeddings answer"));
        let huge = format!(r#"{{"data":[{{"embedding":[{}]}}]}}"#, vec!["1"; MAX_DIM + 1].join(","));
        assert!(parse(huge.as_bytes(), 1).unwrap_err().contains("at most"));
        assert!(parse(br#"{"data":[{"embedding":[1e40]}]}"#, 1).unwrap_err().contains("not finite"));
        assert_eq!(cut(&"é".repeat(MAX_TEXT_CHARS + 5)).chars().count(), MAX_TEXT_CHARS);
    }

    #[test]
    fn the_endpoint_keeps_the_base_query_and_is_shown_without_credentials() {
        let provider = ProviderConfig {
            id: "local".into(),
            api: WireApi::OpenAiChat,
            base_url: "http://user:secret@127.0.0.1:9/v1/?key=k123".into(),
            api_key: None,
            api_key_env: None,
            key_required: false,
            headers: Vec::new(),
            models: Vec::new(),
            prompt_cache_key: false,
            profiles: Vec::new(),
            rotation: Default::default(),
            discovered: false,
        };
        let e = Embedder::new("local/embed", "embed", &provider);
        assert_eq!(e.url, "http://user:secret@127.0.0.1:9/v1/embeddings?key=k123");
        assert_eq!(e.shown, "http://127.0.0.1:9/v1/embeddings");
    }
}
