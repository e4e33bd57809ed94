//! Cron jobs and the heartbeat as the wire has them (OpenClaw's `cron.*`, `wake`,
//! `set-heartbeats`, `last-heartbeat`, and the `cron` and `heartbeat` events): a job, its
//! schedule, payload, delivery and state, a run-log entry, and the methods' params and results.
//! Times are Unix milliseconds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Schema;
use super::method::{Method, NoParams, any, at_least, key, method, none};

/// When a job runs: once at a time, every interval from an anchor, or by a cron expression
/// (5 fields, or 6 with seconds first) in a time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Schedule {
    At {
        at: String,
    },
    #[serde(rename_all = "camelCase")]
    Every {
        every_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    Cron {
        expr: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stagger_ms: Option<u64>,
    },
}

impl Default for Schedule {
    fn default() -> Self {
        Self::Every { every_ms: 0, anchor_ms: None }
    }
}

/// What a run does: a message for the agent (an isolated session), or a system event for the
/// main session (read at its next heartbeat, or at once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Payload {
    SystemEvent {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    AgentTurn {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_seconds: Option<u64>,
    },
}

impl Default for Payload {
    fn default() -> Self {
        Self::SystemEvent { text: String::new() }
    }
}

impl Payload {
    /// What the run says: the message or the event's text.
    pub fn text(&self) -> &str {
        match self {
            Self::SystemEvent { text } => text,
            Self::AgentTurn { message, .. } => message,
        }
    }
}

/// Where a run's result goes: nowhere (`none`), or to a chat (`announce`, with `channel` and
/// `to`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_effort: Option<bool>,
}

/// A job's state: when it runs next, whether it runs now, how its last run went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<i64>,
    /// `ok`, `error` or `skipped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_status: Option<String>,
    /// The same (an older name clients still read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<u32>,
}

/// A cron job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronJob {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub enabled: bool,
    /// Removed after a successful run (`at` jobs, by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub schedule: Schedule,
    /// `main` or `isolated`.
    pub session_target: String,
    /// `now` or `next-heartbeat`.
    pub wake_mode: String,
    pub payload: Payload,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    pub state: JobState,
}

/// A job as results show it: its state's next run also at the top.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobShown {
    #[serde(flatten)]
    pub job: CronJob,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
}

impl From<CronJob> for JobShown {
    fn from(job: CronJob) -> Self {
        let next_run_at_ms = if job.enabled { job.state.next_run_at_ms } else { None };
        Self { job, next_run_at_ms }
    }
}

/// One run of a job, as the run log keeps it (`cron.runs`) and `finished` says it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunEntry {
    pub ts: i64,
    pub job_id: String,
    pub action: String,
    /// `ok`, `error` or `skipped`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run's reply (or the event's text), cut short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<bool>,
    /// `delivered`, `not-delivered`, `not-requested`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// The `cron` event: a job was added, updated, removed, (re)scheduled, started or finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronEvent {
    pub job_id: String,
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<CronJob>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<i64>,
    /// `finished`: how the run went.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunFields>,
}

/// What `finished` adds to a `cron` event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunFields {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

// ---- methods' params and results ----

/// `{id}` or `{jobId}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobIdParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

impl JobIdParams {
    pub fn of(id: &str) -> Self {
        Self { id: Some(id.to_owned()), job_id: None }
    }

    /// The job asked for (`id`, else `jobId`), if given.
    pub fn job(&self) -> Option<&str> {
        self.id.as_deref().or(self.job_id.as_deref()).filter(|s| !s.is_empty())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronListParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_disabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// `all`, `enabled` or `disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<String>,
    /// `nextRunAtMs`, `updatedAtMs` or `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<String>,
    /// `asc` or `desc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_dir: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronPage {
    pub jobs: Vec<JobShown>,
    pub snapshot_revision: String,
    pub total: u64,
    pub offset: u64,
    pub limit: u64,
    pub has_more: bool,
    /// `null` on the last page.
    pub next_offset: Option<u64>,
    /// Where each listed job's results go, in words.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub delivery_previews: std::collections::BTreeMap<String, DeliveryPreview>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryPreview {
    pub label: String,
    pub detail: String,
}

impl DeliveryPreview {
    /// Where `delivery` sends a job's results.
    pub fn of(delivery: Option<&Delivery>) -> Self {
        let said = |label: &str, detail: &str| Self { label: label.into(), detail: detail.into() };
        match delivery.filter(|d| d.mode == "announce") {
            None => said("not requested", "not requested"),
            Some(d) => match (d.channel.as_deref().filter(|c| *c != "last"), d.to.as_deref()) {
                (Some(channel), Some(to)) => {
                    let thread = d.thread_id.as_deref().map(|t| format!(":{t}")).unwrap_or_default();
                    said(&format!("announce -> {channel}"), &format!("{channel}:{to}{thread}"))
                }
                _ => said("announce -> last", "the chat someone last wrote to the agent from"),
            },
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronInfo {
    pub enabled: bool,
    pub triggers_enabled: bool,
    pub store_path: String,
    pub storage: String,
    pub sqlite_path: String,
    pub jobs: u64,
    pub next_wake_at_ms: Option<i64>,
}

/// `cron.add`: a new job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronAddParams {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    pub schedule: Value,
    pub session_target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_mode: Option<String>,
    pub payload: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Value>,
}

/// `cron.update`: `patch` changes the fields it names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronUpdateParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    pub patch: serde_json::Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronRunParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// `force` (the default) or `due`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// `cron.run`: enqueued (`runId`), or not run and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronRunAck {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueued: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronRemoved {
    pub ok: bool,
    pub removed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronRunsParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// `job` or `all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// `ok`, `error` or `skipped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `desc` (the default: newest first) or `asc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_dir: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CronRunsPage {
    pub entries: Vec<RunEntry>,
    pub total: u64,
    pub offset: u64,
    pub limit: u64,
    pub has_more: bool,
    pub next_offset: Option<u64>,
}

// ---- the heartbeat ----

/// The `heartbeat` event (and `last-heartbeat`): how a heartbeat went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HeartbeatEvent {
    pub ts: i64,
    /// `sent`, `ok-empty`, `ok-token`, `skipped` or `failed`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WakeParams {
    /// `now` or `next-heartbeat`.
    pub mode: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Woken {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SetHeartbeatsParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatsSet {
    pub ok: bool,
    pub enabled: bool,
}

// Cron jobs and the heartbeat (types in `cron.rs`): `id` or `jobId` names a job; which one
// must be given is checked by the handler, in the reference's words.
fn job_id() -> Vec<(&'static str, Schema, bool)> {
    vec![("id", Schema::String, false), ("jobId", Schema::String, false)]
}

fn with_job_id(more: &[(&'static str, Schema, bool)]) -> Schema {
    let mut props = job_id();
    props.extend_from_slice(more);
    Schema::Object { props, open: false }
}

method!(CronStatus = "cron.status", NoParams => CronInfo, none());
method!(CronList = "cron.list", CronListParams => CronPage, Schema::object(&[
    ("includeDisabled", Schema::Bool, false),
    ("limit", Schema::Integer { min: Some(1), max: Some(200) }, false),
    ("offset", at_least(0), false),
    ("query", Schema::String, false),
    ("enabled", Schema::Enum(&["all", "enabled", "disabled"]), false),
    ("sortBy", Schema::Enum(&["nextRunAtMs", "updatedAtMs", "name"]), false),
    ("sortDir", Schema::Enum(&["asc", "desc"]), false),
    ("compact", Schema::Bool, false),
]));
method!(CronGet = "cron.get", JobIdParams => JobShown, with_job_id(&[]));
method!(CronAdd = "cron.add", CronAddParams => JobShown, Schema::object(&[
    ("name", key(), true),
    ("description", Schema::String, false),
    ("agentId", Schema::String, false),
    ("enabled", Schema::Bool, false),
    ("deleteAfterRun", Schema::Bool, false),
    ("schedule", Schema::Any, true),
    ("sessionTarget", key(), true),
    ("wakeMode", Schema::Enum(&["now", "next-heartbeat"]), false),
    ("payload", Schema::Any, true),
    ("delivery", Schema::Any, false),
]));
method!(CronUpdate = "cron.update", CronUpdateParams => JobShown, with_job_id(&[("patch", Schema::open_object(&[]), true)]));
method!(CronRemove = "cron.remove", JobIdParams => CronRemoved, with_job_id(&[]));
method!(CronRun = "cron.run", CronRunParams => CronRunAck, with_job_id(&[("mode", Schema::Enum(&["force", "due"]), false)]));
method!(CronRuns = "cron.runs", CronRunsParams => CronRunsPage, with_job_id(&[
    ("scope", Schema::Enum(&["job", "all"]), false),
    ("limit", Schema::Integer { min: Some(1), max: Some(200) }, false),
    ("offset", at_least(0), false),
    ("status", Schema::Enum(&["all", "ok", "error", "skipped"]), false),
    ("sortDir", Schema::Enum(&["asc", "desc"]), false),
]));
method!(LastHeartbeat = "last-heartbeat", NoParams => Option<HeartbeatEvent>, any());
method!(SetHeartbeats = "set-heartbeats", SetHeartbeatsParams => HeartbeatsSet,
    Schema::object(&[("enabled", Schema::Bool, false)]));
method!(Wake = "wake", WakeParams => Woken, Schema::object(&[
    ("mode", Schema::String, true),
    ("text", Schema::String, true),
    ("sessionKey", Schema::String, false),
    ("agentId", Schema::String, false),
]));
