//! `web_fetch`: GET a URL with a time limit and a size limit; HTML becomes readable text (links
//! kept as footnotes), other text is returned as is, binary content is described, not shown.

use std::time::Duration;

use futures_util::StreamExt;

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::Int;
use super::{Access, Action, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, fetch_guard, truncate};

const TIME_LIMIT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;

pub struct WebFetch;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// http:// or https:// URL
    url: String,
    #[schemars(range(min = 1))]
    max_bytes: Option<Int>,
}

impl Tool for WebFetch {
    const NAME: &'static str = "web_fetch";
    type Args = WebFetchArgs;

    fn description(&self) -> String {
        format!(
            "Fetch a web page or file over HTTP(S) and return it as text (HTML is converted to readable text). \
         Limited to {} seconds and `max_bytes` (default {DEFAULT_MAX_BYTES}) bytes.",
            TIME_LIMIT.as_secs()
        )
    }

    async fn prepare(&self, args: WebFetchArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let url = args.url.trim().to_owned();
        let parsed = reqwest::Url::parse(&url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
        fetch_guard::check_url(&parsed, &fetch_guard::Allowed::new(&ctx.config.web_fetch.allow_private_hosts))?;
        let max_bytes = args.max_bytes.map_or(DEFAULT_MAX_BYTES, |m| m.0).clamp(1, 4 * DEFAULT_MAX_BYTES);
        Ok(Prepared {
            title: format!("Fetch {url}"),
            kind: ToolKind::Fetch,
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access { network: Some(url.clone()), ..Access::default() },
            action: Box::new(FetchAction { url: parsed, max_bytes }),
        })
    }
}

struct FetchAction {
    url: reqwest::Url,
    max_bytes: u64,
}

impl Action for FetchAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let allowed = fetch_guard::Allowed::new(&ctx.config.web_fetch.allow_private_hosts);
        let http = match fetch_guard::client(&allowed, ctx.config.timeouts.connect) {
            Ok(http) => http,
            Err(e) => return ToolOutput::error(format!("could not set up the HTTP client: {e}")),
        };
        let url = self.url.to_string();
        let fetch = async {
            let response = fetch_guard::get(&http, self.url.clone(), &allowed).await?;
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
                let chunk = chunk.map_err(|e| crate::http::error_chain(&e))?;
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
        let deadline = tokio::time::Instant::now() + TIME_LIMIT;
        let (status, content_type, body, cut) = tokio::select! {
            r = tokio::time::timeout_at(deadline, fetch) => match r {
                Ok(Ok(done)) => done,
                Ok(Err(e)) => return ToolOutput::error(format!("fetching {url} failed: {e}")),
                Err(_) => return ToolOutput::error(format!("fetching {url} took longer than {} s", TIME_LIMIT.as_secs())),
            },
            () = ctx.cancel.cancelled() => return ToolOutput::error("cancelled"),
        };
        // Converting HTML is CPU work: off the async thread, within the same time limit.
        let convert = tokio::task::spawn_blocking(move || to_text(&content_type, &body).map(|t| (t, content_type)));
        let (text, content_type) = tokio::select! {
            r = tokio::time::timeout_at(deadline, convert) => match r {
                Ok(Ok(Ok(done))) => done,
                Ok(Ok(Err(e))) => return ToolOutput::error(format!("{url}: {e}")),
                Ok(Err(e)) => return ToolOutput::error(format!("{url}: {e}")),
                Err(_) => return ToolOutput::error(format!("reading {url} took longer than {} s", TIME_LIMIT.as_secs())),
            },
            () = ctx.cancel.cancelled() => return ToolOutput::error("cancelled"),
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
    }
}

/// HTML converted to text, at most (the model sees 30 KB of it anyway).
const MAX_HTML_CONVERTED: usize = 2 << 20;
/// Deeper than any real page (browsers' own parsers cap nesting at a few hundred levels).
const MAX_HTML_NESTING: usize = 512;

/// How deeply the elements of an HTML document nest, roughly: open tags less close tags, not
/// counting void elements and self-closed ones.
fn nesting(html: &[u8]) -> usize {
    const VOID: [&[u8]; 14] = [
        b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"source", b"track",
        b"wbr", b"!",
    ];
    let (mut depth, mut deepest) = (0usize, 0usize);
    for at in memchr::memchr_iter(b'<', html) {
        let rest = &html[at + 1..];
        if rest.first() == Some(&b'/') {
            depth = depth.saturating_sub(1);
            continue;
        }
        let name_len = rest.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'!').count();
        if name_len == 0 {
            continue;
        }
        let name = rest[..name_len].to_ascii_lowercase();
        let tag_end = memchr::memchr(b'>', rest).unwrap_or(rest.len());
        let self_closed = tag_end > 0 && rest[tag_end - 1] == b'/';
        if !self_closed && !VOID.iter().any(|v| name.starts_with(v) && (name.len() == v.len() || *v == b"!")) {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// The text of an HTML document with its tags removed.
fn strip_tags(html: &[u8]) -> String {
    let text = String::from_utf8_lossy(html);
    let mut out = String::with_capacity(text.len() / 2);
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Text for the model from a body: HTML converted, text and JSON as they are, binary refused.
pub fn to_text(content_type: &str, body: &[u8]) -> Result<String, String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let looks_html = content_type.contains("html")
        || (content_type.is_empty() && (head.contains("<html") || head.contains("<!doctype html")));
    if looks_html {
        // The converter's time grows with the square of the nesting: markup nested deeper than
        // any real page is shown as its text with the tags taken out instead.
        if nesting(body) > MAX_HTML_NESTING {
            return Ok(strip_tags(&body[..body.len().min(MAX_HTML_CONVERTED)]));
        }
        let html = &body[..body.len().min(MAX_HTML_CONVERTED)];
        return html2text::from_read(html, 100).map_err(|e| format!("could not read the HTML: {e}"));
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
    fn absurdly_nested_html_is_not_given_to_the_converter() {
        let mut html = String::from("<html><body>");
        for _ in 0..100_000 {
            html.push_str("<div>");
        }
        html.push_str("deep text");
        assert!(nesting(html.as_bytes()) > 100_000);
        let text = to_text("text/html", html.as_bytes()).unwrap();
        assert_eq!(text.trim(), "deep text");
        // Void and self-closed elements do not nest.
        let page = "<html><head><meta charset=utf-8><link rel=x></head><body><p>a<br>b<img src=x/></p></body></html>";
        assert_eq!(nesting(page.repeat(2000).as_bytes()), 3);
    }

    #[test]
    fn text_passes_and_binary_is_refused() {
        assert_eq!(to_text("application/json", b"{\"a\":1}").unwrap(), "{\"a\":1}");
        assert!(to_text("image/png", b"\x89PNG").unwrap_err().contains("binary"));
        assert!(to_text("", b"ab\x00cd").is_err());
    }
}
