//! One port for HTTP and WebSocket: hyper's HTTP/1 server answers the web chat's files and
//! `/healthz`, and hands a WebSocket upgrade (on any path) to tokio-tungstenite and the
//! connection handler (`conn.rs`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderValue, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;

use super::{Gateway, guard};

/// How long a client may take to send a request's headers (also how long an idle keep-alive
/// connection is kept).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a webhook's body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until `stop`: each takes a slot (closed at once when none is left), and
/// `accept` failing (out of file descriptors, say) backs off instead of spinning, logging once in
/// a while how often it failed.
pub async fn serve(listener: TcpListener, gateway: Arc<Gateway>, stop: CancellationToken) {
    let mut backoff = Duration::ZERO;
    let mut failures = Throttled::default();
    let mut refused = Throttled::default();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff = Duration::ZERO;
                    a
                }
                Err(e) => {
                    backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    failures.note(|n| tracing::warn!(error = %e, failures = n, "accept failed; backing off"));
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    continue;
                }
            },
        };
        let Some(slot) = gateway.access.slots.take() else {
            refused.note(|n| {
                tracing::warn!(%peer, refused = n, limits = ?gateway.access.slots.limits, "connection refused: the gateway is full")
            });
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let gateway = gateway.clone();
        tokio::spawn(async move {
            let conn_slot = slot.clone();
            let service = hyper::service::service_fn(move |req| {
                let gateway = gateway.clone();
                let slot = conn_slot.clone();
                async move { Ok::<_, Infallible>(route(req, gateway, peer, slot).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(64 << 10)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, %peer, "HTTP connection ended");
            }
            drop(slot);
        });
    }
}

/// A warning that may repeat at a high rate, logged at most every 10 s with how many times it
/// happened since.
#[derive(Default)]
struct Throttled {
    last: Option<std::time::Instant>,
    count: u64,
}

impl Throttled {
    fn note(&mut self, log: impl FnOnce(u64)) {
        self.count += 1;
        if self.last.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
            log(self.count);
            self.count = 0;
            self.last = Some(std::time::Instant::now());
        }
    }
}

async fn route(
    req: Request<Incoming>,
    gateway: Arc<Gateway>,
    peer: std::net::SocketAddr,
    slot: Arc<guard::Slot>,
) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    let host = req.headers().get(HOST).map(|h| h.to_str().unwrap_or("\u{fffd}"));
    // A name this gateway does not answer to: a page on another site whose name was pointed at
    // this address (DNS rebinding).
    if !gateway.access.hosts.allows(host) {
        tracing::warn!(%peer, host = host.unwrap_or_default(), "request for another host refused");
        return respond(
            StatusCode::MISDIRECTED_REQUEST,
            TEXT,
            "this gateway does not answer to that host name\n".into(),
        );
    }
    if is_upgrade(&req) {
        return upgrade(req, gateway, peer, slot);
    }
    if req.method() == hyper::Method::POST && gateway.channels.has_webhook(req.uri().path()) {
        return webhook(req, &gateway).await;
    }
    match (req.method().as_str(), req.uri().path()) {
        ("GET" | "HEAD", "/healthz") => respond(StatusCode::OK, "application/json", r#"{"ok":true}"#.into()),
        // hyper leaves the body out of an answer to HEAD.
        ("GET" | "HEAD", path) => match super::webchat::file(path) {
            Some((content_type, body)) => respond(StatusCode::OK, content_type, Bytes::from_static(body)),
            None => respond(StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
        },
        _ => respond(StatusCode::METHOD_NOT_ALLOWED, TEXT, "method not allowed\n".into()),
    }
}

/// Updates a messaging service posts (Telegram's webhook): the channel's secret in
/// `X-Telegram-Bot-Api-Secret-Token` checked before anything of the body is read, then at most
/// 1 MiB of JSON within [`BODY_TIMEOUT`].
async fn webhook(req: Request<Incoming>, gateway: &Gateway) -> Response<Full<Bytes>> {
    use http_body_util::BodyExt as _;
    const TEXT: &str = "text/plain; charset=utf-8";
    let path = req.uri().path().to_owned();
    let secret = req.headers().get("x-telegram-bot-api-secret-token").and_then(|v| v.to_str().ok());
    match gateway.channels.webhook_secret_ok(&path, secret) {
        None => return respond(StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
        Some(false) => {
            tracing::warn!(%path, "webhook call without the right secret refused");
            return respond(StatusCode::UNAUTHORIZED, TEXT, "wrong secret\n".into());
        }
        Some(true) => {}
    }
    let body = match tokio::time::timeout(
        BODY_TIMEOUT,
        http_body_util::Limited::new(req.into_body(), 1 << 20).collect(),
    )
    .await
    {
        Ok(Ok(body)) => body.to_bytes(),
        Ok(Err(_)) => return respond(StatusCode::PAYLOAD_TOO_LARGE, TEXT, "update too large or cut off\n".into()),
        Err(_) => return respond(StatusCode::REQUEST_TIMEOUT, TEXT, "the update took too long to arrive\n".into()),
    };
    let Ok(update) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return respond(StatusCode::BAD_REQUEST, TEXT, "not JSON\n".into());
    };
    match gateway.channels.webhook(&path, update) {
        true => respond(StatusCode::OK, "application/json", "{}".into()),
        false => respond(StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The web chat's page may not be framed by others, and runs only its own scripts.
    response.headers_mut().insert("x-frame-options", HeaderValue::from_static("DENY"));
    response.headers_mut().insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'"),
    );
    response.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

fn is_upgrade(req: &Request<Incoming>) -> bool {
    let has = |name, value: &str| {
        req.headers()
            .get_all(name)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|part| part.trim().eq_ignore_ascii_case(value))))
    };
    has(CONNECTION, "upgrade") && has(UPGRADE, "websocket")
}

fn upgrade(
    mut req: Request<Incoming>,
    gateway: Arc<Gateway>,
    peer: std::net::SocketAddr,
    slot: Arc<guard::Slot>,
) -> Response<Full<Bytes>> {
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY).map(|k| derive_accept_key(k.as_bytes())) else {
        return respond(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", "missing Sec-WebSocket-Key\n".into());
    };
    let origin = req.headers().get("origin").and_then(|o| o.to_str().ok()).map(str::to_owned);
    let host = req.headers().get(HOST).and_then(|h| h.to_str().ok()).map(str::to_owned);
    // A page from another site must not drive this gateway with the user's browser.
    if let Some(origin) = &origin
        && !guard::same_origin(origin, host.as_deref())
    {
        tracing::warn!(%peer, %origin, "WebSocket from another origin refused");
        return respond(StatusCode::FORBIDDEN, "text/plain; charset=utf-8", "origin not allowed\n".into());
    }
    // Browsers always say where their page came from: such a connection needs a token even where
    // other local clients do not.
    let browser = origin.is_some();
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                // Small buffers: a thousand idle clients must stay cheap (the defaults are 128 KiB
                // each way per connection); the writer flushes each batch it sends.
                let config = WebSocketConfig::default()
                    .max_message_size(Some(super::MAX_PAYLOAD))
                    .max_frame_size(Some(super::MAX_PAYLOAD))
                    .read_buffer_size(4096)
                    .write_buffer_size(16 << 10);
                let (io, budget) = super::conn::Metered::new(TokioIo::new(upgraded), super::conn::PRE_AUTH_BYTES);
                let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                super::conn::run(ws, budget, gateway, super::conn::Peer { addr: peer, browser, slot }).await;
            }
            Err(e) => tracing::debug!(error = %e, %peer, "WebSocket upgrade failed"),
        }
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&key) {
        headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}
