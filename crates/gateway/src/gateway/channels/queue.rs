//! What happens to channel messages that arrive while their session runs: the queue mode
//! (`collect`, `followup`, `steer`, `steer-backlog`, `interrupt`), the quiet time before queued
//! messages run (`debounce`), how many wait (`cap`) and which go beyond it (`drop`: the oldest, the
//! newest, or the oldest kept as a short summary that runs with the rest). Set in
//! `[messages.queue]` (per channel with `by_channel`) and per session with
//! `/queue MODE debounce:2s cap:25 drop:summarize` (`/queue default` clears the session's).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::QueueConfig;
use crate::runtime::UserBlock;

/// A message to run: its text, and what came with it (images, files), as prompt blocks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prompt {
    pub text: String,
    pub attached: Vec<UserBlock>,
    /// Who sent it, from which chat (its run answers there); for a joined prompt, the last's.
    pub from: Option<Origin>,
    /// Some of it came from a guest (someone who is not an owner): its run is restricted.
    pub guest: bool,
    /// Some of it is another agent's words (a subagent's announcement): no directive in it is read.
    pub agent: bool,
}

/// Where a queued message came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub peer: String,
    pub thread: Option<String>,
    pub kind: super::routing::PeerKind,
    pub sender: String,
}

impl Prompt {
    /// The blocks of the prompt: the text first.
    pub fn blocks(self) -> Vec<UserBlock> {
        let mut blocks = Vec::with_capacity(1 + self.attached.len());
        if !self.text.is_empty() || self.attached.is_empty() {
            blocks.push(UserBlock::Text { text: self.text });
        }
        blocks.extend(self.attached);
        blocks
    }

    /// Several messages as one (`collect`): texts in order, then everything attached.
    fn joined(all: Vec<Prompt>) -> Prompt {
        let mut texts = Vec::new();
        let mut attached = Vec::new();
        let mut from = None;
        let (mut guest, mut agent) = (false, false);
        for p in all {
            if !p.text.is_empty() {
                texts.push(p.text);
            }
            attached.extend(p.attached);
            from = p.from.or(from);
            guest |= p.guest;
            agent |= p.agent;
        }
        Prompt { text: texts.join("\n\n"), attached, from, guest, agent }
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Self { text, attached: Vec::new(), from: None, guest: false, agent: false }
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Everything that arrived runs as one prompt when the run ends.
    #[default]
    Collect,
    /// Each runs on its own, in order, after the run.
    Followup,
    /// Into the running turn, read by the model at its next tool boundary; a follow-up when the
    /// turn takes no more (it was writing its answer).
    Steer,
    /// Into the running turn, and also kept as a follow-up.
    SteerBacklog,
    /// The run is stopped and the newest message runs instead.
    Interrupt,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "collect" => Self::Collect,
            "followup" | "follow-up" => Self::Followup,
            "steer" | "queue" => Self::Steer,
            "steer-backlog" | "steer+backlog" => Self::SteerBacklog,
            "interrupt" => Self::Interrupt,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Collect => "collect",
            Self::Followup => "followup",
            Self::Steer => "steer",
            Self::SteerBacklog => "steer-backlog",
            Self::Interrupt => "interrupt",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drop {
    /// The oldest waiting message goes.
    Old,
    /// The new message is refused.
    New,
    /// The oldest goes, kept as a line of a summary that runs with the rest.
    #[default]
    Summarize,
}

impl Drop {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "old" => Self::Old,
            "new" => Self::New,
            "summarize" => Self::Summarize,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Old => "old",
            Self::New => "new",
            Self::Summarize => "summarize",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub mode: Mode,
    #[serde(with = "millis")]
    pub debounce: Duration,
    pub cap: usize,
    pub drop: Drop,
}

impl Default for Settings {
    fn default() -> Self {
        Self { mode: Mode::Collect, debounce: Duration::from_millis(1000), cap: 20, drop: Drop::Summarize }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

impl Settings {
    /// The defaults from `[messages.queue]` for `channel`; an error names the bad setting.
    pub fn from_config(config: &QueueConfig, channel: &str) -> Result<Self, String> {
        let mut s = Self::default();
        let mode = config.by_channel.get(channel).or(config.mode.as_ref());
        if let Some(mode) = mode {
            s.mode = Mode::parse(mode).ok_or_else(|| {
                format!("[messages.queue] mode `{mode}`: use collect, followup, steer, steer-backlog or interrupt")
            })?;
        }
        if let Some(ms) = config.debounce_ms {
            s.debounce = Duration::from_millis(ms);
            if s.debounce > MAX_DEBOUNCE {
                return Err("[messages.queue] debounce_ms: at most 60000".into());
            }
        }
        if let Some(cap) = config.cap {
            if cap == 0 || cap > MAX_CAP {
                return Err(format!("[messages.queue] cap: from 1 to {MAX_CAP}"));
            }
            s.cap = cap;
        }
        if let Some(drop) = &config.drop {
            s.drop = Drop::parse(drop)
                .ok_or_else(|| format!("[messages.queue] drop `{drop}`: use old, new or summarize"))?;
        }
        Ok(s)
    }

    pub fn describe(&self) -> String {
        format!(
            "{} (debounce {} ms, cap {}, drop {})",
            self.mode.name(),
            self.debounce.as_millis(),
            self.cap,
            self.drop.name()
        )
    }
}

/// The longest quiet time and the largest queue a session may ask for.
const MAX_DEBOUNCE: Duration = Duration::from_secs(60);
const MAX_CAP: usize = 1000;

/// What `/queue …` asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Show,
    /// Back to the configured defaults.
    Reset,
    Set(Settings),
}

/// Reads `/queue`'s arguments over the session's current settings: a mode and/or
/// `debounce:2s` (`500ms`, `1m`, or milliseconds), `cap:N`, `drop:old|new|summarize`.
pub fn parse_command(args: &str, current: Settings) -> Result<Asked, String> {
    let args = args.trim().to_lowercase();
    let args = args.as_str();
    if args.is_empty() {
        return Ok(Asked::Show);
    }
    if matches!(args, "default" | "reset") {
        return Ok(Asked::Reset);
    }
    let mut s = current;
    for word in args.split_whitespace() {
        let word = word.to_lowercase();
        if let Some((key, value)) = word.split_once(':') {
            match key {
                "debounce" => {
                    s.debounce = duration(value)
                        .filter(|d| *d <= MAX_DEBOUNCE)
                        .ok_or_else(|| format!("`{word}`: use debounce:2s (at most 60s)"))?;
                }
                "cap" => {
                    s.cap = value
                        .parse()
                        .ok()
                        .filter(|&n| n > 0 && n <= MAX_CAP)
                        .ok_or_else(|| format!("`{word}`: use cap:20 (1 to {MAX_CAP})"))?;
                }
                "drop" => {
                    s.drop = Drop::parse(value).ok_or_else(|| format!("`{word}`: use drop:old, new or summarize"))?;
                }
                _ => return Err(format!("unknown option `{word}`: use debounce:, cap: or drop:")),
            }
        } else {
            s.mode = Mode::parse(&word).ok_or_else(|| {
                format!("unknown queue mode `{word}`: use collect, followup, steer, steer-backlog or interrupt")
            })?;
        }
    }
    Ok(Asked::Set(s))
}

fn duration(s: &str) -> Option<Duration> {
    let (number, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = number.parse().ok()?;
    match unit {
        "" | "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        _ => None,
    }
}

/// Messages waiting for a session's run to end.
#[derive(Debug, Default)]
pub struct Waiting {
    /// Each message, and whether it is a command (never joined with others).
    items: VecDeque<(Prompt, bool)>,
    /// Dropped under `summarize`: one short line each.
    dropped: Vec<String>,
    /// Some of what was dropped came from a guest (the summary run is restricted then).
    dropped_guest: bool,
}

impl Waiting {
    /// Queues `text`; false if it was refused (`drop: new` with the queue full).
    pub fn push(&mut self, prompt: impl Into<Prompt>, settings: &Settings) -> bool {
        self.push_item(prompt.into(), false, settings)
    }

    /// Queues a slash command: it runs on its own, in its place.
    pub fn push_command(&mut self, command: impl Into<Prompt>, settings: &Settings) -> bool {
        self.push_item(command.into(), true, settings)
    }

    fn push_item(&mut self, prompt: Prompt, command: bool, settings: &Settings) -> bool {
        if settings.mode == Mode::Interrupt {
            self.items.clear();
        }
        if self.items.len() >= settings.cap {
            match settings.drop {
                Drop::New => return false,
                Drop::Old => {
                    self.items.pop_front();
                }
                Drop::Summarize => {
                    if let Some((old, _)) = self.items.pop_front() {
                        self.dropped.push(short(&old.text));
                        self.dropped_guest |= old.guest;
                    }
                }
            }
        }
        self.items.push_back((prompt, command));
        true
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.dropped.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.dropped.clear();
        self.dropped_guest = false;
    }

    /// The next prompt to run: under `collect` every message up to the next command, else the
    /// oldest; a command always alone. A summary of what was dropped comes first.
    pub fn next(&mut self, mode: Mode) -> Option<Prompt> {
        if let Some((_, true)) = self.items.front() {
            return self.items.pop_front().map(|(command, _)| command);
        }
        let body = match mode {
            Mode::Collect => {
                let mut all = Vec::new();
                while let Some((_, false)) = self.items.front() {
                    all.extend(self.items.pop_front().map(|(prompt, _)| prompt));
                }
                (!all.is_empty()).then(|| Prompt::joined(all))
            }
            _ => self.items.pop_front().map(|(prompt, _)| prompt),
        };
        if self.dropped.is_empty() {
            return body;
        }
        let dropped = std::mem::take(&mut self.dropped);
        let mut guest = std::mem::take(&mut self.dropped_guest);
        let mut text = format!(
            "[{} earlier message{} did not fit in the queue; in short:]\n",
            dropped.len(),
            if dropped.len() == 1 { "" } else { "s" }
        );
        for line in dropped {
            text.push_str(&format!("- {line}\n"));
        }
        let (mut attached, mut from, mut agent) = (Vec::new(), None, false);
        if let Some(body) = body {
            text.push('\n');
            text.push_str(&body.text);
            attached = body.attached;
            from = body.from;
            guest |= body.guest;
            agent = body.agent;
        }
        Some(Prompt { text, attached, from, guest, agent })
    }
}

/// One line of at most 120 characters.
fn short(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= 120 {
        return line;
    }
    let mut cut: String = line.chars().take(119).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: Mode, cap: usize, drop: Drop) -> Settings {
        Settings { mode, cap, drop, ..Settings::default() }
    }

    #[test]
    fn the_command_sets_modes_and_options() {
        let d = Settings::default();
        assert_eq!(parse_command("", d), Ok(Asked::Show));
        assert_eq!(parse_command(" reset ", d), Ok(Asked::Reset));
        assert_eq!(parse_command("default", d), Ok(Asked::Reset));
        let Ok(Asked::Set(s)) = parse_command("followup debounce:2s cap:25 drop:old", d) else { panic!() };
        assert_eq!(s, Settings { mode: Mode::Followup, debounce: Duration::from_secs(2), cap: 25, drop: Drop::Old });
        let Ok(Asked::Set(s)) = parse_command("cap:3", s) else { panic!() };
        assert_eq!((s.mode, s.cap), (Mode::Followup, 3), "options alone keep the mode");
        let Ok(Asked::Set(s)) = parse_command("STEER+backlog debounce:500ms", d) else { panic!() };
        assert_eq!((s.mode, s.debounce), (Mode::SteerBacklog, Duration::from_millis(500)));
        assert_eq!(parse_command("queue", d).map(|a| matches!(a, Asked::Set(s) if s.mode == Mode::Steer)), Ok(true));
        for bad in ["later", "cap:0", "cap:x", "cap:5000", "drop:all", "debounce:2h", "debounce:61s", "size:3"] {
            assert!(parse_command(bad, d).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_defaults_per_channel_and_errors_name_the_setting() {
        let mut c = QueueConfig { mode: Some("followup".into()), ..QueueConfig::default() };
        c.by_channel.insert("telegram".into(), "interrupt".into());
        assert_eq!(Settings::from_config(&c, "telegram").map(|s| s.mode), Ok(Mode::Interrupt));
        assert_eq!(Settings::from_config(&c, "slack").map(|s| s.mode), Ok(Mode::Followup));
        c.drop = Some("everything".into());
        assert!(Settings::from_config(&c, "slack").is_err_and(|e| e.contains("[messages.queue] drop")));
    }

    #[test]
    fn collect_runs_everything_at_once_followup_one_by_one() {
        let s = settings(Mode::Collect, 20, Drop::Summarize);
        let mut w = Waiting::default();
        for t in ["a", "b", "c"] {
            assert!(w.push(t, &s));
        }
        assert_eq!(w.next(Mode::Collect).map(|p| p.text).as_deref(), Some("a\n\nb\n\nc"));
        assert_eq!(w.next(Mode::Collect), None);
        for t in ["a", "b"] {
            w.push(t, &s);
        }
        assert_eq!(w.next(Mode::Followup).map(|p| p.text).as_deref(), Some("a"));
        assert_eq!(w.next(Mode::Followup).map(|p| p.text).as_deref(), Some("b"));
        assert!(w.is_empty());
    }

    #[test]
    fn beyond_the_cap_old_new_or_summarized() {
        let mut w = Waiting::default();
        let s = settings(Mode::Followup, 2, Drop::Old);
        for t in ["1", "2", "3"] {
            assert!(w.push(t, &s));
        }
        assert_eq!((w.next(Mode::Followup), w.next(Mode::Followup)), (Some("2".into()), Some("3".into())));
        w.clear();
        let image = UserBlock::Image { mime_type: "image/png".into(), data: "AA==".into(), uri: None };
        let s2 = settings(Mode::Collect, 20, Drop::Old);
        w.push(
            Prompt { text: "look".into(), attached: vec![image.clone()], from: None, guest: false, agent: false },
            &s2,
        );
        w.push("and this", &s2);
        let both = w.next(Mode::Collect).unwrap_or_default();
        assert_eq!(both.clone().blocks(), vec![UserBlock::text("look\n\nand this"), image], "{both:?}");
        let s = settings(Mode::Followup, 2, Drop::New);
        assert!(w.push("1", &s) && w.push("2", &s));
        assert!(!w.push("3", &s), "the newest is refused");
        w.clear();
        let s = settings(Mode::Collect, 2, Drop::Summarize);
        for t in ["first  message\nwith lines", "2", "3", "4"] {
            w.push(t, &s);
        }
        assert_eq!(
            w.next(Mode::Collect).map(|p| p.text).as_deref(),
            Some("[2 earlier messages did not fit in the queue; in short:]\n- first message with lines\n- 2\n\n3\n\n4")
        );
        assert!(w.is_empty());
        let long = "x ".repeat(200);
        w.push(long.clone(), &s);
        w.push("b", &s);
        w.push("c", &s);
        let next = w.next(Mode::Followup).unwrap_or_default().text;
        assert!(next.contains("- x x") && next.contains('…') && next.ends_with("\n\nb"), "{next}");
    }

    #[test]
    fn commands_are_never_collected_with_messages() {
        let s = settings(Mode::Collect, 20, Drop::Summarize);
        let mut w = Waiting::default();
        w.push("a", &s);
        w.push("b", &s);
        w.push_command("/new", &s);
        w.push("c", &s);
        assert_eq!(w.next(Mode::Collect).map(|p| p.text).as_deref(), Some("a\n\nb"));
        assert_eq!(w.next(Mode::Collect).map(|p| p.text).as_deref(), Some("/new"));
        assert_eq!(w.next(Mode::Collect).map(|p| p.text).as_deref(), Some("c"));
        assert!(w.is_empty());
    }

    #[test]
    fn interrupt_keeps_only_the_newest() {
        let s = settings(Mode::Interrupt, 20, Drop::Summarize);
        let mut w = Waiting::default();
        for t in ["a", "b", "c"] {
            w.push(t, &s);
        }
        assert_eq!(w.next(Mode::Interrupt).map(|p| p.text).as_deref(), Some("c"));
    }
}
