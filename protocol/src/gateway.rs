//! The gateway protocol (OpenClaw's, version 4) as it is on the wire: three frame shapes over a
//! WebSocket's text messages — `req`, `res`, `event` — the error shape, the `connect` handshake's
//! params, and a validator of params against closed-object schemas whose messages read as the
//! reference gateway's (Ajv's, with the path: `at /client/id: must be equal to one of the allowed
//! values`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// A closed-object JSON schema, as small as the gateway's params need.
#[derive(Debug, Clone)]
pub enum Schema {
    Any,
    String,
    NonEmptyString,
    Integer {
        min: Option<i64>,
        max: Option<i64>,
    },
    Number,
    Bool,
    Const(&'static str),
    Enum(&'static [&'static str]),
    Array(Box<Schema>),
    /// Properties (name, schema, required); no others allowed unless `open`.
    Object {
        props: Vec<(&'static str, Schema, bool)>,
        open: bool,
    },
}

impl Schema {
    pub fn object(props: &[(&'static str, Schema, bool)]) -> Self {
        Self::Object { props: props.to_vec(), open: false }
    }

    pub fn open_object(props: &[(&'static str, Schema, bool)]) -> Self {
        Self::Object { props: props.to_vec(), open: true }
    }

    pub fn int() -> Self {
        Self::Integer { min: None, max: None }
    }

    pub fn strings() -> Self {
        Self::Array(Box::new(Self::String))
    }

    /// Every error, as `at /path: message` (`at root: …` for the object itself, except a missing
    /// property, which the reference words without a path at the root).
    pub fn check(&self, value: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        self.walk(value, "", &mut errors);
        errors
    }

    fn walk(&self, value: &Value, path: &str, errors: &mut Vec<String>) {
        let at = |message: &str| {
            if path.is_empty() { format!("at root: {message}") } else { format!("at {path}: {message}") }
        };
        match self {
            Self::Any => {}
            Self::String => {
                if !value.is_string() {
                    errors.push(at("must be string"));
                }
            }
            Self::NonEmptyString => match value.as_str() {
                Some("") => errors.push(at("must NOT have fewer than 1 characters")),
                Some(_) => {}
                None => errors.push(at("must be string")),
            },
            Self::Integer { min, max } => match value.as_i64() {
                None => errors.push(at("must be integer")),
                Some(n) if min.is_some_and(|m| n < m) => errors.push(at(&format!("must be >= {}", min.unwrap_or(0)))),
                Some(n) if max.is_some_and(|m| n > m) => errors.push(at(&format!("must be <= {}", max.unwrap_or(0)))),
                Some(_) => {}
            },
            Self::Number => {
                if !value.is_number() {
                    errors.push(at("must be number"));
                }
            }
            Self::Bool => {
                if !value.is_boolean() {
                    errors.push(at("must be boolean"));
                }
            }
            Self::Const(c) => {
                if value.as_str() != Some(c) {
                    errors.push(at("must be equal to constant"));
                }
            }
            Self::Enum(allowed) => {
                if !value.as_str().is_some_and(|v| allowed.contains(&v)) {
                    errors.push(at("must be equal to one of the allowed values"));
                }
            }
            Self::Array(item) => match value.as_array() {
                None => errors.push(at("must be array")),
                Some(items) => {
                    for (i, v) in items.iter().enumerate() {
                        item.walk(v, &format!("{path}/{i}"), errors);
                    }
                }
            },
            Self::Object { props, open } => {
                let Some(obj) = value.as_object() else {
                    errors.push(at("must be object"));
                    return;
                };
                for (name, _, required) in props {
                    if *required && !obj.contains_key(*name) {
                        let message = format!("must have required property '{name}'");
                        errors.push(if path.is_empty() { message } else { at(&message) });
                    }
                }
                if !open {
                    for key in obj.keys() {
                        if !props.iter().any(|(name, _, _)| name == key) {
                            errors.push(at(&format!("unexpected property '{key}'")));
                        }
                    }
                }
                for (name, schema, _) in props {
                    if let Some(v) = obj.get(*name) {
                        schema.walk(v, &format!("{path}/{name}"), errors);
                    }
                }
            }
        }
    }
}

/// Checks `params` of `method` against `schema`: `Ok(object)` or the reference's message
/// (`invalid chat.send params: must have required property 'idempotencyKey'`).
pub fn check_params(method: &str, schema: &Schema, params: &Value) -> Result<Map<String, Value>, String> {
    let params = if params.is_null() { Value::Object(Map::new()) } else { params.clone() };
    let errors = schema.check(&params);
    if !errors.is_empty() {
        return Err(format!("invalid {method} params: {}", errors.join("; ")));
    }
    Ok(params.as_object().cloned().unwrap_or_default())
}

/// The client ids the reference accepts.
pub const CLIENT_IDS: &[&str] = &[
    "webchat-ui",
    "openclaw-control-ui",
    "openclaw-browser-copilot",
    "openclaw-tui",
    "webchat",
    "cli",
    "gateway-client",
    "openclaw-macos",
    "openclaw-linux",
    "openclaw-ios",
    "openclaw-watchos",
    "openclaw-android",
    "node-host",
    "openclaw-worker",
    "test",
    "fingerprint",
    "openclaw-probe",
];

/// The client modes the reference accepts.
pub const CLIENT_MODES: &[&str] = &["webchat", "cli", "ui", "backend", "node", "worker", "probe", "test"];

/// The schema of `connect` params.
pub fn connect_schema() -> Schema {
    let client = Schema::object(&[
        ("id", Schema::Enum(CLIENT_IDS), true),
        ("displayName", Schema::String, false),
        ("version", Schema::String, true),
        ("buildId", Schema::String, false),
        ("platform", Schema::String, true),
        ("deviceFamily", Schema::String, false),
        ("modelIdentifier", Schema::String, false),
        ("timeZone", Schema::String, false),
        ("mode", Schema::Enum(CLIENT_MODES), true),
        ("instanceId", Schema::String, false),
    ]);
    let device = Schema::object(&[
        ("id", Schema::NonEmptyString, true),
        ("publicKey", Schema::NonEmptyString, true),
        ("signature", Schema::NonEmptyString, true),
        ("signedAt", Schema::int(), true),
        ("nonce", Schema::NonEmptyString, true),
    ]);
    let auth = Schema::object(&[
        ("token", Schema::String, false),
        ("bootstrapToken", Schema::String, false),
        ("deviceToken", Schema::String, false),
        ("password", Schema::String, false),
        ("approvalRuntimeToken", Schema::String, false),
        ("agentRuntimeIdentityToken", Schema::String, false),
    ]);
    Schema::object(&[
        ("minProtocol", Schema::Integer { min: Some(1), max: None }, true),
        ("maxProtocol", Schema::Integer { min: Some(1), max: None }, true),
        ("client", client, true),
        ("caps", Schema::strings(), false),
        ("commands", Schema::strings(), false),
        ("computerUse", Schema::Any, false),
        ("workerRuns", Schema::Any, false),
        ("permissions", Schema::Any, false),
        ("pathEnv", Schema::String, false),
        ("role", Schema::String, false),
        ("scopes", Schema::strings(), false),
        ("modelCatalog", Schema::Any, false),
        ("device", device, false),
        ("auth", auth, false),
        ("locale", Schema::String, false),
        ("userAgent", Schema::String, false),
    ])
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
