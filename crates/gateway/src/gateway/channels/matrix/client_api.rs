//! The Matrix Client-Server API over reqwest, as the Matrix channel uses it: `whoami`, `/sync`
//! long polling, joining rooms, sending messages (with a transaction id, so a retried send is
//! one message), typing notices, a room's members, its name, media uploads and authenticated
//! media downloads.
//! A 429 (`M_LIMIT_EXCEEDED`) is waited out as `retry_after_ms` says (at most 5 minutes, three
//! attempts); 5xx and unreachable servers are retried; other refusals are not.

use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime::host::ChatFile;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status, if the homeserver answered.
    pub status: Option<u16>,
    /// `errcode` (`M_FORBIDDEN`, …).
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "the homeserver refused it ({status} {}): {}", self.code, self.message),
            None => write!(f, "the homeserver could not be reached: {}", self.message),
        }
    }
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// A path segment (room ids, event ids and user ids carry `!`, `$`, `@` and `:`).
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Api {
    pub fn new(http: reqwest::Client, homeserver: &str, token: &str) -> Self {
        Self { http, base: homeserver.trim_end_matches('/').to_owned(), token: token.to_owned() }
    }

    /// The account's user id.
    pub async fn whoami(&self) -> Result<String, ApiError> {
        let me = self.call(reqwest::Method::GET, "/_matrix/client/v3/account/whoami", None, TIMEOUT).await?;
        me["user_id"].as_str().map(str::to_owned).ok_or_else(|| ApiError {
            status: None,
            code: String::new(),
            message: "whoami gave no user_id".into(),
        })
    }

    /// One `/sync`: held up to `wait` for something new after `since`.
    pub async fn sync(&self, since: Option<&str>, wait: Duration) -> Result<Value, ApiError> {
        // Only what the channel reads: room messages and memberships, invitations; no presence.
        let filter = json!({
            "presence": {"types": []},
            "account_data": {"types": []},
            "room": {
                "timeline": {"types": ["m.room.message", "m.room.member"], "limit": 50},
                "state": {"types": ["m.room.member", "m.room.name", "m.room.encryption"], "lazy_load_members": true},
                "ephemeral": {"types": []},
                "account_data": {"types": []},
            },
        });
        let mut path =
            format!("/_matrix/client/v3/sync?timeout={}&filter={}", wait.as_millis(), segment(&filter.to_string()));
        if let Some(since) = since {
            path.push_str(&format!("&since={}", segment(since)));
        }
        self.once(reqwest::Method::GET, &path, None, wait + Duration::from_secs(30)).await.map_err(|(e, _)| e)
    }

    pub async fn join(&self, room: &str) -> Result<(), ApiError> {
        let path = format!("/_matrix/client/v3/join/{}", segment(room));
        self.call(reqwest::Method::POST, &path, Some(&json!({})), TIMEOUT).await.map(drop)
    }

    /// Sends a message event with transaction id `txn` (a retry with the same id is one message).
    pub async fn send(&self, room: &str, txn: &str, content: &Value) -> Result<String, ApiError> {
        let path = format!("/_matrix/client/v3/rooms/{}/send/m.room.message/{}", segment(room), segment(txn));
        let sent = self.call(reqwest::Method::PUT, &path, Some(content), TIMEOUT).await?;
        Ok(sent["event_id"].as_str().unwrap_or_default().to_owned())
    }

    /// "typing…" in `room` for a few seconds.
    pub async fn typing(&self, room: &str, me: &str) {
        let path = format!("/_matrix/client/v3/rooms/{}/typing/{}", segment(room), segment(me));
        let body = json!({"typing": true, "timeout": 5000});
        if let Err(e) = self.once(reqwest::Method::PUT, &path, Some(&body), Duration::from_secs(10)).await {
            tracing::debug!(error = %e.0, "Matrix typing notice");
        }
    }

    /// The account's direct chats (`m.direct` account data): user id → room ids.
    pub async fn direct_rooms(&self, me: &str) -> Result<Value, ApiError> {
        let path = format!("/_matrix/client/v3/user/{}/account_data/m.direct", segment(me));
        match self.call(reqwest::Method::GET, &path, None, TIMEOUT).await {
            Ok(value) => Ok(value),
            Err(e) if e.status == Some(404) => Ok(json!({})),
            Err(e) => Err(e),
        }
    }

    /// Keeps `room` among the account's direct chats with `with` (as a client does when it
    /// accepts one), so it is one after a restart too.
    pub async fn add_direct_room(&self, me: &str, with: &str, room: &str) -> Result<(), ApiError> {
        let mut direct = self.direct_rooms(me).await?;
        if !direct.is_object() {
            direct = json!({});
        }
        let rooms = direct.as_object_mut().map(|m| m.entry(with.to_owned()).or_insert_with(|| json!([])));
        if let Some(Value::Array(rooms)) = rooms
            && !rooms.iter().any(|r| r == room)
        {
            rooms.push(json!(room));
        }
        let path = format!("/_matrix/client/v3/user/{}/account_data/m.direct", segment(me));
        self.call(reqwest::Method::PUT, &path, Some(&direct), TIMEOUT).await.map(drop)
    }

    /// An `mxc://server/id` file's bytes, refused beyond `limit`.
    pub async fn download(&self, mxc: &str, limit: u64) -> Result<Vec<u8>, String> {
        let (server, id) = mxc
            .strip_prefix("mxc://")
            .and_then(|rest| rest.split_once('/'))
            .filter(|(s, i)| !s.is_empty() && !i.is_empty() && !i.contains('/'))
            .ok_or_else(|| format!("`{mxc}` is not a Matrix content URI"))?;
        let url = format!("{}/_matrix/client/v1/media/download/{}/{}", self.base, segment(server), segment(id));
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("the file could not be downloaded: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("the file could not be downloaded ({})", response.status()));
        }
        super::super::read_capped(response, limit).await
    }

    /// Calls the API, retrying as the policy says ([`super::super::with_retries`]).
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        super::super::with_retries(|| self.once(method.clone(), path, body, timeout), retryable).await
    }

    async fn once(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, (ApiError, Option<Duration>)> {
        let with_body = |request: reqwest::RequestBuilder| match body {
            Some(body) => request.json(body),
            None => request,
        };
        self.request(method, path, timeout, with_body).await
    }

    /// Uploads `file` to the media repository: its `mxc://` URI.
    pub async fn upload(&self, file: &ChatFile) -> Result<String, ApiError> {
        let path = format!("/_matrix/media/v3/upload?filename={}", segment(&file.name));
        let body = |request: reqwest::RequestBuilder| {
            request.header(reqwest::header::CONTENT_TYPE, &file.mime).body(file.bytes.clone())
        };
        let retryable = |e: &ApiError| e.status.is_none_or(|s| s == 429 || s >= 500);
        let once = || self.request(reqwest::Method::POST, &path, Duration::from_secs(120), body);
        let uploaded = super::super::with_retries(once, retryable).await?;
        uploaded["content_uri"].as_str().filter(|uri| uri.starts_with("mxc://")).map(str::to_owned).ok_or_else(|| {
            ApiError { status: None, code: String::new(), message: "the upload gave no content URI".into() }
        })
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        timeout: Duration,
        body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Value, (ApiError, Option<Duration>)> {
        let request = body(self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token));
        let unreachable = |e: reqwest::Error| {
            (ApiError { status: None, code: String::new(), message: crate::http::error_chain(&e.without_url()) }, None)
        };
        let response = request.timeout(timeout).send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = super::super::read_capped(response, 64 << 20)
            .await
            .map_err(|e| (ApiError { status: None, code: String::new(), message: e }, None))?;
        let value: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let retry_after = value["retry_after_ms"].as_u64().map(Duration::from_millis);
        let error = ApiError {
            status: Some(status),
            code: value["errcode"].as_str().unwrap_or_default().to_owned(),
            message: value["error"].as_str().unwrap_or("no reason given").chars().take(300).collect(),
        };
        Err((error, retry_after))
    }
}

const TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_escaped_as_path_segments() {
        assert_eq!(segment("!room:example.org"), "%21room%3Aexample.org");
        assert_eq!(segment("@ada:example.org"), "%40ada%3Aexample.org");
        assert_eq!(segment("a/b?c"), "a%2Fb%3Fc");
    }
}
