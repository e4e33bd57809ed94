//! Discord's REST API (v10) over reqwest, as the Discord channel uses it: the Gateway's URL, the
//! bot's own user, a channel's kind, a direct chat with a user, sending messages (no mention in
//! them pings anyone: `allowed_mentions` is empty) and files (multipart, `files[0]`), typing, and
//! attachments from Discord's CDN.
//! Rate limits are kept as Discord asks: a route whose `X-RateLimit-Remaining` reached 0 is not
//! called again before `X-RateLimit-Reset-After`; a 429 is waited out as its `retry_after` says
//! (at most 5 minutes, three attempts); 5xx and unreachable servers are retried; other refusals
//! are not.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::host::ChatFile;
use crate::sync::lock;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status, if Discord answered.
    pub status: Option<u16>,
    /// Discord's JSON error code (`50001` missing access, …), 0 if none.
    pub code: i64,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "Discord refused it ({status}, code {}): {}", self.code, self.message),
            None => write!(f, "Discord could not be reached: {}", self.message),
        }
    }
}

pub struct Rest {
    http: reqwest::Client,
    base: String,
    authorization: String,
    /// Routes told to wait (their remaining calls ran out): not called before then.
    not_before: Mutex<HashMap<String, Instant>>,
}

const TIMEOUT: Duration = Duration::from_secs(30);

impl Rest {
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            authorization: format!("Bot {token}"),
            not_before: Mutex::default(),
        }
    }

    /// The URL to open the Gateway at (`GET /gateway/bot`).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let found = self.call(reqwest::Method::GET, "/gateway/bot", None).await?;
        found["url"].as_str().map(str::to_owned).ok_or_else(|| ApiError {
            status: None,
            code: 0,
            message: "GET /gateway/bot gave no url".into(),
        })
    }

    /// A channel (`GET /channels/{id}`): its `type`, `guild_id`, `parent_id`.
    pub async fn channel(&self, id: &str) -> Result<Value, ApiError> {
        self.call(reqwest::Method::GET, &format!("/channels/{}", snowflake(id)?), None).await
    }

    /// The direct chat with user `user` (opened if there was none): its channel id.
    pub async fn dm_channel(&self, user: &str) -> Result<String, ApiError> {
        let body = json!({"recipient_id": snowflake(user)?});
        let dm = self.call(reqwest::Method::POST, "/users/@me/channels", Some(&body)).await?;
        dm["id"].as_str().map(str::to_owned).ok_or_else(|| ApiError {
            status: None,
            code: 0,
            message: "Discord gave the direct chat no id".into(),
        })
    }

    /// Sends `content` to `channel`: the new message's id. Mentions in it ping no one (the
    /// model's words must not reach `@everyone`); a retry is one message (`enforce_nonce`).
    pub async fn create_message(&self, channel: &str, content: &str) -> Result<String, ApiError> {
        // One nonce for all the attempts: a retry after a lost answer posts nothing twice.
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_owned();
        let body =
            json!({"content": content, "allowed_mentions": {"parse": []}, "nonce": nonce, "enforce_nonce": true});
        let path = format!("/channels/{}/messages", snowflake(channel)?);
        let sent = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        Ok(sent["id"].as_str().unwrap_or_default().to_owned())
    }

    /// Sends `file` to `channel` with `content` (at most 2,000 characters; may be empty), as
    /// `create_message` sends text: the new message's id.
    pub async fn create_message_with_file(
        &self,
        channel: &str,
        content: &str,
        file: &ChatFile,
    ) -> Result<String, ApiError> {
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_owned();
        let body = json!({"content": content, "allowed_mentions": {"parse": []}, "nonce": nonce,
            "enforce_nonce": true, "attachments": [{"id": 0, "filename": file.name}]});
        let path = format!("/channels/{}/messages", snowflake(channel)?);
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        let sent = super::super::with_retries(
            || self.once(&reqwest::Method::POST, &path, Payload::WithFile(&body, file)),
            retryable,
        )
        .await?;
        Ok(sent["id"].as_str().unwrap_or_default().to_owned())
    }

    /// "… is typing" in `channel` for a few seconds.
    pub async fn typing(&self, channel: &str) {
        let Ok(id) = snowflake(channel) else { return };
        let path = format!("/channels/{id}/typing");
        if let Err((e, _)) = self.once(&reqwest::Method::POST, &path, Payload::Json(&json!({}))).await {
            tracing::debug!(error = %e, "Discord typing");
        }
    }

    /// An attachment's bytes from `url`, refused beyond `limit`; only from Discord's CDN (or the
    /// API's own host, where a stand-in serves them): a message cannot send the bot elsewhere.
    pub async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        let parsed = reqwest::Url::parse(url).map_err(|_| format!("`{url}` is not a URL"))?;
        let api = reqwest::Url::parse(&self.base).ok();
        let host = parsed.host_str().unwrap_or_default();
        let cdn = parsed.scheme() == "https" && matches!(host, "cdn.discordapp.com" | "media.discordapp.net");
        let own = api
            .is_some_and(|a| a.host_str() == Some(host) && a.port() == parsed.port() && a.scheme() == parsed.scheme());
        if !cdn && !own {
            return Err(format!("attachments are fetched only from Discord's CDN, not {host}"));
        }
        let response = self
            .http
            .get(parsed)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("the file could not be downloaded: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("the file could not be downloaded ({})", response.status()));
        }
        super::super::read_capped(response, limit).await
    }

    /// No call on `route` before `after` from now.
    fn wait_before(&self, route: String, after: Duration) {
        let mut waits = lock(&self.not_before);
        if waits.len() > 1000 {
            waits.retain(|_, t| *t > Instant::now());
        }
        waits.insert(route, Instant::now() + after);
    }

    /// Calls the API, retrying as the policy says ([`super::super::with_retries`]).
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        let body = body.map_or(Payload::None, Payload::Json);
        super::super::with_retries(|| self.once(&method, path, body), retryable).await
    }

    async fn once(
        &self,
        method: &reqwest::Method,
        path: &str,
        body: Payload<'_>,
    ) -> Result<Value, (ApiError, Option<Duration>)> {
        let route = format!("{method} {path}");
        let wait = {
            let waits = lock(&self.not_before);
            [waits.get(&route), waits.get(GLOBAL)]
                .into_iter()
                .flatten()
                .max()
                .map(|t| t.saturating_duration_since(Instant::now()))
        };
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            tokio::time::sleep(wait).await;
        }
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("Authorization", &self.authorization)
            .header("User-Agent", concat!("DiscordBot (acp, ", env!("CARGO_PKG_VERSION"), ")"));
        let mut timeout = TIMEOUT;
        match body {
            Payload::None => {}
            Payload::Json(body) => request = request.json(body),
            Payload::WithFile(body, file) => {
                let form = reqwest::multipart::Form::new()
                    .text("payload_json", body.to_string())
                    .part("files[0]", super::super::file_part(file));
                request = request.multipart(form);
                timeout = Duration::from_secs(120);
            }
        }
        let unreachable = |e: reqwest::Error| {
            (ApiError { status: None, code: 0, message: crate::http::error_chain(&e.without_url()) }, None)
        };
        let response = request.timeout(timeout).send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let seconds = |s: Option<String>| s.and_then(|s| s.parse::<f64>().ok()).and_then(capped);
        let header_wait = seconds(header("retry-after"));
        let global = header("x-ratelimit-global").as_deref() == Some("true");
        if header("x-ratelimit-remaining").as_deref() == Some("0")
            && let Some(after) = seconds(header("x-ratelimit-reset-after"))
        {
            self.wait_before(route.clone(), after);
        }
        let text = super::super::read_capped(response, 16 << 20)
            .await
            .map_err(|e| (ApiError { status: None, code: 0, message: e }, None))?;
        let value: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(value);
        }
        // The body's `retry_after` is in seconds, with a fraction; the header is a fallback. A
        // global limit holds every route back.
        let retry_after = value["retry_after"].as_f64().and_then(capped).or(header_wait).filter(|_| status == 429);
        if let Some(after) = retry_after
            && (global || value["global"] == true)
        {
            self.wait_before(GLOBAL.into(), after);
        }
        let error = ApiError {
            status: Some(status),
            code: value["code"].as_i64().unwrap_or(0),
            message: value["message"].as_str().unwrap_or("no reason given").chars().take(300).collect(),
        };
        Err((error, retry_after))
    }
}

/// What a request carries.
#[derive(Clone, Copy)]
enum Payload<'a> {
    None,
    Json(&'a Value),
    /// `payload_json` and the file as `files[0]` (multipart).
    WithFile(&'a Value, &'a ChatFile),
}

/// Where a global rate limit is kept among the routes'.
const GLOBAL: &str = "global";

/// A wait Discord asked for, in seconds: at most 5 minutes (a longer one is not believed).
fn capped(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(300.0)))
}

/// A Discord id as it may go into a path: digits only.
fn snowflake(id: &str) -> Result<&str, ApiError> {
    if !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
        Ok(id)
    } else {
        Err(ApiError { status: None, code: 0, message: format!("`{id}` is not a Discord id") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_digits_go_into_paths() {
        assert!(snowflake("1234567890123").is_ok());
        assert!(snowflake("12/../../users").is_err() && snowflake("").is_err() && snowflake("x").is_err());
        assert_eq!(capped(1e20), Some(Duration::from_secs(300)));
        assert_eq!((capped(f64::NAN), capped(-1.0)), (None, None));
        assert_eq!(capped(0.25), Some(Duration::from_millis(250)));
    }
}
