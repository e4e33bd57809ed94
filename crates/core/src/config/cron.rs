//! `[cron]` and `[heartbeat]` in config.toml: the gateway's scheduled jobs and its periodic
//! check-in (docs/cron.md). Durations are written as people write them (`30s`, `5m`, `2h`).

use serde::{Deserialize, Deserializer};

/// `[cron]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CronConfig {
    /// Whether jobs run (default true); with `false` they are kept and listed, and run only
    /// when asked (`cron.run`).
    pub enabled: bool,
    /// Jobs running at once (the `cron` lane, default 2); more wait their turn.
    pub max_concurrent: usize,
    /// How long one run may take (default 10 minutes) unless its job says otherwise.
    #[serde(deserialize_with = "duration_ms")]
    pub timeout: u64,
    /// What a job whose time passed while the gateway was down does: `run-once` (default: it
    /// runs once at start, however many times it was due) or `skip` (to its next time).
    pub missed: Missed,
    /// How long the sessions of isolated runs are kept after their last use (default a day; `0`:
    /// for ever). The run log keeps their summaries regardless.
    #[serde(deserialize_with = "duration_ms")]
    pub session_retention: u64,
    /// Jobs kept at most (default 100,000): more are refused.
    pub max_jobs: usize,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_concurrent: 2,
            timeout: 10 * 60_000,
            missed: Missed::RunOnce,
            session_retention: 24 * 60 * 60_000,
            max_jobs: 100_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Missed {
    RunOnce,
    Skip,
}

/// `[heartbeat]`: a periodic turn in the main session, with `HEARTBEAT.md` as its checklist.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeartbeatConfig {
    /// How often (default 30 minutes); `0` turns it off.
    #[serde(deserialize_with = "duration_ms")]
    pub every: u64,
    /// When it may run, local time: `08:00-22:00` (a span past midnight wraps); all day when
    /// unset.
    pub active_hours: Option<String>,
    /// The time zone of `active_hours` (default: the host's).
    pub timezone: Option<String>,
    /// Where a reply worth reading goes: `telegram:CHAT` (`telegram:CHAT:TOPIC` for a forum
    /// topic), or `last` (the chat the user last wrote from). Unset: nowhere but the main
    /// session's own clients.
    pub target: Option<String>,
    /// The instruction a heartbeat turn begins with (default: read `HEARTBEAT.md`, answer
    /// `HEARTBEAT_OK` when nothing needs the user).
    pub prompt: Option<String>,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self { every: 30 * 60_000, active_hours: None, timezone: None, target: None, prompt: None }
    }
}

fn duration_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Ms(u64),
        Text(String),
    }
    match Given::deserialize(d)? {
        Given::Ms(ms) => Ok(ms),
        Given::Text(text) => parse_duration(&text).map_err(serde::de::Error::custom),
    }
}

/// A duration as people write it: `500ms`, `2s`, `5m`, `1h`, `1d`, or a number of milliseconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not a duration (e.g. 30s, 5m, 2h)"))?;
    let factor = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?} is not a duration (e.g. 30s, 5m, 2h)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("{text:?} is too long"))
}
