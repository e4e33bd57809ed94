//! The events' payloads, as the wire has them. A server builds them; a client reads them
//! leniently (the reference sends more fields, more `state`s and more `stream`s than ours).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::methods::lenient;

/// Event names.
pub mod name {
    pub const CHALLENGE: &str = "connect.challenge";
    pub const AGENT: &str = "agent";
    pub const CHAT: &str = "chat";
    pub const SESSIONS_CHANGED: &str = "sessions.changed";
    pub const SESSION_MESSAGE: &str = "session.message";
    pub const HEALTH: &str = "health";
    pub const TICK: &str = "tick";
    pub const PRESENCE: &str = "presence";
    pub const APPROVAL_REQUESTED: &str = "exec.approval.requested";
    pub const APPROVAL_RESOLVED: &str = "exec.approval.resolved";
    pub const SHUTDOWN: &str = "shutdown";
    pub const CRON: &str = "cron";
    pub const HEARTBEAT: &str = "heartbeat";
}

/// Every event this gateway sends (`features.events` in `hello-ok`).
pub const EVENTS: &[&str] = &[
    name::CHALLENGE,
    name::AGENT,
    name::CHAT,
    name::SESSIONS_CHANGED,
    name::SESSION_MESSAGE,
    name::HEALTH,
    name::TICK,
    name::PRESENCE,
    name::APPROVAL_REQUESTED,
    name::APPROVAL_RESOLVED,
    name::SHUTDOWN,
    name::CRON,
    name::HEARTBEAT,
];

/// `connect.challenge`: what a device signs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Challenge {
    pub nonce: String,
    pub ts: i64,
    pub capabilities: Vec<String>,
}

/// `tick`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tick {
    pub ts: i64,
}

/// `stateVersion`: bumped when the presence list, or what `health` reports, changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StateVersion {
    pub presence: u64,
    pub health: u64,
}

/// `shutdown`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Shutdown {
    pub reason: String,
    pub restart_expected_ms: Option<u64>,
}

/// One present client (or the gateway itself), as `presence` and `system-presence` list them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PresenceEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub version: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub platform: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub device_family: Option<String>,
    pub mode: String,
    pub reason: String,
    pub text: String,
    pub ts: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    pub instance_id: String,
}

/// `presence`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Presence {
    pub presence: Vec<PresenceEntry>,
}

/// `sessions.changed`: why (`created`, `run`, `title`, `patch`, `reset`, `deleted`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionsChanged {
    pub session_key: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `session.message`: a message added to a session (the user's as a run begins, a steered one, an
/// injected one, the assistant's as a run ends).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionMessage {
    pub session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub message: ChatMessage,
}

/// A chat message: the user's (its text) or the assistant's (content blocks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatMessage {
    #[serde(deserialize_with = "lenient")]
    pub role: String,
    #[serde(deserialize_with = "lenient")]
    pub content: Content,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub steered: Option<bool>,
}

impl ChatMessage {
    pub fn user(text: impl Into<String>, timestamp: Option<i64>) -> Self {
        Self { role: "user".into(), content: Content::Text(text.into()), timestamp, ..Self::default() }
    }

    pub fn assistant(blocks: Vec<Block>, timestamp: Option<i64>) -> Self {
        Self { role: "assistant".into(), content: Content::Blocks(blocks), timestamp, ..Self::default() }
    }

    /// Its text blocks, joined, and its thinking blocks, joined.
    pub fn text_and_thinking(&self) -> (String, String) {
        match &self.content {
            Content::Text(text) => (text.clone(), String::new()),
            Content::Blocks(blocks) => {
                let (mut text, mut thinking) = (Vec::new(), Vec::new());
                for block in blocks {
                    match block {
                        Block::Text { text: t } => text.push(t.as_str()),
                        Block::Thinking { thinking: t } => thinking.push(t.as_str()),
                        _ => {}
                    }
                }
                (text.join("\n"), thinking.join("\n"))
            }
        }
    }
}

/// A message's content: plain text, or blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

impl Default for Content {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

/// A content block.
#[allow(clippy::large_enum_variant)] // as on the wire
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Block {
    Text {
        #[serde(default, deserialize_with = "lenient")]
        text: String,
    },
    Thinking {
        #[serde(default, deserialize_with = "lenient")]
        thinking: String,
    },
    /// A tool call, with its title, status and result (`chat.history`).
    #[serde(rename_all = "camelCase")]
    ToolCall {
        #[serde(default, deserialize_with = "lenient")]
        id: String,
        #[serde(default, deserialize_with = "lenient")]
        name: String,
        #[serde(default)]
        arguments: Value,
        #[serde(default, deserialize_with = "lenient")]
        title: String,
        #[serde(default, deserialize_with = "lenient")]
        kind: String,
        #[serde(default, deserialize_with = "lenient")]
        status: String,
        #[serde(default)]
        result: Value,
    },
    /// A block of a kind this side does not read.
    #[serde(other)]
    Other,
}

/// A `chat` event's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatState {
    #[default]
    Delta,
    Final,
    Aborted,
    Error,
    /// One this side does not read (the reference's `status`).
    #[serde(other)]
    Other,
}

/// `chat`: a run's reply so far (`delta`, the message cumulative), or its end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChatEvent {
    #[serde(deserialize_with = "lenient")]
    pub run_id: String,
    #[serde(deserialize_with = "lenient")]
    pub session_key: String,
    #[serde(deserialize_with = "lenient")]
    pub agent_id: String,
    #[serde(deserialize_with = "lenient")]
    pub seq: u64,
    #[serde(deserialize_with = "lenient")]
    pub state: ChatState,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub delta_text: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub message: Option<ChatMessage>,
}

/// `agent`: one of a run's streams (`lifecycle`, `assistant`, `thinking`, `tool`, `usage`,
/// `notice`) with its data. `D` is [`AgentData`] as a server sends it; a client reads `Value`
/// and the stream's type from it ([`AgentEvent::data_as`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentEvent<D = Value> {
    #[serde(deserialize_with = "lenient")]
    pub run_id: String,
    #[serde(deserialize_with = "lenient")]
    pub stream: String,
    pub data: D,
    #[serde(deserialize_with = "lenient")]
    pub session_key: String,
    #[serde(deserialize_with = "lenient")]
    pub agent_id: String,
    #[serde(deserialize_with = "lenient")]
    pub seq: u64,
    #[serde(deserialize_with = "lenient")]
    pub ts: i64,
    #[serde(deserialize_with = "lenient")]
    pub is_heartbeat: bool,
}

impl AgentEvent<Value> {
    /// Its data as `T` (every field defaulting).
    pub fn data_as<T: serde::de::DeserializeOwned + Default>(&self) -> T {
        serde_json::from_value(self.data.clone()).unwrap_or_default()
    }
}

/// An `agent` event's data, by stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AgentData {
    Lifecycle(Lifecycle),
    /// `assistant` and `thinking`.
    Text(TextData),
    Tool(Box<ToolData>),
    Usage(UsageData),
    Notice {
        text: String,
        /// Set when the notice tells of a failover: `{from, to, reason}`.
        #[serde(skip_serializing_if = "Option::is_none")]
        failover: Option<Value>,
    },
}

/// `lifecycle`: a run's start and end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Lifecycle {
    #[serde(deserialize_with = "lenient")]
    pub phase: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(deserialize_with = "lenient")]
    pub started_at: i64,
    /// `cancelled` for an aborted run.
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// `assistant` and `thinking`: the text so far, the new part, and the message it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TextData {
    #[serde(deserialize_with = "lenient")]
    pub text: String,
    #[serde(deserialize_with = "lenient")]
    pub delta: String,
    #[serde(deserialize_with = "lenient")]
    pub item_id: String,
}

/// `tool`: a tool call's `start`, `update` or `result`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolData {
    #[serde(deserialize_with = "lenient")]
    pub phase: String,
    #[serde(deserialize_with = "lenient")]
    pub tool_call_id: String,
    #[serde(deserialize_with = "lenient")]
    pub name: String,
    #[serde(deserialize_with = "lenient")]
    pub title: String,
    #[serde(deserialize_with = "lenient")]
    pub kind: String,
    #[serde(deserialize_with = "lenient")]
    pub status: String,
    pub args: Value,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<DiffData>,
    /// Its output (`result`): text on ours, anything on the reference's.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub result: Value,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DiffData {
    #[serde(deserialize_with = "lenient")]
    pub path: String,
    #[serde(deserialize_with = "lenient")]
    pub old_text: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub new_text: String,
}

/// `usage`: tokens a run used, or how full the context is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UsageData {
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// `exec.approval.requested` (and `exec.approval.get`'s answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalRequested {
    pub approval_kind: String,
    #[serde(deserialize_with = "lenient")]
    pub id: String,
    #[serde(deserialize_with = "lenient")]
    pub request: ApprovalRequest,
    #[serde(deserialize_with = "lenient")]
    pub created_at_ms: i64,
    #[serde(deserialize_with = "lenient")]
    pub expires_at_ms: i64,
}

/// What a tool call asks to do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalRequest {
    #[serde(deserialize_with = "lenient")]
    pub command: String,
    #[serde(deserialize_with = "lenient")]
    pub title: String,
    #[serde(deserialize_with = "lenient")]
    pub kind: String,
    #[serde(deserialize_with = "lenient")]
    pub tool_name: String,
    pub raw_input: Value,
    #[serde(deserialize_with = "lenient")]
    pub content: Vec<ShownContent>,
    #[serde(deserialize_with = "lenient")]
    pub host: String,
    #[serde(deserialize_with = "lenient")]
    pub agent_id: String,
    #[serde(deserialize_with = "lenient")]
    pub session_key: String,
    #[serde(deserialize_with = "lenient")]
    pub run_id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub tool_call_id: String,
    #[serde(deserialize_with = "lenient")]
    pub options: Vec<ApprovalOption>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Vec::is_empty")]
    pub unavailable_decisions: Vec<String>,
}

/// What a question shows of the call: its text, or a diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ShownContent {
    Text {
        #[serde(default)]
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Diff {
        #[serde(default)]
        path: String,
        #[serde(default)]
        old_text: Option<String>,
        #[serde(default)]
        new_text: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalOption {
    pub id: String,
    pub label: String,
    /// `allow-once`, `allow-always`, `deny`, `deny-always`.
    pub kind: String,
}

/// `exec.approval.resolved`: answered (`decision`, the option, by whom) or given up (`reason`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalResolved {
    #[serde(deserialize_with = "lenient")]
    pub id: String,
    #[serde(deserialize_with = "lenient")]
    pub decision: String,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
    #[serde(deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub ts: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::methods::{HelloOk, SessionPage};

    /// Frames as the reference gateway (OpenClaw 2026.9.6) sends them, read by this side's types:
    /// states and streams it does not know, more fields, other types, nothing lost that it reads.
    #[test]
    fn the_reference_gateways_frames_read_leniently() {
        let status: ChatEvent = serde_json::from_str(
            r#"{"runId":"r1","sessionKey":"agent:main:wire-demo","agentId":"main","seq":1,"state":"status","phase":"preparing_workspace"}"#,
        )
        .unwrap();
        assert_eq!((status.state, status.run_id.as_str(), status.seq), (ChatState::Other, "r1", 1));
        let delta: ChatEvent = serde_json::from_str(
            r#"{"runId":"r1","sessionKey":"k","agentId":"main","seq":6,"state":"delta","deltaText":"Hello","message":{"role":"assistant","content":[{"type":"text","text":"Hello"},{"type":"image","url":"x"}],"timestamp":1795401040559}}"#,
        )
        .unwrap();
        let message = delta.message.unwrap();
        assert_eq!(message.text_and_thinking(), ("Hello".to_owned(), String::new()));
        assert!(matches!(&message.content, Content::Blocks(b) if b[1] == Block::Other));
        let lifecycle: AgentEvent = serde_json::from_str(
            r#"{"runId":"r1","stream":"lifecycle","data":{"phase":"model","provider":null,"model":null},"sessionKey":"k","seq":29,"ts":1}"#,
        )
        .unwrap();
        assert_eq!(lifecycle.data_as::<Lifecycle>().phase, "model");
        // A field of another type reads as its default, and the rest still reads.
        let odd: AgentEvent = serde_json::from_str(
            r#"{"runId":"r2","stream":"usage","data":{"outputTokens":"24","contextTokens":7},"seq":"x"}"#,
        )
        .unwrap();
        assert_eq!((odd.run_id.as_str(), odd.seq), ("r2", 0));
        let usage: UsageData = odd.data_as();
        assert_eq!((usage.output_tokens, usage.context_tokens), (None, Some(7)));
        let page: SessionPage = serde_json::from_str(
            r#"{"ts":1795401032815,"path":"(multiple)","count":0,"totalCount":0,"limitApplied":20,"nextOffset":null,"hasMore":false,"owners":[],"sessions":[{"key":"agent:main:a","origin":{"kind":"cli"},"updatedAt":1.5e12}]}"#,
        )
        .unwrap();
        assert_eq!(page.next_offset, None);
        assert_eq!(page.sessions[0].origin["kind"], "cli");
        assert_eq!(page.sessions[0].updated_at, None, "a float time is not a millisecond count; left out");
        let hello: HelloOk = serde_json::from_str(
            r#"{"type":"hello-ok","protocol":4,"features":{"methods":"<466 method names>"},"auth":{"deviceToken":"dt","scopes":["operator.admin"]},"policy":{"tickIntervalMs":30000}}"#,
        )
        .unwrap();
        assert_eq!(hello.auth.device_token.as_deref(), Some("dt"));
        assert_eq!((hello.policy.tick_interval_ms, hello.features.methods.len()), (30_000, 0));
    }

    #[test]
    fn our_events_are_written_as_the_reference_writes_them() {
        let event = ChatEvent {
            run_id: "r".into(),
            session_key: "k".into(),
            agent_id: "main".into(),
            seq: 2,
            state: ChatState::Final,
            stop_reason: Some("stop".into()),
            message: Some(ChatMessage::assistant(vec![Block::Text { text: "hi".into() }], Some(5))),
            ..ChatEvent::default()
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"runId":"r","sessionKey":"k","agentId":"main","seq":2,"state":"final","stopReason":"stop","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"timestamp":5}}"#
        );
        let tool = AgentEvent {
            run_id: "r".into(),
            stream: "usage".into(),
            data: AgentData::Usage(UsageData { output_tokens: Some(3), ..UsageData::default() }),
            session_key: "k".into(),
            agent_id: "main".into(),
            seq: 1,
            ts: 9,
            is_heartbeat: false,
        };
        let text = serde_json::to_string(&tool).unwrap();
        assert!(text.contains(r#""stream":"usage","data":{"outputTokens":3}"#), "{text}");
    }
}
