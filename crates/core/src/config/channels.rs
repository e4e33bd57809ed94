//! The gateway's sections of config.toml: `[gateway]`, `[channels.*]`,
//! `[session]`, `[messages]`, `[skills]` and `[subagents]` (what they mean: docs/channels.md,
//! docs/skills.md, docs/subagents.md).

use serde::Deserialize;

/// `[channels]` in config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
    pub telegram: Option<TelegramConfig>,
    pub matrix: Option<MatrixConfig>,
    pub discord: Option<DiscordConfig>,
    pub slack: Option<SlackConfig>,
}

/// `[channels.discord]`: a Discord bot, over the Gateway (v10) WebSocket and the REST API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The bot's token (else `$DISCORD_BOT_TOKEN`).
    pub bot_token: Option<String>,
    /// Default `https://discord.com/api/v10`.
    pub api_base_url: Option<String>,
    /// `pairing` (default), `allowlist` or `open`.
    pub dm_policy: Option<String>,
    /// Who may use the bot in servers: `allowlist` (default), `open` or `disabled`.
    pub group_policy: Option<String>,
    /// Discord user ids always allowed: the owners.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// More ways a server message addresses the bot, besides a mention and a reply to it.
    #[serde(default)]
    pub mention_patterns: Vec<String>,
    /// Replies are sent in messages of this many characters (default 800..=2000, Discord's limit).
    pub chunk_min_chars: Option<usize>,
    pub chunk_max_chars: Option<usize>,
    pub block_streaming: Option<bool>,
    pub coalesce_idle_ms: Option<u64>,
    /// As `[channels.telegram] guest_mode`.
    pub guest_mode: Option<String>,
    /// More bots: `[channels.discord.accounts.NAME]`, each with its own token; what an account
    /// does not set it takes from `[channels.discord]` (not the token).
    #[serde(default)]
    pub accounts: std::collections::BTreeMap<String, DiscordConfig>,
}

impl DiscordConfig {
    /// This account's settings, with what it does not set taken from `parent`.
    #[must_use]
    pub fn inherit(&self, parent: &DiscordConfig) -> DiscordConfig {
        let list = |own: &Vec<String>, theirs: &Vec<String>| if own.is_empty() { theirs.clone() } else { own.clone() };
        DiscordConfig {
            bot_token: self.bot_token.clone(),
            api_base_url: self.api_base_url.clone().or_else(|| parent.api_base_url.clone()),
            dm_policy: self.dm_policy.clone().or_else(|| parent.dm_policy.clone()),
            group_policy: self.group_policy.clone().or_else(|| parent.group_policy.clone()),
            allow_from: list(&self.allow_from, &parent.allow_from),
            mention_patterns: list(&self.mention_patterns, &parent.mention_patterns),
            chunk_min_chars: self.chunk_min_chars.or(parent.chunk_min_chars),
            chunk_max_chars: self.chunk_max_chars.or(parent.chunk_max_chars),
            block_streaming: self.block_streaming.or(parent.block_streaming),
            coalesce_idle_ms: self.coalesce_idle_ms.or(parent.coalesce_idle_ms),
            guest_mode: self.guest_mode.clone().or_else(|| parent.guest_mode.clone()),
            accounts: Default::default(),
        }
    }
}

/// `[channels.slack]`: a Slack app, over Socket Mode (a WebSocket the app opens) and the Web API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The bot token, `xoxb-…` (else `$SLACK_BOT_TOKEN`): the Web API.
    pub bot_token: Option<String>,
    /// The app-level token, `xapp-…` with `connections:write` (else `$SLACK_APP_TOKEN`): Socket Mode.
    pub app_token: Option<String>,
    /// Default `https://slack.com/api`.
    pub api_base_url: Option<String>,
    /// `pairing` (default), `allowlist` or `open`.
    pub dm_policy: Option<String>,
    /// Who may use the bot in channels: `allowlist` (default), `open` or `disabled`.
    pub group_policy: Option<String>,
    /// Slack user ids (`U…`) always allowed: the owners.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// More ways a channel message addresses the bot, besides a mention and a reply in its thread.
    #[serde(default)]
    pub mention_patterns: Vec<String>,
    /// Replies are sent in messages of this many characters (default 800..=3500).
    pub chunk_min_chars: Option<usize>,
    pub chunk_max_chars: Option<usize>,
    pub block_streaming: Option<bool>,
    pub coalesce_idle_ms: Option<u64>,
    /// As `[channels.telegram] guest_mode`.
    pub guest_mode: Option<String>,
    /// More apps: `[channels.slack.accounts.NAME]`, each with its own tokens; what an account
    /// does not set it takes from `[channels.slack]` (not the tokens).
    #[serde(default)]
    pub accounts: std::collections::BTreeMap<String, SlackConfig>,
}

impl SlackConfig {
    /// This account's settings, with what it does not set taken from `parent`.
    #[must_use]
    pub fn inherit(&self, parent: &SlackConfig) -> SlackConfig {
        let list = |own: &Vec<String>, theirs: &Vec<String>| if own.is_empty() { theirs.clone() } else { own.clone() };
        SlackConfig {
            bot_token: self.bot_token.clone(),
            app_token: self.app_token.clone(),
            api_base_url: self.api_base_url.clone().or_else(|| parent.api_base_url.clone()),
            dm_policy: self.dm_policy.clone().or_else(|| parent.dm_policy.clone()),
            group_policy: self.group_policy.clone().or_else(|| parent.group_policy.clone()),
            allow_from: list(&self.allow_from, &parent.allow_from),
            mention_patterns: list(&self.mention_patterns, &parent.mention_patterns),
            chunk_min_chars: self.chunk_min_chars.or(parent.chunk_min_chars),
            chunk_max_chars: self.chunk_max_chars.or(parent.chunk_max_chars),
            block_streaming: self.block_streaming.or(parent.block_streaming),
            coalesce_idle_ms: self.coalesce_idle_ms.or(parent.coalesce_idle_ms),
            guest_mode: self.guest_mode.clone().or_else(|| parent.guest_mode.clone()),
            accounts: Default::default(),
        }
    }
}

/// `[channels.matrix]`: a Matrix account on a homeserver, over the Client-Server API (no
/// end-to-end encryption: encrypted rooms are not read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// The homeserver's base URL (`https://matrix.example.org`).
    pub homeserver: Option<String>,
    /// The account's access token (else `$MATRIX_ACCESS_TOKEN`).
    pub access_token: Option<String>,
    /// `pairing` (default), `allowlist` or `open`.
    pub dm_policy: Option<String>,
    /// Who may use the bot in rooms: `allowlist` (default), `open` or `disabled`.
    pub group_policy: Option<String>,
    /// Matrix user ids (`@ada:example.org`) always allowed: the owners.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// More ways a room message addresses the bot, besides its user id, its name and a reply.
    #[serde(default)]
    pub mention_patterns: Vec<String>,
    /// Replies are sent in messages of this many characters (default 800..=4000).
    pub chunk_min_chars: Option<usize>,
    pub chunk_max_chars: Option<usize>,
    pub block_streaming: Option<bool>,
    pub coalesce_idle_ms: Option<u64>,
    /// As `[channels.telegram] guest_mode`.
    pub guest_mode: Option<String>,
    /// Accept room invitations from senders who may talk to the bot (default true).
    pub auto_join: Option<bool>,
    /// More accounts: `[channels.matrix.accounts.NAME]`, each with its own token; what an account
    /// does not set it takes from `[channels.matrix]` (not the token).
    #[serde(default)]
    pub accounts: std::collections::BTreeMap<String, MatrixConfig>,
}

impl MatrixConfig {
    /// This account's settings, with what it does not set taken from `parent`.
    #[must_use]
    pub fn inherit(&self, parent: &MatrixConfig) -> MatrixConfig {
        let list = |own: &Vec<String>, theirs: &Vec<String>| if own.is_empty() { theirs.clone() } else { own.clone() };
        MatrixConfig {
            homeserver: self.homeserver.clone().or_else(|| parent.homeserver.clone()),
            access_token: self.access_token.clone(),
            dm_policy: self.dm_policy.clone().or_else(|| parent.dm_policy.clone()),
            group_policy: self.group_policy.clone().or_else(|| parent.group_policy.clone()),
            allow_from: list(&self.allow_from, &parent.allow_from),
            mention_patterns: list(&self.mention_patterns, &parent.mention_patterns),
            chunk_min_chars: self.chunk_min_chars.or(parent.chunk_min_chars),
            chunk_max_chars: self.chunk_max_chars.or(parent.chunk_max_chars),
            block_streaming: self.block_streaming.or(parent.block_streaming),
            coalesce_idle_ms: self.coalesce_idle_ms.or(parent.coalesce_idle_ms),
            guest_mode: self.guest_mode.clone().or_else(|| parent.guest_mode.clone()),
            auto_join: self.auto_join.or(parent.auto_join),
            accounts: Default::default(),
        }
    }
}

/// `[channels.telegram]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The bot's token (else `$TELEGRAM_BOT_TOKEN`).
    pub bot_token: Option<String>,
    /// Default `https://api.telegram.org`.
    pub api_base_url: Option<String>,
    /// `pairing` (default), `allowlist` or `open`.
    pub dm_policy: Option<String>,
    /// Who may use the bot in groups: `allowlist` (default: those allowed in direct chats —
    /// `allow_from` and approved pairings), `open` (anyone who mentions it) or `disabled`.
    pub group_policy: Option<String>,
    /// Telegram user ids (as strings) always allowed.
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// More ways a group message addresses the bot, besides `@botname` and replies to it.
    #[serde(default)]
    pub mention_patterns: Vec<String>,
    /// Replies are sent in messages of this many characters (default 800..=3500; Telegram's
    /// limit is 4096).
    pub chunk_min_chars: Option<usize>,
    pub chunk_max_chars: Option<usize>,
    /// Send the reply in pieces as it streams (default true); false sends it when it ends.
    pub block_streaming: Option<bool>,
    /// A pause this long in the reply sends what has gathered (default 1000 ms).
    pub coalesce_idle_ms: Option<u64>,
    /// Receive updates by webhook at this public URL instead of long polling.
    pub webhook_url: Option<String>,
    /// The secret Telegram sends with each webhook call (required with `webhook_url`).
    pub webhook_secret: Option<String>,
    /// The gateway's path that receives them (default `/telegram-webhook`).
    pub webhook_path: Option<String>,
    /// The most a run started by someone who is not an owner (not in `allow_from`: approved by
    /// pairing, or let in by an open policy) gets: `ask` (default: every change, command and
    /// fetch asks, and only an owner may answer), `code` or `auto` (as the session's mode says).
    pub guest_mode: Option<String>,
    /// More bots, each with its own token: `[channels.telegram.accounts.NAME]`. What an account
    /// does not set it takes from `[channels.telegram]` (not the token or the webhook).
    #[serde(default)]
    pub accounts: std::collections::BTreeMap<String, TelegramConfig>,
}

impl TelegramConfig {
    /// This account's settings, with what it does not set taken from `parent` (never its
    /// token, webhook or accounts).
    #[must_use]
    pub fn inherit(&self, parent: &TelegramConfig) -> TelegramConfig {
        let list = |own: &Vec<String>, theirs: &Vec<String>| if own.is_empty() { theirs.clone() } else { own.clone() };
        TelegramConfig {
            bot_token: self.bot_token.clone(),
            api_base_url: self.api_base_url.clone().or_else(|| parent.api_base_url.clone()),
            dm_policy: self.dm_policy.clone().or_else(|| parent.dm_policy.clone()),
            group_policy: self.group_policy.clone().or_else(|| parent.group_policy.clone()),
            allow_from: list(&self.allow_from, &parent.allow_from),
            mention_patterns: list(&self.mention_patterns, &parent.mention_patterns),
            chunk_min_chars: self.chunk_min_chars.or(parent.chunk_min_chars),
            chunk_max_chars: self.chunk_max_chars.or(parent.chunk_max_chars),
            block_streaming: self.block_streaming.or(parent.block_streaming),
            coalesce_idle_ms: self.coalesce_idle_ms.or(parent.coalesce_idle_ms),
            webhook_url: self.webhook_url.clone(),
            webhook_secret: self.webhook_secret.clone(),
            webhook_path: self.webhook_path.clone(),
            guest_mode: self.guest_mode.clone().or_else(|| parent.guest_mode.clone()),
            accounts: Default::default(),
        }
    }
}

/// `[skills]`: which skills are offered to the model (docs/skills.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Names never offered.
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Offer the skills built into acp (default true).
    pub bundled: Option<bool>,
}

/// `[messages]`: how channel messages are batched and queued.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesConfig {
    #[serde(default)]
    pub inbound: InboundConfig,
    #[serde(default)]
    pub queue: QueueConfig,
}

/// `[messages.inbound]`: rapid messages from one sender wait this long for more and run as one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboundConfig {
    /// Default 0 (each message on its own).
    pub debounce_ms: Option<u64>,
    /// Per channel (`telegram = 1500`).
    #[serde(default)]
    pub by_channel: std::collections::BTreeMap<String, u64>,
}

/// `[messages.queue]`: what happens to messages that arrive while their session runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// `collect` (default), `followup`, `steer`, `steer-backlog` or `interrupt`.
    pub mode: Option<String>,
    /// Quiet time before queued messages run (default 1000).
    pub debounce_ms: Option<u64>,
    /// Messages a session's queue holds (default 20).
    pub cap: Option<usize>,
    /// Beyond the cap: `old`, `new` or `summarize` (default).
    pub drop: Option<String>,
    /// The mode per channel (`telegram = "followup"`).
    #[serde(default)]
    pub by_channel: std::collections::BTreeMap<String, String>,
}

/// `[session.send_policy]`: where replies and the agent's messages may be delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendPolicyConfig {
    /// `allow` (default) or `deny`, for what no rule matches.
    pub default: Option<String>,
    /// The first rule that matches decides.
    #[serde(default)]
    pub rules: Vec<SendRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRule {
    /// `allow` or `deny`.
    pub action: String,
    #[serde(rename = "match", default)]
    pub matches: SendMatch,
}

/// What a rule matches; every given field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendMatch {
    pub channel: Option<String>,
    /// `direct`, `group` or `channel`.
    pub chat_type: Option<String>,
    /// The session key starts with this (after `agent:<id>:`, or whole).
    pub key_prefix: Option<String>,
}

/// `[session]`: how channel messages map to sessions.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// `main` (default), `per-peer`, `per-channel-peer` or `per-account-channel-peer`.
    pub dm_scope: Option<String>,
    pub main_key: Option<String>,
    /// A canonical name → the channel-prefixed ids that are that person (`telegram:123`).
    #[serde(default)]
    pub identity_links: std::collections::BTreeMap<String, Vec<String>>,
    /// `[session.send_policy]`.
    pub send_policy: Option<SendPolicyConfig>,
    /// `[session.reset]`: when a chat's session starts afresh (default: daily at 4 am).
    pub reset: Option<ResetPolicy>,
    /// `[session.reset_by_type.direct|group|thread]`: the same, for one type of chat.
    #[serde(default)]
    pub reset_by_type: std::collections::BTreeMap<ChatType, ResetPolicy>,
    /// `[session.reset_by_channel.telegram]`: the same, for one channel (before the others).
    #[serde(default)]
    pub reset_by_channel: std::collections::BTreeMap<String, ResetPolicy>,
}

/// When a chat's session starts afresh (a new transcript under the same key; the old one stays
/// listed), checked when the next message arrives: after the day's reset time (`daily`), after
/// a while without messages (`idle`), whichever comes first when both are set, or never (`off`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetPolicy {
    /// `daily` (default), `idle` or `off`.
    pub mode: Option<ResetMode>,
    /// The hour of the daily reset, local time (default 4).
    pub at_hour: Option<u8>,
    /// The daily reset's time as `HH:MM` or `HH:MM:SS` (instead of `at_hour`).
    pub at: Option<String>,
    /// Minutes without a message after which the session starts afresh.
    pub idle_minutes: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetMode {
    Daily,
    Idle,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Direct,
    Group,
    Thread,
}

/// `[subagents]`: sessions the agent spawns (docs/subagents.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentsConfig {
    /// What agents speak to each other: `openlang` (default) or `plain`.
    pub protocol: Option<String>,
    /// Subagents running at once (default 8); more wait.
    pub max_concurrent: Option<usize>,
    /// A subagent's run is stopped after this long (default 600).
    pub timeout_secs: Option<u64>,
    /// Subagents one turn may start (default 16); more are refused.
    pub max_children_per_turn: Option<usize>,
    /// Model requests the subagents one turn started may make together (default 500): one reply
    /// spawning many that each loop on tools stops there.
    pub max_requests_per_turn: Option<u32>,
    /// Agents whose subagents a session may start (`sessions_spawn` with `agentId`; `*`: any);
    /// an agent's `[agents.subagents] allow_agents` replaces it. Its own always.
    #[serde(default)]
    pub allow_agents: Vec<String>,
}

/// `[gateway]` in config.toml: what `acp gateway` uses when its flags do not say.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// `host:port` to listen on.
    pub listen: Option<String>,
    /// The shared token clients present.
    pub token: Option<String>,
    /// The directory gateway sessions work in.
    pub workspace: Option<std::path::PathBuf>,
    /// How long an approval question waits for a client's answer (default 120).
    pub approval_timeout_secs: Option<u64>,
    /// Host names a gateway without a token answers to besides loopback ones (`localhost`,
    /// `127.0.0.1`, `[::1]`): requests naming any other host are refused (DNS rebinding).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Connections held at once, at most (default 4096, and never more than the open-file limit
    /// allows).
    pub max_connections: Option<usize>,
    /// Runs going at once (default 4); more wait their turn.
    pub max_concurrent_runs: Option<usize>,
    /// Runs one session holds not yet ended — going and queued (default 20); more are refused.
    pub max_queued_runs: Option<usize>,
    /// Sessions kept open (default 256): past it, the least recently used idle one is closed.
    pub max_open_sessions: Option<usize>,
    /// Minutes a session with nothing to do stays open (default 30).
    pub idle_session_minutes: Option<f64>,
    /// The PostgreSQL database gateways on several hosts share (`postgres://user:password@host/db`);
    /// without one, sessions are kept under `$ACP_HOME`.
    pub store: Option<String>,
    /// Seconds a gateway's hold on a session in that store lasts unless renewed (default 15,
    /// renewed every third of it): how long a dead gateway's sessions wait to move.
    pub store_lease_secs: Option<f64>,
    /// The NATS server(s) the gateways of that store share events and requests through
    /// (`nats://host:4222`).
    pub bus: Option<String>,
}
