//! Chat sessions that start afresh (`[session.reset]`, as the seed's `session.reset`): checked
//! when a chat's next message arrives, a session last used before the day's reset time (4 am
//! local by default), or idle longer than its idle minutes, is moved aside — kept and listed as
//! `<key>:reset:<when>` — and the message starts a new transcript under the same key. The policy
//! is the channel's (`reset_by_channel`), else the chat type's (`reset_by_type`: direct, group,
//! thread), else `[session.reset]`. Only channel chats are reset, and never a session a control
//! client (an editor through the bridge, the web chat, `chat.send`) has run in since the gateway
//! started: it does not change behind their backs.

use jiff::Timestamp;
use jiff::civil::Time;
use jiff::tz::TimeZone;

use super::Gateway;
use crate::clock::now_ms;
use crate::config::Config;
use crate::config::{ChatType, ResetMode, ResetPolicy};

/// A policy read and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reset {
    /// The daily reset's local time, if daily.
    pub daily: Option<Time>,
    /// Idle this long (ms), if set.
    pub idle_ms: Option<i64>,
}

/// The policy for a chat of `kind` on `channel`.
pub fn policy(config: &Config, channel: Option<&str>, kind: ChatType) -> Result<Reset, String> {
    let session = &config.session;
    let chosen = channel
        .and_then(|c| session.reset_by_channel.get(c))
        .or_else(|| session.reset_by_type.get(&kind))
        .or(session.reset.as_ref());
    read(chosen.cloned().unwrap_or_default())
}

/// Every policy in the configuration, checked (the gateway refuses to start on a bad one).
pub fn check(config: &Config) -> Result<(), String> {
    let session = &config.session;
    let all = session.reset.iter().map(|p| ("[session.reset]".to_owned(), p));
    let by_type = session.reset_by_type.iter().map(|(t, p)| (format!("[session.reset_by_type.{t:?}]"), p));
    let by_channel = session.reset_by_channel.iter().map(|(c, p)| (format!("[session.reset_by_channel.{c}]"), p));
    for (place, p) in all.chain(by_type).chain(by_channel) {
        read(p.clone()).map_err(|e| format!("{} in config.toml: {e}", place.to_lowercase()))?;
    }
    Ok(())
}

fn read(p: ResetPolicy) -> Result<Reset, String> {
    let idle_ms = match p.idle_minutes {
        Some(m) if !(m > 0.0 && m.is_finite()) => return Err(format!("idle_minutes = {m} is not a positive number")),
        Some(m) => Some((m * 60_000.0) as i64),
        None => None,
    };
    let daily = match (p.at.as_deref(), p.at_hour) {
        (Some(at), _) => {
            Some(at.trim().parse::<Time>().map_err(|_| format!("at = {at:?} is not a time of day (04:00)"))?)
        }
        (None, Some(hour)) if hour < 24 => Some(Time::constant(hour as i8, 0, 0, 0)),
        (None, Some(hour)) => return Err(format!("at_hour = {hour} is not an hour (0 to 23)")),
        (None, None) => Some(Time::constant(4, 0, 0, 0)),
    };
    Ok(match p.mode.unwrap_or(ResetMode::Daily) {
        ResetMode::Off => Reset { daily: None, idle_ms: None },
        ResetMode::Idle if idle_ms.is_none() => return Err("mode = \"idle\" needs idle_minutes".into()),
        ResetMode::Idle => Reset { daily: None, idle_ms },
        ResetMode::Daily => Reset { daily, idle_ms },
    })
}

impl Reset {
    /// Whether a session last used at `used` (ms) is stale at `now`, local time in `tz`.
    pub fn stale(&self, used: i64, now: i64, tz: &TimeZone) -> bool {
        if self.idle_ms.is_some_and(|idle| now - used > idle) {
            return true;
        }
        let Some(at) = self.daily else { return false };
        let Ok(now_local) = Timestamp::from_millisecond(now).map(|t| t.to_zoned(tz.clone())) else { return false };
        // The latest reset time not after now: today's, or yesterday's if today's is still ahead.
        let today = now_local.date().to_datetime(at).to_zoned(tz.clone());
        let last = match today {
            Ok(t) if t.timestamp().as_millisecond() <= now => Some(t),
            _ => now_local.date().yesterday().ok().and_then(|d| d.to_datetime(at).to_zoned(tz.clone()).ok()),
        };
        last.is_some_and(|last| used < last.timestamp().as_millisecond())
    }
}

/// The type of chat session `key` is, by its key's shape (`…:group:…`, `…:topic:…`).
pub fn chat_type(key: &str) -> ChatType {
    let parts: Vec<&str> = key.split(':').collect();
    if parts.iter().any(|p| matches!(*p, "topic" | "thread")) {
        ChatType::Thread
    } else if parts.iter().any(|p| matches!(*p, "group" | "channel")) {
        ChatType::Group
    } else {
        ChatType::Direct
    }
}

impl Gateway {
    /// A chat's message is about to run on session `key`: if the session is stale by its
    /// policy, it is moved aside first. Errors are logged; the message runs either way.
    pub(super) async fn reset_if_stale(&self, key: &str) {
        let config = self.runtime.config();
        // The channel, whichever of its accounts (`telegram:work` is `telegram`'s).
        let channel =
            self.channels.outbox.own_chat(key).map(|c| c.channel.split(':').next().unwrap_or_default().to_owned());
        let policy = match policy(&config, channel.as_deref(), chat_type(key)) {
            Ok(policy) if policy.daily.is_some() || policy.idle_ms.is_some() => policy,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "a session reset policy does not read; no reset");
                return;
            }
        };
        // A session with runs going or waiting is in use, whatever its time; one a control
        // client (an editor through the bridge, the web chat) runs in is theirs too.
        if self.open.busy(key) || !self.hub.turn_of(key, None).is_empty() || self.open.client_driven(key) {
            return;
        }
        let used = match self.runtime.session_summary(key).await {
            Ok(Some(s)) => s.updated_at,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, session = key, "could not read when a session was last used; no reset");
                return;
            }
        };
        let now = now_ms();
        if !policy.stale(used, now, &TimeZone::system()) {
            return;
        }
        let when = Timestamp::from_millisecond(used).map(|t| t.strftime("%Y-%m-%dT%H-%M-%S").to_string());
        let archived = format!("{key}:reset:{}", when.unwrap_or_else(|_| used.to_string()));
        self.close_session(key).await;
        match self.runtime.archive_session(key, &archived).await {
            Ok(()) => {
                tracing::info!(session = key, kept_as = %archived, "the chat's session starts afresh (session reset)");
                self.hub.changed(key, "reset", None);
            }
            Err(e) => tracing::warn!(error = %e, session = key, "could not reset a stale session; it goes on"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(iso: &str) -> i64 {
        iso.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn a_session_is_stale_after_the_days_reset_time_or_its_idle_time() {
        let utc = TimeZone::UTC;
        let daily = read(ResetPolicy::default()).unwrap();
        assert_eq!(daily, Reset { daily: Some(Time::constant(4, 0, 0, 0)), idle_ms: None });
        // Used yesterday evening: stale after 4 am, not before.
        assert!(!daily.stale(ms("2026-11-26T22:00:00Z"), ms("2026-11-27T03:59:00Z"), &utc));
        assert!(daily.stale(ms("2026-11-26T22:00:00Z"), ms("2026-11-27T04:00:00Z"), &utc));
        assert!(!daily.stale(ms("2026-11-27T04:30:00Z"), ms("2026-11-27T23:00:00Z"), &utc));
        let idle = read(ResetPolicy { mode: Some(ResetMode::Idle), idle_minutes: Some(30.0), ..Default::default() });
        let idle = idle.unwrap();
        assert!(!idle.stale(ms("2026-11-27T10:00:00Z"), ms("2026-11-27T10:29:00Z"), &utc));
        assert!(idle.stale(ms("2026-11-27T10:00:00Z"), ms("2026-11-27T10:31:00Z"), &utc));
        let off = read(ResetPolicy { mode: Some(ResetMode::Off), ..Default::default() }).unwrap();
        assert!(!off.stale(0, ms("2026-11-27T10:31:00Z"), &utc));
        assert!(read(ResetPolicy { at_hour: Some(24), ..Default::default() }).is_err());
        assert!(read(ResetPolicy { at: Some("4 am".into()), ..Default::default() }).is_err());
        assert!(read(ResetPolicy { mode: Some(ResetMode::Idle), ..Default::default() }).is_err());
    }

    #[test]
    fn chat_types_read_from_keys() {
        assert_eq!(chat_type("agent:main:main"), ChatType::Direct);
        assert_eq!(chat_type("agent:main:telegram:dm:1"), ChatType::Direct);
        assert_eq!(chat_type("agent:main:telegram:group:-100"), ChatType::Group);
        assert_eq!(chat_type("agent:main:telegram:group:-100:topic:7"), ChatType::Thread);
    }
}
