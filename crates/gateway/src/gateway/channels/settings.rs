//! A channel account's inbox settings from what every channel's section has in common
//! (`dm_policy`, `group_policy`, `allow_from`, chunk sizes, block streaming, `guest_mode`) and
//! `[session]`/`[messages]`, checked: a setting that cannot be used is an error naming its
//! section.

use std::sync::Arc;
use std::time::Duration;

use super::access::DmPolicy;
use super::chunker::Limits;
use super::inbox::{GroupPolicy, Settings};
use super::policy::SendPolicy;
use super::queue;
use super::routing::Routing;
use crate::config::Config;

/// What a channel's section says, in the words every channel shares.
pub struct Common<'a> {
    /// `[channels.telegram]`, `[channels.matrix.accounts.work]`, …
    pub section: &'a str,
    pub channel: &'a str,
    pub account: &'a str,
    pub dm_policy: Option<&'a str>,
    pub group_policy: Option<&'a str>,
    pub allow_from: &'a [String],
    pub chunk_min_chars: Option<usize>,
    pub chunk_max_chars: Option<usize>,
    /// The default most characters in one message, and the platform's limit.
    pub chunk_default_max: usize,
    pub text_limit: usize,
    pub block_streaming: Option<bool>,
    pub coalesce_idle_ms: Option<u64>,
    pub guest_mode: Option<&'a str>,
}

/// The [`Common`] of a channel section `$c` (any of `[channels.*]`: they name these settings
/// alike), for account `$account` in `$section`: `common!(section, "discord", &name, d, 2000, 2000)`.
macro_rules! common {
    ($section:expr, $channel:expr, $account:expr, $c:expr, $default_max:expr, $limit:expr) => {
        $crate::gateway::channels::settings::Common {
            section: $section,
            channel: $channel,
            account: $account,
            dm_policy: $c.dm_policy.as_deref(),
            group_policy: $c.group_policy.as_deref(),
            allow_from: &$c.allow_from,
            chunk_min_chars: $c.chunk_min_chars,
            chunk_max_chars: $c.chunk_max_chars,
            chunk_default_max: $default_max,
            text_limit: $limit,
            block_streaming: $c.block_streaming,
            coalesce_idle_ms: $c.coalesce_idle_ms,
            guest_mode: $c.guest_mode.as_deref(),
        }
    };
}
pub(crate) use common;

impl Common<'_> {
    pub fn settings(&self, config: &Config, routing: Arc<Routing>) -> Result<Settings, String> {
        let section = self.section;
        let policy = match self.dm_policy {
            None | Some("pairing") => DmPolicy::Pairing,
            Some("allowlist") => DmPolicy::Allowlist,
            Some("open") => DmPolicy::Open,
            Some(other) => return Err(format!("{section} dm_policy `{other}`: use pairing, allowlist or open")),
        };
        let group_policy = match self.group_policy {
            None | Some("allowlist") => GroupPolicy::Allowlist,
            Some("open") => GroupPolicy::Open,
            Some("disabled") => GroupPolicy::Disabled,
            Some(other) => return Err(format!("{section} group_policy `{other}`: use allowlist, open or disabled")),
        };
        let limit = self.text_limit;
        let (min, max) = (self.chunk_min_chars.unwrap_or(800), self.chunk_max_chars.unwrap_or(self.chunk_default_max));
        if !(100..=limit).contains(&max) {
            return Err(format!("{section} chunk_max_chars {max}: from 100 to {limit} (the platform's limit)"));
        }
        if min > max {
            return Err(format!("{section} chunk_min_chars {min} is above chunk_max_chars {max}"));
        }
        if policy == DmPolicy::Allowlist && self.allow_from.is_empty() {
            tracing::warn!("{section} dm_policy allowlist with an empty allow_from: nobody can write to the bot");
        }
        let inbound = &config.messages.inbound;
        Ok(Settings {
            account: self.account.to_owned(),
            policy,
            group_policy,
            allow_from: self.allow_from.to_vec(),
            routing,
            limits: Limits::new(min.min(max), max, limit),
            block_streaming: self.block_streaming.unwrap_or(true),
            idle: Duration::from_millis(self.coalesce_idle_ms.unwrap_or(1000)),
            queue: queue::Settings::from_config(&config.messages.queue, self.channel)?,
            inbound_debounce: Duration::from_millis(
                inbound.by_channel.get(self.channel).copied().or(inbound.debounce_ms).unwrap_or(0),
            ),
            send_policy: SendPolicy::from_config(config.session.send_policy.as_ref())?,
            guest_mode: match self.guest_mode {
                None | Some("ask") => crate::runtime::Mode::Ask,
                Some("code") => crate::runtime::Mode::Code,
                Some("auto") => crate::runtime::Mode::Auto,
                Some(other) => return Err(format!("{section} guest_mode `{other}`: use ask, code or auto")),
            },
        })
    }
}

/// A channel section with accounts: its own credential, its named accounts, and an account's
/// settings with the section's filled in.
pub trait WithAccounts: Clone {
    /// What the account authenticates with (`bot_token`, `access_token`), as given.
    fn credential(&self) -> Option<&String>;
    fn accounts(&self) -> &std::collections::BTreeMap<String, Self>;
    fn inherit(&self, parent: &Self) -> Self;
}

/// The accounts of `[channels.<channel>]` — (name, settings, credential), checked: the section
/// itself is the `default` account when it has a credential, or when it names no others (then
/// from `$<env>`); named ones need their own credential, a name that can go into keys and file
/// names, and no second use of a credential (one account is served once). `what` names the
/// credential's key.
pub fn accounts<T: WithAccounts>(
    channel: &str,
    top: &T,
    what: &str,
    env: &str,
) -> Result<Vec<(String, T, String)>, String> {
    let mut out = Vec::new();
    if top.credential().is_some() || top.accounts().is_empty() {
        let credential = top.credential().cloned().or_else(|| std::env::var(env).ok()).filter(|c| !c.trim().is_empty());
        let Some(credential) = credential else {
            return Err(format!("[channels.{channel}] needs {what} (or {env})"));
        };
        out.push(("default".to_owned(), top.clone(), credential));
    }
    for (name, own) in top.accounts() {
        let section = format!("[channels.{channel}.accounts.{name}]");
        if !crate::config::agents::valid_account(name) {
            return Err(format!(
                "{section}: name the account with lower-case letters, digits, _ and - (not `default`, nor a word keys use)"
            ));
        }
        if !own.accounts().is_empty() {
            return Err(format!("{section}: accounts do not nest"));
        }
        let Some(credential) = own.credential().filter(|c| !c.trim().is_empty()).cloned() else {
            return Err(format!("{section} needs {what}"));
        };
        if out.iter().any(|(_, _, other)| *other == credential) {
            return Err(format!("{section}: its {what} is another account's (one account is served once)"));
        }
        out.push((name.clone(), own.inherit(top), credential));
    }
    Ok(out)
}

/// The section an account's settings are in, as errors name it.
pub fn section(channel: &str, account: &str) -> String {
    if account == "default" {
        format!("[channels.{channel}]")
    } else {
        format!("[channels.{channel}.accounts.{account}]")
    }
}

impl WithAccounts for crate::config::TelegramConfig {
    fn credential(&self) -> Option<&String> {
        self.bot_token.as_ref()
    }
    fn accounts(&self) -> &std::collections::BTreeMap<String, Self> {
        &self.accounts
    }
    fn inherit(&self, parent: &Self) -> Self {
        crate::config::TelegramConfig::inherit(self, parent)
    }
}

impl WithAccounts for crate::config::MatrixConfig {
    fn credential(&self) -> Option<&String> {
        self.access_token.as_ref()
    }
    fn accounts(&self) -> &std::collections::BTreeMap<String, Self> {
        &self.accounts
    }
    fn inherit(&self, parent: &Self) -> Self {
        crate::config::MatrixConfig::inherit(self, parent)
    }
}

impl WithAccounts for crate::config::DiscordConfig {
    fn credential(&self) -> Option<&String> {
        self.bot_token.as_ref()
    }
    fn accounts(&self) -> &std::collections::BTreeMap<String, Self> {
        &self.accounts
    }
    fn inherit(&self, parent: &Self) -> Self {
        crate::config::DiscordConfig::inherit(self, parent)
    }
}

impl WithAccounts for crate::config::SlackConfig {
    fn credential(&self) -> Option<&String> {
        self.bot_token.as_ref()
    }
    fn accounts(&self) -> &std::collections::BTreeMap<String, Self> {
        &self.accounts
    }
    fn inherit(&self, parent: &Self) -> Self {
        crate::config::SlackConfig::inherit(self, parent)
    }
}
