//! The gateway protocol (OpenClaw's, version 4) as it is on the wire, the one definition both
//! ends use: three frame shapes over a WebSocket's text messages — `req`, `res`, `event` —, the
//! error shape, stop reasons, the device proof, each method's params and result ([`methods`]),
//! the events' payloads ([`events`]), and the params' schemas with the reference's messages
//! ([`schema`]).

pub mod agents;
mod config_view;
mod connect;
pub mod cron;
pub mod events;
mod method;
pub mod methods;
mod schema;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use methods::Method;
pub use schema::{CLIENT_IDS, CLIENT_MODES, Schema, check_params, connect_schema};

/// The protocol version spoken; clients must include it in `[minProtocol, maxProtocol]`.
pub const PROTOCOL_VERSION: u64 = 4;
/// The oldest version a probe may speak (reported in a mismatch).
pub const MIN_PROBE_PROTOCOL: u64 = 3;

/// Error codes.
pub mod code {
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    pub const NOT_PAIRED: &str = "NOT_PAIRED";
    pub const FORBIDDEN: &str = "FORBIDDEN";
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    pub const NOT_FOUND: &str = "NOT_FOUND";
}

/// WebSocket close codes the gateway uses.
pub mod close {
    /// Normal: the handshake timed out, or the first frame was not JSON.
    pub const NORMAL: u16 = 1000;
    /// Going away: the gateway shuts down.
    pub const GOING_AWAY: u16 = 1001;
    /// Protocol error: the versions do not overlap.
    pub const PROTOCOL: u16 = 1002;
    /// Policy violation: a bad first frame, bad credentials.
    pub const POLICY: u16 = 1008;
    /// Too big: a frame over `maxPayload`.
    pub const TOO_BIG: u16 = 1009;
    /// Try again later: the client fell too far behind.
    pub const TRY_AGAIN: u16 = 1013;
}

/// How a run stopped, as `chat` `final` and the `agent` lifecycle's `stopReason` say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `stop`: the model ended its turn.
    Stop,
    /// `length`: the model's output limit.
    Length,
    /// `max_turn_requests`: the run's request limit.
    MaxTurnRequests,
    /// `refusal`.
    Refusal,
    /// `rpc`: stopped by a client (`chat.abort`).
    Aborted,
    /// `error`.
    Error,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::MaxTurnRequests => "max_turn_requests",
            Self::Refusal => "refusal",
            Self::Aborted => "rpc",
            Self::Error => "error",
        }
    }

    /// A stop reason as a gateway (ours or the reference) sends it; anything unknown is `stop`.
    pub fn parse(wire: &str) -> Self {
        match wire {
            "length" | "max_tokens" => Self::Length,
            "max_turn_requests" => Self::MaxTurnRequests,
            "refusal" => Self::Refusal,
            "rpc" | "aborted" => Self::Aborted,
            "error" => Self::Error,
            _ => Self::Stop,
        }
    }
}

/// What a device signs to prove itself in `connect`:
/// `v3|device|client|mode|role|scopes|signedAt|token|nonce|platform|family`, lower-cased platform
/// and family (`v2`, for older servers, stops after the nonce).
#[derive(Debug, Clone, Copy)]
pub struct DeviceProof<'a> {
    pub version: &'a str,
    pub device_id: &'a str,
    pub client_id: &'a str,
    pub client_mode: &'a str,
    pub role: &'a str,
    pub scopes: &'a [String],
    pub signed_at: i64,
    pub token: Option<&'a str>,
    pub nonce: &'a str,
    pub platform: &'a str,
    pub family: &'a str,
}

impl DeviceProof<'_> {
    pub fn payload(&self) -> String {
        let mut text = format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.version,
            self.device_id,
            self.client_id,
            self.client_mode,
            self.role,
            self.scopes.join(","),
            self.signed_at,
            self.token.unwrap_or(""),
            self.nonce
        );
        if self.version == "v3" {
            text.push_str(&format!("|{}|{}", self.platform.to_lowercase(), self.family.to_lowercase()));
        }
        text
    }
}

/// `{code, message, details?, retryable?, retryAfterMs?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorShape {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ErrorShape {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into(), details: None, retryable: None, retry_after_ms: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// A `details.code` and more fields.
    fn detailed(self, code: &str, mut more: serde_json::Map<String, Value>) -> Self {
        more.insert("code".into(), code.into());
        self.with_details(Value::Object(more))
    }

    /// The client's protocol range does not hold ours.
    pub fn protocol_mismatch(min: u64, max: u64) -> Self {
        let details = serde_json::json!({"clientMinProtocol": min, "clientMaxProtocol": max,
            "expectedProtocol": PROTOCOL_VERSION, "minimumProbeProtocol": MIN_PROBE_PROTOCOL});
        Self::invalid("protocol mismatch").detailed("PROTOCOL_MISMATCH", object(details))
    }

    /// A device proof that does not hold.
    pub fn device_rejected(why: &str) -> Self {
        Self::new(code::NOT_PAIRED, format!("device identity rejected: {why}"))
            .detailed("DEVICE_AUTH_INVALID", object(serde_json::json!({"reason": why})))
    }

    /// No credentials at all.
    pub fn identity_required() -> Self {
        Self::new(code::NOT_PAIRED, "device identity required").detailed("DEVICE_IDENTITY_REQUIRED", Default::default())
    }

    /// A device token asked for more than it was issued for.
    pub fn scope_mismatch(message: String, granted: &[String], requested: &[String]) -> Self {
        let details = serde_json::json!({"authReason": "scope_mismatch", "grantedScopes": granted,
            "requestedScopes": requested, "recommendedNextStep": "update_auth_credentials"});
        Self::invalid(message).detailed("AUTH_SCOPE_MISMATCH", object(details))
    }

    /// No token (`missing`), or a wrong one.
    pub fn unauthorized(missing: bool, hint: &str) -> Self {
        let (what, code, reason) = match missing {
            true => ("missing", "AUTH_TOKEN_MISSING", "token_missing"),
            false => ("mismatch", "AUTH_TOKEN_MISMATCH", "token_mismatch"),
        };
        let details = serde_json::json!({"authReason": reason, "canRetryWithDeviceToken": false,
            "recommendedNextStep": "update_auth_credentials"});
        Self::invalid(format!("unauthorized: gateway token {what} ({hint})")).detailed(code, object(details))
    }

    /// A method the connection's scopes do not reach.
    pub fn missing_scope(scope: &str) -> Self {
        let details = serde_json::json!({"missingScope": scope, "requiredScopes": [scope]});
        Self::new(code::FORBIDDEN, format!("missing scope: {scope}")).detailed("MISSING_SCOPE", object(details))
    }

    /// `details.code`, if any.
    pub fn detail_code(&self) -> &str {
        self.details.as_ref().and_then(|d| d.get("code")).and_then(Value::as_str).unwrap_or_default()
    }
}

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// A frame the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    Req {
        id: String,
        method: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<Value>,
    },
    Res {
        id: String,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorShape>,
    },
    Event {
        event: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        #[serde(default, rename = "stateVersion", skip_serializing_if = "Option::is_none")]
        state_version: Option<Value>,
    },
}

impl Frame {
    pub fn ok(id: &str, payload: Value) -> Self {
        Self::Res { id: id.into(), ok: true, payload: Some(payload), error: None }
    }

    pub fn err(id: &str, error: ErrorShape) -> Self {
        Self::Res { id: id.into(), ok: false, payload: None, error: Some(error) }
    }

    pub fn event(event: &str, payload: Value) -> Self {
        Self::Event { event: event.into(), payload: Some(payload), seq: None, state_version: None }
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A request (what a client sends).
    pub fn request(id: &str, method: &str, params: Value) -> Self {
        Self::Req { id: id.into(), method: method.into(), params: Some(params) }
    }

    /// A frame as text arrives, `None` if it is none of the three shapes.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// An event frame's text: `payload` serialised as it is (not through a `Value`), `seq` last
/// when given (a hub serialises an event once and splices each connection's `seq` in).
pub fn event_text<T: Serialize + ?Sized>(
    event: &str,
    payload: &T,
    state_version: Option<&events::StateVersion>,
    seq: Option<u64>,
) -> String {
    #[derive(Serialize)]
    struct Out<'a, T: ?Sized> {
        #[serde(rename = "type")]
        kind: &'static str,
        event: &'a str,
        payload: &'a T,
        #[serde(rename = "stateVersion", skip_serializing_if = "Option::is_none")]
        state_version: Option<&'a events::StateVersion>,
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
    }
    serde_json::to_string(&Out { kind: "event", event, payload, state_version, seq }).unwrap_or_default()
}

/// A successful response's text.
pub fn ok_text<T: Serialize + ?Sized>(id: &str, payload: &T) -> String {
    #[derive(Serialize)]
    struct Out<'a, T: ?Sized> {
        #[serde(rename = "type")]
        kind: &'static str,
        id: &'a str,
        ok: bool,
        payload: &'a T,
    }
    serde_json::to_string(&Out { kind: "res", id, ok: true, payload }).unwrap_or_default()
}

/// A request as the client sent it, checked: `{type:"req", id, method, params?}` (also
/// `traceparent`, `expectedProfileId`). Anything else is described as the reference does.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: String,
    pub method: String,
    pub params: Value,
}

/// Reads a client frame; `Err` says what is wrong with it (`invalid request frame: …`).
/// A session key as gateways store it: `wire-demo` → `agent:main:wire-demo`; keys already in the
/// `agent:<id>:…` form are kept.
pub fn canonical_key(key: &str) -> String {
    let key = key.trim();
    if key.starts_with("agent:") { key.to_owned() } else { format!("agent:main:{key}") }
}

pub fn parse_request(frame: &Value) -> Result<Request, String> {
    let schema = Schema::object(&[
        ("type", Schema::Const("req"), true),
        ("id", Schema::NonEmptyString, true),
        ("method", Schema::NonEmptyString, true),
        ("params", Schema::Any, false),
        ("traceparent", Schema::String, false),
        ("expectedProfileId", Schema::String, false),
    ]);
    let errors = schema.check(frame);
    if !errors.is_empty() {
        return Err(format!("invalid request frame: {}", errors.join("; ")));
    }
    let text = |k: &str| frame.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    Ok(Request { id: text("id"), method: text("method"), params: frame.get("params").cloned().unwrap_or(Value::Null) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_read_as_the_reference() {
        let schema = connect_schema();
        let check = |v: Value| check_params("connect", &schema, &v).err();
        assert_eq!(
            check(json!({"minProtocol": 4, "maxProtocol": 4})).unwrap(),
            "invalid connect params: must have required property 'client'"
        );
        let client = json!({"id": "cli", "version": "1", "platform": "linux", "mode": "cli"});
        assert_eq!(check(json!({"minProtocol": 4, "maxProtocol": 4, "client": client})), None);
        assert_eq!(
            check(json!({"minProtocol": 4, "maxProtocol": 4, "client": client, "bogus": 1})).unwrap(),
            "invalid connect params: at root: unexpected property 'bogus'"
        );
        let mut bad = client.clone();
        bad["id"] = json!("nope");
        assert_eq!(
            check(json!({"minProtocol": 4, "maxProtocol": 4, "client": bad})).unwrap(),
            "invalid connect params: at /client/id: must be equal to one of the allowed values"
        );
        let list = Schema::object(&[("limit", Schema::int(), false)]);
        assert_eq!(
            check_params("sessions.list", &list, &json!({"limit": "x"})).unwrap_err(),
            "invalid sessions.list params: at /limit: must be integer"
        );
    }

    #[test]
    fn request_frames() {
        assert_eq!(
            parse_request(&json!({"type": "req", "id": "1", "method": "health"})).unwrap(),
            Request { id: "1".into(), method: "health".into(), params: Value::Null }
        );
        assert_eq!(
            parse_request(&json!({"type": "event", "event": "x"})).unwrap_err(),
            "invalid request frame: must have required property 'id'; must have required property 'method'; \
             at root: unexpected property 'event'; at /type: must be equal to constant"
        );
        let frame = Frame::ok("1", json!({"a": 1}));
        assert_eq!(frame.to_text(), r#"{"type":"res","id":"1","ok":true,"payload":{"a":1}}"#);
        let event =
            Frame::Event { event: "tick".into(), payload: Some(json!({"ts": 1})), seq: Some(2), state_version: None };
        assert_eq!(event.to_text(), r#"{"type":"event","event":"tick","payload":{"ts":1},"seq":2}"#);
    }
}
