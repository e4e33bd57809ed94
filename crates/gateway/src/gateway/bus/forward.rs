//! Requests for a session another gateway holds, forwarded to it over the bus: `chat.send`,
//! `agent`, `chat.abort`, `chat.inject`, `sessions.patch`, `sessions.reset`, `sessions.delete`
//! and `agent.wait`. The gateway the client is connected to asks the holder (NATS
//! request/reply); the holder answers the request as its own, as if the client were connected
//! to it, and its answers come back on the client's own subject
//! (`<prefix>.conn.<gateway>.<connection>`), while the run's events reach the client as any
//! session's do. A holder that does not answer (it died) is waited for until its lease lapses;
//! then the session is served here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_protocol::gateway::{ErrorShape, Frame, Request, code};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Bus, PREFIX, token};
use crate::gateway::Gateway;
use crate::gateway::handshake::Client;
use crate::gateway::hub::{Conn, Out};

/// The methods that act on one session, and so are answered by the gateway holding it.
const FORWARDED: &[&str] = &[
    "chat.send",
    "agent",
    "chat.abort",
    "chat.inject",
    "sessions.patch",
    "sessions.reset",
    "sessions.delete",
    "agent.wait",
];

/// A request as it goes to the gateway holding its session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Forwarded {
    /// Where its answers go.
    reply: String,
    role: String,
    scopes: Vec<String>,
    client_id: String,
    mode: String,
    id: String,
    method: String,
    params: Value,
}

/// Whether `request` was for a session another gateway holds, and so was sent there (or
/// answered with why it could not be). Otherwise it is answered here.
pub async fn routed(gw: &Gateway, conn: &Conn, client: &Client, request: &Request) -> bool {
    let Some(bus) = gw.bus.get() else { return false };
    if !FORWARDED.contains(&request.method.as_str()) {
        return false;
    }
    // Only what the client may ask goes anywhere (the scope is checked again where it lands).
    let allowed = crate::gateway::methods::METHODS
        .iter()
        .find(|(m, _)| *m == request.method)
        .is_some_and(|(_, scope)| client.may(scope));
    if !allowed {
        return false;
    }
    let Some(key) = session_of(gw, request).await else { return false };
    if gw.open.handle(&key).is_some() {
        return false;
    }
    match bus.forward(&key, conn, client, request).await {
        Ok(sent) => sent,
        Err(error) => {
            conn.send(&Frame::err(&request.id, error));
            true
        }
    }
}

/// The session `request` acts on, canonical; `None` when it names none (the handler says so).
async fn session_of(gw: &Gateway, request: &Request) -> Option<String> {
    let p = &request.params;
    let field = |name: &str| p.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    match request.method.as_str() {
        "agent" => match (field("sessionKey"), field("agentId")) {
            (Some(key), _) => Some(gw.key(key)),
            (None, Some(agent)) => Some(format!("agent:{}:main", agent.to_lowercase())),
            (None, None) => Some(gw.key("main")),
        },
        "agent.wait" => {
            let run = field("runId")?;
            if gw.runs.watch(run).is_some() {
                return None;
            }
            let record = gw.runtime.key(&crate::gateway::chat::run_key(run)).await.ok()??;
            record.outcome.is_none().then_some(record.session)
        }
        _ => field("sessionKey").or_else(|| field("key")).map(|k| gw.key(k)),
    }
}

impl Bus {
    /// Sends `request` (for session `key`) to the gateway holding the session: true once it
    /// took it; false when nobody holds it (anymore), so it is answered here. A holder that is
    /// gone from the bus keeps it until its lease lapses, and is waited for that long.
    async fn forward(&self, key: &str, conn: &Conn, client: &Client, request: &Request) -> Result<bool, ErrorShape> {
        let forwarded = Forwarded {
            reply: format!("{PREFIX}.conn.{}.{}", self.me, conn.id),
            role: client.role.clone(),
            scopes: client.scopes.clone(),
            client_id: client.client_id.clone(),
            mode: client.mode.clone(),
            id: request.id.clone(),
            method: request.method.clone(),
            params: request.params.clone(),
        };
        let payload = serde_json::to_vec(&forwarded).map_err(|e| ErrorShape::new(code::UNAVAILABLE, e.to_string()))?;
        let give_up = Instant::now() + self.store.lease() + Duration::from_secs(2);
        loop {
            let holder = self.store.holder(key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e.to_string()))?;
            let Some((owner, left)) = holder else { return Ok(false) };
            let subject = format!("{PREFIX}.gw.{}", token(&owner));
            match self.nats.request(subject, payload.clone().into()).await {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => {
                    // Its gateway is not on the bus: dead, most likely. Its lease lapses soon.
                    if Instant::now() >= give_up {
                        return Err(ErrorShape::new(
                            code::UNAVAILABLE,
                            format!("session `{key}` is held by gateway {owner}, which does not answer on the bus"),
                        ));
                    }
                    tracing::info!(session = %key, %owner, "the gateway holding the session does not answer; waiting for its lease to lapse");
                    tokio::time::sleep(left.clamp(Duration::from_millis(50), Duration::from_millis(250))).await;
                }
                Err(e) => {
                    let mut error = ErrorShape::new(
                        code::UNAVAILABLE,
                        format!("session `{key}` is held by gateway {owner}, which could not be reached: {e}"),
                    );
                    error.retryable = Some(true);
                    return Err(error);
                }
            }
        }
    }

    /// Answers the requests other gateways forward to this one, until `stop`.
    pub async fn serve_forwarded(self: Arc<Self>, gw: &Arc<Gateway>, stop: CancellationToken) -> Result<(), String> {
        let subject = format!("{PREFIX}.gw.{}", self.me);
        let mut requests =
            self.nats.subscribe(subject).await.map_err(|e| format!("could not take requests from the bus: {e}"))?;
        let mut answers = self
            .nats
            .subscribe(format!("{PREFIX}.conn.{}.*", self.me))
            .await
            .map_err(|e| format!("could not take answers from the bus: {e}"))?;
        let gw = Arc::downgrade(gw);
        let bus = self.clone();
        let answering = stop.clone();
        // Answers for this gateway's clients, from the gateways their sessions are on.
        let answers_gw = gw.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    _ = answering.cancelled() => return,
                    m = answers.next() => match m { Some(m) => m, None => return },
                };
                let Some(gw) = answers_gw.upgrade() else { return };
                let conn =
                    message.subject.rsplit('.').next().and_then(|id| id.parse().ok()).and_then(|id| gw.hub.conn(id));
                if let (Some(conn), Ok(text)) = (conn, String::from_utf8(message.payload.to_vec())) {
                    conn.send_text(text);
                }
            }
        });
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    _ = stop.cancelled() => return,
                    m = requests.next() => match m { Some(m) => m, None => return },
                };
                let Some(gw) = gw.upgrade() else { return };
                let Some(reply) = message.reply.clone() else { continue };
                let forwarded: Forwarded = match serde_json::from_slice(&message.payload) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(error = %e, "a request on the bus that is not one");
                        continue;
                    }
                };
                if let Err(e) = bus.nats.publish(reply, "taken".into()).await {
                    tracing::debug!(error = %e, "could not say a forwarded request was taken");
                }
                tokio::spawn(bus.clone().answer(gw, forwarded));
            }
        });
        Ok(())
    }

    /// Answers a forwarded request as if its client were connected here; its answers go back.
    async fn answer(self: Arc<Self>, gw: Arc<Gateway>, forwarded: Forwarded) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let conn = Conn::new(gw.hub.next_conn_id(), tx);
        let queued = conn.queued.clone();
        let nats = self.nats.clone();
        let reply = forwarded.reply.clone();
        let sending = tokio::spawn(async move {
            while let Some(out) = rx.recv().await {
                if let Out::Text(text) = out {
                    queued.fetch_sub(text.len(), std::sync::atomic::Ordering::Relaxed);
                    if let Err(e) = nats.publish(reply.clone(), text.into()).await {
                        tracing::debug!(error = %e, "could not send an answer back on the bus");
                    }
                }
            }
        });
        let client = Client {
            conn_id: format!("bus-{}", conn.id),
            client_id: forwarded.client_id,
            mode: forwarded.mode,
            role: forwarded.role,
            scopes: forwarded.scopes,
            device_id: None,
            info: Default::default(),
            token_scopes: None,
        };
        let request = Request { id: forwarded.id, method: forwarded.method, params: forwarded.params };
        crate::gateway::methods::call(&gw, &conn, &client, request).await;
        drop(conn);
        let _ = sending.await;
    }
}
