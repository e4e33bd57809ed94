//! One WebSocket connection: the challenge, the handshake (15 s, first frame `connect`), then
//! requests answered concurrently while events stream out through the connection's queue; `tick`
//! and `health` pushes every `tickIntervalMs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acp_protocol::gateway::{self, ErrorShape, Frame, events};
use futures_util::{SinkExt as _, StreamExt as _};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::Gateway;
use super::handshake::{self, Challenge};
use super::hub::{Conn, Out};
use crate::clock::now_ms;

pub type Socket = WebSocketStream<Metered<TokioIo<hyper::upgrade::Upgraded>>>;

/// How long a client has to send `connect`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes a client may send before it has authenticated (its `connect` is a few hundred).
pub const PRE_AUTH_BYTES: usize = 64 << 10;
/// Requests of one connection being answered at once; past it, a request is refused at once.
pub const MAX_IN_FLIGHT: usize = 256;

/// Who is on the other end of a WebSocket, as its HTTP request told.
pub struct Peer {
    pub addr: std::net::SocketAddr,
    /// A browser (it sent `Origin`): it needs a token even where other local clients do not.
    pub browser: bool,
    pub slot: Arc<super::guard::Slot>,
}

/// A stream whose reads stop (with an error) once a budget of bytes is spent, until the budget
/// is lifted: what an unauthenticated client may make the gateway read and hold.
pub struct Metered<S> {
    inner: S,
    left: Arc<std::sync::atomic::AtomicUsize>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, budget: usize) -> (Self, Arc<std::sync::atomic::AtomicUsize>) {
        let left = Arc::new(std::sync::atomic::AtomicUsize::new(budget));
        (Self { inner, left: left.clone() }, left)
    }
}

/// The error a spent budget reads as.
const OVER_BUDGET: &str = "more sent before authenticating than a connect takes";

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Metered<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let left = self.left.load(Ordering::Relaxed);
        if left == 0 {
            return std::task::Poll::Ready(Err(std::io::Error::other(OVER_BUDGET)));
        }
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if left != usize::MAX {
            let read = buf.filled().len() - before;
            self.left.fetch_sub(read.min(left), Ordering::Relaxed);
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One request being answered, counted until it is dropped (answered, or its task ended).
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn count(counter: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a read failed because the client sent too much: a frame over `maxPayload`, or more
/// than [`PRE_AUTH_BYTES`] before authenticating. Such a connection is closed with 1009.
fn too_big(e: &tokio_tungstenite::tungstenite::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Capacity(_) => true,
        Error::Io(io) => io.to_string() == OVER_BUDGET,
        _ => false,
    }
}

/// What the first frame of a connection came to.
enum First {
    Text(String),
    /// Closed, or nothing in time.
    Gone,
    /// More than a `connect` takes.
    TooBig,
}

async fn next_text(stream: &mut futures_util::stream::SplitStream<Socket>) -> First {
    while let Some(message) = stream.next().await {
        match message {
            Ok(Message::Text(text)) => return First::Text(text.to_string()),
            Ok(Message::Binary(bytes)) => return First::Text(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if too_big(&e) => return First::TooBig,
            Ok(Message::Close(_)) | Err(_) => return First::Gone,
            Ok(_) => {}
        }
    }
    First::Gone
}

pub async fn run(ws: Socket, budget: Arc<std::sync::atomic::AtomicUsize>, gw: Arc<Gateway>, peer: Peer) {
    let Peer { addr: peer, browser, slot } = peer;
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    let conn = Arc::new(Conn::new(gw.hub.next_conn_id(), tx));
    let queued = conn.queued.clone();
    let writer = tokio::spawn(async move {
        // Whatever is queued goes out together: one write for a delta's `agent` and `chat`
        // events, or for a burst.
        let mut batch = Vec::new();
        'writing: while let Some(out) = rx.recv().await {
            batch.push(out);
            while batch.len() < 64 {
                match rx.try_recv() {
                    Ok(out) => batch.push(out),
                    Err(_) => break,
                }
            }
            let mut written = 0;
            let mut close = None;
            for out in batch.drain(..) {
                match out {
                    Out::Text(text) => {
                        written += text.len();
                        if sink.feed(Message::Text(text.into())).await.is_err() {
                            break 'writing;
                        }
                    }
                    Out::Close(code, reason) => {
                        close = Some(CloseFrame { code: code.into(), reason: reason.into() });
                        break;
                    }
                }
            }
            let flushed = sink.flush().await;
            queued.fetch_sub(written, Ordering::Relaxed);
            if let Some(frame) = close {
                let _ = sink.send(Message::Close(Some(frame))).await;
                break;
            }
            if flushed.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let challenge = Challenge { nonce: uuid::Uuid::new_v4().to_string(), ts: now_ms() };
    let shown = events::Challenge { nonce: challenge.nonce.clone(), ts: challenge.ts, capabilities: Vec::new() };
    conn.send_text(gateway::event_text(events::name::CHALLENGE, &shown, None, None));
    let client = match tokio::time::timeout(HANDSHAKE_TIMEOUT, next_text(&mut stream)).await {
        Err(_) => {
            conn.close(gateway::close::NORMAL, "");
            None
        }
        Ok(First::Gone) => None,
        Ok(First::TooBig) => {
            conn.close(gateway::close::TOO_BIG, "message too big");
            None
        }
        Ok(First::Text(text)) => match handshake(&gw, &conn, &text, &challenge, browser).await {
            Ok(client) => Some(client),
            Err((code, reason)) => {
                conn.close(code, &reason);
                None
            }
        },
    };
    let Some(client) = client else {
        drop(conn);
        let _ = writer.await;
        return;
    };
    // Authenticated: frames up to `maxPayload` from now on, and its slot no longer counts among
    // those waiting to authenticate.
    budget.store(usize::MAX, Ordering::Relaxed);
    slot.authenticated();
    tracing::info!(%peer, conn = %client.conn_id, client = %client.client_id, mode = %client.mode, "gateway client connected");
    conn.approver.store(client.may(handshake::APPROVALS), Ordering::Relaxed);
    gw.hub.add(conn.clone());
    let client = Arc::new(client);
    let ticker = tokio::spawn(ticks(gw.clone(), conn.clone()));
    // The first health push, as the reference sends one just after hello.
    conn.event(events::name::HEALTH, &gw.health(), false, Some(&gw.presence.state_version()));
    gw.joined(&conn, &client, peer);
    let mut too_big_close = false;
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let message = tokio::select! {
            () = conn.dropped_out.cancelled() => break,
            message = stream.next() => match message {
                Some(m) => m,
                None => break,
            },
        };
        let text = match message {
            Ok(Message::Text(text)) => text.to_string(),
            Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if too_big(&e) => {
                tracing::info!(%peer, conn = %client.conn_id, "a frame over maxPayload; closing");
                too_big_close = true;
                break;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        // Malformed JSON is ignored, as the reference does.
        let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
        let request = match gateway::parse_request(&frame) {
            Ok(r) => r,
            Err(message) => {
                conn.send(&Frame::err("invalid", ErrorShape::invalid(message)));
                continue;
            }
        };
        if request.method == "connect" {
            conn.send(&Frame::err(&request.id, ErrorShape::invalid("connect is only valid as the first request")));
            continue;
        }
        // What one client can make the gateway hold is capped: requests waiting on runs
        // (`agent`, `agent.wait`) included.
        if in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT {
            let mut error = ErrorShape::new(
                gateway::code::UNAVAILABLE,
                format!(
                    "{MAX_IN_FLIGHT} requests of this connection are being answered already; wait for their answers"
                ),
            );
            error.retryable = Some(true);
            conn.send(&Frame::err(&request.id, error));
            continue;
        }
        let counted = InFlight::count(&in_flight);
        let (gw, conn, client) = (gw.clone(), conn.clone(), client.clone());
        tokio::spawn(async move {
            // A request sent to another gateway keeps its slot until its last answer is back.
            if let Some(counted) = super::bus::forward::routed(&gw, &conn, &client, &request, counted).await {
                super::methods::call(&gw, &conn, &client, request).await;
                drop(counted);
            }
        });
    }
    ticker.abort();
    gw.hub.remove(conn.id);
    gw.left(&client);
    tracing::info!(%peer, conn = %client.conn_id, dropped = conn.dropped.load(Ordering::Relaxed), "gateway client left");
    if too_big_close {
        conn.close(gateway::close::TOO_BIG, "message too big");
    } else {
        conn.close(gateway::close::NORMAL, "");
    }
    drop(conn);
    // A writer stuck on a client that reads nothing is not waited for long.
    let abort = writer.abort_handle();
    if tokio::time::timeout(Duration::from_secs(2), writer).await.is_err() {
        abort.abort();
    }
}

/// The first frame: `Ok` once `hello-ok` is sent; else the close code and reason (after the
/// response, when the reference sends one).
async fn handshake(
    gw: &Gateway,
    conn: &Conn,
    text: &str,
    challenge: &Challenge,
    browser: bool,
) -> Result<handshake::Client, (u16, String)> {
    let policy = gateway::close::POLICY;
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        return Err((gateway::close::NORMAL, String::new()));
    };
    let request = gateway::parse_request(&frame).map_err(|_| (policy, "invalid request frame".to_owned()))?;
    if request.method != "connect" {
        let message = "invalid handshake: first request must be connect";
        conn.send(&Frame::err(&request.id, ErrorShape::invalid(message)));
        return Err((policy, message.into()));
    }
    match handshake::connect(&gw.access, &request.id, &request.params, challenge, browser).await {
        Ok(client) => {
            conn.send_text(gateway::ok_text(&request.id, &gw.hello(&client)));
            Ok(client)
        }
        Err(refusal) => {
            if let Some(response) = &refusal.response {
                conn.send(response);
            }
            Err((refusal.close, refusal.reason))
        }
    }
}

/// `tick {ts}` then `health` every tick interval, on wall-clock boundaries.
async fn ticks(gw: Arc<Gateway>, conn: Arc<Conn>) {
    let every = super::TICK_INTERVAL_MS;
    loop {
        let now = now_ms();
        let next = (now / every + 1) * every;
        tokio::time::sleep(Duration::from_millis(u64::try_from(next - now).unwrap_or(0))).await;
        conn.event(events::name::TICK, &events::Tick { ts: now_ms() }, true, None);
        conn.event(events::name::HEALTH, &gw.health(), true, Some(&gw.presence.state_version()));
    }
}
