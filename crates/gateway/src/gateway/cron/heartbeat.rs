//! The heartbeat: every `[heartbeat] every` (and when woken), a turn in the main session that
//! reads `HEARTBEAT.md` of the agent workspace (`$ACP_HOME/workspace`) as its checklist, with the system events queued since
//! the last one (cron jobs of the main session, `wake`). A reply of `HEARTBEAT_OK` or
//! `NO_REPLY` (or nothing) is not delivered; any other goes to `[heartbeat] target`. It never
//! waits behind a busy session (skipped, and logged), never runs twice at once, and costs
//! nothing while the checklist is empty and nothing is queued (no model call).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use acp_protocol::gateway::cron::HeartbeatEvent;
use acp_protocol::gateway::events::name;
use tokio::sync::Notify;

use super::super::Gateway;
use super::super::hub::RunEnd;
use super::run::SILENT;
use crate::clock::now_ms;
use crate::config::cron::HeartbeatConfig;
use crate::runtime::host::ChatTarget;
use crate::runtime::{TurnOptions, UserBlock};
use crate::sync::lock;

/// The checklist, in the workspace.
pub const FILE: &str = "HEARTBEAT.md";
/// System events kept for the next heartbeat, at most (the oldest go).
const PENDING_MAX: usize = 32;
/// A reply with a silent token and at most this much else is still silent.
const TOKEN_SLACK: usize = 300;
/// How much of a reply the event shows.
const PREVIEW_CHARS: usize = 200;
const YEAR_MS: u64 = 365 * 24 * 60 * 60_000;

const DEFAULT_PROMPT: &str = "This is a scheduled check-in (heartbeat), not a message from the user. Work through \
     what is below (the HEARTBEAT.md checklist, the events since the last check) strictly; do not bring back tasks \
     from earlier chats. If nothing needs the user's attention, reply HEARTBEAT_OK and nothing else.";

pub struct Heartbeat {
    config: HeartbeatConfig,
    /// `set-heartbeats`.
    enabled: AtomicBool,
    /// System events for the next heartbeat.
    pending: Mutex<VecDeque<String>>,
    last: Mutex<Option<HeartbeatEvent>>,
    /// A heartbeat asked for now.
    wake: Notify,
    running: AtomicBool,
    timeout: Duration,
}

impl Heartbeat {
    /// `timeout_ms`: how long one heartbeat turn may take (`[cron] timeout`).
    pub fn new(config: HeartbeatConfig, timeout_ms: u64) -> Self {
        Self {
            timeout: Duration::from_millis(timeout_ms.clamp(1_000, YEAR_MS)),
            config,
            enabled: AtomicBool::new(true),
            pending: Mutex::default(),
            last: Mutex::default(),
            wake: Notify::new(),
            running: AtomicBool::new(false),
        }
    }

    /// Queues `text` for the next heartbeat; `now`: that heartbeat is now.
    pub fn enqueue(&self, text: &str, now: bool) {
        let mut pending = lock(&self.pending);
        if pending.len() >= PENDING_MAX {
            pending.pop_front();
        }
        pending.push_back(text.trim().to_owned());
        drop(pending);
        if now {
            self.wake.notify_one();
        }
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn last(&self) -> Option<HeartbeatEvent> {
        lock(&self.last).clone()
    }

    /// Beats every `[heartbeat] every`, and when woken, until `stop`.
    pub async fn run(&self, gw: std::sync::Weak<Gateway>, stop: tokio_util::sync::CancellationToken) {
        // Past a year it is as good as off (and `Instant` arithmetic stays in range).
        let every = (self.config.every > 0).then(|| Duration::from_millis(self.config.every.min(YEAR_MS)));
        let mut next = every.map(|e| tokio::time::Instant::now() + e);
        loop {
            let tick = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let reason = tokio::select! {
                () = tick => "interval",
                () = self.wake.notified() => "wake",
                () = stop.cancelled() => return,
            };
            if let (Some(every), "interval") = (every, reason) {
                next = Some(tokio::time::Instant::now() + every);
            }
            let Some(gw) = gw.upgrade() else { return };
            if let Some(event) = self.beat(&gw, reason).await {
                tracing::info!(status = %event.status, reason = event.reason.as_deref().unwrap_or(""), "heartbeat");
                *lock(&self.last) = Some(event.clone());
                gw.hub.broadcast(name::HEARTBEAT, &event, false);
            }
        }
    }

    /// One heartbeat; what it did (`None`: heartbeats are off).
    async fn beat(&self, gw: &Gateway, reason: &str) -> Option<HeartbeatEvent> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let started = now_ms();
        let skipped = |why: &str, message: Option<String>| {
            tracing::info!(reason = why, "heartbeat skipped");
            Some(HeartbeatEvent {
                ts: now_ms(),
                status: "skipped".into(),
                reason: Some(why.into()),
                message,
                duration_ms: Some(0),
                ..HeartbeatEvent::default()
            })
        };
        match active(self.config.active_hours.as_deref(), self.config.timezone.as_deref(), started) {
            Ok(true) => {}
            Ok(false) => return skipped("quiet-hours", None),
            Err(e) => return skipped("quiet-hours", Some(e)),
        }
        // The default agent's main session.
        let main = gw.key("main");
        if gw.open.busy(&main) || !gw.hub.turn_of(&main, None).is_empty() {
            return skipped("requests-in-flight", Some("the main session is busy; the next heartbeat will try".into()));
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return skipped("already-running", None);
        }
        let beat = self.beat_in_main(gw, reason, started).await;
        self.running.store(false, Ordering::Release);
        Some(beat)
    }

    async fn beat_in_main(&self, gw: &Gateway, reason: &str, started: i64) -> HeartbeatEvent {
        let main = gw.key("main");
        let done = |status: &str, why: Option<&str>| HeartbeatEvent {
            ts: now_ms(),
            status: status.into(),
            reason: why.map(str::to_owned),
            duration_ms: Some(now_ms() - started),
            ..HeartbeatEvent::default()
        };
        // The default agent's workspace files (`$ACP_HOME/workspace`, or its own workspace),
        // beside MEMORY.md and AGENTS.md.
        let path = gw.runtime.config_for(&main).agent_dir().join(FILE);
        let checklist = tokio::fs::read_to_string(path).await.unwrap_or_default();
        let events: Vec<String> = lock(&self.pending).drain(..).collect();
        if empty(&checklist) && events.is_empty() {
            return done("skipped", Some("empty-heartbeat-file"));
        }
        let prompt = prompt(self.config.prompt.as_deref().unwrap_or(DEFAULT_PROMPT), &checklist, &events);
        // Not begun: the events wait for the next one.
        let failed = |message: String| {
            let mut pending = lock(&self.pending);
            for event in events.iter().rev() {
                pending.push_front(event.clone());
            }
            pending.truncate(PENDING_MAX);
            HeartbeatEvent { message: Some(message), ..done("failed", Some(reason)) }
        };
        let ticket = match gw.open.admit(&main, prompt.len()) {
            Ok(ticket) => ticket,
            Err(e) => return failed(e.message.clone()),
        };
        let handle = match gw.open(&main).await {
            Ok(handle) => handle,
            Err(e) => return failed(e),
        };
        let failed = |message: String| HeartbeatEvent { message: Some(message), ..done("failed", Some(reason)) };
        let run_id = format!("heartbeat:{}", uuid::Uuid::new_v4());
        let options = TurnOptions { from_agent: true, ..gw.open.run_options() };
        let blocks = vec![UserBlock::Text { text: prompt }];
        let (turn, mut ended, outcome) = gw.runs.begin(&handle, &main, &run_id, blocks, options, None);
        if !super::run::within(&handle, turn, outcome, self.timeout).await {
            drop(ticket);
            return failed(format!(
                "the heartbeat's turn took longer than {} s and was stopped",
                self.timeout.as_secs()
            ));
        }
        drop(ticket);
        let reply = match ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone()) {
            Some(RunEnd::Final { text, .. }) => text,
            Some(RunEnd::Aborted { .. }) => return failed("the heartbeat's turn was stopped".into()),
            Some(RunEnd::Error { message }) => return failed(message),
            None => return failed("the heartbeat's turn ended without a result".into()),
        };
        match silent(&reply) {
            Some(status) => HeartbeatEvent { silent: Some(true), ..done(status, Some(reason)) },
            None => self.deliver(gw, &reply, done("sent", Some(reason))).await,
        }
    }

    /// Sends `reply` to the target; `event` says how it went.
    async fn deliver(&self, gw: &Gateway, reply: &str, event: HeartbeatEvent) -> HeartbeatEvent {
        let reply = reply.trim();
        let preview = Some(reply.chars().take(PREVIEW_CHARS).collect::<String>());
        let target = match self.target(gw) {
            Ok(target) => target,
            Err(message) => {
                return HeartbeatEvent {
                    status: "skipped".into(),
                    reason: Some("no-route".into()),
                    message: Some(message),
                    preview,
                    ..event
                };
            }
        };
        let (to, channel) = (Some(target.to.clone()), Some(target.channel.clone()));
        match gw.channels.outbox.send(&target, reply, None).await {
            Ok(()) => HeartbeatEvent { to, channel, preview, ..event },
            Err(e) => HeartbeatEvent { status: "failed".into(), message: Some(e), to, channel, preview, ..event },
        }
    }

    /// Where replies go: `[heartbeat] target`.
    fn target(&self, gw: &Gateway) -> Result<ChatTarget, String> {
        let no_route = || {
            "the heartbeat has nowhere to deliver: set [heartbeat] target (telegram:CHAT, or last for the chat the user \
             last wrote from)"
                .to_owned()
        };
        match self.config.target.as_deref().map(str::trim) {
            None | Some("" | "none") => Err(no_route()),
            Some("last") => gw.channels.last_chat(&gw.default_agent()).ok_or_else(no_route),
            Some(given) => parse_target(given),
        }
    }
}

/// `channel:chat[:topic]`.
/// `channel[@account]:chat[:topic]`, as [`ChatTarget::parse`] reads it.
pub fn parse_target(given: &str) -> Result<ChatTarget, String> {
    ChatTarget::parse(given)
}

/// `ok-empty` (nothing, or `NO_REPLY`) or `ok-token` (`HEARTBEAT_OK` at either end, with at
/// most [`TOKEN_SLACK`] characters else) for a reply not to deliver.
pub fn silent(reply: &str) -> Option<&'static str> {
    let reply = reply.trim();
    if reply.is_empty() || reply == "NO_REPLY" {
        return Some("ok-empty");
    }
    let rest = SILENT.iter().find_map(|token| reply.strip_prefix(token).or_else(|| reply.strip_suffix(token)))?;
    (rest.trim().chars().count() <= TOKEN_SLACK).then_some("ok-token")
}

/// Whether a checklist says nothing: only blank lines, headings and empty list items.
pub fn empty(checklist: &str) -> bool {
    checklist.lines().map(str::trim).all(|line| {
        let item = line.trim_start_matches(['-', '*', '+']).trim();
        line.is_empty()
            || line.starts_with('#')
            || line.starts_with("<!--")
            || (line.len() > item.len() && matches!(item, "" | "[ ]" | "[x]" | "[X]"))
    })
}

/// The heartbeat's prompt: marked as one (a quiet one is left out of what later turns send).
fn prompt(instruction: &str, checklist: &str, events: &[String]) -> String {
    let mut prompt = format!("{}\n{}", crate::runtime::compaction::HEARTBEAT_MARK, instruction.trim());
    if !events.is_empty() {
        prompt.push_str("\n\nEvents since the last check:\n");
        for event in events {
            prompt.push_str(&format!("- {event}\n"));
        }
    }
    if !empty(checklist) {
        prompt.push_str(&format!("\n\n{FILE}:\n{}", checklist.trim()));
    }
    prompt
}

/// Whether `now` is within `hours` (`08:00-22:00`, local to `tz` or the host; a span past
/// midnight wraps); always, without hours.
pub fn active(hours: Option<&str>, tz: Option<&str>, now: i64) -> Result<bool, String> {
    let Some(hours) = hours.map(str::trim).filter(|h| !h.is_empty()) else { return Ok(true) };
    let minute = |t: &str| -> Option<i64> {
        let (h, m) = t.trim().split_once(':')?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        ((0..=24).contains(&h) && (0..60).contains(&m) && h * 60 + m <= 24 * 60).then_some(h * 60 + m)
    };
    let bad = || format!("[heartbeat] active_hours `{hours}` is not a span of the day (08:00-22:00)");
    let (from, to) = hours.split_once('-').ok_or_else(bad)?;
    let (from, to) = (minute(from).ok_or_else(bad)?, minute(to).ok_or_else(bad)?);
    let zone = match tz {
        Some(name) => jiff::tz::TimeZone::get(name).map_err(|_| format!("[heartbeat] timezone `{name}` is unknown"))?,
        None => jiff::tz::TimeZone::system(),
    };
    let local = jiff::Timestamp::from_millisecond(now).map_err(|e| e.to_string())?.to_zoned(zone);
    let at = i64::from(local.hour()) * 60 + i64::from(local.minute());
    Ok(if from <= to { (from..to).contains(&at) } else { at >= from || at < to })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_replies_are_known_by_their_token() {
        assert_eq!(silent("HEARTBEAT_OK"), Some("ok-token"));
        assert_eq!(silent("  all quiet. HEARTBEAT_OK"), Some("ok-token"));
        assert_eq!(silent("NO_REPLY"), Some("ok-empty"));
        assert_eq!(silent(""), Some("ok-empty"));
        assert_eq!(silent("The build is red: 3 tests fail."), None);
        assert_eq!(silent(&format!("HEARTBEAT_OK {}", "x".repeat(301))), None);
    }

    #[test]
    fn a_checklist_of_headings_and_empty_items_says_nothing() {
        assert!(empty("# Heartbeat\n\n- [ ]\n-\n<!-- add items -->\n"));
        assert!(!empty("# Heartbeat\n- check the build\n"));
    }

    #[test]
    fn active_hours_wrap_past_midnight() {
        // 2026-11-27T23:30:00Z
        let late = 1_795_822_200_000;
        assert_eq!(active(Some("08:00-22:00"), Some("UTC"), late), Ok(false));
        assert_eq!(active(Some("22:00-06:00"), Some("UTC"), late), Ok(true));
        assert_eq!(active(None, None, late), Ok(true));
        assert!(active(Some("8 to 10"), Some("UTC"), late).is_err());
    }

    #[test]
    fn targets_read_as_channel_and_chat() {
        let t = parse_target("telegram:-100123:42").unwrap();
        assert_eq!((t.channel.as_str(), t.to.as_str(), t.thread.as_deref()), ("telegram", "-100123", Some("42")));
        assert!(parse_target("telegram").is_err());
        let t = parse_target("telegram@family:55:7").unwrap();
        assert_eq!((t.channel.as_str(), t.to.as_str(), t.thread.as_deref()), ("telegram:family", "55", Some("7")));
        let t = parse_target("matrix:!room:example.org:8448").unwrap();
        assert_eq!((t.channel.as_str(), t.to.as_str(), t.thread), ("matrix", "!room:example.org:8448", None));
        assert!(
            parse_target("@x:1").is_err() && parse_target("telegram@:1").is_err() && parse_target("telegram:").is_err()
        );
    }
}
