//! A job as `cron.add` makes it and `cron.update` changes it: every field checked, in the
//! reference's words where it has them, and its first run worked out. Nothing here runs.

use acp_protocol::gateway::cron::{CronAddParams, CronJob, Delivery, JobState, Payload, Schedule};
use serde_json::{Map, Value};

use super::schedule::{Timed, Timing};

/// The fields `cron.update`'s `patch` may change.
const PATCHABLE: &[&str] = &[
    "name",
    "description",
    "agentId",
    "enabled",
    "deleteAfterRun",
    "schedule",
    "sessionTarget",
    "wakeMode",
    "payload",
    "delivery",
];

/// The channels a result can be delivered to.
pub const CHANNELS: &[&str] = &["telegram"];

/// A new job from `cron.add`'s params, added at `now`.
pub fn new_job(p: CronAddParams, id: String, now: i64) -> Result<CronJob, String> {
    let bad = |what: String| format!("invalid cron.add params: {what}");
    let mut schedule: Schedule =
        serde_json::from_value(p.schedule).map_err(|e| bad(format!("at /schedule: {}", plain(&e))))?;
    // `every` counts from when it was added, unless an anchor is given.
    if let Schedule::Every { anchor_ms: anchor @ None, .. } = &mut schedule {
        *anchor = Some(now);
    }
    let timing = timing(&schedule, now, true)
        .map_err(|e| if e.starts_with("schedule.at is in the past") { e } else { bad(e) })?;
    let at = matches!(schedule, Schedule::At { .. });
    let mut job = CronJob {
        id,
        agent_id: p.agent_id,
        name: p.name.trim().to_owned(),
        description: p.description.filter(|d| !d.trim().is_empty()),
        enabled: p.enabled.unwrap_or(true),
        delete_after_run: p.delete_after_run.or(at.then_some(true)),
        created_at_ms: now,
        updated_at_ms: now,
        schedule,
        session_target: p.session_target,
        wake_mode: p.wake_mode.unwrap_or_else(|| "now".into()),
        payload: serde_json::from_value(p.payload).map_err(|e| bad(format!("at /payload: {}", plain(&e))))?,
        delivery: p.delivery.filter(|d| !d.is_null()).map(delivery).transpose().map_err(bad)?,
        state: JobState::default(),
    };
    check(&job).map_err(bad)?;
    job.state.next_run_at_ms = if job.enabled { first_run(&timing, now) } else { None };
    Ok(job)
}

/// `job` changed by `patch` at `now`; its state stays, its next run is worked out again when its
/// schedule or `enabled` changed.
pub fn patched(job: &CronJob, patch: &Map<String, Value>, now: i64) -> Result<CronJob, String> {
    let bad = |what: String| format!("invalid cron.update params: {what}");
    if let Some(key) = patch.keys().find(|k| !PATCHABLE.contains(&k.as_str())) {
        return Err(bad(format!("at /patch: unexpected property '{key}'")));
    }
    let mut value = serde_json::to_value(job).map_err(|e| e.to_string())?;
    let Some(fields) = value.as_object_mut() else { return Err("a job is an object".into()) };
    for (key, given) in patch {
        match (key.as_str(), given) {
            ("description" | "delivery" | "agentId" | "deleteAfterRun", Value::Null) => {
                fields.remove(key);
            }
            // A payload of the same kind (or none said) changes the fields given; another kind
            // replaces it.
            ("payload" | "delivery", Value::Object(changes))
                if changes.get("kind").is_none_or(|k| fields.get(key).and_then(|v| v.get("kind")) == Some(k)) =>
            {
                let into = fields.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
                if let Some(into) = into.as_object_mut() {
                    for (k, v) in changes {
                        if v.is_null() {
                            into.remove(k);
                        } else {
                            into.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => {
                fields.insert(key.clone(), given.clone());
            }
        }
    }
    let mut next: CronJob = serde_json::from_value(value).map_err(|e| bad(format!("at /patch: {}", plain(&e))))?;
    if let Some(Value::Object(_)) = patch.get("delivery") {
        next.delivery =
            next.delivery.map(|d| delivery(serde_json::to_value(d).unwrap_or_default())).transpose().map_err(bad)?;
    }
    if let Schedule::Every { anchor_ms: anchor @ None, .. } = &mut next.schedule {
        *anchor = Some(now);
    }
    next.name = next.name.trim().to_owned();
    check(&next).map_err(bad)?;
    let rescheduled = patch.contains_key("schedule") || next.enabled != job.enabled;
    let timing = timing(&next.schedule, next.created_at_ms, patch.contains_key("schedule"))
        .map_err(|e| if e.starts_with("schedule.at is in the past") { e } else { bad(e) })?;
    if !next.enabled {
        next.state.next_run_at_ms = None;
    } else if rescheduled || next.state.next_run_at_ms.is_none() {
        next.state.next_run_at_ms = first_run(&timing, now);
    }
    next.updated_at_ms = now;
    Ok(next)
}

/// The job's schedule, checked (an `at` long past refused when `added`, that is, just given).
pub fn timing(schedule: &Schedule, created: i64, added: bool) -> Result<Timing, String> {
    schedule.timing(created, added.then(crate::clock::now_ms))
}

/// When a job (re)scheduled at `now` runs first: an `at` job at its time (one just past runs
/// at once), the others at their next time.
pub fn first_run(timing: &Timing, now: i64) -> Option<i64> {
    match timing {
        Timing::At(at) => Some(*at),
        other => other.next_after(now),
    }
}

/// What every job must be.
fn check(job: &CronJob) -> Result<(), String> {
    if job.name.is_empty() {
        return Err("at /name: must NOT have fewer than 1 characters".into());
    }
    match (job.session_target.as_str(), &job.payload) {
        ("main", Payload::SystemEvent { .. }) | ("isolated", Payload::AgentTurn { .. }) => {}
        ("main", _) => return Err("main cron jobs require payload.kind=\"systemEvent\"".into()),
        ("isolated", _) => return Err("isolated cron jobs require payload.kind=\"agentTurn\"".into()),
        (other, _) => {
            return Err(format!("at /sessionTarget: `{other}` is not a target here: use \"main\" or \"isolated\""));
        }
    }
    if job.payload.text().trim().is_empty() {
        let field = if job.session_target == "main" { "text" } else { "message" };
        return Err(format!("at /payload/{field}: must NOT have fewer than 1 characters"));
    }
    if let Payload::AgentTurn { timeout_seconds: Some(0), .. } = job.payload {
        return Err("at /payload/timeoutSeconds: must be >= 1".into());
    }
    if !matches!(job.wake_mode.as_str(), "now" | "next-heartbeat") {
        return Err("at /wakeMode: must be equal to one of the allowed values".into());
    }
    Ok(())
}

/// `delivery`, checked: `none`, or `announce` to a chat of a channel served here.
fn delivery(given: Value) -> Result<Delivery, String> {
    let d: Delivery = serde_json::from_value(given).map_err(|e| format!("at /delivery: {}", plain(&e)))?;
    match d.mode.as_str() {
        "none" | "announce" => {}
        "webhook" => return Err("at /delivery/mode: webhook delivery is not supported here (use announce)".into()),
        _ => return Err("at /delivery/mode: must be equal to one of the allowed values".into()),
    }
    if let Some(channel) = d.channel.as_deref().filter(|c| *c != "last" && !CHANNELS.contains(c)) {
        return Err(format!("at /delivery/channel: no channel `{channel}` (channels: {})", CHANNELS.join(", ")));
    }
    if d.mode == "announce" && d.to.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err("at /delivery/to: must NOT have fewer than 1 characters".into());
    }
    Ok(d)
}

/// A serde error without its position (the params were JSON already).
fn plain(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.find(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add(v: Value) -> Result<CronJob, String> {
        new_job(serde_json::from_value(v).unwrap(), "job-1".into(), 1_800_000_000_000)
    }

    #[test]
    fn jobs_are_checked_as_the_reference_checks_them() {
        let every = json!({"name": "e", "schedule": {"kind": "every", "everyMs": 2000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "hi"}});
        let job = add(every.clone()).unwrap();
        assert_eq!(job.wake_mode, "now");
        assert_eq!(job.schedule, Schedule::Every { every_ms: 2000, anchor_ms: Some(1_800_000_000_000) });
        assert_eq!(job.state.next_run_at_ms, Some(1_800_000_002_000));
        assert_eq!(job.delete_after_run, None);

        let mut main = every.clone();
        main["sessionTarget"] = json!("main");
        assert_eq!(
            add(main).unwrap_err(),
            "invalid cron.add params: main cron jobs require payload.kind=\"systemEvent\""
        );
        let mut bad = every.clone();
        bad["schedule"] = json!({"kind": "cron", "expr": "not a cron"});
        assert!(add(bad).unwrap_err().starts_with("invalid cron.add params: schedule.expr"));
        let mut bad = every.clone();
        bad["schedule"] = json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus"});
        assert!(add(bad).unwrap_err().contains("\"Mars/Olympus\" is not a time zone"));
        let mut bad = every;
        bad["delivery"] = json!({"mode": "announce", "channel": "pigeon", "to": "1"});
        assert!(add(bad).unwrap_err().contains("no channel `pigeon`"));
    }

    #[test]
    fn at_jobs_run_once_and_are_removed_after() {
        let job = add(json!({"name": "a", "schedule": {"kind": "at", "at": "2027-01-15T08:00:00Z"},
            "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "x"}}))
        .unwrap();
        assert_eq!(job.delete_after_run, Some(true));
        assert_eq!(job.state.next_run_at_ms, super::super::schedule::parse_time("2027-01-15T08:00:00Z").ok());
    }

    #[test]
    fn a_patch_changes_what_it_names_and_reschedules() {
        let job =
            add(json!({"name": "e", "schedule": {"kind": "every", "everyMs": 60000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "hi", "timeoutSeconds": 30}}))
            .unwrap();
        let now = job.created_at_ms + 10_000;
        let off = patched(&job, json!({"enabled": false}).as_object().unwrap(), now).unwrap();
        assert!(!off.enabled && off.state.next_run_at_ms.is_none());
        let on = patched(&off, json!({"enabled": true}).as_object().unwrap(), now).unwrap();
        assert_eq!(on.state.next_run_at_ms, Some(job.created_at_ms + 60_000));
        let changed = patched(&job, json!({"payload": {"message": "bye"}}).as_object().unwrap(), now).unwrap();
        assert_eq!(
            changed.payload,
            Payload::AgentTurn { message: "bye".into(), model: None, thinking: None, timeout_seconds: Some(30) }
        );
        assert_eq!(
            patched(&job, json!({"bogus": 1}).as_object().unwrap(), now).unwrap_err(),
            "invalid cron.update params: at /patch: unexpected property 'bogus'"
        );
    }
}
