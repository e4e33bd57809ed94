//! Each method's params and result, as the wire has them, and the schema its params are checked
//! against (the reference's messages). A [`Method`] ties the three to its name: the gateway
//! dispatches by it, and a client calls through it (`GatewayClient::call::<ChatSend>`).
//!
//! Params are what a client sends: the server reads them once the schema has passed them. Results
//! are what a server answers; a client reads them leniently (every field defaults, and a field of
//! an unexpected type reads as its default), since the reference's answers carry more, and other,
//! fields than ours.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::Schema;
pub use super::agents::*;
pub use super::config_view::*;
pub use super::connect::*;
pub use super::cron::*;
use super::events::ChatMessage;
pub use super::method::{Method, NoParams, lenient};
use super::method::{any, at_least, key, method, none};

/// A field that was given, `null` included (`Some(Value::Null)`: "clear it").
fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

method!(Health = "health", NoParams => HealthInfo, any());
method!(Status = "status", NoParams => StatusInfo, any());
method!(ModelsList = "models.list", NoParams => Models, any());
method!(SystemPresence = "system-presence", NoParams => Vec<super::events::PresenceEntry>, any());
method!(ConfigGet = "config.get", NoParams => ConfigView, any());
method!(SessionsList = "sessions.list", SessionsListParams => SessionPage, Schema::object(&[
    ("limit", at_least(1), false),
    ("offset", at_least(0), false),
    ("search", Schema::String, false),
    ("includeDerivedTitles", Schema::Bool, false),
    ("includeGlobal", Schema::Bool, false),
    ("includeUnknown", Schema::Bool, false),
    ("agentId", Schema::String, false),
]));
method!(SessionsResolve = "sessions.resolve", SessionsResolveParams => Resolved, Schema::object(&[
    ("key", Schema::String, false),
    ("sessionKey", Schema::String, false),
    ("label", Schema::String, false),
    ("agentId", Schema::String, false),
]));
method!(SessionsSubscribe = "sessions.subscribe", NoParams => Subscribed, any());
method!(SessionsUnsubscribe = "sessions.unsubscribe", NoParams => Subscribed, any());
method!(SessionsReset = "sessions.reset", SessionKeyParams => SessionDone, session_key());
method!(SessionsDelete = "sessions.delete", SessionKeyParams => SessionDone, session_key());
method!(
    /// Changes a session's settings from its next run on.
    SessionsPatch = "sessions.patch", SessionsPatchParams => SessionDone, Schema::object(&[
    ("key", key(), true),
    ("label", Schema::String, false),
    ("model", Schema::String, false),
    ("thinking", Schema::String, false),
    ("mode", Schema::Enum(&["ask", "code", "auto"]), false),
    ("sendPolicy", Schema::Any, false),
    ("verboseLevel", Schema::Any, false),
    ("reasoningLevel", Schema::Any, false),
]));
// The reference takes some 25 optional fields for chat.send and agent; those not needed here are
// accepted and left alone, so its clients work unchanged.
method!(
    /// Starts a run; answered at once (`started`), its reply streams as `chat` and `agent` events.
    ChatSend = "chat.send", ChatSendParams => RunAck, Schema::open_object(&[
    ("sessionKey", key(), true),
    ("message", Schema::String, true),
    ("idempotencyKey", key(), true),
    ("thinking", Schema::String, false),
    ("timeoutMs", at_least(0), false),
    ("attachments", Schema::Any, false),
]));
method!(ChatAbort = "chat.abort", ChatAbortParams => Aborted, Schema::object(&[
    ("sessionKey", key(), true),
    ("runId", Schema::String, false),
]));
method!(ChatHistory = "chat.history", ChatHistoryParams => History, Schema::object(&[
    ("sessionKey", key(), true),
    ("limit", at_least(1), false),
]));
method!(ChatInject = "chat.inject", ChatInjectParams => Injected, Schema::object(&[
    ("sessionKey", key(), true),
    ("message", key(), true),
    ("label", Schema::String, false),
]));
method!(
    /// A run answered twice on one id: [`RunAck`] (`accepted`), then [`AgentDone`].
    Agent = "agent", AgentParams => RunAck, Schema::open_object(&[
    ("message", Schema::String, true),
    ("idempotencyKey", key(), true),
    ("sessionKey", Schema::String, false),
    ("agentId", Schema::String, false),
    ("thinking", Schema::String, false),
    ("timeout", at_least(0), false),
    ("attachments", Schema::Any, false),
]));
method!(AgentWait = "agent.wait", AgentWaitParams => RunResult, Schema::object(&[
    ("runId", key(), true),
    ("timeoutMs", at_least(0), false),
]));
method!(
    /// Delivers a message to a chat; a retry with the same key sends nothing again.
    Send = "send", SendParams => Sent, Schema::open_object(&[
    ("to", key(), true),
    ("message", Schema::String, false),
    ("mediaUrl", Schema::String, false),
    ("mediaUrls", Schema::strings(), false),
    ("idempotencyKey", key(), true),
    ("channel", Schema::String, false),
    ("accountId", Schema::String, false),
    ("sessionKey", Schema::String, false),
    ("threadId", Schema::String, false),
]));
method!(ChannelsStatus = "channels.status", NoParams => ChannelsInfo, none());
method!(PairingList = "pairing.list", NoParams => PendingPairs, none());
method!(PairingApprove = "pairing.approve", PairingParams => Paired, pairing());
method!(PairingReject = "pairing.reject", PairingParams => Paired, pairing());
method!(ApprovalGet = "exec.approval.get", ApprovalGetParams => super::events::ApprovalRequested,
    Schema::object(&[("id", key(), true)]));
method!(ApprovalResolve = "exec.approval.resolve", ApprovalResolveParams => ApprovalDone, Schema::object(&[
    ("id", key(), true),
    ("decision", key(), true),
    ("reviewer", Schema::Any, false),
    ("grantExpiresInDays", Schema::Integer { min: Some(1), max: Some(3650) }, false),
]));

fn session_key() -> Schema {
    Schema::object(&[("key", key(), false), ("sessionKey", key(), false), ("reason", Schema::String, false)])
}

fn pairing() -> Schema {
    Schema::object(&[("channel", key(), true), ("code", key(), true)])
}

// ---- params ----

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionsListParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_derived_titles: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionsResolveParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl SessionsResolveParams {
    /// `key`, else `sessionKey` (the reference takes either).
    pub fn key(&self) -> &str {
        self.key.as_deref().or(self.session_key.as_deref()).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionKeyParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl SessionKeyParams {
    pub fn of(key: &str) -> Self {
        Self { key: Some(key.into()), ..Self::default() }
    }

    /// `key`, else `sessionKey`.
    pub fn key(&self) -> &str {
        self.key.as_deref().or(self.session_key.as_deref()).unwrap_or_default()
    }
}

/// Fields left out are left alone; `sendPolicy`, `verboseLevel` and `reasoningLevel` may be
/// `null` (back to the default), so they are kept as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionsPatchParams {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    pub send_policy: Option<Value>,
    #[serde(deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    pub verbose_level: Option<Value>,
    #[serde(deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    pub reasoning_level: Option<Value>,
}

/// An image sent with a run's message (`attachments`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Attachment {
    #[serde(rename = "type")]
    pub kind: String,
    pub mime_type: String,
    /// Base64.
    pub content: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatSendParams {
    pub session_key: String,
    pub message: String,
    pub idempotency_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Checked by the server for its own messages ([`Attachment`]s when right).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentParams {
    pub message: String,
    pub idempotency_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatAbortParams {
    pub session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatHistoryParams {
    pub session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatInjectParams {
    pub session_key: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentWaitParams {
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SendParams {
    pub to: String,
    pub message: String,
    pub idempotency_key: String,
    /// A file to send (`message` its caption): a path in the agent's workspace or an http(s)
    /// URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_url: Option<String>,
    /// More files, each sent as `media_url` is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub media_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PairingParams {
    pub channel: String,
    pub code: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalGetParams {
    pub id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalResolveParams {
    pub id: String,
    pub decision: String,
}

// ---- results ----

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionCounts {
    #[serde(deserialize_with = "lenient")]
    pub count: u64,
    pub recent: Vec<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentHealth {
    pub agent_id: String,
    pub is_default: bool,
    pub sessions: SessionCounts,
}

/// `health` (and the `health` event).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HealthInfo {
    pub ok: bool,
    #[serde(deserialize_with = "lenient")]
    pub ts: i64,
    #[serde(deserialize_with = "lenient")]
    pub duration_ms: u64,
    pub channels: BTreeMap<String, Value>,
    pub channel_order: Vec<String>,
    pub channel_labels: BTreeMap<String, Value>,
    #[serde(deserialize_with = "lenient")]
    pub heartbeat_seconds: u64,
    pub default_agent_id: String,
    #[serde(deserialize_with = "lenient")]
    pub agents: Vec<AgentHealth>,
    #[serde(deserialize_with = "lenient")]
    pub sessions: SessionCounts,
    #[serde(deserialize_with = "lenient")]
    pub connections: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StatusInfo {
    pub runtime_version: String,
    #[serde(deserialize_with = "lenient")]
    pub uptime_ms: u64,
    #[serde(deserialize_with = "lenient")]
    pub sessions: StatusSessions,
    #[serde(deserialize_with = "lenient")]
    pub runs: RunCounts,
    #[serde(deserialize_with = "lenient")]
    pub connections: u64,
    pub channel_summary: Vec<Value>,
    #[serde(deserialize_with = "lenient")]
    pub process_memory: ProcessMemory,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StatusSessions {
    #[serde(deserialize_with = "lenient")]
    pub count: u64,
    #[serde(deserialize_with = "lenient")]
    pub defaults: SessionDefaults,
    pub recent: Vec<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunCounts {
    pub running: u64,
    pub waiting: u64,
    pub max_concurrent: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProcessMemory {
    pub rss_bytes: u64,
}

/// What a new session starts with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionDefaults {
    #[serde(deserialize_with = "lenient")]
    pub model: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Models {
    #[serde(deserialize_with = "lenient")]
    pub models: Vec<ModelEntry>,
    /// What a new session starts with (the reference's clients ignore it).
    #[serde(deserialize_with = "lenient")]
    pub defaults: SessionDefaults,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ModelEntry {
    #[serde(deserialize_with = "lenient")]
    pub id: String,
    #[serde(deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub provider: String,
    #[serde(deserialize_with = "lenient")]
    pub model: String,
    #[serde(deserialize_with = "lenient")]
    pub context_window: Option<u64>,
}

/// `config.get`: the configuration, every secret replaced (the reference's is larger and
/// shaped otherwise, so a client reads it as it comes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConfigView {
    pub path: String,
    pub config: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionPage {
    #[serde(deserialize_with = "lenient")]
    pub ts: i64,
    #[serde(deserialize_with = "lenient")]
    pub count: u64,
    #[serde(deserialize_with = "lenient")]
    pub total_count: u64,
    #[serde(deserialize_with = "lenient")]
    pub limit_applied: u64,
    #[serde(deserialize_with = "lenient")]
    pub next_offset: Option<u64>,
    pub has_more: bool,
    #[serde(deserialize_with = "lenient")]
    pub sessions: Vec<SessionRow>,
}

/// A `sessions.list` row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionRow {
    #[serde(deserialize_with = "lenient")]
    pub key: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub label: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub display_name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub derived_title: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub updated_at: Option<i64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    /// Which surface made it (ours: a string; the reference: an object).
    #[serde(skip_serializing_if = "Value::is_null")]
    pub origin: Value,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub kind: Value,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub verbose_level: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub reasoning_level: Option<String>,
    /// Whether the gateway has it open now.
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub open: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Resolved {
    pub ok: bool,
    #[serde(deserialize_with = "lenient")]
    pub key: String,
    #[serde(deserialize_with = "lenient")]
    pub session_id: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Subscribed {
    pub ok: bool,
    pub subscribed: bool,
}

/// `sessions.reset|delete|patch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionDone {
    pub ok: bool,
    #[serde(deserialize_with = "lenient")]
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

/// The first answer to `chat.send` (`started`, or `in_flight`/`ok` for a run seen already) and
/// to `agent` (`accepted`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunAck {
    #[serde(deserialize_with = "lenient")]
    pub run_id: String,
    #[serde(deserialize_with = "lenient")]
    pub status: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<i64>,
}

/// `agent`'s second answer: how the run ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentDone {
    pub run_id: String,
    pub status: String,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<AgentOutput>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentOutput {
    pub payloads: Vec<AgentPayload>,
    pub meta: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentPayload {
    pub text: String,
    pub media_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Aborted {
    pub ok: bool,
    pub aborted: bool,
    #[serde(deserialize_with = "lenient")]
    pub run_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct History {
    #[serde(deserialize_with = "lenient")]
    pub session_key: String,
    #[serde(deserialize_with = "lenient")]
    pub session_id: String,
    #[serde(deserialize_with = "lenient")]
    pub messages: Vec<Value>,
    pub has_more: bool,
    #[serde(deserialize_with = "lenient")]
    pub total_messages: u64,
}

impl History {
    /// Its messages that read as chat messages.
    pub fn chat_messages(&self) -> impl Iterator<Item = ChatMessage> + '_ {
        self.messages.iter().filter_map(|m| serde_json::from_value(m.clone()).ok())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Injected {
    pub ok: bool,
    pub message_id: String,
    pub run_id: String,
}

/// How a run ended (`agent.wait`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunResult {
    #[serde(deserialize_with = "lenient")]
    pub run_id: String,
    /// `ok`, `aborted`, `error` or `timeout`.
    #[serde(deserialize_with = "lenient")]
    pub status: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub terminal_reply: Option<TerminalReply>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminalReply {
    pub disposition: String,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Sent {
    pub ok: bool,
    pub channel: String,
    pub to: String,
    pub run_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[serde(rename_all = "camelCase")]
pub struct ChannelsInfo {
    pub ts: i64,
    pub channel_order: Vec<String>,
    pub channel_labels: BTreeMap<String, String>,
    /// Per channel: `{configured, accounts, running}`.
    pub channels: BTreeMap<String, Value>,
    /// Per channel, each account's state as the channel reports it (`accountId`, `state`, …).
    pub channel_accounts: BTreeMap<String, Vec<Value>>,
    pub channel_default_account_id: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PendingPairs {
    pub pending: Vec<PendingPair>,
}

/// A sender waiting for an owner to approve its pairing code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PendingPair {
    pub channel: String,
    pub peer: String,
    pub name: String,
    pub code: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Paired {
    pub ok: bool,
    pub channel: String,
    pub peer: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalDone {
    pub ok: bool,
    pub id: String,
    pub decision: String,
}
