//! `connect`: its params (who the client is, its credentials, its device's signature) and
//! `hello-ok`, what the gateway answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::methods::{HealthInfo, lenient};

/// `connect`'s params (the schema is [`super::connect_schema`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConnectParams {
    pub min_protocol: u64,
    pub max_protocol: u64,
    pub client: ClientInfo,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `None`: the default (read and write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectAuth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSignature>,
}

/// Who a client says it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClientInfo {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub version: String,
    pub platform: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_family: Option<String>,
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConnectAuth {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl ConnectAuth {
    fn given(field: &Option<String>) -> Option<&str> {
        field.as_deref().filter(|t| !t.is_empty())
    }

    pub fn token(&self) -> Option<&str> {
        Self::given(&self.token)
    }

    pub fn device_token(&self) -> Option<&str> {
        Self::given(&self.device_token)
    }

    pub fn password(&self) -> Option<&str> {
        Self::given(&self.password)
    }
}

/// A device's signature over its [`super::DeviceProof`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeviceSignature {
    pub id: String,
    /// Base64 of the ed25519 public key.
    pub public_key: String,
    pub signature: String,
    pub signed_at: i64,
    pub nonce: String,
}

/// `connect`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HelloOk {
    /// `hello-ok`.
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u64,
    #[serde(deserialize_with = "lenient")]
    pub server: ServerInfo,
    #[serde(deserialize_with = "lenient")]
    pub features: Features,
    pub snapshot: Value,
    #[serde(deserialize_with = "lenient")]
    pub auth: HelloAuth,
    #[serde(deserialize_with = "lenient")]
    pub policy: Policy,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServerInfo {
    pub version: String,
    pub build_id: String,
    pub boot_id: String,
    pub control_ui_build_source: String,
    pub conn_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Features {
    #[serde(deserialize_with = "lenient")]
    pub methods: Vec<String>,
    #[serde(deserialize_with = "lenient")]
    pub events: Vec<String>,
    pub capabilities: Vec<String>,
}

/// `hello-ok.auth`: how it was let in; a signed device on a gateway with a token also gets its
/// device token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HelloAuth {
    #[serde(deserialize_with = "lenient")]
    pub method: String,
    #[serde(deserialize_with = "lenient")]
    pub role: String,
    #[serde(deserialize_with = "lenient")]
    pub scopes: Vec<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub device_token_scopes: Option<Vec<String>>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub issued_at_ms: Option<i64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub recovery_migration_allowed: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Policy {
    #[serde(deserialize_with = "lenient")]
    pub max_payload: u64,
    #[serde(deserialize_with = "lenient")]
    pub max_buffered_bytes: u64,
    #[serde(deserialize_with = "lenient")]
    pub tick_interval_ms: u64,
}

/// `hello-ok.snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Snapshot {
    pub presence: Vec<super::events::PresenceEntry>,
    pub health: HealthInfo,
    pub state_version: super::events::StateVersion,
    pub uptime_ms: u64,
    pub session_defaults: SnapshotDefaults,
    pub suspension: Suspension,
    pub auth_mode: String,
    pub config_path: String,
    pub state_dir: String,
}

/// `hello-ok.snapshot.sessionDefaults`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SnapshotDefaults {
    pub default_agent_id: String,
    pub model_configured: bool,
    pub ownership: String,
    pub selection_required: bool,
    pub main_key: String,
    pub main_session_key: String,
    pub scope: String,
}

/// `hello-ok.snapshot.suspension`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Suspension {
    pub phase: String,
}
