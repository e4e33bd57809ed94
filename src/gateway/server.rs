//! One port for HTTP and WebSocket: hyper's HTTP/1 server answers the web chat's files and
//! `/healthz`, and hands a WebSocket upgrade (on any path) to tokio-tungstenite and the
//! connection handler (`conn.rs`).

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;

use super::Gateway;

/// Accepts connections until `stop`.
pub async fn serve(listener: TcpListener, gateway: Arc<Gateway>, stop: CancellationToken) {
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let gateway = gateway.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let gateway = gateway.clone();
                async move { Ok::<_, Infallible>(route(req, gateway, peer).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, %peer, "HTTP connection ended");
            }
        });
    }
}

async fn route(req: Request<Incoming>, gateway: Arc<Gateway>, peer: std::net::SocketAddr) -> Response<Full<Bytes>> {
    if is_upgrade(&req) {
        return upgrade(req, gateway, peer);
    }
    if req.method() == hyper::Method::POST && gateway.has_webhook(req.uri().path()) {
        return webhook(req, &gateway).await;
    }
    match (req.method().as_str(), req.uri().path()) {
        ("GET" | "HEAD", "/healthz") => respond(StatusCode::OK, "application/json", r#"{"ok":true}"#.into()),
        // hyper leaves the body out of an answer to HEAD.
        ("GET" | "HEAD", path) => match super::webchat::file(path) {
            Some((content_type, body)) => respond(StatusCode::OK, content_type, Bytes::from_static(body)),
            None => respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "not found\n".into()),
        },
        _ => respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "method not allowed\n".into()),
    }
}

/// Updates a messaging service posts (Telegram's webhook): at most 1 MiB of JSON, with the
/// channel's secret in `X-Telegram-Bot-Api-Secret-Token`.
async fn webhook(req: Request<Incoming>, gateway: &Gateway) -> Response<Full<Bytes>> {
    use http_body_util::BodyExt as _;
    const TEXT: &str = "text/plain; charset=utf-8";
    let path = req.uri().path().to_owned();
    let secret = req.headers().get("x-telegram-bot-api-secret-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = match http_body_util::Limited::new(req.into_body(), 1 << 20).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return respond(StatusCode::PAYLOAD_TOO_LARGE, TEXT, "update too large or cut off\n".into()),
    };
    let Ok(update) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return respond(StatusCode::BAD_REQUEST, TEXT, "not JSON\n".into());
    };
    match gateway.webhook(&path, secret.as_deref(), update) {
        Some(true) => respond(StatusCode::OK, "application/json", "{}".into()),
        Some(false) => {
            tracing::warn!(%path, "webhook call without the right secret refused");
            respond(StatusCode::UNAUTHORIZED, TEXT, "wrong secret\n".into())
        }
        None => respond(StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
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

fn upgrade(mut req: Request<Incoming>, gateway: Arc<Gateway>, peer: std::net::SocketAddr) -> Response<Full<Bytes>> {
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY).map(|k| derive_accept_key(k.as_bytes())) else {
        return respond(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", "missing Sec-WebSocket-Key\n".into());
    };
    let origin = req.headers().get("origin").and_then(|o| o.to_str().ok()).map(str::to_owned);
    let host = req.headers().get("host").and_then(|h| h.to_str().ok()).map(str::to_owned);
    // A page from another site must not drive this gateway with the user's browser.
    if let Some(origin) = &origin
        && !same_origin(origin, host.as_deref())
    {
        tracing::warn!(%peer, %origin, "WebSocket from another origin refused");
        return respond(StatusCode::FORBIDDEN, "text/plain; charset=utf-8", "origin not allowed\n".into());
    }
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
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
                super::conn::run(ws, gateway, peer).await;
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

/// Whether a browser's `Origin` is this gateway's own page.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|o| o == host)
}
