//! `web_fetch`: GET a URL with a time limit and a size limit; HTML becomes readable text (links
//! kept as footnotes), other text is returned as is, binary content is described, not shown.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    Access, Action, Prepared, ToolContent, ToolContext, ToolHandler, ToolKind, ToolOutput, arg_opt_u64, arg_str,
    truncate,
};
use crate::providers::ToolSpec;

const TIME_LIMIT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;

pub struct WebFetch;

impl ToolHandler for WebFetch {
    fn name(&self) -> &'static str {
        "web_fetch"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Fetch a web page or file over HTTP(S) and return it as text (HTML is converted to readable text). \
                 Limited to {} seconds and `max_bytes` (default {DEFAULT_MAX_BYTES}) bytes.",
                TIME_LIMIT.as_secs()
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http:// or https:// URL"},
                    "max_bytes": {"type": "integer", "minimum": 1}
                },
                "required": ["url"]
            }),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let url = arg_str(args, "url")?.trim().to_owned();
            let parsed = reqwest::Url::parse(&url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("only http and https URLs can be fetched, not {}:", parsed.scheme()));
            }
            let max_bytes =
                arg_opt_u64(args, "max_bytes")?.unwrap_or(DEFAULT_MAX_BYTES).clamp(1, 4 * DEFAULT_MAX_BYTES);
            Ok(Prepared {
                title: format!("Fetch {url}"),
                kind: ToolKind::Fetch,
                locations: Vec::new(),
                preview: Vec::new(),
                access: Access { network: Some(url.clone()), ..Access::default() },
                action: Box::new(FetchAction { url: parsed, max_bytes }),
            })
        })
    }
}

struct FetchAction {
    url: reqwest::Url,
    max_bytes: u64,
}

impl Action for FetchAction {
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(http) = ctx.http.clone() else {
                return ToolOutput::error("no HTTP client is available");
            };
            let url = self.url.to_string();
            let fetch = async {
                let response =
                    http.get(self.url.clone()).send().await.map_err(|e| crate::providers::client::error_chain(&e))?;
                let status = response.status();
                let content_type = response
                    .headers()
                    .get(reqwest::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                let mut body = Vec::new();
                let mut stream = response.bytes_stream();
                let mut cut = false;
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| crate::providers::client::error_chain(&e))?;
                    let room = (self.max_bytes as usize).saturating_sub(body.len());
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        cut = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok::<_, String>((status, content_type, body, cut))
            };
            let (status, content_type, body, cut) = tokio::select! {
                r = tokio::time::timeout(TIME_LIMIT, fetch) => match r {
                    Ok(Ok(done)) => done,
                    Ok(Err(e)) => return ToolOutput::error(format!("fetching {url} failed: {e}")),
                    Err(_) => return ToolOutput::error(format!("fetching {url} took longer than {} s", TIME_LIMIT.as_secs())),
                },
                () = ctx.cancel.cancelled() => return ToolOutput::error("cancelled"),
            };
            let text = match to_text(&content_type, &body) {
                Ok(text) => text,
                Err(e) => return ToolOutput::error(format!("{url}: {e}")),
            };
            let mut head = format!("{url} — HTTP {}", status.as_u16());
            if !content_type.is_empty() {
                head.push_str(&format!(", {content_type}"));
            }
            if cut {
                head.push_str(&format!(", first {} bytes", self.max_bytes));
            }
            let body = truncate::for_model(
                &text,
                truncate::MODEL_BUDGET,
                "fetch again with a larger `max_bytes` or a more specific URL",
            );
            let summary = format!("HTTP {} · {} bytes", status.as_u16(), body.len());
            let output = ToolOutput::ok(format!("{head}\n\n{body}"), vec![ToolContent::Text(summary)]);
            if status.is_success() { output } else { ToolOutput { is_error: true, ..output } }
        })
    }
}

/// Text for the model from a body: HTML converted, text and JSON as they are, binary refused.
pub fn to_text(content_type: &str, body: &[u8]) -> Result<String, String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let looks_html = content_type.contains("html")
        || (content_type.is_empty() && (head.contains("<html") || head.contains("<!doctype html")));
    if looks_html {
        return html2text::from_read(body, 100).map_err(|e| format!("could not read the HTML: {e}"));
    }
    let textual = content_type.is_empty()
        || content_type.starts_with("text/")
        || ["json", "xml", "javascript", "yaml", "toml", "csv"].iter().any(|t| content_type.contains(t));
    if !textual || body.iter().take(8192).any(|b| *b == 0) {
        return Err(format!(
            "the content is binary ({}, {} bytes) and is not shown",
            if content_type.is_empty() { "unknown type" } else { content_type },
            body.len()
        ));
    }
    Ok(String::from_utf8_lossy(body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_text() {
        let html = b"<html><head><title>T</title><script>var x;</script></head><body><h1>Hello</h1><p>A <a href=\"https://x.org\">link</a>.</p></body></html>";
        let text = to_text("text/html; charset=utf-8", html).unwrap();
        assert!(text.contains("Hello") && text.contains("link"), "{text}");
        assert!(!text.contains("<p>") && !text.contains("var x"), "{text}");
    }

    #[test]
    fn text_passes_and_binary_is_refused() {
        assert_eq!(to_text("application/json", b"{\"a\":1}").unwrap(), "{\"a\":1}");
        assert!(to_text("image/png", b"\x89PNG").unwrap_err().contains("binary"));
        assert!(to_text("", b"ab\x00cd").is_err());
    }
}
