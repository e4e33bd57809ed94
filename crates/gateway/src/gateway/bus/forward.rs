//! Requests for a session another gateway holds, forwarded to it over the bus: `chat.send`,
//! `agent`, `chat.abort`, `chat.inject`, `sessions.patch`, `sessions.reset`, `sessions.delete`
//! and `agent.wait` (and `exec.approval.resolve`/`get` for a question another gateway asked go
//! to that gateway). The gateway the client is connected to asks the holder (NATS
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

use super::{Bus, PREFIX, Pending, token};
use crate::clock::now_ms;
use crate::gateway::Gateway;
use crate::gateway::handshake::Client;
use crate::gateway::hub::{Conn, Out};
use crate::sync::lock;

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
    "exec.approval.resolve",
    "exec.approval.get",
];

/// Forwarded requests a gateway answers at once, at most; more are refused as busy.
const ANSWERING: usize = 1024;
/// How long a forwarded request may take to reach its holder before it is dropped there (the
/// asking gateway has told its client by then).
const REACH: Duration = Duration::from_secs(10);

/// A request as it goes to the gateway holding its session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Forwarded {
    /// Where its answers go.
    reply: String,
    /// When the asking gateway stops waiting for it to be taken (Unix ms): later, it is dropped.
    deadline: i64,
    role: String,
    scopes: Vec<String>,
    client_id: String,
    /// What the client calls itself (shown as who answered a question).
    #[serde(default)]
    display_name: Option<String>,
    mode: String,
    id: String,
    method: String,
    params: Value,
}

/// Whether `request` was for a session another gateway holds, and so was sent there (or
/// answered with why it could not be): `None`. Otherwise `slot` (what the request holds of its
/// connection's cap) is given back, and the request is answered here. A forwarded request keeps
/// its slot until its last answer comes back.
pub async fn routed<S: Send + 'static>(
    gw: &Gateway,
    conn: &Conn,
    client: &Client,
    request: &Request,
    slot: S,
) -> Option<S> {
    let Some(bus) = gw.bus.get() else { return Some(slot) };
    if !FORWARDED.contains(&request.method.as_str()) {
        return Some(slot);
    }
    // Only what the client may ask goes anywhere (the scope is checked again where it lands).
    let allowed = crate::gateway::methods::METHODS
        .iter()
        .find(|(m, _)| *m == request.method)
        .is_some_and(|(_, scope)| client.may(scope));
    if !allowed {
        return Some(slot);
    }
    let (key, to) = if request.method.starts_with("exec.approval.") {
        // A question goes back to the gateway that asked it (unless it was this one).
        let Some(id) = request.params.get("id").and_then(Value::as_str) else { return Some(slot) };
        if gw.approvals.get(id).is_ok() {
            return Some(slot);
        }
        let Some((asker, key)) = bus.asker_of(id) else { return Some(slot) };
        (key, Some(asker))
    } else {
        let Some(key) = session_of(gw, request).await else { return Some(slot) };
        if gw.open.handle(&key).is_some() {
            return Some(slot);
        }
        (key, None)
    };
    // Kept from before it is sent: its answers may come back before the holder's "taken".
    let entry = (conn.id, request.id.clone());
    let pending = Pending {
        owner: String::new(),
        key: key.clone(),
        method: request.method.clone(),
        since: Instant::now(),
        slot: Box::new(slot),
    };
    if lock(&bus.pending).insert(entry.clone(), pending).is_some() {
        // The same id again while the first is out: answered as a request of its own would be.
        tracing::debug!(id = %request.id.escape_debug(), "a request id forwarded twice at once");
    }
    let outcome = match to {
        Some(asker) => bus.forward_to(gw, &asker, &key, conn, client, request).await.map(Some),
        None => bus.forward(&key, conn, client, request).await,
    };
    let back = {
        let mut pending = lock(&bus.pending);
        match outcome {
            Ok(Some(owner)) => {
                if let Some(p) = pending.get_mut(&entry) {
                    p.owner = owner;
                }
                return None;
            }
            Ok(None) => pending.remove(&entry).and_then(|p| p.slot.downcast::<S>().ok()),
            Err(error) => {
                pending.remove(&entry);
                drop(pending);
                conn.send(&Frame::err(&request.id, error));
                return None;
            }
        }
    };
    // Nobody holds it: answered here, its slot given back (had it gone meanwhile, answered all
    // the same).
    match back {
        Some(slot) => Some(*slot),
        None => {
            crate::gateway::methods::call(gw, conn, client, request.clone()).await;
            None
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
    /// Sends `request` (for session `key`) to the gateway holding the session: that gateway
    /// once it took it; `None` when nobody holds it (anymore), so it is answered here. A holder
    /// that is gone from the bus keeps it until its lease lapses, and is waited for that long.
    async fn forward(
        &self,
        key: &str,
        conn: &Conn,
        client: &Client,
        request: &Request,
    ) -> Result<Option<String>, ErrorShape> {
        let payload = self.forwarded(conn, client, request).map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        let give_up = Instant::now() + self.store.lease() + Duration::from_secs(2);
        loop {
            let holder = self.store.holder(key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e.to_string()))?;
            let Some((owner, left)) = holder else { return Ok(None) };
            // Off the bus, nothing reaches the holder: said at once, not after a wait.
            if self.nats.connection_state() != async_nats::connection::State::Connected {
                return Err(self.off_the_bus(key, &owner));
            }
            let subject = format!("{PREFIX}.gw.{}", token(&owner));
            let asked = tokio::time::timeout(REACH, self.nats.request(subject, payload.clone().into())).await;
            let Ok(asked) = asked else {
                let mut error = ErrorShape::new(
                    code::UNAVAILABLE,
                    format!(
                        "session `{key}` is held by gateway {owner}, which did not answer in time; the request may \
                         still run there: retry with the same idempotency key"
                    ),
                );
                error.retryable = Some(true);
                return Err(error);
            };
            match asked {
                Ok(answer) if answer.payload.as_ref() == b"taken" => return Ok(Some(owner)),
                Ok(_) => {
                    let mut error = ErrorShape::new(
                        code::UNAVAILABLE,
                        format!("gateway {owner}, which holds session `{key}`, is answering too many requests; retry"),
                    );
                    error.retryable = Some(true);
                    return Err(error);
                }
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::MaxPayloadExceeded => {
                    return Err(ErrorShape::invalid(format!(
                        "session `{key}` is held by gateway {owner}, and this request is larger than the bus carries \
                         (its max_payload, {} bytes): send it to that gateway, or raise max_payload",
                        self.nats.max_payload()
                    )));
                }
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
                // The bus went while asking (or the request waited for it in vain).
                Err(_) if self.nats.connection_state() != async_nats::connection::State::Connected => {
                    return Err(self.off_the_bus(key, &owner));
                }
                Err(e) => {
                    let mut error = ErrorShape::new(
                        code::UNAVAILABLE,
                        format!(
                            "session `{key}` is held by gateway {owner}, which could not be reached over the bus \
                             ({e}); the request may still run there: retry with the same idempotency key"
                        ),
                    );
                    error.retryable = Some(true);
                    return Err(error);
                }
            }
        }
    }

    /// Sends `request` about a question of session `key` to `asker`, the gateway that asked it:
    /// `asker` once it took it.
    async fn forward_to(
        &self,
        gw: &Gateway,
        asker: &str,
        key: &str,
        conn: &Conn,
        client: &Client,
        request: &Request,
    ) -> Result<String, ErrorShape> {
        let payload = self.forwarded(conn, client, request).map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        let retry = |why: String| {
            let mut error = ErrorShape::new(code::UNAVAILABLE, why);
            error.retryable = Some(true);
            error
        };
        if self.nats.connection_state() != async_nats::connection::State::Connected {
            return Err(retry(format!(
                "this question was asked by gateway {asker} (session `{key}`), and this gateway has lost the bus \
                 ({}; reconnecting): answer it again in a moment",
                self.url
            )));
        }
        let asked = self.nats.request(format!("{PREFIX}.gw.{asker}"), payload.into());
        match tokio::time::timeout(REACH, asked).await {
            Ok(Ok(answer)) if answer.payload.as_ref() == b"taken" => Ok(asker.to_owned()),
            Ok(Err(e)) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => {
                // The gateway that asked is gone, and its questions with it.
                self.forget_asker(gw, asker);
                Err(ErrorShape::invalid("unknown or expired approval id (the gateway that asked it has stopped)"))
            }
            Ok(Ok(_)) => {
                Err(retry(format!("gateway {asker}, which asked this question, is answering too many requests; retry")))
            }
            _ => Err(retry(format!(
                "gateway {asker}, which asked this question for session `{key}`, could not be reached over the bus; retry"
            ))),
        }
    }

    /// `request` from connection `conn`, as it goes to another gateway.
    fn forwarded(&self, conn: &Conn, client: &Client, request: &Request) -> Result<Vec<u8>, String> {
        let forwarded = Forwarded {
            reply: format!("{PREFIX}.conn.{}.{}", self.me, conn.id),
            deadline: now_ms() + REACH.as_millis() as i64,
            role: client.role.clone(),
            scopes: client.scopes.clone(),
            client_id: client.client_id.clone(),
            display_name: client.info.display_name.clone(),
            mode: client.mode.clone(),
            id: request.id.clone(),
            method: request.method.clone(),
            params: request.params.clone(),
        };
        serde_json::to_vec(&forwarded).map_err(|e| e.to_string())
    }

    /// Why a request for a session `owner` holds cannot go there now: this gateway is off the bus.
    fn off_the_bus(&self, key: &str, owner: &str) -> ErrorShape {
        let mut error = ErrorShape::new(
            code::UNAVAILABLE,
            format!(
                "session `{key}` is held by gateway {owner}, and this gateway has lost the bus ({}; reconnecting): \
                 retry with the same idempotency key in a moment, or ask the gateway holding the session",
                self.url
            ),
        );
        error.retryable = Some(true);
        error
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
        let sweeping = stop.clone();
        let sweep_gw = gw.clone();
        let sweeper = self.clone();
        tokio::spawn(async move { sweeper.sweep(sweep_gw, sweeping).await });
        let room = Arc::new(tokio::sync::Semaphore::new(ANSWERING));
        // Answers for this gateway's clients, from the gateways their sessions are on.
        let answers_gw = gw.clone();
        let answering_bus = self.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    _ = answering.cancelled() => return,
                    m = answers.next() => match m { Some(m) => m, None => return },
                };
                let Some(gw) = answers_gw.upgrade() else { return };
                let Some(id) = message.subject.rsplit('.').next().and_then(|id| id.parse::<u64>().ok()) else {
                    continue;
                };
                let Ok(text) = String::from_utf8(message.payload.to_vec()) else { continue };
                answering_bus.answered(id, &text);
                if let Some(conn) = gw.hub.conn(id) {
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
                // Only what a gateway forwards, answered only to a client's subject.
                if !FORWARDED.contains(&forwarded.method.as_str())
                    || !forwarded.reply.starts_with(&format!("{PREFIX}.conn."))
                {
                    tracing::warn!(method = %forwarded.method.escape_debug(), "a request on the bus no gateway sends; dropped");
                    continue;
                }
                // Too late: the asking gateway has told its client it may retry.
                if forwarded.deadline < now_ms() {
                    tracing::info!(method = %forwarded.method, "a forwarded request came too late; dropped");
                    continue;
                }
                let Ok(permit) = room.clone().try_acquire_owned() else {
                    let _ = bus.nats.publish(reply, "busy".into()).await;
                    continue;
                };
                if let Err(e) = bus.nats.publish(reply, "taken".into()).await {
                    tracing::debug!(error = %e, "could not say a forwarded request was taken");
                }
                let answering = bus.clone().answer(gw, forwarded);
                tokio::spawn(async move {
                    answering.await;
                    drop(permit);
                });
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
            info: acp_protocol::gateway::methods::ClientInfo {
                display_name: forwarded.display_name,
                ..Default::default()
            },
            token_scopes: None,
        };
        let request = Request { id: forwarded.id, method: forwarded.method, params: forwarded.params };
        crate::gateway::methods::call(&gw, &conn, &client, request).await;
        drop(conn);
        let _ = sending.await;
    }

    /// An answer came back for connection `conn`: its request is done unless more answers
    /// follow (`agent`'s `accepted` is followed by its result).
    fn answered(&self, conn: u64, text: &str) {
        #[derive(Deserialize)]
        struct Answer {
            id: String,
            #[serde(default)]
            payload: Option<Value>,
        }
        let Ok(answer) = serde_json::from_str::<Answer>(text) else { return };
        let mut pending = lock(&self.pending);
        let key = (conn, answer.id);
        let more = pending.get(&key).is_some_and(|p| {
            p.method == "agent"
                && answer.payload.as_ref().and_then(|v| v.get("status")).is_some_and(|s| s == "accepted")
        });
        if !more {
            pending.remove(&key);
        }
    }

    /// Requests forwarded from here whose holder died before it answered them in full: answered
    /// here, once the session is no longer that gateway's; those of clients gone, forgotten.
    async fn sweep(self: Arc<Self>, gw: std::sync::Weak<Gateway>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let Some(gw) = gw.upgrade() else { return };
            let waiting: Vec<((u64, String), String, String)> = {
                let mut pending = lock(&self.pending);
                pending.retain(|(conn, _), _| gw.hub.conn(*conn).is_some());
                pending
                    .iter()
                    .filter(|(_, p)| !p.owner.is_empty() && p.since.elapsed() >= Duration::from_secs(2))
                    .map(|(k, p)| (k.clone(), p.owner.clone(), p.key.clone()))
                    .collect()
            };
            for ((conn, id), owner, key) in waiting {
                match self.store.holder(&key).await {
                    Ok(Some((now, _))) if token(&now) == token(&owner) => continue,
                    Err(_) => continue,
                    _ => {}
                }
                if lock(&self.pending).remove(&(conn, id.clone())).is_none() {
                    continue;
                }
                if let Some(conn) = gw.hub.conn(conn) {
                    let mut error = ErrorShape::new(
                        code::UNAVAILABLE,
                        format!(
                            "gateway {owner}, which was answering this for session `{key}`, stopped before it finished"
                        ),
                    );
                    error.retryable = Some(true);
                    conn.send(&Frame::err(&id, error));
                }
            }
        }
    }
}
