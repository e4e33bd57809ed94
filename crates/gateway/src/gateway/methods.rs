//! The methods this gateway implements: one table (method, scope, handler) that
//! `features.methods` in `hello-ok`, the scope check, the params check and dispatch all read.
//! Each method's name, params, result and params' schema are its type in
//! `acp_protocol::gateway::methods`. Requests run concurrently; each gets one response (`agent`
//! gets two). The handlers are short; the longer ones live with their subject (`chat.rs`,
//! `sessions.rs`).

// `ErrorShape` is the wire's error, made once per failed request.
#![allow(clippy::result_large_err)]

use acp_protocol::gateway::methods::*;
use acp_protocol::gateway::{ErrorShape, Frame, Method, Request, check_params, code, ok_text};
use serde_json::Value;

use super::Gateway;
use super::handshake::{ADMIN, APPROVALS, Client, READ, WRITE};
use super::hub::Conn;
use acp_protocol::gateway::canonical_key;

/// One line per method: its type (name, params, result, schema), the scope it needs and its
/// handler. This table is the one place a method is served (`features.methods` in `hello-ok`
/// lists it); adding one is its type in the protocol crate, a line here and its handler
/// (docs/architecture.md says how).
macro_rules! methods {
    ($($method:ident => $scope:ident, $handler:ident;)*) => {
        /// Every method and the scope it needs.
        pub const METHODS: &[(&str, &str)] = &[$(($method::NAME, $scope)),*];

        /// Checks the params of `call.method` and runs its handler; the payload, already as text,
        /// or `None` when the handler answered itself.
        async fn run(call: &Call<'_>, params: &Value) -> Result<Option<String>, ErrorShape> {
            $(if call.method == $method::NAME {
                let params = parse::<$method>(params)?;
                return Ok($handler(call, params).await?.map(|result| ok_text(call.id, &result)));
            })*
            Err(ErrorShape::invalid(format!("unknown method: {}", call.method)))
        }
    };
}

methods! {
    Health => READ, health;
    Status => READ, status;
    ModelsList => READ, models_list;
    AgentsList => READ, agents_list;
    AgentIdentityGet => READ, agent_identity;
    SystemPresence => READ, presence;
    ConfigGet => READ, config_get;
    SessionsList => READ, sessions_list;
    SessionsResolve => READ, sessions_resolve;
    SessionsSubscribe => READ, subscribe;
    SessionsUnsubscribe => READ, unsubscribe;
    SessionsReset => WRITE, sessions_reset;
    SessionsPatch => WRITE, sessions_patch;
    SessionsDelete => ADMIN, sessions_delete;
    ChatSend => WRITE, chat_send;
    ChatAbort => WRITE, chat_abort;
    ChatHistory => READ, chat_history;
    ChatInject => ADMIN, chat_inject;
    Agent => WRITE, agent;
    AgentWait => READ, agent_wait;
    Send => WRITE, send;
    ChannelsStatus => READ, channels_status;
    PairingList => ADMIN, pairing_list;
    PairingApprove => ADMIN, pairing_approve;
    PairingReject => ADMIN, pairing_reject;
    ApprovalGet => APPROVALS, approval_get;
    ApprovalResolve => APPROVALS, approval_resolve;
    CronStatus => READ, cron_status;
    CronList => READ, cron_list;
    CronGet => READ, cron_get;
    CronRuns => READ, cron_runs;
    CronAdd => ADMIN, cron_add;
    CronUpdate => ADMIN, cron_update;
    CronRemove => ADMIN, cron_remove;
    CronRun => ADMIN, cron_run;
    LastHeartbeat => READ, last_heartbeat;
    SetHeartbeats => ADMIN, set_heartbeats;
    Wake => WRITE, wake;
}

/// `M`'s params, checked against its schema (the reference's messages) and read.
pub(super) fn parse<M: Method>(params: &Value) -> Result<M::Params, ErrorShape> {
    let checked = check_params(M::NAME, &M::schema(), params).map_err(ErrorShape::invalid)?;
    serde_json::from_value(Value::Object(checked))
        .map_err(|e| ErrorShape::invalid(format!("invalid {} params: {e}", M::NAME)))
}

/// A request being answered: who asks, and on which connection.
struct Call<'a> {
    gw: &'a Gateway,
    client: &'a Client,
    conn: &'a Conn,
    id: &'a str,
    method: &'a str,
}

impl Call<'_> {
    fn asked(&self) -> super::chat::Asked<'_> {
        super::chat::Asked { gw: self.gw, conn: self.conn, id: self.id }
    }
}

/// The result, or `None` when the method answered itself (before its events).
type Answer<T> = Result<Option<T>, ErrorShape>;

pub async fn call(gw: &Gateway, conn: &Conn, client: &Client, request: Request) {
    let call = Call { gw, client, conn, id: &request.id, method: &request.method };
    match dispatch(&call, &request.params).await {
        Ok(Some(text)) => conn.send_text(text),
        Ok(None) => {}
        Err(error) => conn.send(&Frame::err(&request.id, error)),
    }
}

async fn dispatch(call: &Call<'_>, params: &Value) -> Result<Option<String>, ErrorShape> {
    let Some((_, scope)) = METHODS.iter().find(|(m, _)| *m == call.method) else {
        return Err(ErrorShape::invalid(format!("unknown method: {}", call.method)));
    };
    if !call.client.may(scope) {
        return Err(ErrorShape::missing_scope(scope));
    }
    run(call, params).await
}

// ---- handlers: what each method does (the longer ones in chat.rs and sessions.rs) ----

async fn health(c: &Call<'_>, _: NoParams) -> Answer<HealthInfo> {
    Ok(Some(c.gw.health()))
}

async fn status(c: &Call<'_>, _: NoParams) -> Answer<StatusInfo> {
    Ok(Some(c.gw.status()))
}

async fn models_list(c: &Call<'_>, _: NoParams) -> Answer<Models> {
    Ok(Some(c.gw.models()))
}

async fn presence(c: &Call<'_>, _: NoParams) -> Answer<Vec<acp_protocol::gateway::events::PresenceEntry>> {
    Ok(Some(c.gw.presence.list()))
}

async fn config_get(c: &Call<'_>, _: NoParams) -> Answer<ConfigView> {
    Ok(Some(c.gw.config_view()))
}

async fn sessions_list(c: &Call<'_>, p: SessionsListParams) -> Answer<SessionPage> {
    c.gw.sessions_list(&p).await.map(Some)
}

async fn sessions_resolve(c: &Call<'_>, p: SessionsResolveParams) -> Answer<Resolved> {
    let label = p.label.as_deref().unwrap_or_default().trim();
    match (p.key(), label) {
        (key, _) if !key.is_empty() => c.gw.resolve(key).await.map(Some),
        (_, label) if !label.is_empty() => c.gw.resolve_label(label).await.map(Some),
        _ => Err(ErrorShape::invalid("invalid sessions.resolve params: give `key` or `label`")),
    }
}

async fn subscribe(c: &Call<'_>, _: NoParams) -> Answer<Subscribed> {
    c.conn.subscribed.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(Subscribed { ok: true, subscribed: true }))
}

async fn unsubscribe(c: &Call<'_>, _: NoParams) -> Answer<Subscribed> {
    c.conn.subscribed.store(false, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(Subscribed { ok: true, subscribed: false }))
}

/// The key `sessions.reset` and `sessions.delete` need.
fn needed_key(c: &Call<'_>, p: &SessionKeyParams) -> Result<String, ErrorShape> {
    match p.key() {
        "" => Err(ErrorShape::invalid(format!("invalid {} params: give `key`", c.method))),
        key => Ok(key.to_owned()),
    }
}

async fn sessions_reset(c: &Call<'_>, p: SessionKeyParams) -> Answer<SessionDone> {
    c.gw.reset(&needed_key(c, &p)?).await.map(Some)
}

async fn sessions_delete(c: &Call<'_>, p: SessionKeyParams) -> Answer<SessionDone> {
    c.gw.delete(&needed_key(c, &p)?).await.map(Some)
}

async fn sessions_patch(c: &Call<'_>, p: SessionsPatchParams) -> Answer<SessionDone> {
    super::sessions::patch(c.gw, p).await.map(Some)
}

async fn chat_send(c: &Call<'_>, p: ChatSendParams) -> Answer<RunAck> {
    super::chat::send(&c.asked(), p).await.map(|()| None)
}

async fn chat_abort(c: &Call<'_>, p: ChatAbortParams) -> Answer<Aborted> {
    super::chat::abort(c.gw, &p.session_key, p.run_id.as_deref()).await.map(Some)
}

async fn chat_history(c: &Call<'_>, p: ChatHistoryParams) -> Answer<History> {
    super::chat::history(c.gw, &p.session_key, p.limit).await.map(Some)
}

async fn chat_inject(c: &Call<'_>, p: ChatInjectParams) -> Answer<Injected> {
    super::chat::inject(c.gw, &p.session_key, &p.message, p.label.as_deref().unwrap_or_default()).await.map(Some)
}

async fn agent(c: &Call<'_>, p: AgentParams) -> Answer<RunAck> {
    super::chat::agent(&c.asked(), p).await.map(|()| None)
}

async fn agent_wait(c: &Call<'_>, p: AgentWaitParams) -> Answer<RunResult> {
    super::chat::agent_wait(c.gw, &p.run_id, p.timeout_ms).await.map(Some)
}

async fn send(c: &Call<'_>, p: SendParams) -> Answer<Sent> {
    // Paths are the workspace of the session's agent (or the default agent's).
    let key = p.session_key.as_deref().map(str::trim).filter(|k| !k.is_empty());
    let config = c.gw.runtime.config_for(&key.map_or_else(|| c.gw.key("main"), canonical_key));
    let workspace = c.gw.workspace_of(&config);
    let media = super::channels::Channels::media(&p, &config, &workspace);
    c.gw.channels.send(&c.gw.runtime, &p, media).await.map(Some)
}

async fn agents_list(c: &Call<'_>, _: NoParams) -> Answer<AgentList> {
    Ok(Some(c.gw.agents_list()))
}

async fn agent_identity(c: &Call<'_>, p: AgentIdentityParams) -> Answer<AgentIdentity> {
    c.gw.agent_identity(&p).map(Some)
}

async fn channels_status(c: &Call<'_>, _: NoParams) -> Answer<ChannelsInfo> {
    Ok(Some(c.gw.channels.status()))
}

async fn pairing_list(c: &Call<'_>, _: NoParams) -> Answer<PendingPairs> {
    Ok(Some(PendingPairs { pending: c.gw.channels.pairings.pending() }))
}

/// `pairing.approve` or `pairing.reject`.
fn pair(c: &Call<'_>, p: &PairingParams, approve: bool) -> Answer<Paired> {
    let pairings = &c.gw.channels.pairings;
    let done = if approve { pairings.approve(&p.channel, &p.code) } else { pairings.reject(&p.channel, &p.code) };
    done.map(|pair| Some(Paired { ok: true, channel: pair.channel, peer: pair.peer, name: pair.name }))
        .map_err(|e| ErrorShape::new(code::NOT_FOUND, e))
}

async fn pairing_approve(c: &Call<'_>, p: PairingParams) -> Answer<Paired> {
    pair(c, &p, true)
}

async fn pairing_reject(c: &Call<'_>, p: PairingParams) -> Answer<Paired> {
    pair(c, &p, false)
}

async fn approval_get(c: &Call<'_>, p: ApprovalGetParams) -> Answer<acp_protocol::gateway::events::ApprovalRequested> {
    c.gw.approvals.get(&p.id).map(Some).map_err(|e| *e)
}

async fn approval_resolve(c: &Call<'_>, p: ApprovalResolveParams) -> Answer<ApprovalDone> {
    let by = c.client.info.display_name.as_deref().unwrap_or(&c.client.client_id);
    c.gw.approvals.resolve(&c.gw.hub, &p.id, &p.decision, by).map(Some).map_err(|e| *e)
}

async fn cron_status(c: &Call<'_>, _: NoParams) -> Answer<CronInfo> {
    Ok(Some(c.gw.cron.status().await))
}

async fn cron_list(c: &Call<'_>, p: CronListParams) -> Answer<CronPage> {
    Ok(Some(c.gw.cron.list(p, None).await))
}

async fn cron_get(c: &Call<'_>, p: JobIdParams) -> Answer<JobShown> {
    c.gw.cron.get(&p).await.map(Some)
}

async fn cron_runs(c: &Call<'_>, p: CronRunsParams) -> Answer<CronRunsPage> {
    c.gw.cron.runs(c.gw, p).await.map(Some)
}

async fn cron_add(c: &Call<'_>, p: CronAddParams) -> Answer<JobShown> {
    c.gw.cron.add(c.gw, p).await.map(Some)
}

async fn cron_update(c: &Call<'_>, p: CronUpdateParams) -> Answer<JobShown> {
    c.gw.cron.update(c.gw, p).await.map(Some)
}

async fn cron_remove(c: &Call<'_>, p: JobIdParams) -> Answer<CronRemoved> {
    c.gw.cron.remove(c.gw, &p).await.map(Some)
}

async fn cron_run(c: &Call<'_>, p: CronRunParams) -> Answer<CronRunAck> {
    let gw = c.gw.me.upgrade().ok_or_else(|| ErrorShape::new(code::UNAVAILABLE, "the gateway is stopping"))?;
    c.gw.cron.run(gw, &p).await.map(Some)
}

async fn last_heartbeat(c: &Call<'_>, _: NoParams) -> Answer<Option<HeartbeatEvent>> {
    Ok(Some(c.gw.cron.heartbeat.last()))
}

async fn set_heartbeats(c: &Call<'_>, p: SetHeartbeatsParams) -> Answer<HeartbeatsSet> {
    let enabled =
        p.enabled.ok_or_else(|| ErrorShape::invalid("invalid set-heartbeats params: enabled (boolean) required"))?;
    c.gw.cron.heartbeat.set_enabled(enabled);
    Ok(Some(HeartbeatsSet { ok: true, enabled }))
}

async fn wake(c: &Call<'_>, p: WakeParams) -> Answer<Woken> {
    if !matches!(p.mode.as_str(), "now" | "next-heartbeat") {
        return Err(ErrorShape::invalid(
            "invalid wake params: at /mode: must be equal to constant; at /mode: must match a schema in anyOf",
        ));
    }
    if p.text.trim().is_empty() {
        return Err(ErrorShape::invalid("invalid wake params: at /text: must NOT have fewer than 1 characters"));
    }
    c.gw.cron.heartbeat.enqueue(&p.text, p.mode == "now");
    Ok(Some(Woken { ok: true, reason: None }))
}
