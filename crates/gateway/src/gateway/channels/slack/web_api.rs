//! Slack's Web API over reqwest, as the Slack channel uses it: `apps.connections.open` (with the
//! app-level token: a Socket Mode URL), `auth.test` (the bot's own ids), `chat.postMessage` (in a
//! thread when given one), `conversations.open`, file uploads (`files.getUploadURLExternal`,
//! the bytes, `files.completeUploadExternal`), and files from `files.slack.com`. Slack answers HTTP 200 with
//! `ok: false` and an `error` for a refusal; an HTTP 429 is waited out as its `Retry-After`
//! says (at most 5 minutes, three attempts), as are 5xx answers and unreachable servers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime::host::ChatFile;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status, if Slack answered.
    pub status: Option<u16>,
    /// Slack's `error` (`invalid_auth`, `channel_not_found`, …), empty if none.
    pub code: String,
    pub message: String,
    /// The request never reached Slack (the connection was not made).
    pub not_sent: bool,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.status, self.code.as_str()) {
            (None, _) => write!(f, "Slack could not be reached: {}", self.message),
            (Some(_), code) if !code.is_empty() => write!(f, "Slack refused it: {code}"),
            (Some(status), _) => write!(f, "Slack refused it ({status}): {}", self.message),
        }
    }
}

impl ApiError {
    /// A token Slack does not take (the channel cannot work until the config changes).
    pub fn bad_token(&self) -> bool {
        matches!(
            self.code.as_str(),
            "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked" | "not_allowed_token_type"
        )
    }
}

/// The bot's ids, from `auth.test`.
#[derive(Debug, Clone)]
pub struct Me {
    pub user_id: String,
    pub bot_id: String,
    pub team_id: String,
    pub name: String,
}

pub struct WebApi {
    http: reqwest::Client,
    base: String,
    bot_token: String,
    app_token: String,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// A Web API call's body: JSON, or a form (the methods that take no JSON).
#[derive(Clone, Copy)]
enum Body<'a> {
    Json(&'a Value),
    Form(&'a [(String, String)]),
}

impl WebApi {
    pub fn new(http: reqwest::Client, base: &str, bot_token: &str, app_token: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            bot_token: bot_token.to_owned(),
            app_token: app_token.to_owned(),
        }
    }

    /// A Socket Mode URL to connect to (each is good for one connection).
    pub async fn open_connection(&self) -> Result<String, ApiError> {
        let opened = self.call("apps.connections.open", &self.app_token, &json!({})).await?;
        opened["url"].as_str().map(str::to_owned).ok_or_else(|| ApiError {
            status: Some(200),
            code: String::new(),
            message: "apps.connections.open gave no url".into(),
            not_sent: false,
        })
    }

    pub async fn auth_test(&self) -> Result<Me, ApiError> {
        let me = self.call("auth.test", &self.bot_token, &json!({})).await?;
        let field = |name: &str| me[name].as_str().unwrap_or_default().to_owned();
        Ok(Me { user_id: field("user_id"), bot_id: field("bot_id"), team_id: field("team_id"), name: field("user") })
    }

    /// Posts `text` (mrkdwn) to `channel` (a channel id, or a user's id for their direct chat),
    /// in thread `thread_ts` if given: the new message's `ts`.
    pub async fn post_message(&self, channel: &str, thread_ts: Option<&str>, text: &str) -> Result<String, ApiError> {
        let mut body = json!({"channel": channel, "text": text, "unfurl_links": false, "unfurl_media": false,
            "parse": "none", "link_names": false});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        // Slack has no idempotency key: retried only where it surely did not post (a 429, a
        // connection never made), so a lost answer never makes two messages.
        let retryable = |e: &ApiError| e.status == Some(429) || e.not_sent;
        let posted =
            super::super::with_retries(|| self.once("chat.postMessage", &self.bot_token, Body::Json(&body)), retryable)
                .await?;
        Ok(posted["ts"].as_str().unwrap_or_default().to_owned())
    }

    /// The direct chat with user `user` (`conversations.open`): its channel id.
    pub async fn open_dm(&self, user: &str) -> Result<String, ApiError> {
        let opened = self.call("conversations.open", &self.bot_token, &json!({"users": user})).await?;
        opened["channel"]["id"].as_str().map(str::to_owned).ok_or_else(|| ApiError {
            status: Some(200),
            code: String::new(),
            message: "conversations.open gave no channel".into(),
            not_sent: false,
        })
    }

    /// Shares `file` in `channel` (in thread `thread_ts`) with `comment` (mrkdwn, may be
    /// empty), as Slack uploads files: `files.getUploadURLExternal`, the bytes to the URL it
    /// gives (only `files.slack.com`'s), then `files.completeUploadExternal`.
    pub async fn upload(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        file: &ChatFile,
        comment: &str,
    ) -> Result<(), ApiError> {
        let length = file.bytes.len().to_string();
        let asked = [("filename", file.name.as_str()), ("length", length.as_str())];
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        let form = |fields: &[(&str, &str)]| fields.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let asked: Vec<(String, String)> = form(&asked);
        let got = super::super::with_retries(
            || self.once("files.getUploadURLExternal", &self.bot_token, Body::Form(&asked)),
            retryable,
        )
        .await?;
        let refused = |message: String| ApiError { status: Some(200), code: String::new(), message, not_sent: false };
        let url = got["upload_url"].as_str().ok_or_else(|| refused("no upload_url was given".into()))?;
        let id = got["file_id"].as_str().ok_or_else(|| refused("no file_id was given".into()))?;
        if !self.slacks_own(url) {
            return Err(refused("the upload URL is not on files.slack.com".into()));
        }
        super::super::with_retries(|| self.put_bytes(url, file), retryable).await?;
        let files = json!([{"id": id, "title": file.name}]).to_string();
        let mut done = vec![("files", files.as_str()), ("channel_id", channel)];
        if let Some(ts) = thread_ts {
            done.push(("thread_ts", ts));
        }
        if !comment.is_empty() {
            done.push(("initial_comment", comment));
        }
        let done: Vec<(String, String)> = form(&done);
        // As `chat.postMessage`: retried only where it surely did not share the file.
        let retryable = |e: &ApiError| e.status == Some(429) || e.not_sent;
        super::super::with_retries(
            || self.once("files.completeUploadExternal", &self.bot_token, Body::Form(&done)),
            retryable,
        )
        .await
        .map(drop)
    }

    /// The file's bytes, posted to the URL `files.getUploadURLExternal` gave (it carries its own
    /// authorization: no token goes with them).
    async fn put_bytes(&self, url: &str, file: &ChatFile) -> Result<(), (ApiError, Option<Duration>)> {
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(file.bytes.clone())
            .timeout(Duration::from_secs(120))
            .send()
            .await;
        let response = sent.map_err(|e| {
            let not_sent = e.is_connect();
            (
                ApiError {
                    status: None,
                    code: String::new(),
                    message: crate::http::error_chain(&e.without_url()),
                    not_sent,
                },
                None,
            )
        })?;
        let status = response.status().as_u16();
        if status == 200 {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default().chars().take(300).collect();
        Err((ApiError { status: Some(status), code: String::new(), message: text, not_sent: false }, None))
    }

    /// Whether `url` is Slack's own file host (or the API's own host, where a stand-in serves).
    fn slacks_own(&self, url: &str) -> bool {
        let Ok(parsed) = reqwest::Url::parse(url) else { return false };
        let api = reqwest::Url::parse(&self.base).ok();
        let host = parsed.host_str().unwrap_or_default();
        let slack = parsed.scheme() == "https" && host == "files.slack.com";
        slack
            || api.is_some_and(|a| {
                a.host_str() == Some(host) && a.port() == parsed.port() && a.scheme() == parsed.scheme()
            })
    }

    /// A file's bytes from its `url_private_download`, refused beyond `limit`; only from
    /// `files.slack.com` (or the API's own host, where a stand-in serves them): a message cannot
    /// send the bot, with its token, elsewhere.
    pub async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        let parsed = reqwest::Url::parse(url).map_err(|_| format!("`{url}` is not a URL"))?;
        if !self.slacks_own(url) {
            return Err(format!(
                "files are fetched only from files.slack.com, not {}",
                parsed.host_str().unwrap_or("")
            ));
        }
        let response = self
            .http
            .get(parsed)
            .bearer_auth(&self.bot_token)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("the file could not be downloaded: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("the file could not be downloaded ({})", response.status()));
        }
        // Without `files:read`, Slack answers with its sign-in page, not the file.
        let html = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/html"));
        if html {
            return Err("Slack sent a web page instead of the file: the app needs the files:read scope".into());
        }
        super::super::read_capped(response, limit).await
    }

    /// Calls `method`, retrying as the policy says ([`super::super::with_retries`]).
    async fn call(&self, method: &str, token: &str, body: &Value) -> Result<Value, ApiError> {
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        super::super::with_retries(|| self.once(method, token, Body::Json(body)), retryable).await
    }

    async fn once(&self, method: &str, token: &str, body: Body<'_>) -> Result<Value, (ApiError, Option<Duration>)> {
        let request = self.http.post(format!("{}/{method}", self.base)).bearer_auth(token).timeout(TIMEOUT);
        let request = match body {
            Body::Json(body) => request.json(body),
            Body::Form(fields) => request.form(fields),
        };
        let unreachable = |e: reqwest::Error| {
            let not_sent = e.is_connect();
            let message = crate::http::error_chain(&e.without_url());
            (ApiError { status: None, code: String::new(), message, not_sent }, None)
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = super::super::read_capped(response, 16 << 20)
            .await
            .map_err(|e| (ApiError { status: None, code: String::new(), message: e, not_sent: false }, None))?;
        let value: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        if status == 200 && value["ok"] == true {
            return Ok(value);
        }
        let error = ApiError {
            status: Some(status),
            code: value["error"].as_str().unwrap_or_default().chars().take(100).collect(),
            message: String::from_utf8_lossy(&text).chars().take(300).collect(),
            not_sent: false,
        };
        Err((error, retry_after.filter(|_| status == 429)))
    }
}
