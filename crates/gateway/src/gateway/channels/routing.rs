//! Which agent and which session an inbound message belongs to, by the seed's rules. Direct chats
//! follow `dmScope` — `main` (every DM in the agent's main session), `per-peer`, `per-channel-peer`
//! or `per-account-channel-peer` — with `identityLinks` folding one person's ids on several
//! channels into one name; groups and channels get their own keys, and a forum topic its own
//! beneath its group's. The agent comes from the most specific binding (`[[bindings]]`): peer,
//! then guild (a Discord server), then team (a Slack workspace), then account, then channel, else
//! the default agent. Bindings are indexed, so a lookup costs a few hash probes however many
//! there are.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

pub use crate::config::agents::Binding;

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
    /// A forum topic, or a thread.
    pub thread: Option<String>,
    /// The Discord server the message came from.
    pub guild: Option<String>,
    /// The Slack workspace the message came from.
    pub team: Option<String>,
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

/// How specific a binding is, most first.
const TIERS: usize = 6;

/// The bindings, indexed by how specific each is and by what it names: per tier, channel (`""`
/// for any) → the value the tier matches on → the bindings there, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings {
    list: Vec<Binding>,
    index: Vec<HashMap<String, HashMap<String, Vec<usize>>>>,
}

impl Bindings {
    pub fn new(list: Vec<Binding>) -> Self {
        let mut index = vec![HashMap::<String, HashMap<String, Vec<usize>>>::new(); TIERS];
        for (i, b) in list.iter().enumerate() {
            let (tier, value) = if let Some(peer) = &b.peer {
                (0, peer.as_str())
            } else if let Some(guild) = &b.guild {
                (1, guild.as_str())
            } else if let Some(team) = &b.team {
                (2, team.as_str())
            } else if let Some(account) = &b.account {
                (3, account.as_str())
            } else if b.channel.is_some() {
                (4, "")
            } else {
                (5, "")
            };
            let channel = b.channel.clone().unwrap_or_default();
            index[tier].entry(channel).or_default().entry(value.to_owned()).or_default().push(i);
        }
        Self { list, index }
    }

    pub fn list(&self) -> &[Binding] {
        &self.list
    }

    /// The most specific binding matching `env` (among equals, the first in the file).
    pub fn find(&self, env: &Envelope) -> Option<&Binding> {
        let matches = |b: &Binding| {
            b.channel.as_ref().is_none_or(|c| *c == env.channel)
                && b.account.as_ref().is_none_or(|a| *a == env.account)
                && b.peer.as_ref().is_none_or(|p| *p == env.peer)
                && b.guild.as_ref().is_none_or(|g| Some(g) == env.guild.as_ref())
                && b.team.as_ref().is_none_or(|t| Some(t) == env.team.as_ref())
        };
        let values = [
            Some(env.peer.as_str()),
            env.guild.as_deref(),
            env.team.as_deref(),
            Some(env.account.as_str()),
            Some(""),
            Some(""),
        ];
        for (tier, value) in self.index.iter().zip(values) {
            let Some(value) = value else { continue };
            let found = [env.channel.as_str(), ""]
                .iter()
                .filter_map(|channel| tier.get(*channel)?.get(value))
                .flat_map(|candidates| candidates.iter().copied().find(|i| matches(&self.list[*i])))
                .min();
            if let Some(i) = found {
                return Some(&self.list[i]);
            }
        }
        None
    }
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
    #[serde(skip)]
    pub bindings: Bindings,
    /// Where a message no binding matches goes (`main` if not given).
    #[serde(default)]
    pub default_agent: Option<String>,
}

/// Characters a key part may not contain (they separate the parts).
fn part(s: &str) -> String {
    s.chars().map(|c| if c == ':' || c.is_whitespace() || c.is_control() { '_' } else { c }).collect()
}

impl Routing {
    /// From `[session]`, `[[bindings]]` and `[[agents]]`.
    pub fn from_config(config: &crate::config::Config) -> Result<Self, String> {
        let dm_scope = match config.session.dm_scope.as_deref() {
            None | Some("main") => DmScope::Main,
            Some("per-peer") => DmScope::PerPeer,
            Some("per-channel-peer") => DmScope::PerChannelPeer,
            Some("per-account-channel-peer") => DmScope::PerAccountChannelPeer,
            Some(other) => {
                return Err(format!(
                    "[session] dm_scope `{other}`: use main, per-peer, per-channel-peer or per-account-channel-peer"
                ));
            }
        };
        Ok(Self {
            dm_scope,
            main_key: config.session.main_key.clone(),
            identity_links: config.session.identity_links.clone(),
            bindings: Bindings::new(config.bindings.clone()),
            default_agent: Some(config.default_agent().to_owned()),
        })
    }

    /// The agent a message goes to: the most specific binding that matches, else the default.
    pub fn agent_for(&self, env: &Envelope) -> &str {
        self.bindings.find(env).map_or(self.default_agent.as_deref().unwrap_or("main"), |b| b.agent.as_str())
    }

    /// The person's canonical name, if an identity link names them.
    fn identity(&self, channel: &str, id: &str) -> Option<&str> {
        let prefixed = format!("{channel}:{id}");
        self.identity_links.iter().find(|(_, ids)| ids.contains(&prefixed)).map(|(name, _)| name.as_str())
    }

    /// The session key of a message.
    pub fn session_key(&self, env: &Envelope) -> String {
        let agent = part(self.agent_for(env));
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
            guild: None,
            team: None,
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

    fn bind(agent: &str, channel: Option<&str>, account: Option<&str>, peer: Option<&str>) -> Binding {
        Binding {
            agent: agent.into(),
            channel: channel.map(Into::into),
            account: account.map(Into::into),
            peer: peer.map(Into::into),
            ..Binding::default()
        }
    }

    #[test]
    fn the_most_specific_binding_picks_the_agent() {
        let r = Routing {
            bindings: Bindings::new(vec![
                bind("by-channel", Some("telegram"), None, None),
                bind("by-peer", Some("telegram"), None, Some("123")),
                bind("by-account", Some("telegram"), Some("work"), None),
                bind("by-guild", Some("discord"), None, None),
            ]),
            dm_scope: DmScope::PerPeer,
            default_agent: Some("home".into()),
            ..Routing::default()
        };
        assert_eq!(r.agent_for(&dm("telegram", "123")), "by-peer");
        let mut env = dm("telegram", "9");
        assert_eq!(r.agent_for(&env), "by-channel");
        env.account = "work".into();
        assert_eq!(r.agent_for(&env), "by-account");
        // A peer binding beats an account one, wherever it is in the file.
        env.peer = "123".into();
        assert_eq!(r.agent_for(&env), "by-peer");
        assert_eq!(r.agent_for(&dm("matrix", "1")), "home");
        assert_eq!(r.session_key(&dm("telegram", "123")), "agent:by-peer:dm:123");
    }

    #[test]
    fn guilds_come_before_teams_and_accounts_and_every_field_given_must_match() {
        let mut guild = bind("guild", Some("discord"), None, None);
        guild.guild = Some("g1".into());
        let mut team = bind("team", Some("slack"), None, None);
        team.team = Some("t1".into());
        // A peer rule that also names an account matches only on that account.
        let peer_on_account = bind("peer-work", Some("discord"), Some("work"), Some("c1"));
        let r = Routing {
            bindings: Bindings::new(vec![
                bind("account", Some("discord"), Some("work"), None),
                guild,
                team,
                peer_on_account,
                bind("anywhere", None, None, None),
            ]),
            ..Routing::default()
        };
        let mut env = dm("discord", "c1");
        env.kind = PeerKind::Channel;
        env.guild = Some("g1".into());
        env.account = "work".into();
        assert_eq!(r.agent_for(&env), "peer-work");
        env.account = "default".into();
        assert_eq!(r.agent_for(&env), "guild");
        env.guild = Some("g2".into());
        assert_eq!(r.agent_for(&env), "anywhere");
        env.account = "work".into();
        assert_eq!(r.agent_for(&env), "peer-work");
        env.peer = "c2".into();
        assert_eq!(r.agent_for(&env), "account");
        let mut env = dm("slack", "C1");
        env.team = Some("t1".into());
        assert_eq!(r.agent_for(&env), "team");
    }

    #[test]
    fn equal_bindings_go_by_file_order() {
        let r = Routing {
            bindings: Bindings::new(vec![
                bind("first", Some("telegram"), None, Some("1")),
                bind("second", None, None, None),
                bind("no", Some("telegram"), None, Some("1")),
            ]),
            ..Routing::default()
        };
        assert_eq!(r.agent_for(&dm("telegram", "1")), "first");
        assert_eq!(r.agent_for(&dm("telegram", "2")), "second");
    }
}
