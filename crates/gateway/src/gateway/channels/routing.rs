//! Which agent and which session an inbound message belongs to, by the seed's rules. Direct chats
//! follow `dmScope` — `main` (every DM in the agent's main session), `per-peer`, `per-channel-peer`
//! or `per-account-channel-peer` — with `identityLinks` folding one person's ids on several
//! channels into one name; groups and channels get their own keys, and a forum topic its own
//! beneath its group's. The agent comes from the most specific binding: peer, then account, then
//! channel, else the default.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Who a message comes from, as a channel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    Direct,
    Group,
    /// A broadcast channel or a room.
    Channel,
}

/// One inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `telegram`, …
    pub channel: String,
    /// The bot or account that received it (`default` for a single account).
    pub account: String,
    /// The chat: the user for a direct chat, else the group or channel.
    pub peer: String,
    pub kind: PeerKind,
    /// The person who wrote it.
    pub sender: String,
    pub sender_name: String,
    pub message_id: String,
    /// The text (a media message's caption).
    pub text: String,
    /// Files, photos and the like that came with it.
    pub attachments: Vec<Attachment>,
    pub reply_to: Option<String>,
    /// A forum topic.
    pub thread: Option<String>,
    /// Whether it addresses the bot (a mention, or a reply to it); groups answer only then.
    pub mentioned: bool,
}

/// Something sent with a message, as the channel names it (fetched only when used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `photo`, `document`, `voice`, `audio`, `video`, `sticker`, …
    pub kind: String,
    /// The channel's id for fetching it.
    pub id: String,
    pub name: Option<String>,
    pub mime: Option<String>,
    pub size: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmScope {
    /// Every direct chat shares the agent's main session (one user, continuity everywhere).
    #[default]
    Main,
    PerPeer,
    PerChannelPeer,
    PerAccountChannelPeer,
}

/// A rule sending matching messages to an agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub agent: String,
    pub channel: Option<String>,
    pub account: Option<String>,
    pub peer: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Routing {
    #[serde(default)]
    pub dm_scope: DmScope,
    /// The main session's key (`main`).
    #[serde(default)]
    pub main_key: Option<String>,
    /// A canonical name → the channel-prefixed ids that are that person (`telegram:123`).
    #[serde(default)]
    pub identity_links: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
}

/// Characters a key part may not contain (they separate the parts).
fn part(s: &str) -> String {
    s.chars().map(|c| if c == ':' || c.is_whitespace() || c.is_control() { '_' } else { c }).collect()
}

impl Routing {
    /// The agent a message goes to: the most specific binding that matches.
    pub fn agent_for(&self, env: &Envelope) -> String {
        let matches = |b: &&Binding| {
            b.channel.as_ref().is_none_or(|c| *c == env.channel)
                && b.account.as_ref().is_none_or(|a| *a == env.account)
                && b.peer.as_ref().is_none_or(|p| *p == env.peer)
        };
        let rank = |b: &Binding| (b.peer.is_some(), b.account.is_some(), b.channel.is_some());
        self.bindings
            .iter()
            .filter(matches)
            .max_by_key(|b| rank(b))
            .map_or_else(|| "main".to_owned(), |b| b.agent.clone())
    }

    /// The person's canonical name, if an identity link names them.
    fn identity(&self, channel: &str, id: &str) -> Option<&str> {
        let prefixed = format!("{channel}:{id}");
        self.identity_links.iter().find(|(_, ids)| ids.contains(&prefixed)).map(|(name, _)| name.as_str())
    }

    /// The session key of a message.
    pub fn session_key(&self, env: &Envelope) -> String {
        let agent = part(&self.agent_for(env));
        let channel = part(&env.channel);
        let key = match env.kind {
            PeerKind::Direct => {
                let peer = part(self.identity(&env.channel, &env.peer).unwrap_or(&env.peer));
                match self.dm_scope {
                    DmScope::Main => format!("agent:{agent}:{}", part(self.main_key.as_deref().unwrap_or("main"))),
                    DmScope::PerPeer => format!("agent:{agent}:dm:{peer}"),
                    DmScope::PerChannelPeer => format!("agent:{agent}:{channel}:dm:{peer}"),
                    DmScope::PerAccountChannelPeer => {
                        format!("agent:{agent}:{channel}:{}:dm:{peer}", part(&env.account))
                    }
                }
            }
            PeerKind::Group => format!("agent:{agent}:{channel}:group:{}", part(&env.peer)),
            PeerKind::Channel => format!("agent:{agent}:{channel}:channel:{}", part(&env.peer)),
        };
        match (&env.thread, env.kind) {
            (Some(thread), PeerKind::Group | PeerKind::Channel) => format!("{key}:topic:{}", part(thread)),
            _ => key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dm(channel: &str, peer: &str) -> Envelope {
        Envelope {
            channel: channel.into(),
            account: "default".into(),
            peer: peer.into(),
            kind: PeerKind::Direct,
            sender: peer.into(),
            sender_name: "Ada".into(),
            message_id: "1".into(),
            text: "hi".into(),
            attachments: Vec::new(),
            reply_to: None,
            thread: None,
            mentioned: false,
        }
    }

    #[test]
    fn direct_chats_follow_the_dm_scope() {
        let mut r = Routing::default();
        let env = dm("telegram", "123");
        assert_eq!(r.session_key(&env), "agent:main:main");
        r.dm_scope = DmScope::PerPeer;
        assert_eq!(r.session_key(&env), "agent:main:dm:123");
        r.dm_scope = DmScope::PerChannelPeer;
        assert_eq!(r.session_key(&env), "agent:main:telegram:dm:123");
        r.dm_scope = DmScope::PerAccountChannelPeer;
        assert_eq!(r.session_key(&env), "agent:main:telegram:default:dm:123");
        r.dm_scope = DmScope::Main;
        r.main_key = Some("home".into());
        assert_eq!(r.session_key(&env), "agent:main:home");
    }

    #[test]
    fn one_person_on_two_channels_shares_a_session_through_an_identity_link() {
        let mut r = Routing { dm_scope: DmScope::PerPeer, ..Routing::default() };
        r.identity_links.insert("ada".into(), vec!["telegram:123".into(), "discord:987".into()]);
        assert_eq!(r.session_key(&dm("telegram", "123")), "agent:main:dm:ada");
        assert_eq!(r.session_key(&dm("discord", "987")), "agent:main:dm:ada");
        assert_eq!(r.session_key(&dm("telegram", "555")), "agent:main:dm:555");
    }

    #[test]
    fn groups_channels_and_topics_get_their_own_keys() {
        let r = Routing::default();
        let mut env = dm("telegram", "-100200");
        env.kind = PeerKind::Group;
        assert_eq!(r.session_key(&env), "agent:main:telegram:group:-100200");
        env.thread = Some("42".into());
        assert_eq!(r.session_key(&env), "agent:main:telegram:group:-100200:topic:42");
        env.kind = PeerKind::Channel;
        env.thread = None;
        assert_eq!(r.session_key(&env), "agent:main:telegram:channel:-100200");
        // Separators in ids cannot forge another key.
        let env = dm("telegram", "1:group:2");
        let r = Routing { dm_scope: DmScope::PerChannelPeer, ..Routing::default() };
        assert_eq!(r.session_key(&env), "agent:main:telegram:dm:1_group_2");
    }

    #[test]
    fn the_most_specific_binding_picks_the_agent() {
        let bind = |agent: &str, channel: Option<&str>, account: Option<&str>, peer: Option<&str>| Binding {
            agent: agent.into(),
            channel: channel.map(Into::into),
            account: account.map(Into::into),
            peer: peer.map(Into::into),
        };
        let r = Routing {
            bindings: vec![
                bind("by-channel", Some("telegram"), None, None),
                bind("by-peer", Some("telegram"), None, Some("123")),
                bind("by-account", Some("telegram"), Some("work"), None),
            ],
            dm_scope: DmScope::PerPeer,
            ..Routing::default()
        };
        assert_eq!(r.agent_for(&dm("telegram", "123")), "by-peer");
        let mut env = dm("telegram", "9");
        assert_eq!(r.agent_for(&env), "by-channel");
        env.account = "work".into();
        assert_eq!(r.agent_for(&env), "by-account");
        assert_eq!(r.agent_for(&dm("discord", "1")), "main");
        assert_eq!(r.session_key(&dm("telegram", "123")), "agent:by-peer:dm:123");
    }
}
