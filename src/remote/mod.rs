//! A client of the gateway protocol (v4) — `acp gateway`'s or OpenClaw's: it connects with this
//! installation's device identity (proof v3, v2 for servers that refuse it), waits for `hello-ok`
//! before any request goes out, answers requests by id, hands events on, watches `tick`s (a
//! gateway silent for two tick intervals is dropped) and reconnects with backoff (1 s doubling to
//! 30 s). Credentials a gateway refuses end it: retrying cannot fix them.

pub mod identity;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::clock::now_ms;
use crate::http::{Stream, open_stream as open};
use crate::sync::lock;
use acp_protocol::gateway::methods::{ClientInfo, ConnectAuth, ConnectParams, HelloOk};
use acp_protocol::gateway::{ErrorShape, Frame, Method, PROTOCOL_VERSION};
use identity::{DeviceToken, Identity};

/// How long connecting (TCP, TLS, WebSocket) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server has to answer `connect`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How to reach the gateway and who to be there.
#[derive(Debug, Clone)]
pub struct Options {
    /// `ws://host:port` or `wss://…`.
    pub url: String,
    pub token: Option<String>,
    pub password: Option<String>,
    /// `$ACP_HOME`: where the device identity is kept.
    pub home: PathBuf,
    pub scopes: Vec<String>,
    /// `connect.client`: id, displayName, version, platform, deviceFamily, mode.
    pub client: ClientInfo,
    pub caps: Vec<String>,
}

/// What the connection tells its owner.
#[derive(Debug, Clone)]
pub enum Notice {
    /// Connected (again); the `hello-ok` payload.
    Up(Box<HelloOk>),
    /// The connection went away; it is being made again.
    Down(String),
    /// The gateway refused these credentials or this protocol: nothing more is tried.
    Refused(String),
    Event {
        event: String,
        payload: Value,
    },
}

/// A request that failed: the gateway's error, or why it could not be asked.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    pub message: String,
    /// The gateway's error code (`INVALID_REQUEST`, `NOT_FOUND`, …); `None` when it was not asked.
    pub code: Option<String>,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl RemoteError {
    fn local(message: impl Into<String>) -> Self {
        Self { message: message.into(), code: None }
    }
}

#[derive(Debug, Clone)]
enum Link {
    /// Not connected yet: how many attempts have failed so far, and the last failure.
    Connecting(u64, Option<String>),
    Up,
    Refused(String),
}

type Answer = oneshot::Sender<Result<Value, RemoteError>>;

struct Inner {
    url: String,
    link: watch::Sender<Link>,
    /// The live connection's outbound frames.
    out: Mutex<Option<mpsc::UnboundedSender<String>>>,
    pending: Mutex<HashMap<String, Answer>>,
    next: AtomicU64,
    stop: CancellationToken,
    /// A request is waiting: try to connect now rather than at the end of the backoff.
    wake: tokio::sync::Notify,
}

/// A connection to a gateway, made and kept in the background; cheap to clone.
#[derive(Clone)]
pub struct GatewayClient {
    inner: Arc<Inner>,
}

impl GatewayClient {
    /// Starts connecting; notices go to `notices`.
    pub fn start(options: Options, identity: Identity, notices: mpsc::UnboundedSender<Notice>) -> Self {
        let inner = Arc::new(Inner {
            url: options.url.clone(),
            link: watch::channel(Link::Connecting(0, None)).0,
            out: Mutex::default(),
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            stop: CancellationToken::new(),
            wake: tokio::sync::Notify::new(),
        });
        tokio::spawn(keep_connected(inner.clone(), options, identity, notices));
        Self { inner }
    }

    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// Stops the connection (pending requests fail).
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// [`Self::request`] for method `M`: its params sent, its result read.
    pub async fn call<M: Method>(&self, params: &M::Params, wait: Duration) -> Result<M::Result, RemoteError> {
        let params = serde_json::to_value(params).map_err(|e| RemoteError::local(e.to_string()))?;
        let answer = self.request(M::NAME, params, wait).await?;
        serde_json::from_value(answer)
            .map_err(|e| RemoteError::local(format!("the gateway's answer to {} could not be read: {e}", M::NAME)))
    }

    /// Waits for the connection, then asks `method` and waits for its answer. Not connected, it
    /// has a connection tried at once (not at the end of the backoff) and fails when that attempt
    /// fails, or after `wait`.
    pub async fn request(&self, method: &str, params: Value, wait: Duration) -> Result<Value, RemoteError> {
        let mut link = self.inner.link.subscribe();
        let failed_before = match &*link.borrow() {
            Link::Connecting(failures, last) => {
                self.inner.wake.notify_one();
                // A first attempt still under way counts as the one to wait for.
                Some(if last.is_some() { *failures } else { failures.saturating_sub(1) })
            }
            _ => None,
        };
        let settled = |l: &Link| match l {
            Link::Connecting(failures, _) => failed_before.is_some_and(|before| *failures > before),
            _ => true,
        };
        let ready = tokio::time::timeout(wait, link.wait_for(settled)).await.is_ok();
        let state = link.borrow().clone();
        match (ready, state) {
            (_, Link::Refused(why)) => return Err(RemoteError::local(why)),
            (_, Link::Connecting(_, last)) => {
                let why = last.unwrap_or_else(|| "it did not answer".to_owned());
                return Err(RemoteError::local(format!("the gateway at {} is not reachable: {why}", self.inner.url)));
            }
            _ => {}
        }
        let id = format!("acp-{}", self.inner.next.fetch_add(1, Ordering::Relaxed));
        let (answer, answered) = oneshot::channel();
        lock(&self.inner.pending).insert(id.clone(), answer);
        let frame = Frame::request(&id, method, params).to_text();
        let sent = lock(&self.inner.out).as_ref().is_some_and(|out| out.send(frame).is_ok());
        if !sent {
            lock(&self.inner.pending).remove(&id);
            return Err(RemoteError::local(format!("the gateway at {} is not connected", self.inner.url)));
        }
        answered.await.unwrap_or_else(|_| Err(RemoteError::local("the gateway connection closed")))
    }

    /// Tries to connect now, not at the end of the backoff (prompts are waiting on it).
    pub fn retry_now(&self) {
        if matches!(*self.inner.link.borrow(), Link::Connecting(..)) {
            self.inner.wake.notify_one();
        }
    }

    /// Whether it is connected now.
    pub fn is_up(&self) -> bool {
        matches!(*self.inner.link.borrow(), Link::Up)
    }
}

/// How one connection ended.
enum Ended {
    /// Closed or failed; try again. `true` if it had been up.
    Closed(String, bool),
    Refused(String),
    /// The server refused the v3 proof: try v2 at once.
    TryV2,
}

async fn keep_connected(
    inner: Arc<Inner>,
    options: Options,
    identity: Identity,
    notices: mpsc::UnboundedSender<Notice>,
) {
    let mut backoff = Duration::from_secs(1);
    let mut proof = "v3";
    loop {
        let ended = tokio::select! {
            () = inner.stop.cancelled() => Ended::Refused("the gateway connection was stopped".into()),
            ended = connection(&inner, &options, &identity, proof, &notices) => ended,
        };
        *lock(&inner.out) = None;
        let failed: Vec<Answer> = lock(&inner.pending).drain().map(|(_, a)| a).collect();
        match ended {
            Ended::TryV2 => {
                proof = "v2";
                continue;
            }
            Ended::Refused(why) => {
                for answer in failed {
                    let _ = answer.send(Err(RemoteError::local(why.clone())));
                }
                inner.link.send_replace(Link::Refused(why.clone()));
                let _ = notices.send(Notice::Refused(why));
                return;
            }
            Ended::Closed(why, was_up) => {
                tracing::info!(url = %inner.url, reason = %why, "gateway connection lost; reconnecting");
                for answer in failed {
                    let _ = answer.send(Err(RemoteError::local(format!("the gateway connection closed: {why}"))));
                }
                let failures = match &*inner.link.borrow() {
                    Link::Connecting(n, _) => n + 1,
                    _ => 1,
                };
                inner.link.send_replace(Link::Connecting(failures, Some(why.clone())));
                if was_up {
                    backoff = Duration::from_secs(1);
                    let _ = notices.send(Notice::Down(why));
                }
            }
        }
        tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => backoff = (backoff * 2).min(MAX_BACKOFF),
            // Someone is waiting: try now (the backoff stays where it was).
            () = inner.wake.notified() => {}
        }
    }
}

type Socket = tokio_tungstenite::WebSocketStream<Box<dyn Stream>>;

/// The next text frame, or why there is none.
async fn next_text(ws: &mut Socket) -> Result<String, String> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => return Ok(text.to_string()),
            Some(Ok(Message::Binary(bytes))) => return Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Some(Ok(Message::Close(frame))) => {
                return Err(frame
                    .map_or_else(|| "closed".to_owned(), |f| format!("closed ({}): {}", u16::from(f.code), f.reason)));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("closed".into()),
        }
    }
}

/// One connection: handshake, then frames both ways until it ends.
async fn connection(
    inner: &Inner,
    options: &Options,
    identity: &Identity,
    proof: &str,
    notices: &mpsc::UnboundedSender<Notice>,
) -> Ended {
    let closed = |why: String| Ended::Closed(why, false);
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, open(&options.url)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) if e.contains("is not a ws://") => return Ended::Refused(e),
        Ok(Err(e)) => return closed(e),
        Err(_) => return closed("connecting timed out".into()),
    };
    let mut config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
    config.max_message_size = Some(32 << 20);
    config.max_frame_size = Some(32 << 20);
    let handshake = tokio_tungstenite::client_async_with_config(options.url.as_str(), stream, Some(config));
    let mut ws = match tokio::time::timeout(CONNECT_TIMEOUT, handshake).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => return closed(format!("WebSocket handshake: {e}")),
        Err(_) => return closed("the WebSocket handshake timed out".into()),
    };
    // The challenge comes first; a server without one gets a connect without a nonce.
    let nonce = match tokio::time::timeout(Duration::from_millis(2000), next_text(&mut ws)).await {
        Ok(Ok(text)) => match Frame::parse(&text) {
            Some(Frame::Event { event, payload: Some(payload), .. }) if event == "connect.challenge" => {
                payload["nonce"].as_str().map(str::to_owned)
            }
            _ => None,
        },
        Ok(Err(e)) => return closed(e),
        Err(_) => None,
    };
    let stored = identity.device_token(&options.url);
    let shared = options.token.as_deref().filter(|t| !t.is_empty());
    let device_token = stored.as_ref().filter(|_| shared.is_none() && options.password.is_none());
    let role = "operator";
    let scopes = device_token.map_or_else(|| options.scopes.clone(), |t| t.scopes.clone());
    let auth = ConnectAuth {
        token: shared.map(str::to_owned),
        password: options.password.clone(),
        device_token: device_token.map(|t| t.token.clone()),
    };
    let given = auth.token.is_some() || auth.password.is_some() || auth.device_token.is_some();
    let signed = shared.or(device_token.map(|t| t.token.as_str()));
    let device =
        nonce.as_ref().map(|nonce| identity.proof(proof, &options.client, role, &scopes, now_ms(), signed, nonce));
    let params = ConnectParams {
        min_protocol: PROTOCOL_VERSION,
        max_protocol: PROTOCOL_VERSION,
        client: options.client.clone(),
        caps: options.caps.clone(),
        role: Some(role.into()),
        scopes: Some(scopes),
        auth: given.then_some(auth),
        device,
    };
    let connect = Frame::request("connect", "connect", serde_json::to_value(&params).unwrap_or_default());
    if let Err(e) = ws.send(Message::Text(connect.to_text().into())).await {
        return closed(e.to_string());
    }
    let hello = loop {
        let text = match tokio::time::timeout(HELLO_TIMEOUT, next_text(&mut ws)).await {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => return closed(format!("the gateway closed the handshake: {e}")),
            Err(_) => return closed("the gateway did not answer connect".into()),
        };
        let Some(Frame::Res { id, ok, payload, error }) = Frame::parse(&text) else { continue };
        if id != "connect" {
            continue;
        }
        if ok {
            break payload.unwrap_or_default();
        }
        let error = error.unwrap_or_else(|| ErrorShape::new("", ""));
        let message = Some(error.message.clone()).filter(|m| !m.is_empty()).unwrap_or_else(|| "connect refused".into());
        if error.detail_code() == "DEVICE_AUTH_INVALID" && proof == "v3" {
            return Ended::TryV2;
        }
        if device_token.is_some() {
            // The kept device token is no longer good: forget it, fall back to the shared one.
            identity.set_device_token(&options.url, None);
            return closed(format!("the gateway refused the kept device token: {message}"));
        }
        let given = if shared.is_none() && options.password.is_none() { " (no token was given)" } else { "" };
        return Ended::Refused(format!("the gateway at {} refused the connection: {message}{given}", options.url));
    };
    let hello: HelloOk = serde_json::from_value(hello).unwrap_or_default();
    if let Some(token) = hello.auth.device_token.clone() {
        let scopes = hello.auth.scopes.clone();
        identity.set_device_token(&options.url, Some(DeviceToken { token, role: role.into(), scopes }));
    }
    let tick = Some(hello.policy.tick_interval_ms).filter(|t| *t > 0).unwrap_or(30_000);
    let silence = Duration::from_millis(tick.saturating_mul(2));
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    *lock(&inner.out) = Some(tx);
    inner.link.send_replace(Link::Up);
    tracing::info!(url = %options.url, "connected to the gateway");
    let _ = notices.send(Notice::Up(Box::new(hello)));
    let mut last_heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(last_heard + silence) => {
                let frame = tokio_tungstenite::tungstenite::protocol::CloseFrame {
                    code: 4000.into(), reason: "tick timeout".into() };
                let _ = ws.send(Message::Close(Some(frame))).await;
                return Ended::Closed("no tick from the gateway for two tick intervals".into(), true);
            }
            out = rx.recv() => match out {
                Some(text) => {
                    if let Err(e) = ws.send(Message::Text(text.into())).await {
                        return Ended::Closed(e.to_string(), true);
                    }
                }
                None => return Ended::Closed("stopped".into(), true),
            },
            text = next_text(&mut ws) => {
                let text = match text {
                    Ok(text) => text,
                    Err(e) => return Ended::Closed(e, true),
                };
                last_heard = tokio::time::Instant::now();
                let Some(frame) = Frame::parse(&text) else { continue };
                handle(inner, frame, notices);
            }
        }
    }
}

/// A frame from the gateway: an answer to its request, or an event for the owner.
fn handle(inner: &Inner, frame: Frame, notices: &mpsc::UnboundedSender<Notice>) {
    match frame {
        Frame::Res { id, ok, payload, error } => {
            // `accepted` first answers of two-answer methods are not the result.
            if ok && payload.as_ref().is_some_and(|p| p["status"] == "accepted") {
                return;
            }
            let Some(answer) = lock(&inner.pending).remove(&id) else { return };
            let result = match (ok, error) {
                (true, _) => Ok(payload.unwrap_or_default()),
                (false, error) => {
                    let error = error.unwrap_or_else(|| ErrorShape::new("", ""));
                    Err(RemoteError {
                        message: Some(error.message)
                            .filter(|m| !m.is_empty())
                            .unwrap_or_else(|| "the gateway refused the request".into()),
                        code: Some(error.code).filter(|c| !c.is_empty()),
                    })
                }
            };
            let _ = answer.send(result);
        }
        Frame::Event { event, payload, .. } if event != "tick" => {
            let _ = notices.send(Notice::Event { event, payload: payload.unwrap_or_default() });
        }
        Frame::Event { .. } | Frame::Req { .. } => {}
    }
}
