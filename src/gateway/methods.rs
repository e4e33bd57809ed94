//! The methods this gateway implements, each with the scope it needs and its params' schema
//! (`features.methods` in `hello-ok` lists exactly these). Requests run concurrently; each gets
//! one response (`agent` gets two).

use std::time::Duration;

use acp_protocol::gateway::{ErrorShape, Frame, Request, Schema, check_params, code};
use serde_json::{Map, Value, json};

use super::Gateway;
use super::handshake::{ADMIN, Client, READ, WRITE};
use super::hub::Conn;
use crate::runtime::{Op, UserBlock};

/// Every method: its name and the scope it needs.
pub const METHODS: &[(&str, &str)] = &[
    ("health", READ),
    ("status", READ),
    ("models.list", READ),
    ("system-presence", READ),
    ("config.get", READ),
    ("sessions.list", READ),
    ("sessions.resolve", READ),
    ("sessions.subscribe", READ),
    ("sessions.unsubscribe", READ),
    ("sessions.reset", WRITE),
    ("sessions.delete", ADMIN),
    ("chat.send", WRITE),
    ("chat.abort", WRITE),
];

/// The events this gateway sends.
pub const EVENTS: &[&str] =
    &["connect.challenge", "agent", "chat", "sessions.changed", "health", "tick", "presence", "shutdown"];

fn schema(method: &str) -> Schema {
    let key = || Schema::NonEmptyString;
    match method {
        "sessions.list" => Schema::object(&[
            ("limit", Schema::Integer { min: Some(1), max: None }, false),
            ("offset", Schema::Integer { min: Some(0), max: None }, false),
            ("search", Schema::String, false),
            ("includeDerivedTitles", Schema::Bool, false),
            ("includeGlobal", Schema::Bool, false),
            ("includeUnknown", Schema::Bool, false),
            ("agentId", Schema::String, false),
        ]),
        "sessions.resolve" => Schema::object(&[
            ("key", Schema::String, false),
            ("sessionKey", Schema::String, false),
            ("label", Schema::String, false),
            ("agentId", Schema::String, false),
        ]),
        "sessions.reset" | "sessions.delete" => {
            Schema::object(&[("key", key(), false), ("sessionKey", key(), false), ("reason", Schema::String, false)])
        }
        // The reference takes some 25 optional fields; those it does not need here are accepted
        // and left alone, so its clients work unchanged.
        "chat.send" => Schema::open_object(&[
            ("sessionKey", key(), true),
            ("message", Schema::String, true),
            ("idempotencyKey", key(), true),
            ("thinking", Schema::String, false),
            ("timeoutMs", Schema::Integer { min: Some(0), max: None }, false),
        ]),
        "chat.abort" => Schema::object(&[("sessionKey", key(), true), ("runId", Schema::String, false)]),
        _ => Schema::open_object(&[]),
    }
}

pub async fn call(gw: &Gateway, conn: &Conn, client: &Client, request: Request) {
    match dispatch(gw, client, conn, &request).await {
        Ok(Some(payload)) => conn.send(&Frame::ok(&request.id, payload)),
        Ok(None) => {}
        Err(error) => conn.send(&Frame::err(&request.id, error)),
    }
}

/// The answer, or `None` when the method answered itself (before its events).
async fn dispatch(gw: &Gateway, client: &Client, conn: &Conn, request: &Request) -> Result<Option<Value>, ErrorShape> {
    let method = request.method.as_str();
    let Some((_, scope)) = METHODS.iter().find(|(m, _)| *m == method) else {
        return Err(ErrorShape::invalid(format!("unknown method: {method}")));
    };
    if !client.may(scope) {
        return Err(ErrorShape::new(code::FORBIDDEN, format!("missing scope: {scope}"))
            .with_details(json!({"code": "MISSING_SCOPE", "missingScope": scope, "requiredScopes": [scope]})));
    }
    let params = check_params(method, &schema(method), &request.params).map_err(ErrorShape::invalid)?;
    if method == "chat.send" {
        return chat_send(gw, conn, &request.id, &params).await.map(|()| None);
    }
    answer(gw, conn, method, &params).await.map(Some)
}

async fn answer(gw: &Gateway, conn: &Conn, method: &str, params: &Map<String, Value>) -> Result<Value, ErrorShape> {
    let text = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    match method {
        "health" => Ok(gw.health()),
        "status" => Ok(gw.status()),
        "models.list" => Ok(gw.models()),
        "system-presence" => Ok(json!(gw.presence())),
        "config.get" => Ok(gw.config_view()),
        "sessions.list" => gw.sessions_list(params).await,
        "sessions.resolve" => {
            let key = if params.contains_key("key") { text("key") } else { text("sessionKey") };
            if key.is_empty() {
                return Err(ErrorShape::invalid("invalid sessions.resolve params: give `key`"));
            }
            gw.resolve(&key).await
        }
        "sessions.subscribe" | "sessions.unsubscribe" => {
            let on = method == "sessions.subscribe";
            conn.subscribed.store(on, std::sync::atomic::Ordering::Relaxed);
            Ok(json!({"ok": true, "subscribed": on}))
        }
        "sessions.reset" | "sessions.delete" => {
            let key = if params.contains_key("key") { text("key") } else { text("sessionKey") };
            if key.is_empty() {
                return Err(ErrorShape::invalid(format!("invalid {method} params: give `key`")));
            }
            if method == "sessions.reset" { gw.reset(&key).await } else { gw.delete(&key).await }
        }
        "chat.abort" => chat_abort(gw, &text("sessionKey"), params.get("runId").and_then(Value::as_str)).await,
        _ => Err(ErrorShape::invalid(format!("unknown method: {method}"))),
    }
}

/// Answers `started` (or the run's state, for a key seen before), then starts the run: the
/// answer precedes the run's events.
async fn chat_send(gw: &Gateway, conn: &Conn, id: &str, params: &Map<String, Value>) -> Result<(), ErrorShape> {
    let text = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (key, message, run_id) = (super::canonical_key(&text("sessionKey")), text("message"), text("idempotencyKey"));
    if let Some(status) = gw.runs_seen(&run_id) {
        conn.send(&Frame::ok(id, json!({"runId": run_id, "status": status})));
        return Ok(());
    }
    if message.trim().is_empty() {
        gw.run_done(&run_id);
        return Err(ErrorShape::invalid("invalid chat.send params: `message` is empty"));
    }
    let handle = match gw.open(&key).await {
        Ok(h) => h,
        Err(e) => {
            gw.run_done(&run_id);
            return Err(ErrorShape::new(code::UNAVAILABLE, e));
        }
    };
    conn.send(&Frame::ok(id, json!({"runId": run_id, "status": "started"})));
    let turn = gw.runtime.next_turn_id();
    let mut ended = gw.hub.start_run(turn, &run_id, &key);
    let outcome = handle.prompt(turn, vec![UserBlock::Text { text: message }]);
    let timeout = params.get("timeoutMs").and_then(Value::as_u64).filter(|t| *t > 0).map(Duration::from_millis);
    let done = gw.runs_handle();
    let run = run_id.clone();
    tokio::spawn(async move {
        match timeout {
            Some(limit) => {
                tokio::pin!(outcome);
                if tokio::time::timeout(limit, &mut outcome).await.is_err() {
                    handle.send(Op::CancelTurn(turn));
                    outcome.await;
                }
            }
            None => {
                outcome.await;
            }
        }
        // Every event of the turn is out once its outcome is in.
        let _ = ended.wait_for(Option::is_some).await;
        done.finish(&run);
    });
    Ok(())
}

async fn chat_abort(gw: &Gateway, key: &str, run_id: Option<&str>) -> Result<Value, ErrorShape> {
    let key = super::canonical_key(key);
    let turns = gw.hub.turn_of(&key, run_id);
    let Some(handle) = gw.open_handle(&key) else {
        return Ok(json!({"ok": true, "aborted": false, "runIds": []}));
    };
    let mut ids = Vec::new();
    let mut waits = Vec::new();
    for turn in turns {
        if let Some(id) = gw.hub.run_id(turn) {
            ids.push(id);
        }
        if let Some(rx) = gw.hub.end_of(turn) {
            waits.push(rx);
        }
        handle.send(Op::CancelTurn(turn));
    }
    // The `aborted` event goes out before this answer.
    for mut rx in waits {
        let _ = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(Option::is_some)).await;
    }
    let aborted = !ids.is_empty();
    Ok(json!({"ok": true, "aborted": aborted, "runIds": ids}))
}
