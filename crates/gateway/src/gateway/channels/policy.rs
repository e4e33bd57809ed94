//! Where replies may be delivered (`[session.send_policy]`: rules on channel, chat type and key
//! prefix, the first match deciding, plus a per-session `/send on|off|inherit`), and the
//! per-session choices made from a chat (`/queue`, `/send`, `/verbose`, `/reasoning`), kept in
//! `$ACP_HOME/channels/sessions.json` so a restart keeps them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::queue;
use super::routing::PeerKind;
use crate::config::{SendMatch, SendPolicyConfig};
use crate::sync::lock;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendPolicy {
    deny_by_default: bool,
    rules: Vec<(bool, SendMatch)>,
}

fn action(s: &str) -> Result<bool, String> {
    match s {
        "allow" => Ok(true),
        "deny" => Ok(false),
        other => Err(format!("[session.send_policy] action `{other}`: use allow or deny")),
    }
}

impl SendPolicy {
    pub fn from_config(config: Option<&SendPolicyConfig>) -> Result<Self, String> {
        let Some(config) = config else { return Ok(Self::default()) };
        let deny_by_default = !action(config.default.as_deref().unwrap_or("allow"))?;
        let mut rules = Vec::new();
        for rule in &config.rules {
            if let Some(t) = &rule.matches.chat_type
                && !matches!(t.as_str(), "direct" | "group" | "channel")
            {
                return Err(format!("[session.send_policy] chat_type `{t}`: use direct, group or channel"));
            }
            rules.push((action(&rule.action)?, rule.matches.clone()));
        }
        Ok(Self { deny_by_default, rules })
    }

    /// Whether session `key` (a chat of `kind` on `channel`) may be sent to; `session`: its
    /// own `/send on|off`, which wins.
    pub fn allows(&self, channel: &str, kind: PeerKind, key: &str, session: Option<bool>) -> bool {
        if let Some(own) = session {
            return own;
        }
        let chat_type = match kind {
            PeerKind::Direct => "direct",
            PeerKind::Group => "group",
            PeerKind::Channel => "channel",
        };
        // `agent:<id>:rest`: a prefix may name the rest or the whole key.
        let rest = key.strip_prefix("agent:").and_then(|k| k.split_once(':')).map_or(key, |(_, rest)| rest);
        for (allow, m) in &self.rules {
            let matches = m.channel.as_deref().is_none_or(|c| c == channel)
                && m.chat_type.as_deref().is_none_or(|t| t == chat_type)
                && m.key_prefix.as_deref().is_none_or(|p| rest.starts_with(p) || key.starts_with(p));
            if matches {
                return *allow;
            }
        }
        !self.deny_by_default
    }
}

/// What a chat chose for its session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prefs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<queue::Settings>,
    /// `/send on|off`; none inherits the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose: Option<Verbose>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ShowReasoning>,
}

/// What a chat is shown of a run's tool calls (`/verbose`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verbose {
    /// The reply only.
    #[default]
    Off,
    /// A line for each tool call as it starts.
    On,
    /// Each tool call as it ends, with its output.
    Full,
}

/// What a chat is shown of the model's reasoning (`/reasoning`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShowReasoning {
    #[default]
    Off,
    /// A message of its own when it ends, before what follows it.
    On,
    /// Sent as it comes, in pieces.
    Stream,
}

impl Verbose {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_lowercase().as_str() {
            "off" => Some(Self::Off),
            "on" => Some(Self::On),
            "full" => Some(Self::Full),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Full => "full",
        }
    }
}

impl ShowReasoning {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_lowercase().as_str() {
            "off" => Some(Self::Off),
            "on" => Some(Self::On),
            "stream" => Some(Self::Stream),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Stream => "stream",
        }
    }
}

/// What a chat is shown of a run besides its reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Show {
    pub verbose: Verbose,
    pub reasoning: ShowReasoning,
}

impl Show {
    /// The chat's own choices.
    pub fn of(prefs: &Prefs) -> Self {
        Self { verbose: prefs.verbose.unwrap_or_default(), reasoning: prefs.reasoning.unwrap_or_default() }
    }

    /// Takes a `/verbose` or `/reasoning` directive's argument; false if it is not one.
    pub fn take(&mut self, name: &str, arg: &str) -> bool {
        match name {
            "verbose" => Verbose::parse(arg).map(|v| self.verbose = v).is_some(),
            "reasoning" => ShowReasoning::parse(arg).map(|r| self.reasoning = r).is_some(),
            _ => false,
        }
    }
}

/// Every session's [`Prefs`], on disk.
pub struct SessionPrefs {
    path: PathBuf,
    all: Mutex<BTreeMap<String, Prefs>>,
}

impl SessionPrefs {
    /// Reads `channels/sessions.json` under `home`; a damaged file is an error (never reset).
    pub fn load(home: &Path) -> Result<Self, String> {
        let path = home.join("channels").join("sessions.json");
        let all = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{} is damaged: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("could not read {}: {e}", path.display())),
        };
        Ok(Self { path, all: Mutex::new(all) })
    }

    pub fn get(&self, key: &str) -> Prefs {
        lock(&self.all).get(key).cloned().unwrap_or_default()
    }

    /// Changes session `key`'s choices and saves them.
    pub fn change(&self, key: &str, change: impl FnOnce(&mut Prefs)) {
        let mut all = lock(&self.all);
        let prefs = all.entry(key.to_owned()).or_default();
        change(prefs);
        if *prefs == Prefs::default() {
            all.remove(key);
        }
        let text = serde_json::to_string_pretty(&*all).unwrap_or_default();
        drop(all);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = self.path.with_extension("tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.path)) {
            tracing::warn!(error = %e, path = %self.path.display(), "could not keep a session's chat settings");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SendRule;

    fn rule(action: &str, channel: Option<&str>, chat_type: Option<&str>, key_prefix: Option<&str>) -> SendRule {
        SendRule {
            action: action.into(),
            matches: SendMatch {
                channel: channel.map(Into::into),
                chat_type: chat_type.map(Into::into),
                key_prefix: key_prefix.map(Into::into),
            },
        }
    }

    #[test]
    fn the_first_matching_rule_decides_and_a_session_override_wins() {
        let config = SendPolicyConfig {
            default: Some("allow".into()),
            rules: vec![
                rule("allow", Some("telegram"), Some("group"), Some("telegram:group:-100")),
                rule("deny", Some("telegram"), Some("group"), None),
                rule("deny", None, None, Some("cron:")),
            ],
        };
        let p = SendPolicy::from_config(Some(&config)).expect("valid");
        assert!(p.allows("telegram", PeerKind::Direct, "agent:main:main", None));
        assert!(!p.allows("telegram", PeerKind::Group, "agent:main:telegram:group:-5", None));
        assert!(p.allows("telegram", PeerKind::Group, "agent:main:telegram:group:-100", None));
        assert!(!p.allows("webchat", PeerKind::Direct, "agent:main:cron:daily", None));
        assert!(p.allows("telegram", PeerKind::Group, "agent:main:telegram:group:-5", Some(true)));
        assert!(!p.allows("telegram", PeerKind::Direct, "agent:main:main", Some(false)));
        let deny = SendPolicySettings::deny();
        assert!(!SendPolicy::from_config(Some(&deny)).expect("valid").allows("x", PeerKind::Direct, "k", None));
        assert!(SendPolicy::default().allows("x", PeerKind::Group, "k", None));
    }

    struct SendPolicySettings;
    impl SendPolicySettings {
        fn deny() -> SendPolicyConfig {
            SendPolicyConfig { default: Some("deny".into()), rules: Vec::new() }
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = SendPolicyConfig { default: Some("maybe".into()), rules: Vec::new() };
        assert!(SendPolicy::from_config(Some(&bad)).is_err_and(|e| e.contains("action `maybe`")));
        let bad = SendPolicyConfig { default: None, rules: vec![rule("deny", None, Some("dm"), None)] };
        assert!(SendPolicy::from_config(Some(&bad)).is_err_and(|e| e.contains("chat_type `dm`")));
    }

    #[test]
    fn prefs_survive_a_restart_and_a_damaged_file_is_an_error() {
        let home = tempfile::tempdir().expect("tempdir");
        let prefs = SessionPrefs::load(home.path()).expect("empty");
        prefs.change("k", |p| p.send = Some(false));
        let queue = queue::Settings { mode: queue::Mode::Followup, ..queue::Settings::default() };
        prefs.change("k", |p| p.queue = Some(queue));
        let again = SessionPrefs::load(home.path()).expect("kept");
        again.change("k", |p| p.verbose = Some(Verbose::Full));
        let again = SessionPrefs::load(home.path()).expect("kept");
        assert_eq!(
            again.get("k"),
            Prefs { queue: Some(queue), send: Some(false), verbose: Some(Verbose::Full), reasoning: None }
        );
        again.change("k", |p| *p = Prefs::default());
        assert_eq!(SessionPrefs::load(home.path()).expect("kept").get("k"), Prefs::default());
        std::fs::write(home.path().join("channels/sessions.json"), "{oops").expect("write");
        assert!(SessionPrefs::load(home.path()).is_err_and(|e| e.contains("damaged")));
    }
}
