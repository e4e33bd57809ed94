//! When a cron job runs, as OpenClaw's gateway protocol shapes it (`schedule` of a job):
//! `{kind: "at", at}` once at an ISO time, `{kind: "every", everyMs, anchorMs?}` every interval
//! counted from an anchor (the job's creation by default), `{kind: "cron", expr, tz?}` by a cron
//! expression of 5 fields (or 6, seconds first) in a time zone (the host's by default), read by
//! `croner` as OpenClaw's own scheduler reads it. Times are Unix milliseconds.

use std::str::FromStr;

pub use crate::config::cron::parse_duration;
pub use acp_protocol::gateway::cron::Schedule;
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// How far in the past an `at` time may be when the job is added (OpenClaw's rule).
pub const AT_PAST_GRACE_MS: i64 = 60_000;
/// The shortest interval of an `every` job.
pub const MIN_EVERY_MS: u64 = 1_000;

/// A schedule checked and ready to say when it comes next.
#[derive(Debug, Clone)]
pub enum Timing {
    At(i64),
    Every { every: i64, anchor: i64 },
    Cron { cron: Box<Cron>, tz: TimeZone },
}

/// What a schedule says of its job's times.
pub trait Timed {
    fn timing(&self, created_ms: i64, now_ms: Option<i64>) -> Result<Timing, String>;
}

impl Timed for Schedule {
    /// Checks the schedule of a job created at `created_ms`; `now_ms`: the time it is added or
    /// changed (an `at` time long past is refused then).
    fn timing(&self, created_ms: i64, now_ms: Option<i64>) -> Result<Timing, String> {
        match self {
            Self::At { at } => {
                let ms = parse_time(at)?;
                if let Some(now) = now_ms
                    && ms < now.saturating_sub(AT_PAST_GRACE_MS)
                {
                    let ago = now.saturating_sub(ms) / 60_000;
                    let current = Timestamp::from_millisecond(now).map(|t| t.to_string()).unwrap_or_default();
                    return Err(format!(
                        "schedule.at is in the past: {at} ({ago} minutes ago). Current time: {current}"
                    ));
                }
                Ok(Timing::At(ms))
            }
            Self::Every { every_ms, anchor_ms } => {
                if *every_ms < MIN_EVERY_MS {
                    return Err(format!("schedule.everyMs must be at least {MIN_EVERY_MS}"));
                }
                if *every_ms > MAX_TIME_MS as u64 {
                    return Err("schedule.everyMs is too large".to_owned());
                }
                let anchor = anchor_ms.unwrap_or(created_ms);
                if !(0..=MAX_TIME_MS).contains(&anchor) {
                    return Err("schedule.anchorMs is not a time between 1970 and 9999".to_owned());
                }
                Ok(Timing::Every { every: *every_ms as i64, anchor })
            }
            Self::Cron { expr, tz, .. } => {
                let parser = CronParser::builder().seconds(Seconds::Optional).build();
                let cron = parser.parse(expr.trim()).map_err(|e| format!("schedule.expr {expr:?}: {e}"))?;
                let tz = match tz.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                    Some(name) => {
                        TimeZone::get(name).map_err(|_| format!("schedule.tz {name:?} is not a time zone"))?
                    }
                    None => TimeZone::system(),
                };
                Ok(Timing::Cron { cron: Box::new(cron), tz })
            }
        }
    }
}

impl Timing {
    /// The first time strictly after `after_ms` the job is due, if it ever is again.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Self::At(at) => (*at > after_ms).then_some(*at),
            Self::Every { every, anchor } => {
                if after_ms < *anchor {
                    return Some(*anchor);
                }
                let passed = after_ms.checked_sub(*anchor)? / every + 1;
                anchor.checked_add(passed.checked_mul(*every)?)
            }
            Self::Cron { cron, tz } => {
                let from = Timestamp::from_millisecond(after_ms).ok()?.to_zoned(tz.clone());
                let next = cron.find_next_occurrence(&from, false).ok()?;
                Some(next.timestamp().as_millisecond())
            }
        }
    }
}

/// An ISO 8601 time with an offset (`2026-11-27T09:00:00Z`, `…+01:00`), or Unix milliseconds.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let ms = match text.parse::<i64>() {
        Ok(ms) => ms,
        Err(_) => Timestamp::from_str(text)
            .map(|t| t.as_millisecond())
            .map_err(|_| format!("{text:?} is not a time (ISO 8601 with an offset, e.g. 2026-11-27T09:00:00Z)"))?,
    };
    if !(0..=MAX_TIME_MS).contains(&ms) {
        return Err(format!("{text:?} is not a time between 1970 and 9999"));
    }
    Ok(ms)
}

/// The last millisecond of the year 9999: no time of a job is later (or before 1970).
pub const MAX_TIME_MS: i64 = 253_402_300_799_999;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ms(iso: &str) -> i64 {
        parse_time(iso).unwrap()
    }

    fn schedule(v: serde_json::Value) -> Schedule {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_three_kinds_read_as_openclaw_writes_them() {
        assert_eq!(
            schedule(json!({"kind": "at", "at": "2026-11-27T09:00:00Z"})),
            Schedule::At { at: "2026-11-27T09:00:00Z".into() }
        );
        assert_eq!(
            schedule(json!({"kind": "every", "everyMs": 2000})),
            Schedule::Every { every_ms: 2000, anchor_ms: None }
        );
        let cron = schedule(json!({"kind": "cron", "expr": "0 9 * * 1", "tz": "Europe/Berlin"}));
        assert_eq!(
            serde_json::to_value(&cron).unwrap(),
            json!({"kind": "cron", "expr": "0 9 * * 1", "tz": "Europe/Berlin"})
        );
        assert!(serde_json::from_value::<Schedule>(json!({"kind": "every", "every": 2})).is_err());
    }

    #[test]
    fn at_runs_once_and_a_time_long_past_is_refused_when_added() {
        let now = ms("2026-11-27T12:00:00Z");
        let at = schedule(json!({"kind": "at", "at": "2026-11-27T12:00:30Z"}));
        let t = at.timing(now, Some(now)).unwrap();
        assert_eq!(t.next_after(now), Some(ms("2026-11-27T12:00:30Z")));
        assert_eq!(t.next_after(ms("2026-11-27T12:00:30Z")), None);
        // 30 s ago is accepted (it runs at once); two minutes ago is not.
        assert!(schedule(json!({"kind": "at", "at": "2026-11-27T11:59:30Z"})).timing(now, Some(now)).is_ok());
        let err = schedule(json!({"kind": "at", "at": "2026-11-27T11:58:00Z"})).timing(now, Some(now)).unwrap_err();
        assert!(err.starts_with("schedule.at is in the past"), "{err}");
        // Read back after a restart (no `now`), a past time stays valid.
        assert!(schedule(json!({"kind": "at", "at": "2026-11-27T11:58:00Z"})).timing(now, None).is_ok());
    }

    #[test]
    fn every_counts_from_its_anchor() {
        let t = schedule(json!({"kind": "every", "everyMs": 2000, "anchorMs": 10_000})).timing(0, None).unwrap();
        assert_eq!(t.next_after(5_000), Some(10_000));
        assert_eq!(t.next_after(10_000), Some(12_000));
        assert_eq!(t.next_after(13_999), Some(14_000));
        let t = schedule(json!({"kind": "every", "everyMs": 2000})).timing(1_000, None).unwrap();
        assert_eq!(t.next_after(1_000), Some(3_000), "from the job's creation");
        assert!(schedule(json!({"kind": "every", "everyMs": 10})).timing(0, None).is_err());
    }

    #[test]
    fn cron_reads_weekdays_time_zones_and_daylight_saving_as_croner_does() {
        // Monday 09:00 in Berlin (weekday 1 is Monday, not Sunday).
        let t = schedule(json!({"kind": "cron", "expr": "0 9 * * 1", "tz": "Europe/Berlin"})).timing(0, None).unwrap();
        assert_eq!(t.next_after(ms("2026-11-27T12:00:00Z")), Some(ms("2026-11-30T08:00:00Z")));
        // 02:30 does not exist in New York on 2026-03-08: that day's run is at 03:00.
        let t =
            schedule(json!({"kind": "cron", "expr": "30 2 * * *", "tz": "America/New_York"})).timing(0, None).unwrap();
        assert_eq!(t.next_after(ms("2026-03-08T05:00:00Z")), Some(ms("2026-03-08T07:00:00Z")));
        // Six fields: seconds first.
        let t = schedule(json!({"kind": "cron", "expr": "*/2 * * * * *", "tz": "UTC"})).timing(0, None).unwrap();
        assert_eq!(t.next_after(ms("2026-11-27T12:00:00Z")), Some(ms("2026-11-27T12:00:02Z")));
        for (expr, tz) in [("61 * * * *", "UTC"), ("0 9 * * 1", "Mars/Olympus")] {
            assert!(schedule(json!({"kind": "cron", "expr": expr, "tz": tz})).timing(0, None).is_err(), "{expr} {tz}");
        }
    }

    #[test]
    fn durations_and_times_as_people_write_them() {
        assert_eq!(parse_duration("2s"), Ok(2_000));
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("5m"), Ok(300_000));
        assert_eq!(parse_duration("1d"), Ok(86_400_000));
        assert!(parse_duration("soon").is_err() && parse_duration("5 fortnights").is_err());
        assert_eq!(parse_time("2026-11-27T10:00:00+01:00"), Ok(ms("2026-11-27T09:00:00Z")));
        assert!(parse_time("tomorrow").is_err());
    }
}
