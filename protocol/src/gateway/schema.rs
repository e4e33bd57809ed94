//! A validator of params against closed-object schemas whose messages read as the reference
//! gateway's (Ajv's, with the path: `at /client/id: must be equal to one of the allowed values`),
//! and the `connect` params' schema.

use serde_json::{Map, Value};

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
