//! The HTTP side of every provider: sends the request, checks status and content type, and turns the
//! body into [`ResponseEvent`]s through the SSE parser and the wire API's decoder. Timeouts are a
//! connect timeout, a time-to-first-byte deadline and an idle timeout between reads — never a total
//! deadline, which would cut off long generations.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::error::{ErrorKind, ProviderError};
use super::error::{retry_after, snippet};
use super::sse::{SseEvent, SseParser};
use super::wire::{ModelRequest, ResponseEvent};
use super::{anthropic, gemini, openai_chat, openai_responses};
use crate::config::{ProviderConfig, Timeouts, WireApi};
use crate::http::error_chain;

/// Error bodies are read up to this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A provider ready to take requests.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
    provider: ProviderConfig,
    timeouts: Timeouts,
}

impl ProviderClient {
    pub fn new(http: reqwest::Client, provider: ProviderConfig, timeouts: Timeouts) -> Self {
        Self { http, provider, timeouts }
    }

    pub fn provider(&self) -> &ProviderConfig {
        &self.provider
    }

    /// Sends the request and returns the event stream once a 2xx event-stream response arrived.
    pub async fn start(&self, req: &ModelRequest<'_>) -> Result<ResponseStream, ProviderError> {
        self.start_inner(req).await.map_err(|e| self.label(e))
    }

    fn label(&self, mut e: ProviderError) -> ProviderError {
        e.provider = self.provider.id.clone();
        e.key_env.clone_from(&self.provider.api_key_env);
        e
    }

    async fn start_inner(&self, req: &ModelRequest<'_>) -> Result<ResponseStream, ProviderError> {
        let p = &self.provider;
        let (url, body) = match p.api {
            WireApi::Anthropic => (anthropic::url(&p.base_url), anthropic::body(req)),
            WireApi::OpenAiChat => {
                let official = p.base_url.contains("api.openai.com");
                (openai_chat::url(&p.base_url), openai_chat::body(req, official, p.prompt_cache_key))
            }
            WireApi::OpenAiResponses => {
                (openai_responses::url(&p.base_url), openai_responses::body(req, p.prompt_cache_key))
            }
            WireApi::Gemini => (gemini::url(&p.base_url, req.model), gemini::body(req)),
        };
        let body = body.map_err(|e| ProviderError::new(ErrorKind::Protocol, e.to_string()))?;
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        match p.api {
            WireApi::Anthropic => {
                headers.insert("anthropic-version", HeaderValue::from_static(anthropic::API_VERSION));
                if let Some(key) = &p.api_key {
                    headers.insert("x-api-key", header_value(key)?);
                }
            }
            WireApi::OpenAiChat | WireApi::OpenAiResponses => {
                if let Some(key) = &p.api_key {
                    headers.insert(reqwest::header::AUTHORIZATION, header_value(&format!("Bearer {key}"))?);
                }
            }
            WireApi::Gemini => {
                if let Some(key) = &p.api_key {
                    headers.insert("x-goog-api-key", header_value(key)?);
                }
            }
        }
        for (name, value) in &p.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ProviderError::new(ErrorKind::InvalidRequest, format!("invalid header name `{name}` in config"))
            })?;
            headers.insert(name, header_value(value)?);
        }

        let started = Instant::now();
        let first_deadline = started + self.timeouts.first_event;
        tracing::debug!(provider = %p.id, %url, model = %req.model, "model request");
        let send = self.http.post(&url).headers(headers).body(body).send();
        let response = match tokio::time::timeout(self.timeouts.first_event, send).await {
            Err(_) => return Err(timeout_error("no response", self.timeouts.first_event)),
            Ok(Err(e)) => return Err(transport_error(&e)),
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let request_id = ["request-id", "x-request-id"]
            .iter()
            .find_map(|h| response.headers().get(*h))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &request_id {
            tracing::debug!(provider = %p.id, status, request_id = %id, "model response");
        }

        if !response.status().is_success() {
            let retry_after = retry_after(response.headers());
            let should_retry = response
                .headers()
                .get("x-should-retry")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.eq_ignore_ascii_case("true"));
            let text = read_capped(response, self.timeouts.idle).await;
            let mut e = match p.api {
                WireApi::Anthropic => anthropic::error_from_body(status, &text),
                WireApi::OpenAiChat => openai_chat::error_from_body(status, &text),
                WireApi::OpenAiResponses => openai_responses::error_from_body(status, &text),
                WireApi::Gemini => gemini::error_from_body(status, &text),
            };
            e.retry_after = retry_after.or(e.retry_after).or_else(|| super::error::delay_from_message(&e.message));
            e.should_retry = should_retry;
            e.request_id = e.request_id.or(request_id);
            return Err(e);
        }

        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !content_type.starts_with("text/event-stream") {
            let text = read_capped(response, self.timeouts.idle).await;
            let mut e = if text.contains("\"error\"") {
                openai_chat::error_from_body(status, &text)
            } else {
                ProviderError::new(
                    ErrorKind::Protocol,
                    format!("expected an event stream but got `{content_type}`: {}", snippet(&text)),
                )
            };
            e.status = None;
            if e.kind == ErrorKind::InvalidRequest {
                e.kind = ErrorKind::Protocol;
            }
            return Err(e);
        }

        Ok(ResponseStream {
            body: Box::pin(response.bytes_stream()),
            sse: SseParser::default(),
            decoder: match p.api {
                WireApi::Anthropic => Decoder::Anthropic(anthropic::Decoder::default()),
                WireApi::OpenAiChat => Decoder::Chat(openai_chat::Decoder::default()),
                WireApi::OpenAiResponses => Decoder::Responses(openai_responses::Decoder::default()),
                WireApi::Gemini => Decoder::Gemini(gemini::Decoder::default()),
            },
            queue: VecDeque::new(),
            error: None,
            done: false,
            got_bytes: false,
            first_deadline,
            idle: self.timeouts.idle,
            timer: Box::pin(tokio::time::sleep_until(first_deadline.into())),
            provider: p.id.clone(),
            key_env: p.api_key_env.clone(),
        })
    }
}

#[derive(Debug)]
enum Decoder {
    Anthropic(anthropic::Decoder),
    Chat(openai_chat::Decoder),
    Responses(openai_responses::Decoder),
    Gemini(gemini::Decoder),
}

impl Decoder {
    fn event(&mut self, ev: &SseEvent, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        match self {
            Self::Anthropic(d) => d.event(ev, out),
            Self::Chat(d) => d.event(ev, out),
            Self::Responses(d) => d.event(ev, out),
            Self::Gemini(d) => d.event(ev, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<ResponseEvent>) -> Result<(), ProviderError> {
        match self {
            Self::Anthropic(d) => d.finish(out),
            Self::Chat(d) => d.finish(out),
            Self::Responses(d) => d.finish(out),
            Self::Gemini(d) => d.finish(),
        }
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A live response. Dropping it closes the connection, which tells the server to stop generating.
pub struct ResponseStream {
    body: ByteStream,
    sse: SseParser,
    decoder: Decoder,
    queue: VecDeque<ResponseEvent>,
    error: Option<ProviderError>,
    done: bool,
    got_bytes: bool,
    first_deadline: Instant,
    idle: Duration,
    /// One timer, re-armed before each read (cheaper than a new timeout per chunk).
    timer: Pin<Box<tokio::time::Sleep>>,
    provider: String,
    key_env: Option<String>,
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream").field("provider", &self.provider).finish_non_exhaustive()
    }
}

impl ResponseStream {
    /// Whether events are ready without reading from the network.
    pub fn has_buffered(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The next event; `None` after the terminal event. Errors are final.
    pub async fn next(&mut self) -> Option<Result<ResponseEvent, ProviderError>> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Some(Ok(ev));
            }
            if let Some(mut e) = self.error.take() {
                e.provider.clone_from(&self.provider);
                e.key_env.clone_from(&self.key_env);
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            self.pump().await;
        }
    }

    /// Reads one chunk and decodes what it completes into the queue (or records the error).
    async fn pump(&mut self) {
        let now = Instant::now();
        let deadline = if self.got_bytes { now + self.idle } else { self.first_deadline };
        let wait = deadline.saturating_duration_since(now);
        self.timer.as_mut().reset(deadline.into());
        let mut out = Vec::new();
        let next = tokio::select! {
            biased;
            next = self.body.next() => Ok(next),
            () = self.timer.as_mut() => Err(()),
        };
        let chunk = match next {
            Err(()) => {
                let what = if self.got_bytes { "the stream went silent" } else { "no data arrived" };
                return self.fail(timeout_error(what, wait));
            }
            Ok(Some(Err(e))) => {
                let mut err = ProviderError::new(
                    ErrorKind::Truncated,
                    format!("the connection broke mid-stream: {}", error_chain(&e)),
                );
                if e.is_timeout() {
                    err.kind = ErrorKind::Timeout;
                }
                return self.fail(err);
            }
            Ok(None) => {
                self.sse.finish();
                self.done = true;
                if let Err(e) = self.decoder.finish(&mut out) {
                    self.error = Some(e);
                }
                self.queue.extend(out);
                return;
            }
            Ok(Some(Ok(bytes))) => bytes,
        };
        self.got_bytes = true;
        let mut events = Vec::new();
        let parsed = self.sse.feed(&chunk, &mut events);
        for ev in &events {
            if let Err(e) = self.decoder.event(ev, &mut out) {
                self.queue.extend(out);
                return self.fail(e);
            }
            if matches!(out.last(), Some(ResponseEvent::Completed(_))) {
                // The terminal event: stop reading (what follows, if anything, does not matter).
                self.done = true;
                break;
            }
        }
        self.queue.extend(out);
        if let Err(e) = parsed
            && !self.done
        {
            self.fail(ProviderError::new(ErrorKind::Protocol, e.to_string()));
        }
    }

    fn fail(&mut self, e: ProviderError) {
        self.error = Some(e);
        self.done = true;
    }
}

fn header_value(value: &str) -> Result<HeaderValue, ProviderError> {
    HeaderValue::from_str(value).map_err(|_| {
        ProviderError::new(ErrorKind::InvalidRequest, "a configured header or API key contains invalid characters")
    })
}

fn timeout_error(what: &str, after: Duration) -> ProviderError {
    ProviderError::new(ErrorKind::Timeout, format!("{what} within {:.1} s", after.as_secs_f64()))
}

fn transport_error(e: &reqwest::Error) -> ProviderError {
    let kind = if e.is_timeout() { ErrorKind::Timeout } else { ErrorKind::Connect };
    let mut error = ProviderError::new(kind, error_chain(e));
    // Nothing listens on this machine's port: no server is coming up within the retries' few
    // seconds, so the user hears it at once.
    if crate::http::refused(e) && e.url().is_some_and(crate::http::is_loopback) {
        error.should_retry = Some(false);
    }
    error
}

async fn read_capped(response: reqwest::Response, idle: Duration) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&body).into_owned()
}
