//! The Slack channel on the gateway: an app over Socket Mode (`socket.rs`: a WebSocket the app
//! opens with its app-level token, so nothing needs to be reachable from the internet) and the
//! Web API (`web_api.rs`). Each `message` (or `app_mention`) event from a person is an
//! [`Envelope`] for the account's [`Inbox`]: a direct message's peer is its sender (bindings and
//! `allow_from` name people by user id), a channel's is the channel (its workspace in `team`, for
//! bindings), a thread's is its channel with the thread beside it. Channels answer when the bot
//! is addressed (a mention of it, a message in a thread it is in, or `mention_patterns`).
//! Replies are mrkdwn (`mrkdwn.rs`), in the thread the message came in. The ids of the last
//! 1,000 messages taken in are kept in `$ACP_HOME/channels/slack.json`, so an envelope Slack
//! sends again (not acknowledged before a drop or a restart) runs once.

pub mod mrkdwn;
pub mod socket;
pub mod web_api;

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Host;
use super::access::Pairings;
use super::inbox::{Channel, Inbox};
use super::kept::Kept;
use super::policy::SessionPrefs;
use super::routing::{Attachment, Envelope, PeerKind, Routing};
use super::{backoff, pause};
use crate::clock::now_ms;
use crate::config::Config;
use crate::runtime::host::ChatFile;
use crate::sync::lock;
use socket::Ended;
use web_api::{Me, WebApi};

/// The most characters in one message sent (Slack's advice; it cuts text at 40,000).
pub const TEXT_LIMIT: usize = 4000;
/// A connection up this long resets the wait before reconnecting.
const STABLE: std::time::Duration = std::time::Duration::from_secs(30);

/// One Slack app as a [`Channel`].
pub struct Account {
    api: WebApi,
    me: OnceLock<Me>,
    /// Direct chats by the user's id: the chat's channel id.
    dms: Mutex<HashMap<String, String>>,
    /// Threads the bot is in: (channel, thread ts).
    threads: Mutex<HashSet<(String, String)>>,
}

impl Account {
    fn dm(&self, user: &str, channel: &str) {
        let mut dms = lock(&self.dms);
        if dms.len() >= 50_000 && !dms.contains_key(user) {
            dms.clear();
        }
        dms.insert(user.to_owned(), channel.to_owned());
    }

    fn in_thread(&self, channel: &str, ts: &str) {
        let mut threads = lock(&self.threads);
        if threads.len() >= 50_000 {
            threads.clear();
        }
        threads.insert((channel.to_owned(), ts.to_owned()));
    }
}

impl Channel for Account {
    fn id(&self) -> &'static str {
        "slack"
    }

    async fn send(&self, peer: &str, thread: Option<&str>, text: &str) -> Result<(), String> {
        // A user's direct chat (Slack opens it for a user id too).
        let channel = lock(&self.dms).get(peer).cloned().unwrap_or_else(|| peer.to_owned());
        // In the thread before the reply lands: a message there right after it addresses the bot.
        if let Some(thread) = thread {
            self.in_thread(&channel, thread);
        }
        for piece in super::chunker::cut(text, TEXT_LIMIT) {
            let ts =
                self.api.post_message(&channel, thread, &mrkdwn::to_mrkdwn(&piece)).await.map_err(|e| e.to_string())?;
            if thread.is_none() {
                self.in_thread(&channel, &ts);
            }
        }
        Ok(())
    }

    /// Shared in the chat (a user's direct chat is opened first: files go to channels only),
    /// the caption as the file's comment when it fits in one message, else after it.
    async fn send_file(&self, peer: &str, thread: Option<&str>, file: &ChatFile, caption: &str) -> Result<(), String> {
        let known = lock(&self.dms).get(peer).cloned();
        let channel = match known {
            Some(dm) => dm,
            None if peer.starts_with(['U', 'W']) => {
                let dm = self.api.open_dm(peer).await.map_err(|e| e.to_string())?;
                lock(&self.dms).insert(peer.to_owned(), dm.clone());
                dm
            }
            None => peer.to_owned(),
        };
        if let Some(thread) = thread {
            self.in_thread(&channel, thread);
        }
        let fits = caption.chars().count() <= TEXT_LIMIT;
        let comment = if fits { mrkdwn::to_mrkdwn(caption) } else { String::new() };
        self.api
            .upload(&channel, thread, file, &comment)
            .await
            .map_err(|e| format!("{} was not sent: {e}", file.name))?;
        if !fits {
            // The file went: say so, so it is not sent again.
            self.send(peer, thread, caption)
                .await
                .map_err(|e| format!("{} was sent, but the text after it was not: {e}", file.name))?;
        }
        Ok(())
    }

    /// Bots have no typing indicator in Slack's Web API.
    async fn typing(&self, _peer: &str, _thread: Option<&str>) {}

    /// By the id's kind: users (`U…`, `W…`) and direct chats (`D…`) are direct; channels are
    /// groups.
    async fn kind_of(&self, peer: &str) -> Result<PeerKind, String> {
        if lock(&self.dms).contains_key(peer) || peer.starts_with(['U', 'W', 'D']) {
            Ok(PeerKind::Direct)
        } else if peer.starts_with(['C', 'G']) {
            Ok(PeerKind::Group)
        } else {
            Err(format!("`{peer}` is not a Slack user or channel id, so it was not sent"))
        }
    }

    async fn fetch(&self, attachment: &Attachment, limit: u64) -> Result<Vec<u8>, String> {
        self.api.download(&attachment.id, limit).await
    }
}

pub struct Slack {
    account: Arc<Account>,
    pub inbox: Arc<Inbox<Account>>,
    /// Into the inbox, in order, off the connection's loop.
    intake: tokio::sync::mpsc::UnboundedSender<super::inbox::Intake>,
    /// `default`, or its name under `[channels.slack.accounts]`.
    pub name: String,
    mention_patterns: Vec<String>,
    /// The messages taken in lately.
    kept: Arc<Kept>,
    /// Since when the connection is up (it said hello).
    live_since: Mutex<Option<std::time::Instant>>,
    /// Envelopes to acknowledge, once taken.
    acks: (mpsc::UnboundedSender<String>, tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>),
    /// Whether the API is plain `http://` on loopback (a stand-in): only then may Socket Mode be
    /// `ws://`.
    plain: bool,
}

/// The channel's accounts from `[channels.slack]` and `[channels.slack.accounts.NAME]`.
pub fn start(
    config: &Config,
    host: Arc<dyn Host>,
    pairings: Arc<Pairings>,
    prefs: Arc<SessionPrefs>,
    http: reqwest::Client,
) -> Result<Vec<Arc<Slack>>, String> {
    let Some(top) = &config.channels.slack else { return Ok(Vec::new()) };
    let routing = Arc::new(Routing::from_config(config)?);
    let accounts = super::settings::accounts("slack", top, "bot_token", "SLACK_BOT_TOKEN")?;
    let mut out = Vec::new();
    for (name, s, bot_token) in accounts {
        let section = super::settings::section("slack", &name);
        let app_token = match s.app_token.clone() {
            Some(t) => t,
            None if name == "default" => std::env::var("SLACK_APP_TOKEN").unwrap_or_default(),
            None => String::new(),
        };
        if app_token.is_empty() {
            return Err(format!(
                "{section} needs app_token (or SLACK_APP_TOKEN): an app-level token, xapp-…, for Socket Mode"
            ));
        }
        if app_token == bot_token || app_token.starts_with("xoxb-") || bot_token.starts_with("xapp-") {
            return Err(format!("{section}: app_token is the app-level token (xapp-…), bot_token the bot's (xoxb-…)"));
        }
        if let Some(bad) =
            s.allow_from.iter().find(|id| !id.starts_with(['U', 'W']) || !id.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            return Err(format!(
                "{section} allow_from `{bad}`: give member ids (U…; in Slack: a profile → ⋯ → Copy member ID)"
            ));
        }
        let base = s.api_base_url.clone().unwrap_or_else(|| "https://slack.com/api".into());
        if !base.starts_with("https://") && !base.starts_with("http://") {
            return Err(format!("{section} api_base_url `{base}` is not an http(s) URL"));
        }
        let settings = super::settings::common!(&section, "slack", &name, s, 3500, TEXT_LIMIT)
            .settings(config, routing.clone())?;
        let account = Arc::new(Account {
            api: WebApi::new(http.clone(), &base, &bot_token, &app_token),
            me: OnceLock::new(),
            dms: Mutex::default(),
            threads: Mutex::default(),
        });
        let inbox = Inbox::new(account.clone(), host.clone(), pairings.clone(), prefs.clone(), settings);
        let file = if name == "default" { "slack.json".to_owned() } else { format!("slack-{name}.json") };
        out.push(Arc::new(Slack {
            account,
            intake: inbox.intake(),
            inbox,
            name,
            mention_patterns: s.mention_patterns.iter().map(|p| p.to_lowercase()).collect(),
            kept: Arc::new(Kept::load(config.home.join("channels").join(file))),
            live_since: Mutex::default(),
            acks: {
                let (tx, rx) = mpsc::unbounded_channel();
                (tx, tokio::sync::Mutex::new(rx))
            },
            plain: crate::http::is_plain(&base)
                && reqwest::Url::parse(&base).is_ok_and(|u| crate::http::is_loopback(&u)),
        }));
    }
    Ok(out)
}

impl Slack {
    /// Connects, and connects again, until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        self.inbox.status(|s| {
            s.insert("state".into(), "connecting".into());
            s.insert("configured".into(), true.into());
            s.insert("running".into(), true.into());
            s.insert("mode".into(), "socket".into());
            s.insert("dmPolicy".into(), self.inbox.policy_name().into());
        });
        let mut failures = 0u32;
        let me = loop {
            match self.account.api.auth_test().await {
                Ok(me) => break me,
                Err(e) if e.bad_token() => return self.give_up(&format!("{e} (the bot token)")),
                Err(e) => {
                    failures += 1;
                    self.failed(&e.to_string());
                    if !pause(&stop, backoff(failures)).await {
                        return;
                    }
                }
            }
        };
        self.inbox.status(|s| {
            s.insert("user".into(), me.name.clone().into());
            s.insert("team".into(), me.team_id.clone().into());
        });
        let _ = self.account.me.set(me);
        failures = 0;
        loop {
            let url = match self.account.api.open_connection().await {
                Ok(url) => url,
                Err(e) if e.bad_token() || e.code == "not_allowed_token_type" => {
                    return self.give_up(&format!("{e} (the app token)"));
                }
                Err(e) => {
                    failures += 1;
                    self.failed(&e.to_string());
                    if !pause(&stop, backoff(failures)).await {
                        return;
                    }
                    continue;
                }
            };
            if !(url.starts_with("wss://") || (self.plain && url.starts_with("ws://"))) {
                failures += 1;
                // Not the URL itself: its ticket is a credential.
                let shown = url.split(['?', '#']).next().unwrap_or_default();
                self.failed(&format!("the Socket Mode URL `{shown}` is not wss://"));
                if !pause(&stop, backoff(failures + 3)).await {
                    return;
                }
                continue;
            }
            *lock(&self.live_since) = None;
            let mut acks = self.acks.1.lock().await;
            match socket::run(&url, self.as_ref(), &mut acks, &stop).await {
                Ended::Stopped => return,
                Ended::Fatal(why) => return self.give_up(&why),
                Ended::Again { why, asked } => {
                    tracing::info!(account = %self.name, %why, "Slack: connecting again");
                    self.inbox.status(|s| {
                        s.insert("state".into(), "connecting".into());
                    });
                    // A refresh Slack asked for: at once. Anything else (a drop, too many
                    // connections): after a pause that grows unless the connection stayed up a
                    // while.
                    let up = *lock(&self.live_since);
                    failures = if up.is_some_and(|t| t.elapsed() >= STABLE) { 1 } else { failures + 1 };
                    if !asked && !pause(&stop, backoff(failures)).await {
                        return;
                    }
                }
            }
        }
    }

    fn give_up(&self, why: &str) {
        tracing::error!(account = %self.name, "Slack: {why}; the channel stops");
        self.failed(why);
        self.inbox.status(|s| {
            s.insert("state".into(), "stopped".into());
            s.insert("running".into(), false.into());
        });
    }

    fn failed(&self, error: &str) {
        tracing::warn!(account = %self.name, %error, "Slack");
        self.inbox.status(|s| {
            s.insert("state".into(), "error".into());
            s.insert("lastError".into(), error.into());
        });
    }

    /// A person's message as an envelope for the inbox, with the id it is kept by.
    fn envelope(&self, payload: &Value) -> Option<(String, Envelope)> {
        let me = self.account.me.get()?;
        let event = &payload["event"];
        let app_mention = event["type"] == "app_mention";
        if !(event["type"] == "message" || app_mention) {
            return None;
        }
        // Edits, deletions, joins and the like are not messages to answer; bots' are not read.
        if !matches!(event["subtype"].as_str(), None | Some("file_share" | "thread_broadcast"))
            || event["bot_id"].is_string()
        {
            return None;
        }
        let user = event["user"].as_str()?;
        let channel = event["channel"].as_str()?;
        let ts = event["ts"].as_str()?;
        if user == me.user_id {
            return None;
        }
        // A message's `ts` is unique in its channel; `message` and `app_mention` for the same
        // message, or an envelope sent again, are one.
        let id = format!("{channel}:{ts}");
        if self.kept.has(&id) {
            tracing::debug!(message = %id, "Slack: a message taken in already");
            return None;
        }
        let direct = match event["channel_type"].as_str() {
            Some(kind) => kind == "im",
            None => channel.starts_with('D'),
        };
        let thread = event["thread_ts"].as_str().filter(|t| *t != ts).map(str::to_owned);
        let peer = if direct {
            self.account.dm(user, channel);
            user.to_owned()
        } else {
            channel.to_owned()
        };
        let text = mrkdwn::unescape(event["text"].as_str().unwrap_or_default());
        let tag = format!("<@{}>", me.user_id);
        let lower = text.to_lowercase();
        let mentioned = app_mention
            || text.contains(&tag)
            || thread.as_ref().is_some_and(|t| lock(&self.account.threads).contains(&(channel.to_owned(), t.clone())))
            || (thread.is_some() && event["parent_user_id"] == me.user_id.as_str())
            || self.mention_patterns.iter().any(|p| !p.is_empty() && lower.contains(p.as_str()));
        let profile = &event["user_profile"];
        let name = profile["display_name"].as_str().filter(|n| !n.is_empty()).or(profile["real_name"].as_str());
        Some((
            id,
            Envelope {
                channel: "slack".into(),
                account: self.name.clone(),
                peer,
                kind: if direct { PeerKind::Direct } else { PeerKind::Group },
                sender: user.to_owned(),
                sender_name: name.unwrap_or(user).to_owned(),
                message_id: ts.to_owned(),
                text: text.replace(&tag, "").trim().to_owned(),
                attachments: event["files"].as_array().into_iter().flatten().filter_map(attachment).collect(),
                reply_to: None,
                thread,
                guild: None,
                team: payload["team_id"].as_str().or(event["team"].as_str()).map(str::to_owned),
                mentioned,
            },
        ))
    }
}

impl socket::Envelopes for Slack {
    async fn event(&self, payload: &Value, retry_attempt: u64, envelope: &str) -> bool {
        if retry_attempt > 0 {
            tracing::debug!(retry_attempt, "Slack: an envelope sent again");
        }
        let Some((id, env)) = self.envelope(payload).filter(|_| payload["type"] == "event_callback") else {
            return true;
        };
        // Acknowledged once taken (and kept as taken): a stop before that loses nothing, Slack
        // sends it again.
        let (kept, acks, envelope) = (self.kept.clone(), self.acks.0.clone(), envelope.to_owned());
        let done = Box::new(move || {
            kept.first_time(&id);
            let _ = acks.send(envelope);
        });
        let _ = self.intake.send((env, done));
        false
    }

    fn hello(&self) {
        *lock(&self.live_since) = Some(std::time::Instant::now());
        self.inbox.status(|s| {
            s.insert("state".into(), "connected".into());
            s.insert("connectedAt".into(), now_ms().into());
            s.remove("lastError");
        });
    }
}

/// A file shared with a message (fetched from `url_private_download` when used).
fn attachment(file: &Value) -> Option<Attachment> {
    let mime = file["mimetype"].as_str().map(str::to_owned);
    let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
        Some("image") => "photo",
        Some("audio") => "audio",
        Some("video") => "video",
        _ => "document",
    };
    Some(Attachment {
        kind: kind.into(),
        id: file["url_private_download"].as_str().or(file["url_private"].as_str())?.to_owned(),
        name: file["name"].as_str().map(str::to_owned),
        mime,
        size: file["size"].as_u64(),
    })
}
