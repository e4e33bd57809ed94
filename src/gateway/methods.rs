//! The methods this gateway implements: one table (name, scope, params' schema, handler) that
//! `features.methods` in `hello-ok`, the scope check, the params check and dispatch all read.
//! Requests run concurrently; each gets one response (`agent` gets two). The handlers are short;
//! the longer ones live with their subject (`chat.rs`, `sessions.rs`).

use acp_protocol::gateway::{ErrorShape, Frame, Request, Schema, check_params, code};
use serde_json::{Map, Value, json};

use super::Gateway;
use super::handshake::{ADMIN, APPROVALS, Client, READ, WRITE};
use super::hub::Conn;
use crate::clock::now_ms;

/// One line per method: its name, the scope it needs, its params' schema and its handler. This
/// table is the one place a method is defined (`features.methods` in `hello-ok` lists it);
/// adding one is a line here and its handler (docs/gateway.md says how).
macro_rules! methods {
    ($($name:literal => $scope:ident, $params:ident, $handler:ident;)*) => {
        /// Every method and the scope it needs.
        pub const METHODS: &[(&str, &str)] = &[$(($name, $scope)),*];

        fn schema(method: &str) -> Schema {
            match method {
                $($name => $params(),)*
                _ => any(),
            }
        }

        async fn run(call: &Call<'_>) -> Answer {
            match call.method {
                $($name => $handler(call).await,)*
                other => Err(ErrorShape::invalid(format!("unknown method: {other}"))),
            }
        }
    };
}

methods! {
    "health" => READ, any, health;
    "status" => READ, any, status;
    "models.list" => READ, any, models_list;
    "system-presence" => READ, any, presence;
    "config.get" => READ, any, config_get;
    "sessions.list" => READ, sessions_list_params, sessions_list;
    "sessions.resolve" => READ, sessions_resolve_params, sessions_resolve;
    "sessions.subscribe" => READ, any, subscribe;
    "sessions.unsubscribe" => READ, any, unsubscribe;
    "sessions.reset" => WRITE, session_key_params, sessions_reset;
    "sessions.patch" => WRITE, sessions_patch_params, sessions_patch;
    "sessions.delete" => ADMIN, session_key_params, sessions_delete;
    "chat.send" => WRITE, chat_send_params, chat_send;
    "chat.abort" => WRITE, chat_abort_params, chat_abort;
    "chat.history" => READ, chat_history_params, chat_history;
    "chat.inject" => ADMIN, chat_inject_params, chat_inject;
    "agent" => WRITE, agent_params, agent;
    "agent.wait" => READ, agent_wait_params, agent_wait;
    "send" => WRITE, send_params, send;
    "channels.status" => READ, none, channels_status;
    "pairing.list" => ADMIN, none, pairing_list;
    "pairing.approve" => ADMIN, pairing_params, pairing_approve;
    "pairing.reject" => ADMIN, pairing_params, pairing_reject;
    "exec.approval.get" => APPROVALS, approval_get_params, approval_get;
    "exec.approval.resolve" => APPROVALS, approval_resolve_params, approval_resolve;
}

/// The events this gateway sends.
pub const EVENTS: &[&str] = &[
    "connect.challenge",
    "agent",
    "chat",
    "sessions.changed",
    "session.message",
    "health",
    "tick",
    "presence",
    "exec.approval.requested",
    "exec.approval.resolved",
    "shutdown",
];

// ---- params: each method's schema, checked before its handler runs ----

fn key() -> Schema {
    Schema::NonEmptyString
}

/// Anything (methods whose params are not read).
fn any() -> Schema {
    Schema::open_object(&[])
}

/// No params at all.
fn none() -> Schema {
    Schema::object(&[])
}

fn sessions_list_params() -> Schema {
    Schema::object(&[
        ("limit", Schema::Integer { min: Some(1), max: None }, false),
        ("offset", Schema::Integer { min: Some(0), max: None }, false),
        ("search", Schema::String, false),
        ("includeDerivedTitles", Schema::Bool, false),
        ("includeGlobal", Schema::Bool, false),
        ("includeUnknown", Schema::Bool, false),
        ("agentId", Schema::String, false),
    ])
}

fn sessions_resolve_params() -> Schema {
    Schema::object(&[
        ("key", Schema::String, false),
        ("sessionKey", Schema::String, false),
        ("label", Schema::String, false),
        ("agentId", Schema::String, false),
    ])
}

fn session_key_params() -> Schema {
    Schema::object(&[("key", key(), false), ("sessionKey", key(), false), ("reason", Schema::String, false)])
}

// The reference takes some 25 optional fields for chat.send and agent; those not needed here are
// accepted and left alone, so its clients work unchanged.
fn chat_send_params() -> Schema {
    Schema::open_object(&[
        ("sessionKey", key(), true),
        ("message", Schema::String, true),
        ("idempotencyKey", key(), true),
        ("thinking", Schema::String, false),
        ("timeoutMs", Schema::Integer { min: Some(0), max: None }, false),
        ("attachments", Schema::Any, false),
    ])
}

fn chat_abort_params() -> Schema {
    Schema::object(&[("sessionKey", key(), true), ("runId", Schema::String, false)])
}

fn chat_inject_params() -> Schema {
    Schema::object(&[("sessionKey", key(), true), ("message", key(), true), ("label", Schema::String, false)])
}

fn sessions_patch_params() -> Schema {
    Schema::object(&[
        ("key", key(), true),
        ("label", Schema::String, false),
        ("model", Schema::String, false),
        ("thinking", Schema::String, false),
        ("mode", Schema::Enum(&["ask", "code", "auto"]), false),
        ("sendPolicy", Schema::Any, false),
        ("verboseLevel", Schema::Any, false),
        ("reasoningLevel", Schema::Any, false),
    ])
}

fn chat_history_params() -> Schema {
    Schema::object(&[("sessionKey", key(), true), ("limit", Schema::Integer { min: Some(1), max: None }, false)])
}

fn agent_params() -> Schema {
    Schema::open_object(&[
        ("message", Schema::String, true),
        ("idempotencyKey", key(), true),
        ("sessionKey", Schema::String, false),
        ("agentId", Schema::String, false),
        ("thinking", Schema::String, false),
        ("timeout", Schema::Integer { min: Some(0), max: None }, false),
        ("attachments", Schema::Any, false),
    ])
}

fn send_params() -> Schema {
    Schema::open_object(&[
        ("to", key(), true),
        ("message", key(), true),
        ("idempotencyKey", key(), true),
        ("channel", Schema::String, false),
        ("accountId", Schema::String, false),
        ("sessionKey", Schema::String, false),
        ("threadId", Schema::String, false),
    ])
}

fn pairing_params() -> Schema {
    Schema::object(&[("channel", key(), true), ("code", key(), true)])
}

fn approval_get_params() -> Schema {
    Schema::object(&[("id", key(), true)])
}

fn approval_resolve_params() -> Schema {
    Schema::object(&[
        ("id", key(), true),
        ("decision", key(), true),
        ("reviewer", Schema::Any, false),
        ("grantExpiresInDays", Schema::Integer { min: Some(1), max: Some(3650) }, false),
    ])
}

fn agent_wait_params() -> Schema {
    Schema::object(&[("runId", key(), true), ("timeoutMs", Schema::Integer { min: Some(0), max: None }, false)])
}
/// A request being answered: who asks, on which connection, and its checked params.
struct Call<'a> {
    gw: &'a Gateway,
    client: &'a Client,
    conn: &'a Conn,
    id: &'a str,
    method: &'a str,
    params: Map<String, Value>,
}

impl Call<'_> {
    /// A string param, empty when absent.
    fn text(&self, key: &str) -> String {
        self.params.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
    }

    /// `key`, else `sessionKey` (the reference takes either).
    fn key(&self) -> String {
        if self.params.contains_key("key") { self.text("key") } else { self.text("sessionKey") }
    }
}

/// The payload, or `None` when the method answered itself (before its events).
type Answer = Result<Option<Value>, ErrorShape>;

pub async fn call(gw: &Gateway, conn: &Conn, client: &Client, request: Request) {
    match dispatch(gw, client, conn, &request).await {
        Ok(Some(payload)) => conn.send(&Frame::ok(&request.id, payload)),
        Ok(None) => {}
        Err(error) => conn.send(&Frame::err(&request.id, error)),
    }
}

async fn dispatch(gw: &Gateway, client: &Client, conn: &Conn, request: &Request) -> Answer {
    let method = request.method.as_str();
    let Some((_, scope)) = METHODS.iter().find(|(m, _)| *m == method) else {
        return Err(ErrorShape::invalid(format!("unknown method: {method}")));
    };
    if !client.may(scope) {
        return Err(ErrorShape::new(code::FORBIDDEN, format!("missing scope: {scope}"))
            .with_details(json!({"code": "MISSING_SCOPE", "missingScope": scope, "requiredScopes": [scope]})));
    }
    let params = check_params(method, &schema(method), &request.params).map_err(ErrorShape::invalid)?;
    run(&Call { gw, client, conn, id: &request.id, method, params }).await
}

// ---- handlers: what each method does (the longer ones in chat.rs and sessions.rs) ----

async fn health(c: &Call<'_>) -> Answer {
    Ok(Some(c.gw.health()))
}

async fn status(c: &Call<'_>) -> Answer {
    Ok(Some(c.gw.status()))
}

async fn models_list(c: &Call<'_>) -> Answer {
    Ok(Some(c.gw.models()))
}

async fn presence(c: &Call<'_>) -> Answer {
    Ok(Some(json!(c.gw.presence())))
}

async fn config_get(c: &Call<'_>) -> Answer {
    Ok(Some(c.gw.config_view()))
}

async fn sessions_list(c: &Call<'_>) -> Answer {
    c.gw.sessions_list(&c.params).await.map(Some)
}

async fn sessions_resolve(c: &Call<'_>) -> Answer {
    let (key, label) = (c.key(), c.text("label"));
    match (key.is_empty(), label.trim()) {
        (false, _) => c.gw.resolve(&key).await.map(Some),
        (true, label) if !label.is_empty() => c.gw.resolve_label(label).await.map(Some),
        _ => Err(ErrorShape::invalid("invalid sessions.resolve params: give `key` or `label`")),
    }
}

async fn subscribe(c: &Call<'_>) -> Answer {
    c.conn.subscribed.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(json!({"ok": true, "subscribed": true})))
}

async fn unsubscribe(c: &Call<'_>) -> Answer {
    c.conn.subscribed.store(false, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(json!({"ok": true, "subscribed": false})))
}

/// `sessions.reset` or `sessions.delete`, which need a key.
async fn reset_or_delete(c: &Call<'_>, reset: bool) -> Answer {
    let key = c.key();
    if key.is_empty() {
        return Err(ErrorShape::invalid(format!("invalid {} params: give `key`", c.method)));
    }
    if reset { c.gw.reset(&key).await } else { c.gw.delete(&key).await }.map(Some)
}

async fn sessions_reset(c: &Call<'_>) -> Answer {
    reset_or_delete(c, true).await
}

async fn sessions_delete(c: &Call<'_>) -> Answer {
    reset_or_delete(c, false).await
}

async fn sessions_patch(c: &Call<'_>) -> Answer {
    super::sessions::patch(c.gw, &c.params).await.map(Some)
}

async fn chat_send(c: &Call<'_>) -> Answer {
    super::chat::send(c.gw, c.conn, c.id, &c.params).await.map(|()| None)
}

async fn chat_abort(c: &Call<'_>) -> Answer {
    let run_id = c.params.get("runId").and_then(Value::as_str);
    super::chat::abort(c.gw, &c.text("sessionKey"), run_id).await.map(Some)
}

async fn chat_history(c: &Call<'_>) -> Answer {
    let limit = c.params.get("limit").and_then(Value::as_u64);
    super::chat::history(c.gw, &c.text("sessionKey"), limit).await.map(Some)
}

async fn chat_inject(c: &Call<'_>) -> Answer {
    super::chat::inject(c.gw, &c.text("sessionKey"), &c.text("message"), &c.text("label")).await.map(Some)
}

async fn agent(c: &Call<'_>) -> Answer {
    super::chat::agent(c.gw, c.conn, c.id, &c.params).await.map(|()| None)
}

async fn agent_wait(c: &Call<'_>) -> Answer {
    let timeout = c.params.get("timeoutMs").and_then(Value::as_u64);
    super::chat::agent_wait(c.gw, &c.text("runId"), timeout).await.map(Some)
}

async fn send(c: &Call<'_>) -> Answer {
    c.gw.send(&c.params).await.map(Some)
}

async fn channels_status(c: &Call<'_>) -> Answer {
    let channels: Vec<Value> = crate::sync::lock(&c.gw.channel_status).values().cloned().collect();
    Ok(Some(json!({"ts": now_ms(), "channels": channels})))
}

async fn pairing_list(c: &Call<'_>) -> Answer {
    Ok(Some(json!({"pending": c.gw.pairings.pending()})))
}

/// `pairing.approve` or `pairing.reject`.
async fn pair(c: &Call<'_>, approve: bool) -> Answer {
    let (channel, code) = (c.text("channel"), c.text("code"));
    let done = if approve { c.gw.pairings.approve(&channel, &code) } else { c.gw.pairings.reject(&channel, &code) };
    done.map(|pair| Some(json!({"ok": true, "channel": pair.channel, "peer": pair.peer, "name": pair.name})))
        .map_err(|e| ErrorShape::new(code::NOT_FOUND, e))
}

async fn pairing_approve(c: &Call<'_>) -> Answer {
    pair(c, true).await
}

async fn pairing_reject(c: &Call<'_>) -> Answer {
    pair(c, false).await
}

async fn approval_get(c: &Call<'_>) -> Answer {
    c.gw.approvals.get(&c.text("id")).map(Some).map_err(|e| *e)
}

async fn approval_resolve(c: &Call<'_>) -> Answer {
    let by = c.client.info.get("displayName").and_then(Value::as_str).unwrap_or(&c.client.client_id);
    c.gw.approvals.resolve(&c.gw.hub, &c.text("id"), &c.text("decision"), by).map(Some).map_err(|e| *e)
}
