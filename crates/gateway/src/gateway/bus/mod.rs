//! The bus between gateways that share a PostgreSQL store (docs/scaling.md): NATS. Each
//! session's events go out on a subject of its own (`<prefix>.ev.<session>`) and reach the
//! gateways that have clients to show them to: each takes `<prefix>.ev.>` only while someone is
//! connected to it, and hands what it gets to its clients with their own `seq`. A request for a
//! session another gateway holds is forwarded to that one (`forward.rs`). A run watched here
//! and run elsewhere is followed: if its end never arrives (the bus was down, or the gateway
//! running it died), the end is read from the store and told as the store has it.

pub mod approvals;
pub mod forward;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use acp_protocol::gateway::events::{ChatEvent, ChatState, name};
use acp_protocol::gateway::methods::RunResult;
use async_nats::HeaderMap;
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::hub::{Audience, Relayed};
use crate::clock::now_ms;
use crate::runtime::store::Postgres;
use crate::sync::lock;

/// Events waiting to go out on the bus, at most; past it, they are dropped (and a run's end is
/// read from the store by those who miss it).
const OUTBOX: usize = 16_384;
/// How long a run watched here may be silent before the store is asked whether it ended.
const SILENT: Duration = Duration::from_secs(2);
/// The subjects' first token, shared by every gateway of one store.
const PREFIX: &str = "acp";

/// This gateway on the bus.
pub struct Bus {
    nats: async_nats::Client,
    /// Where it is, as shown to people (without credentials).
    url: String,
    /// Its name on the bus: its name as the store's lease holder, made a subject token.
    me: String,
    store: Postgres,
    /// Runs of other gateways this one's clients watch, by run id.
    remote: Mutex<HashMap<String, Remote>>,
    /// Runs whose end was told here from the store (their late events are dropped), newest last.
    told: Mutex<std::collections::VecDeque<String>>,
    /// Requests forwarded from here not yet answered in full, by connection and request id.
    pending: Mutex<HashMap<(u64, String), Pending>>,
    /// Approval questions other gateways' runs are waiting on, by id.
    asked: Mutex<HashMap<String, approvals::Asked>>,
}

/// A request sent to the gateway holding its session, until its last answer comes back.
struct Pending {
    /// The holder it went to (its name as the store's lease holder; empty while it is being
    /// sent), and the session.
    owner: String,
    key: String,
    method: String,
    since: Instant,
    /// What the request holds of its connection's cap, given back with the last answer.
    slot: Box<dyn std::any::Any + Send>,
}

/// A run going on elsewhere, as followed here.
struct Remote {
    session_key: String,
    /// The gateway running it (its name on the bus).
    from: String,
    /// The last number of its events heard.
    seq: u64,
    /// The place of the last connection to join here when its last event was handed out: those
    /// joining after it never saw the run, and are not told its end.
    seen_by: u64,
    /// When the store is asked about it next, and how long after that (doubling while it runs).
    check_at: Instant,
    wait: Duration,
    /// When its last event was heard.
    heard: Instant,
}

/// How long a run elsewhere is followed after its last event while its gateway lives on (a run
/// without a stored outcome, whose end was lost on the bus, is not asked about for ever).
const FOLLOWED: Duration = Duration::from_secs(3600);
/// Runs remembered as told from the store, at most.
const TOLD: usize = 4096;
/// How long a quiet run elsewhere goes between questions to the store, at most.
const SILENT_MAX: Duration = Duration::from_secs(30);

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus").field("me", &self.me).finish_non_exhaustive()
    }
}

/// `text` as one subject token: what NATS gives meaning to (`.`, `*`, `>`, spaces) replaced.
fn token(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':') { c } else { '_' }).collect()
}

/// The URL (or comma-separated URLs) as shown to people: without credentials.
pub fn shown(url: &str) -> String {
    let one = |url: &str| match url.split_once("://").and_then(|(scheme, rest)| Some((scheme, rest.rsplit_once('@')?)))
    {
        Some((scheme, (_, host))) => format!("{scheme}://…@{host}"),
        None => url.to_owned(),
    };
    url.split(',').map(|u| one(u.trim())).collect::<Vec<_>>().join(",")
}

/// `text` as a header value: bytes other than letters, digits and `.:_-` as `%XX` (a run id is
/// the client's idempotency key: anything at all).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// [`encode`] undone; `None` for what it never makes.
fn decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Checks the bus's URL (or comma-separated URLs) as given: each a NATS server's address with
/// a host.
pub fn check_url(url: &str) -> Result<(), String> {
    for one in url.split(',').map(str::trim) {
        if one.is_empty() {
            return Err(format!("`{}` has an empty URL in its list (a comma too many?)", shown(url)));
        }
        if !(one.starts_with("nats://") || one.starts_with("tls://")) {
            return Err(format!("`{}` is not a nats:// (or tls://) URL", shown(one)));
        }
        let authority = one.split_once("://").map_or("", |(_, rest)| rest.split('/').next().unwrap_or_default());
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        if host.is_empty() || host.starts_with(':') {
            return Err(format!("`{}` names no host (nats://host:4222)", shown(one)));
        }
        if let Err(e) = one.parse::<async_nats::ServerAddr>() {
            return Err(format!("`{}`: {e}", shown(one)));
        }
    }
    Ok(())
}

/// Why the first of `url`'s servers cannot be reached, as the system says it.
async fn unreachable(url: &str) -> String {
    let Some(addr) = url.split(',').next().and_then(|u| u.trim().parse::<async_nats::ServerAddr>().ok()) else {
        return "not a NATS URL".into();
    };
    let target = format!("{}:{}", addr.host(), addr.port());
    match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(&target)).await {
        Err(_) => format!("{target} did not answer within 5 s"),
        Ok(Err(e)) => format!("{target}: {e}"),
        // It answers: it is not NATS, or refuses these credentials or TLS settings.
        Ok(Ok(_)) => format!("{target} answers, but not as a NATS server that takes these settings (credentials, TLS)"),
    }
}

impl Bus {
    /// Connects to the NATS server(s) at `url` (`nats://host:4222`, comma-separated for a
    /// cluster; credentials as `nats://user:password@host`), as the gateway holding leases in
    /// `store`. Reconnects by itself for as long as the gateway runs.
    pub async fn connect(url: &str, store: Postgres) -> Result<Arc<Self>, String> {
        let shown_url = shown(url);
        let events = shown_url.clone();
        // Whether a loss was told: the return is told as loudly.
        let lost = Arc::new(AtomicBool::new(false));
        let lost_events = lost.clone();
        let nats = async_nats::ConnectOptions::new()
            .name(format!("acp gateway {}", store.owner()))
            // Its own events are delivered to its clients already.
            .no_echo()
            .connection_timeout(Duration::from_secs(5))
            // A bus down when the gateway starts is waited for, as one lost later is.
            .retry_on_initial_connect()
            .request_timeout(Some(Duration::from_secs(10)))
            .event_callback(move |event| {
                let url = events.clone();
                let lost = lost_events.clone();
                async move {
                    match event {
                        async_nats::Event::Connected if lost.swap(false, Ordering::Relaxed) => {
                            tracing::warn!(bus = %url, "back on the bus")
                        }
                        async_nats::Event::Connected => tracing::info!(bus = %url, "connected to the bus"),
                        async_nats::Event::Disconnected => {
                            lost.store(true, Ordering::Relaxed);
                            tracing::warn!(bus = %url, "lost the bus; reconnecting (until then, runs elsewhere are not seen here, and requests for sessions other gateways hold are refused)")
                        }
                        other => tracing::debug!(bus = %url, event = %other, "bus"),
                    }
                }
            })
            .connect(url)
            .await
            .map_err(|e| format!("the bus at {shown_url}: {e}"))?;
        let me = token(store.owner());
        let has_credentials = url.split(',').all(|u| u.contains('@') || u.trim().starts_with("tls://"));
        let loopback =
            url.split(',').all(|u| u.contains("127.0.0.1") || u.contains("localhost") || u.contains("[::1]"));
        if !has_credentials && !loopback {
            tracing::warn!(bus = %shown_url, "the bus has no credentials and no TLS: anyone who reaches it can act as any client of these gateways (docs/scaling.md)");
        }
        // Not reached at first: said once, with why, while it keeps trying.
        let first = nats.clone();
        let servers = url.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            if first.connection_state() == async_nats::connection::State::Connected {
                return;
            }
            let why = unreachable(&servers).await;
            // Reached meanwhile: nothing to say.
            if first.connection_state() != async_nats::connection::State::Connected
                && !lost.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(bus = %shown(&servers), reason = %why, "cannot reach the bus; trying again (until then, runs elsewhere are not seen here, and requests for sessions other gateways hold are refused)");
            }
        });
        Ok(Arc::new(Self {
            nats,
            url: shown_url,
            me,
            store,
            remote: Mutex::default(),
            told: Mutex::default(),
            pending: Mutex::default(),
            asked: Mutex::default(),
        }))
    }

    /// Starts carrying `gw`'s events out and the other gateways' in, until `stop` (the
    /// requests forwarded to it are answered by `forward::serve`).
    pub fn start(self: &Arc<Self>, gw: &Arc<Gateway>, stop: CancellationToken) {
        let (tx, rx) = mpsc::channel(OUTBOX);
        let watchers = gw.hub.relay_to(tx);
        tokio::spawn(self.clone().publish(rx));
        tokio::spawn(self.clone().answer_for_approvers(gw.hub.approvers(), stop.clone()));
        tokio::spawn(self.clone().hear_questions(Arc::downgrade(gw), stop.clone()));
        tokio::spawn(self.clone().intake(Arc::downgrade(gw), watchers, stop.clone()));
        tokio::spawn(self.clone().follow(Arc::downgrade(gw), stop));
    }

    /// Sends what is left to send (before the gateway exits).
    pub async fn flush(&self) {
        if let Err(e) = tokio::time::timeout(Duration::from_secs(5), self.nats.flush()).await.unwrap_or(Ok(())) {
            tracing::warn!(error = %e, "could not send the last events on the bus");
        }
    }

    /// Publishes this gateway's sessions' events, in order.
    async fn publish(self: Arc<Self>, mut rx: mpsc::Receiver<Relayed>) {
        while let Some(event) = rx.recv().await {
            // Off the bus, nothing is kept for later: a burst of stale deltas helps no one, and
            // whoever watched a run that ended meanwhile reads its end from the store.
            if self.nats.connection_state() != async_nats::connection::State::Connected {
                continue;
            }
            if event.head.len() + 512 > self.nats.max_payload() {
                // The bus's `max_payload` is smaller: those watching elsewhere miss it (a
                // delta repaired by the next; an end read from the store).
                tracing::debug!(session = %event.session_key, bytes = event.head.len(), "an event too large for the bus");
                continue;
            }
            let mut headers = HeaderMap::new();
            headers.insert("Acp-From", self.me.as_str());
            headers.insert("Acp-Session", encode(&event.session_key));
            match event.audience {
                Audience::All => {}
                Audience::Subscribers => headers.insert("Acp-To", "subscribers"),
                Audience::Approvers => headers.insert("Acp-To", "approvers"),
            }
            if event.droppable {
                headers.insert("Acp-Droppable", "1");
            }
            if let Some((run, seq, end)) = &event.run {
                headers.insert("Acp-Run", encode(run));
                headers.insert("Acp-Seq", seq.to_string());
                if *end {
                    headers.insert("Acp-End", "1");
                }
            }
            // Questions on subjects of their own, which every gateway takes (an approver may
            // connect to one while a question waits).
            let kind = if event.audience == Audience::Approvers { "ap" } else { "ev" };
            let subject = format!("{PREFIX}.{kind}.{}", token(&event.session_key));
            if let Err(e) = self.nats.publish_with_headers(subject, headers, event.head.into()).await {
                tracing::debug!(error = %e, "could not publish an event on the bus");
            }
        }
    }

    /// Takes the other gateways' events while anyone is connected here, and hands them to the
    /// connections.
    async fn intake(self: Arc<Self>, gw: Weak<Gateway>, watchers: watch::Receiver<usize>, stop: CancellationToken) {
        let subject = format!("{PREFIX}.ev.>");
        self.take_while(subject, watchers, stop, |message| {
            let Some(gw) = gw.upgrade() else { return std::future::ready(false) };
            self.deliver(&gw, message);
            std::future::ready(true)
        })
        .await;
    }

    /// Takes `subject` while `count` is above zero (and unsubscribes while it is zero), handing
    /// each message to `each`, until `each` says no more or `stop`.
    async fn take_while<F, Fut>(
        &self,
        subject: String,
        mut count: watch::Receiver<usize>,
        stop: CancellationToken,
        mut each: F,
    ) where
        F: FnMut(async_nats::Message) -> Fut,
        Fut: Future<Output = bool>,
    {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                seen = count.wait_for(|n| *n > 0) => if seen.map(drop).is_err() { return },
            }
            let mut messages = match self.nats.subscribe(subject.clone()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, %subject, "could not take from the bus; trying again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let _ = self.nats.flush().await;
            tracing::debug!(%subject, "taking from the bus");
            loop {
                let message = tokio::select! {
                    _ = stop.cancelled() => return,
                    gone = count.wait_for(|n| *n == 0) => {
                        if gone.map(drop).is_err() { return }
                        None
                    }
                    message = messages.next() => match message {
                        Some(m) => Some(m),
                        None => break,
                    },
                };
                let Some(message) = message else {
                    let _ = messages.unsubscribe().await;
                    tracing::debug!(%subject, "no longer taking from the bus");
                    break;
                };
                if !each(message).await {
                    return;
                }
            }
        }
    }

    fn deliver(&self, gw: &Gateway, message: async_nats::Message) {
        let Some(headers) = message.headers.as_ref() else { return };
        let header = |name: &str| headers.get(name).map(|v| v.as_str().to_owned());
        let Ok(head) = String::from_utf8(message.payload.to_vec()) else { return };
        // An event as a gateway sends it: its text without the closing brace, which the `seq`
        // of each connection completes. Anything else is not passed on to clients.
        if !head.starts_with("{\"type\":\"event\",\"event\":\"") || headers.get("Acp-From").is_none() {
            tracing::debug!(subject = %message.subject, "a message on the bus that is not an event; dropped");
            return;
        }
        // Questions only on their own subjects, and only to those who may answer them.
        let question = message.subject.strip_prefix(PREFIX).is_some_and(|rest| rest.starts_with(".ap."));
        let audience = if question {
            if !self.heard_approval(&header("Acp-From").unwrap_or_default(), &head) {
                return;
            }
            Audience::Approvers
        } else {
            match header("Acp-To").as_deref() {
                None => Audience::All,
                Some("subscribers") => Audience::Subscribers,
                Some(_) => return,
            }
        };
        if let Some(run) = headers.get("Acp-Run").and_then(|v| decode(v.as_str())) {
            // Its end was told from the store already: what comes late is not shown after it.
            if lock(&self.told).contains(&run) {
                return;
            }
            let seq = headers.get("Acp-Seq").and_then(|s| s.as_str().parse().ok()).unwrap_or_default();
            let check_at = Instant::now() + SILENT;
            let seen_by = gw.hub.newest_conn();
            let mut remote = lock(&self.remote);
            if headers.get("Acp-End").is_some() {
                remote.remove(&run);
            } else if let Some(known) = remote.get_mut(&run) {
                (known.seq, known.check_at, known.wait, known.seen_by) = (seq, check_at, SILENT, seen_by);
                known.heard = Instant::now();
            } else if let Some(session_key) = header("Acp-Session").and_then(|k| decode(&k)) {
                let from = header("Acp-From").unwrap_or_default();
                let heard = Instant::now();
                remote.insert(run, Remote { session_key, from, seq, seen_by, check_at, wait: SILENT, heard });
            }
        }
        gw.hub.deliver(audience, header("Acp-Droppable").is_some(), head);
    }

    /// Runs watched here whose end did not come: their end as the store has it, once they have
    /// been silent a while and the store says they ended (or that the gateway running them
    /// died).
    async fn follow(self: Arc<Self>, gw: Weak<Gateway>, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(SILENT / 2) => {}
            }
            let now = Instant::now();
            let silent: Vec<(String, String, String, u64)> = lock(&self.remote)
                .iter_mut()
                .filter(|(_, r)| r.check_at <= now)
                .map(|(id, r)| {
                    // Asked again later, and later still while it runs quietly (a long tool call).
                    r.wait = (r.wait * 2).min(SILENT_MAX);
                    r.check_at = now + r.wait;
                    (id.clone(), r.session_key.clone(), r.from.clone(), r.seq)
                })
                .collect();
            let Some(gw) = gw.upgrade() else { return };
            for (run, session_key, from, seq) in silent {
                let event = match self.ended_elsewhere(&gw, &run, &session_key, &from, seq).await {
                    Heard::Ended(event) => event,
                    // Its gateway still holds the session: asked again no later than its lease
                    // lapses unless renewed (a dead gateway's run is told ended soon after).
                    Heard::Held(left) => {
                        let mut remote = lock(&self.remote);
                        if remote.get(&run).is_some_and(|r| r.heard.elapsed() > FOLLOWED) {
                            remote.remove(&run);
                        } else if let Some(r) = remote.get_mut(&run) {
                            r.check_at = r.check_at.min(Instant::now() + left + Duration::from_millis(250));
                        }
                        continue;
                    }
                    Heard::Unknown => continue,
                };
                // Unless its end came meanwhile.
                let Some(remote) = lock(&self.remote).remove(&run) else { continue };
                tracing::info!(run = %run, "a run elsewhere ended unseen here; its end as the store has it");
                let mut told = lock(&self.told);
                if told.len() >= TOLD {
                    told.pop_front();
                }
                told.push_back(run);
                drop(told);
                gw.hub.broadcast_to_older(name::CHAT, &*event, remote.seen_by);
            }
        }
    }

    /// The end of run `run` (run by gateway `from`, last heard as `seq`) from the store, if it
    /// ended: as recorded by the gateway that ran it, or as interrupted once that gateway no
    /// longer holds its session (it died: its lease lapsed, or another took the session over).
    async fn ended_elsewhere(&self, gw: &Gateway, run: &str, session_key: &str, from: &str, seq: u64) -> Heard {
        let Ok(recorded) = gw.runtime.key(&super::chat::run_key(run)).await else { return Heard::Unknown };
        let result: Option<RunResult> =
            recorded.as_ref().and_then(|r| r.outcome.as_deref()).and_then(|o| serde_json::from_str(o).ok());
        let result = match result {
            Some(result) => result,
            // Not recorded as ended: ended only if its gateway no longer holds its session.
            None => match self.store.holder(session_key).await {
                Ok(Some((owner, left))) if token(&owner) == from => return Heard::Held(left),
                Err(_) => return Heard::Unknown,
                // A run of `chat.send` or `agent` whose key has no outcome: cut.
                Ok(_) if recorded.is_some() => RunResult {
                    status: "error".into(),
                    error: Some("the gateway running it stopped (the turn was interrupted)".into()),
                    ..RunResult::default()
                },
                // A run of a channel, cron or hook keeps no outcome: how it ended is not known here.
                Ok(_) => RunResult {
                    status: "error".into(),
                    error: Some(
                        "its end was not seen here, and the gateway that ran it no longer holds the session; \
                         chat.history shows what was saved"
                            .into(),
                    ),
                    ..RunResult::default()
                },
            },
        };
        let mut event = ChatEvent {
            run_id: run.to_owned(),
            session_key: session_key.to_owned(),
            agent_id: crate::config::agents::agent_or_main(session_key).to_owned(),
            seq: seq + 1,
            state: ChatState::Final,
            stop_reason: result.stop_reason.clone(),
            ..ChatEvent::default()
        };
        match result.status.as_str() {
            "ok" | "aborted" => {
                if result.status == "aborted" {
                    event.state = ChatState::Aborted;
                }
                let text = result.terminal_reply.map(|r| r.text).unwrap_or_default();
                event.message = Some(super::hub::assistant(&text, now_ms()));
            }
            _ => {
                event.state = ChatState::Error;
                event.error_message = Some(result.error.unwrap_or_else(|| "the run failed".into()));
            }
        }
        Heard::Ended(Box::new(event))
    }
}

/// What the store says of a run elsewhere whose end was not heard.
enum Heard {
    /// It ended: its end, to tell.
    Ended(Box<ChatEvent>),
    /// Its gateway holds its session for this long yet, unless it renews the lease.
    Held(Duration),
    /// Nothing to tell (the store could not be asked).
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_subject_tokens_and_urls_lose_their_passwords() {
        assert_eq!(token("host.example/1234/0a1b"), "host_example_1234_0a1b");
        assert_eq!(token("agent:main:a.b c>*"), "agent:main:a_b_c__");
        assert_eq!(shown("nats://acp:secret@10.0.0.5:4222"), "nats://…@10.0.0.5:4222");
        assert_eq!(shown("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(shown("nats://u:p@h1:4222, nats://u:p@h2"), "nats://…@h1:4222,nats://…@h2");
    }

    #[test]
    fn any_run_id_survives_a_header() {
        for id in ["k-1", "a\r\nb", "ключ 1", "%41", "", "agent:main:x.y"] {
            let encoded = encode(id);
            assert!(encoded.bytes().all(|b| b.is_ascii_graphic()), "{encoded}");
            assert_eq!(decode(&encoded).as_deref(), Some(id));
        }
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%FF"), None);
    }
}
