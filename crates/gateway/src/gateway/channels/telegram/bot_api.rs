//! The Telegram Bot API over reqwest, as the Telegram channel uses it: `getMe`, long-polled
//! `getUpdates`, `sendMessage` (Telegram HTML built from the reply's Markdown, sent again as plain
//! text when Telegram rejects the markup), `sendPhoto` and `sendDocument` (multipart uploads)
//! and `sendChatAction`. Calls follow the retry policy:
//! three attempts, at least 400 ms apart with jitter, `retry_after` honoured on 429; a refusal
//! (other 4xx) is not retried.

use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime::host::ChatFile;

/// Telegram's limit for one message, in characters.
pub const TEXT_LIMIT: usize = 4096;
/// Telegram's limit for a file's caption, in characters.
pub const CAPTION_LIMIT: usize = 1024;
/// The largest photo Telegram takes; a larger picture goes as a document.
const PHOTO_MAX: usize = 10 << 20;
/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// Telegram's `error_code` (the HTTP status), if it answered.
    pub code: Option<u16>,
    pub description: String,
    /// The request never reached Telegram (the connection was not made).
    pub not_sent: bool,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) => write!(f, "Telegram refused it ({code}): {}", self.description),
            None => write!(f, "Telegram could not be reached: {}", self.description),
        }
    }
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    /// `https://api.telegram.org/bot<token>`.
    base: String,
    /// `https://api.telegram.org/file/bot<token>`: where files are downloaded.
    files: String,
}

impl Api {
    pub fn new(http: reqwest::Client, api_base_url: &str, token: &str) -> Self {
        let root = api_base_url.trim_end_matches('/');
        Self { http, base: format!("{root}/bot{token}"), files: format!("{root}/file/bot{token}") }
    }

    /// A file's bytes (`getFile`, then the download), refused beyond `limit` bytes.
    pub async fn file(&self, file_id: &str, limit: u64) -> Result<Vec<u8>, String> {
        let found = self
            .call("getFile", &json!({"file_id": file_id}), Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        let path = found["file_path"].as_str().ok_or("Telegram gave no path for the file")?;
        if path.split('/').any(|part| part == "..") {
            return Err("Telegram gave an unusable path for the file".into());
        }
        let response = self
            .http
            .get(format!("{}/{path}", self.files))
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("the file could not be downloaded: {}", e.without_url()))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!("the file could not be downloaded ({})", response.status()));
        }
        super::super::read_capped(response, limit).await
    }

    /// Calls `method`, retrying as the policy says ([`super::super::with_retries`]); `Ok` is
    /// Telegram's `result`.
    pub async fn call(&self, method: &str, params: &Value, timeout: Duration) -> Result<Value, ApiError> {
        let retryable = |e: &ApiError| e.code.is_none_or(|code| code == 429 || code >= 500);
        let body = |request: reqwest::RequestBuilder| request.json(params);
        super::super::with_retries(|| self.once(method, timeout, &body), retryable).await
    }

    async fn once(
        &self,
        method: &str,
        timeout: Duration,
        body: &impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Value, (ApiError, Option<Duration>)> {
        let url = format!("{}/{method}", self.base);
        let sent = body(self.http.post(&url).timeout(timeout)).send().await;
        let response = sent.map_err(|e| {
            // The token is in the URL: never in an error.
            let e = e.without_url();
            let mut description = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                description.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            (ApiError { code: None, description, not_sent: e.is_connect() }, None)
        })?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or_else(|_| json!({"ok": false, "description": "not JSON"}));
        if body["ok"] == true {
            return Ok(body["result"].clone());
        }
        let code = body["error_code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(status);
        let description = body["description"].as_str().unwrap_or("no description").to_owned();
        let retry_after = body["parameters"]["retry_after"].as_u64().map(Duration::from_secs);
        Err((ApiError { code: Some(code), description, not_sent: false }, retry_after))
    }

    /// The bot's own username (for mentions in groups).
    pub async fn username(&self) -> Result<String, ApiError> {
        let me = self.call("getMe", &json!({}), Duration::from_secs(30)).await?;
        Ok(me["username"].as_str().unwrap_or_default().to_owned())
    }

    /// The type of chat `chat`: `private`, `group`, `supergroup` or `channel`.
    pub async fn chat_type(&self, chat: &str) -> Result<String, ApiError> {
        let found = self.call("getChat", &json!({"chat_id": chat}), Duration::from_secs(10)).await?;
        Ok(found["type"].as_str().unwrap_or_default().to_owned())
    }

    /// Updates after `offset`, waiting up to `wait` for some (long polling).
    pub async fn updates(&self, offset: i64, wait: Duration) -> Result<Vec<Value>, ApiError> {
        let params = json!({"offset": offset, "timeout": wait.as_secs(), "allowed_updates": ["message"]});
        let result = self.call("getUpdates", &params, wait + Duration::from_secs(15)).await?;
        Ok(result.as_array().cloned().unwrap_or_default())
    }

    /// Sends `markdown` as HTML; if Telegram rejects the markup, as plain text. Returns the
    /// message id.
    pub async fn send(&self, chat: &str, thread: Option<&str>, markdown: &str) -> Result<i64, ApiError> {
        let mut params = json!({"chat_id": chat, "text": to_html(markdown), "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true}});
        if let Some(thread) = thread {
            params["message_thread_id"] = json!(thread.parse::<i64>().unwrap_or_default());
        }
        let sent = match self.call("sendMessage", &params, Duration::from_secs(30)).await {
            Err(e) if e.code == Some(400) && e.description.contains("parse") => {
                tracing::debug!(error = %e, "Telegram rejected the markup; sending plain text");
                params["text"] = json!(markdown);
                params.as_object_mut().map(|p| p.remove("parse_mode"));
                self.call("sendMessage", &params, Duration::from_secs(30)).await?
            }
            other => other?,
        };
        Ok(sent["message_id"].as_i64().unwrap_or_default())
    }

    /// Sends `file` with `caption` (Markdown, at most [`CAPTION_LIMIT`] characters) as
    /// HTML — plain if Telegram rejects the markup: a picture as a photo (Telegram shows it,
    /// recompressed) while it is one Telegram takes, else as a document (sent as it is). Returns
    /// the message id.
    pub async fn send_file(
        &self,
        chat: &str,
        thread: Option<&str>,
        file: &ChatFile,
        caption: &str,
    ) -> Result<i64, ApiError> {
        let photo =
            matches!(file.mime.as_str(), "image/jpeg" | "image/png" | "image/webp") && file.bytes.len() <= PHOTO_MAX;
        let timeout = Duration::from_secs(120);
        let upload = |method: &'static str, html: bool| {
            let field = if method == "sendPhoto" { "photo" } else { "document" };
            let text = if html { to_html(caption) } else { caption.to_owned() };
            // No idempotency key: retried only where it surely was not posted (a 429, a
            // connection never made), so a lost answer never posts a file twice.
            let retryable = |e: &ApiError| e.code == Some(429) || e.not_sent;
            let body = move |request: reqwest::RequestBuilder| {
                let mut form = reqwest::multipart::Form::new().text("chat_id", chat.to_owned());
                if let Some(thread) = thread {
                    form = form.text("message_thread_id", thread.to_owned());
                }
                if !text.is_empty() {
                    form = form.text("caption", text.clone());
                    if html {
                        form = form.text("parse_mode", "HTML");
                    }
                }
                request.multipart(form.part(field, super::super::file_part(file)))
            };
            async move { super::super::with_retries(|| self.once(method, timeout, &body), retryable).await }
        };
        let mut method = if photo { "sendPhoto" } else { "sendDocument" };
        let mut html = true;
        loop {
            match upload(method, html).await {
                Ok(sent) => return Ok(sent["message_id"].as_i64().unwrap_or_default()),
                Err(e) if e.code == Some(400) && html && e.description.contains("parse") => {
                    tracing::debug!(error = %e, "Telegram rejected the caption's markup; sending it plain");
                    html = false;
                }
                // A picture Telegram will not take as a photo (its size, its dimensions, its
                // contents) goes as a document.
                Err(e)
                    if e.code == Some(400)
                        && method == "sendPhoto"
                        && (e.description.contains("PHOTO_") || e.description.contains("IMAGE_PROCESS_FAILED")) =>
                {
                    tracing::debug!(error = %e, "Telegram refused the photo; sending it as a document");
                    method = "sendDocument";
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Webhook mode: Telegram posts updates to `url`, with `secret` in
    /// `X-Telegram-Bot-Api-Secret-Token`.
    pub async fn set_webhook(&self, url: &str, secret: &str) -> Result<(), ApiError> {
        let params = json!({"url": url, "secret_token": secret, "allowed_updates": ["message"]});
        self.call("setWebhook", &params, Duration::from_secs(30)).await.map(drop)
    }

    /// Back to polling (Telegram refuses `getUpdates` while a webhook is set).
    pub async fn delete_webhook(&self) -> Result<(), ApiError> {
        self.call("deleteWebhook", &json!({}), Duration::from_secs(30)).await.map(drop)
    }

    /// "typing…" in the chat (for about five seconds).
    pub async fn typing(&self, chat: &str, thread: Option<&str>) {
        let mut params = json!({"chat_id": chat, "action": "typing"});
        if let Some(thread) = thread {
            params["message_thread_id"] = json!(thread.parse::<i64>().unwrap_or_default());
        }
        if let Err(e) = self.call("sendChatAction", &params, Duration::from_secs(10)).await {
            tracing::debug!(error = %e, "typing indicator");
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The reply's Markdown as Telegram HTML: fenced code → `<pre><code>`, `code`, **bold**,
/// *italic*/_italic_, [links](https://…); everything else escaped, so model output never becomes
/// markup it did not ask for.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::new();
    for (i, part) in markdown.split("```").enumerate() {
        if i % 2 == 1 {
            let (lang, body) = match part.split_once('\n') {
                Some((first, rest)) if !first.trim().is_empty() && !first.contains(' ') => (first.trim(), rest),
                Some((_, rest)) => ("", rest),
                None => ("", part),
            };
            let class = if lang.is_empty() { String::new() } else { format!(" class=\"language-{}\"", escape(lang)) };
            out.push_str(&format!("<pre><code{class}>{}</code></pre>", escape(body.trim_end_matches('\n'))));
        } else {
            out.push_str(&inline(part));
        }
    }
    out
}

/// Inline Markdown in escaped text.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, piece) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("<code>{}</code>", escape(piece)));
            continue;
        }
        let mut s = escape(piece);
        s = pairs(&s, "**", "b");
        s = pairs(&s, "__", "b");
        s = pairs(&s, "*", "i");
        s = links(&s);
        out.push_str(&s);
    }
    out
}

/// `marker…marker` → `<tag>…</tag>`, for whole pairs on one line.
fn pairs(s: &str, marker: &str, tag: &str) -> String {
    s.split('\n')
        .map(|line| {
            let parts: Vec<&str> = line.split(marker).collect();
            if parts.len() < 3 {
                return line.to_owned();
            }
            let mut out = String::new();
            let pairs_count = (parts.len() - 1) / 2;
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    let n = i - 1;
                    if n < pairs_count * 2 {
                        let close = if n % 2 == 0 { "" } else { "/" };
                        out.push_str(&format!("<{close}{tag}>"));
                    } else {
                        out.push_str(marker);
                    }
                }
                out.push_str(p);
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `[text](http…)` → `<a href="…">text</a>` (in escaped text; the URL may not hold quotes).
fn links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let parsed = after.find("](").and_then(|close| {
            let label = &after[..close];
            let url_part = &after[close + 2..];
            let end = url_part.find(')')?;
            let url = &url_part[..end];
            let ok =
                (url.starts_with("https://") || url.starts_with("http://")) && !url.contains('"') && !url.contains(' ');
            ok.then(|| (label, url, open + 1 + close + 2 + end + 1))
        });
        match parsed {
            Some((label, url, used)) => {
                out.push_str(&rest[..open]);
                out.push_str(&format!("<a href=\"{url}\">{label}</a>"));
                rest = &rest[used..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html_and_nothing_else_does() {
        assert_eq!(to_html("Hello **world** and *you*"), "Hello <b>world</b> and <i>you</i>");
        assert_eq!(to_html("use `a < b` here"), "use <code>a &lt; b</code> here");
        assert_eq!(
            to_html("```rust\nfn main() { a && b }\n```"),
            "<pre><code class=\"language-rust\">fn main() { a &amp;&amp; b }</code></pre>"
        );
        assert_eq!(to_html("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
        assert_eq!(to_html("see [docs](https://example.org/x)"), "see <a href=\"https://example.org/x\">docs</a>");
        assert_eq!(to_html("[bad](javascript:alert(1))"), "[bad](javascript:alert(1))");
        assert_eq!(to_html("2 * 3 = 6"), "2 * 3 = 6", "a lone star stays");
    }

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// A one-shot HTTP server answering each request with the next scripted (status, body);
    /// returns its base URL and the requests' bodies.
    async fn telegram_stub(answers: Vec<(u16, Value)>) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            for (status, body) in answers {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let length: usize = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if request.len() >= head_end + 4 + length {
                            let body: Value = serde_json::from_slice(&request[head_end + 4..]).unwrap_or_default();
                            log.lock().unwrap().push(body);
                            break;
                        }
                    }
                }
                let body = body.to_string();
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                socket.write_all(head.as_bytes()).await.unwrap();
                socket.write_all(body.as_bytes()).await.unwrap();
            }
        });
        (base, seen)
    }

    #[tokio::test]
    async fn a_429_is_retried_after_retry_after_and_a_markup_rejection_falls_back_to_plain_text() {
        let (base, seen) = telegram_stub(vec![
            (429, json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}})),
            (400, json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: unsupported start tag"})),
            (200, json!({"ok": true, "result": {"message_id": 77}})),
        ])
        .await;
        let api = Api::new(client(), &base, "T0KEN");
        let id = api.send("42", Some("7"), "Hi **there**").await.unwrap();
        assert_eq!(id, 77);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 3);
        assert_eq!((&seen[0]["parse_mode"], &seen[0]["text"]), (&json!("HTML"), &json!("Hi <b>there</b>")));
        assert_eq!(seen[1], seen[0], "the same message again after retry_after");
        assert_eq!((seen[2].get("parse_mode"), &seen[2]["text"]), (None, &json!("Hi **there**")), "plain text");
        assert_eq!(seen[2]["message_thread_id"], 7);
    }

    #[tokio::test]
    async fn a_refusal_is_not_retried_and_the_token_never_shows_in_errors() {
        let (base, seen) = telegram_stub(vec![(
            403,
            json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
        )])
        .await;
        let api = Api::new(client(), &base, "SECRET-TOKEN");
        let e = api.send("42", None, "hi").await.unwrap_err();
        assert_eq!(e.code, Some(403));
        assert_eq!(seen.lock().unwrap().len(), 1);
        let unreachable = Api::new(client(), "http://127.0.0.1:9", "SECRET-TOKEN");
        let e = unreachable.call("getMe", &json!({}), Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(e.code, None);
        assert!(!e.to_string().contains("SECRET-TOKEN"), "{e}");
    }
}
