//! The legacy HTTP + SSE transport (MCP 2024-11-05), which rmcp no longer has: a GET opens the
//! event stream, its first `endpoint` event names the URL to POST each message to (relative to
//! the stream's), and the server's messages come as `message` events on the stream.

use std::borrow::Cow;

use futures_util::StreamExt as _;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use crate::providers::sse::{SseEvent, SseParser};

/// The largest event accepted (a large file read, an image).
const MAX_EVENT_BYTES: usize = 64 << 20;

pub(crate) struct SseTransport {
    http: reqwest::Client,
    post_url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    rx: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[derive(Debug)]
pub(crate) struct SseError(String);

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SseError {}

/// Events from a response body, parsed as they arrive.
struct Events {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    ready: std::collections::VecDeque<SseEvent>,
}

impl Events {
    async fn next(&mut self) -> Result<Option<SseEvent>, String> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => {
                    let mut out = Vec::new();
                    self.parser.feed(&chunk, &mut out).map_err(|e| e.to_string())?;
                    self.ready.extend(out);
                }
                Some(Err(e)) => return Err(crate::http::error_chain(&e)),
                None => return Ok(None),
            }
        }
    }
}

impl SseTransport {
    /// Opens the stream and waits for the `endpoint` event.
    pub(crate) async fn connect(
        http: reqwest::Client,
        url: &str,
        headers: reqwest::header::HeaderMap,
    ) -> Result<Self, String> {
        let base = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let response = http
            .get(base.clone())
            .headers(headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| crate::http::error_chain(&e))?;
        if !response.status().is_success() {
            return Err(format!("the server answered HTTP {}", response.status()));
        }
        let mut events = Events {
            body: response.bytes_stream().boxed(),
            parser: SseParser::new(MAX_EVENT_BYTES),
            ready: Default::default(),
        };
        let post_url = loop {
            match events.next().await? {
                Some(e) if e.event_type() == "endpoint" => {
                    break base.join(e.data.trim()).map_err(|e| format!("the endpoint event is not a URL: {e}"))?;
                }
                Some(_) => continue,
                None => return Err("the event stream ended before it named its endpoint".into()),
            }
        };
        let (tx, rx) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            loop {
                match events.next().await {
                    Ok(Some(e)) if e.event_type() == "message" && e.has_data => {
                        match serde_json::from_str::<ServerJsonRpcMessage>(&e.data) {
                            Ok(message) => {
                                if tx.send(message).await.is_err() {
                                    break;
                                }
                            }
                            Err(err) => {
                                tracing::warn!(target: "mcp", error = %err, "a message on the event stream is not MCP; ignored")
                            }
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(target: "mcp", error = %e, "the event stream failed");
                        break;
                    }
                }
            }
            // Dropping `tx` ends the connection.
        });
        Ok(Self { http, post_url, headers, rx, reader })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "sse".into()
    }

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let request = self
            .http
            .post(self.post_url.clone())
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        async move {
            let body = body.map_err(|e| SseError(e.to_string()))?;
            // The answer comes on the event stream; the POST itself is answered 202.
            let response = request.body(body).send().await.map_err(|e| SseError(crate::http::error_chain(&e)))?;
            if !response.status().is_success() {
                return Err(SseError(format!("the server answered HTTP {}", response.status())));
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.rx.close();
        Ok(())
    }
}
