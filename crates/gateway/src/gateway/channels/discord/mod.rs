//! The Discord channel on the gateway: a bot on Discord's Gateway (v10 WebSocket, `socket.rs`)
//! and REST API (`rest.rs`). Each `MESSAGE_CREATE` from a person is an [`Envelope`] for the
//! account's [`Inbox`]: a direct message's peer is its sender (bindings name people by user id),
//! a server channel's is the channel (its server in `guild`, for bindings), a thread's is its
//! parent channel with the thread beside it. Servers answer when the bot is addressed (a mention
//! of it, a reply to it, or `mention_patterns`). The session id, its resume URL and the last
//! sequence number are kept in `$ACP_HOME/channels/discord.json` with the ids of the last 1,000
//! messages taken in, so a dropped connection or a restart resumes the session — Discord
//! replays what was missed — and a message delivered twice runs once.

pub mod rest;
pub mod socket;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
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
use rest::Rest;
use socket::Ended;

/// The most characters in one Discord message.
pub const TEXT_LIMIT: usize = 2000;
/// A connection up this long resets the wait before reconnecting.
const STABLE: Duration = Duration::from_secs(30);
/// GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT (privileged: turned on for the bot
/// in the developer portal).
pub const INTENTS: u64 = 1 | (1 << 9) | (1 << 12) | (1 << 15);

/// What a channel is, as learnt from the Gateway or asked of the API.
#[derive(Debug, Clone)]
struct Known {
    kind: PeerKind,
    /// A thread's parent channel.
    parent: Option<String>,
}

/// One Discord bot as a [`Channel`].
pub struct Account {
    rest: Rest,
    /// Its user id, once `READY` said it.
    me: Mutex<Option<String>>,
    /// Channels by id.
    channels: Mutex<HashMap<String, Known>>,
    /// Direct chats by the user's id: the chat's channel id.
    dms: Mutex<HashMap<String, String>>,
}

impl Account {
    fn learn(&self, channel: &Value) {
        let Some(id) = channel["id"].as_str() else { return };
        let known = match channel["type"].as_u64() {
            // A direct message; a group DM.
            Some(1) => {
                if let Some(user) = channel["recipients"][0]["id"].as_str() {
                    self.dm(user, id);
                }
                Known { kind: PeerKind::Direct, parent: None }
            }
            // Threads (announcement, public, private).
            Some(10..=12) => Known { kind: PeerKind::Group, parent: channel["parent_id"].as_str().map(str::to_owned) },
            Some(_) => Known { kind: PeerKind::Group, parent: None },
            None => return,
        };
        let mut channels = lock(&self.channels);
        if channels.len() >= 50_000 && !channels.contains_key(id) {
            channels.clear();
        }
        channels.insert(id.to_owned(), known);
    }

    fn dm(&self, user: &str, channel: &str) {
        let mut dms = lock(&self.dms);
        if dms.len() >= 50_000 && !dms.contains_key(user) {
            dms.clear();
        }
        dms.insert(user.to_owned(), channel.to_owned());
    }

    /// What channel `id` is: as learnt, else asked of the API.
    async fn known(&self, id: &str) -> Result<Known, rest::ApiError> {
        if let Some(known) = lock(&self.channels).get(id) {
            return Ok(known.clone());
        }
        let channel = self.rest.channel(id).await?;
        self.learn(&channel);
        lock(&self.channels).get(id).cloned().ok_or_else(|| rest::ApiError {
            status: None,
            code: 0,
            message: format!("Discord did not say what channel {id} is"),
        })
    }

    /// The channel to post to for `peer` (a user: their direct chat; else the channel itself)
    /// and `thread` (a thread is a channel of its own).
    async fn target(&self, peer: &str, thread: Option<&str>) -> Result<String, String> {
        if let Some(thread) = thread {
            return Ok(thread.to_owned());
        }
        let user = peer.strip_prefix("user:").unwrap_or(peer);
        if let Some(dm) = lock(&self.dms).get(user) {
            return Ok(dm.clone());
        }
        if !peer.starts_with("user:") {
            match self.known(peer).await {
                Ok(_) => return Ok(peer.to_owned()),
                Err(e) if e.status != Some(404) => return Err(e.to_string()),
                Err(_) => {}
            }
        }
        // Not a channel: a user, written to in a direct chat.
        let dm = self.rest.dm_channel(user).await.map_err(|e| e.to_string())?;
        self.dm(user, &dm);
        Ok(dm)
    }
}

impl Channel for Account {
    fn id(&self) -> &'static str {
        "discord"
    }

    async fn send(&self, peer: &str, thread: Option<&str>, text: &str) -> Result<(), String> {
        let channel = self.target(peer, thread).await?;
        for piece in super::chunker::cut(text, TEXT_LIMIT) {
            self.rest.create_message(&channel, &piece).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The caption goes with the file when it fits in one message, else after it.
    async fn send_file(&self, peer: &str, thread: Option<&str>, file: &ChatFile, caption: &str) -> Result<(), String> {
        let channel = self.target(peer, thread).await?;
        let fits = caption.chars().count() <= TEXT_LIMIT;
        let with = if fits { caption } else { "" };
        self.rest.create_message_with_file(&channel, with, file).await.map_err(|e| match e.status {
            Some(413) => format!(
                "{} is larger than this Discord server takes (10 MB unless it is boosted): {e}",
                file.describe()
            ),
            _ => e.to_string(),
        })?;
        if !fits {
            // The file went: say so, so it is not sent again.
            self.send(peer, thread, caption)
                .await
                .map_err(|e| format!("{} was sent, but the text after it was not: {e}", file.name))?;
        }
        Ok(())
    }

    async fn typing(&self, peer: &str, thread: Option<&str>) {
        let channel = thread.map(str::to_owned).or_else(|| lock(&self.dms).get(peer).cloned());
        self.rest.typing(channel.as_deref().unwrap_or(peer)).await;
    }

    async fn kind_of(&self, peer: &str) -> Result<PeerKind, String> {
        let user = peer.strip_prefix("user:").unwrap_or(peer);
        if peer.starts_with("user:") || lock(&self.dms).contains_key(user) {
            return Ok(PeerKind::Direct);
        }
        match self.known(peer).await {
            Ok(known) => Ok(known.kind),
            // Not a channel: a user id (a direct chat is opened to send).
            Err(e) if e.status == Some(404) => Ok(PeerKind::Direct),
            Err(e) => Err(format!("Discord did not say what `{peer}` is ({e}), so it was not sent")),
        }
    }

    async fn fetch(&self, attachment: &Attachment, limit: u64) -> Result<Vec<u8>, String> {
        self.rest.download(&attachment.id, limit).await
    }
}

pub struct Discord {
    account: Arc<Account>,
    pub inbox: Arc<Inbox<Account>>,
    /// Into the inbox, in order, off the connection's loop.
    intake: tokio::sync::mpsc::UnboundedSender<super::inbox::Intake>,
    /// `default`, or its name under `[channels.discord.accounts]`.
    pub name: String,
    token: String,
    /// Whether the API is plain `http://` on loopback (a stand-in): only then may the Gateway
    /// be `ws://`.
    plain: bool,
    mention_patterns: Vec<String>,
    /// The session, its resume URL, the last sequence number, the messages taken in lately.
    kept: Arc<Kept>,
    /// Since when the connection is up (`READY` or `RESUMED`).
    live_since: Mutex<Option<Instant>>,
}

/// The channel's accounts from `[channels.discord]` and `[channels.discord.accounts.NAME]`.
pub fn start(
    config: &Config,
    host: Arc<dyn Host>,
    pairings: Arc<Pairings>,
    prefs: Arc<SessionPrefs>,
    http: reqwest::Client,
) -> Result<Vec<Arc<Discord>>, String> {
    let Some(d) = &config.channels.discord else { return Ok(Vec::new()) };
    let routing = Arc::new(Routing::from_config(config)?);
    let accounts = super::settings::accounts("discord", d, "bot_token", "DISCORD_BOT_TOKEN")?;
    let mut out = Vec::new();
    for (name, d, token) in accounts {
        let section = super::settings::section("discord", &name);
        if let Some(bad) = d.allow_from.iter().find(|id| id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit())) {
            return Err(format!(
                "{section} allow_from `{bad}`: give user ids (digits; in Discord: Developer Mode, then a user → Copy User ID)"
            ));
        }
        if token.starts_with("Bot ") {
            return Err(format!("{section} bot_token: give the token alone, without `Bot `"));
        }
        let base = d.api_base_url.clone().unwrap_or_else(|| "https://discord.com/api/v10".into());
        if !base.starts_with("https://") && !base.starts_with("http://") {
            return Err(format!("{section} api_base_url `{base}` is not an http(s) URL"));
        }
        let settings = super::settings::common!(&section, "discord", &name, d, TEXT_LIMIT, TEXT_LIMIT)
            .settings(config, routing.clone())?;
        let account = Arc::new(Account {
            rest: Rest::new(http.clone(), &base, &token),
            me: Mutex::default(),
            channels: Mutex::default(),
            dms: Mutex::default(),
        });
        let inbox = Inbox::new(account.clone(), host.clone(), pairings.clone(), prefs.clone(), settings);
        let file = if name == "default" { "discord.json".to_owned() } else { format!("discord-{name}.json") };
        out.push(Arc::new(Discord {
            account,
            intake: inbox.intake(),
            inbox,
            name,
            token,
            plain: crate::http::is_plain(&base)
                && reqwest::Url::parse(&base).is_ok_and(|u| crate::http::is_loopback(&u)),
            mention_patterns: d.mention_patterns.iter().map(|p| p.to_lowercase()).collect(),
            kept: Arc::new(Kept::load(config.home.join("channels").join(file))),
            live_since: Mutex::default(),
        }));
    }
    Ok(out)
}

impl Discord {
    /// Connects, and connects again, until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        self.inbox.status(|s| {
            s.insert("state".into(), "connecting".into());
            s.insert("configured".into(), true.into());
            s.insert("running".into(), true.into());
            s.insert("mode".into(), "gateway".into());
            s.insert("dmPolicy".into(), self.inbox.policy_name().into());
        });
        let mut seq = self.kept.get("seq").and_then(|s| s.as_u64());
        // A resumed session gets no READY: the bot's id is kept with it.
        if let Some(me) = self.kept.get("user_id").and_then(|s| s.as_str().map(str::to_owned)) {
            *lock(&self.account.me) = Some(me);
        }
        let mut failures = 0u32;
        // Resumes in a row that got nowhere (a resume URL gone dead): identified anew after three.
        let mut resumes_failed = 0u32;
        loop {
            let session = self.kept.get("session_id").and_then(|s| s.as_str().map(str::to_owned));
            let resume_url = self.kept.get("resume_url").and_then(|s| s.as_str().map(str::to_owned));
            let (url, first) = match (session, resume_url, seq) {
                (Some(session), Some(url), Some(s)) => {
                    (url, json!({"op": 6, "d": {"token": self.token, "session_id": session, "seq": s}}))
                }
                _ => match self.account.rest.gateway_url().await {
                    Ok(url) => {
                        seq = None;
                        (url, self.identify())
                    }
                    Err(e) if e.status == Some(401) => {
                        self.failed(&format!("{e}: the bot token was refused"));
                        tracing::error!(account = %self.name, "Discord refused the bot token; the channel stops");
                        self.inbox.status(|s| {
                            s.insert("state".into(), "stopped".into());
                            s.insert("running".into(), false.into());
                        });
                        return;
                    }
                    Err(e) => {
                        failures += 1;
                        self.failed(&e.to_string());
                        if !pause(&stop, backoff(failures)).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            let allowed = url.starts_with("wss://") || (self.plain && url.starts_with("ws://"));
            if !allowed {
                self.failed(&format!("the Gateway URL `{url}` is not wss://"));
                self.kept.set(json!({"session_id": null, "resume_url": null}));
                if !pause(&stop, backoff(failures + 3)).await {
                    return;
                }
                continue;
            }
            *lock(&self.live_since) = None;
            let resuming = first["op"] == 6;
            match socket::run(&url, &first, &mut seq, self.as_ref(), &stop).await {
                Ended::Stopped => return,
                Ended::Fatal(why) => {
                    self.failed(&why);
                    tracing::error!(account = %self.name, "Discord: {why}; the channel stops");
                    self.inbox.status(|s| {
                        s.insert("state".into(), "stopped".into());
                        s.insert("running".into(), false.into());
                    });
                    return;
                }
                Ended::Again { resume, why } => {
                    tracing::warn!(account = %self.name, %why, resume, "Discord: connecting again");
                    self.inbox.status(|s| {
                        s.insert("state".into(), "connecting".into());
                        s.insert("lastError".into(), why.clone().into());
                    });
                    // A connection that stayed up a while resets the count (one that drops at once
                    // keeps slowing down: identifies are limited per day).
                    let up = *lock(&self.live_since);
                    failures = if up.is_some_and(|t| t.elapsed() >= STABLE) { 1 } else { failures + 1 };
                    resumes_failed = if resuming && up.is_none() { resumes_failed + 1 } else { 0 };
                    let mut wait = backoff(failures);
                    if !resume || resumes_failed >= 3 {
                        resumes_failed = 0;
                        self.kept.set(json!({"session_id": null, "resume_url": null, "seq": null}));
                        seq = None;
                        // Discord asks for a pause of 1 to 5 s before identifying again.
                        wait = wait.max(Duration::from_millis(1000 + u64::from(random_byte()) * 16));
                    }
                    if !pause(&stop, wait).await {
                        return;
                    }
                }
            }
        }
    }

    fn identify(&self) -> Value {
        json!({"op": 2, "d": {
            "token": self.token,
            "intents": INTENTS,
            "properties": {"os": std::env::consts::OS, "browser": "acp", "device": "acp"},
        }})
    }

    fn failed(&self, error: &str) {
        tracing::warn!(account = %self.name, %error, "Discord");
        self.inbox.status(|s| {
            s.insert("state".into(), "error".into());
            s.insert("lastError".into(), error.into());
        });
    }

    /// A message from a person, as an envelope for the inbox.
    async fn message(&self, d: &Value) -> Option<Envelope> {
        let me = lock(&self.account.me).clone()?;
        let author = &d["author"];
        let sender = author["id"].as_str()?;
        // Its own, other bots', webhooks', and system messages (joins, pins, …) are not read.
        if sender == me
            || author["bot"] == true
            || !d["webhook_id"].is_null()
            || !matches!(d["type"].as_u64(), Some(0 | 19))
        {
            return None;
        }
        let id = d["id"].as_str()?;
        let channel = d["channel_id"].as_str()?;
        let guild = d["guild_id"].as_str().map(str::to_owned);
        let (peer, kind, thread) = if guild.is_none() {
            self.account.dm(sender, channel);
            (sender.to_owned(), PeerKind::Direct, None)
        } else {
            // Not for long: the connection's heartbeats wait meanwhile.
            let known = tokio::time::timeout(Duration::from_secs(5), self.account.known(channel)).await;
            let known = known
                .unwrap_or_else(|_| Err(rest::ApiError { status: None, code: 0, message: "no answer in 5 s".into() }));
            match known {
                Ok(Known { parent: Some(parent), .. }) => (parent, PeerKind::Group, Some(channel.to_owned())),
                Ok(Known { kind, .. }) => (channel.to_owned(), kind, None),
                // Not known, and the API did not say: a server channel as any other.
                Err(e) => {
                    tracing::warn!(%channel, error = %e, "Discord: could not ask what the channel is; taken as a server channel");
                    (channel.to_owned(), PeerKind::Group, None)
                }
            }
        };
        if self.kept.has(id) {
            tracing::debug!(message = id, "Discord: a message taken in already");
            return None;
        }
        let content = d["content"].as_str().unwrap_or_default();
        let lower = content.to_lowercase();
        let tags = [format!("<@{me}>"), format!("<@!{me}>")];
        let mentioned = d["mentions"].as_array().is_some_and(|m| m.iter().any(|u| u["id"] == me.as_str()))
            || tags.iter().any(|t| content.contains(t.as_str()))
            || d["referenced_message"]["author"]["id"] == me.as_str()
            || self.mention_patterns.iter().any(|p| !p.is_empty() && lower.contains(p.as_str()));
        let text = tags.iter().fold(content.to_owned(), |text, tag| text.replace(tag.as_str(), ""));
        let name = author["global_name"].as_str().or(author["username"].as_str()).unwrap_or_default();
        Some(Envelope {
            channel: "discord".into(),
            account: self.name.clone(),
            peer,
            kind,
            sender: sender.to_owned(),
            sender_name: name.to_owned(),
            message_id: id.to_owned(),
            text: text.trim().to_owned(),
            attachments: d["attachments"].as_array().into_iter().flatten().filter_map(attachment).collect(),
            reply_to: d["message_reference"]["message_id"].as_str().map(str::to_owned),
            thread,
            guild,
            team: None,
            mentioned,
        })
    }
}

impl socket::Events for Discord {
    async fn dispatch(&self, name: &str, d: &Value, seq: Option<u64>) {
        match name {
            "READY" => {
                if let Some(me) = d["user"]["id"].as_str() {
                    *lock(&self.account.me) = Some(me.to_owned());
                }
                self.kept.set(json!({"session_id": d["session_id"], "resume_url": d["resume_gateway_url"], "seq": seq, "user_id": d["user"]["id"]}));
                let user = d["user"]["username"].as_str().unwrap_or_default().to_owned();
                tracing::info!(account = %self.name, %user, "Discord channel connected");
                *lock(&self.live_since) = Some(Instant::now());
                self.inbox.status(|s| {
                    s.insert("state".into(), "connected".into());
                    s.insert("user".into(), user.into());
                    s.insert("connectedAt".into(), now_ms().into());
                    s.remove("lastError");
                });
            }
            "RESUMED" => {
                tracing::info!(account = %self.name, "Discord session resumed");
                *lock(&self.live_since) = Some(Instant::now());
                self.inbox.status(|s| {
                    s.insert("state".into(), "connected".into());
                    s.insert("connectedAt".into(), now_ms().into());
                    s.remove("lastError");
                });
            }
            "GUILD_CREATE" => {
                for channel in d["channels"].as_array().into_iter().chain(d["threads"].as_array()).flatten() {
                    self.account.learn(channel);
                }
            }
            "CHANNEL_CREATE" | "CHANNEL_UPDATE" | "THREAD_CREATE" | "THREAD_UPDATE" => self.account.learn(d),
            "MESSAGE_CREATE" => {
                // Once taken, the message's id is kept with its sequence number (in order: a
                // restart resumes after the last one taken; what is not taken — the bot's own,
                // other bots' — is replayed then and dropped again).
                if let Some(env) = self.message(d).await {
                    let (kept, id) = (self.kept.clone(), env.message_id.clone());
                    let done = Box::new(move || {
                        kept.first_time_with(&id, &json!({"seq": seq}));
                    });
                    let _ = self.intake.send((env, done));
                }
            }
            _ => {}
        }
    }
}

/// An attachment of a message (fetched from its CDN URL when used).
fn attachment(a: &Value) -> Option<Attachment> {
    let mime = a["content_type"].as_str().map(str::to_owned);
    let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
        Some("image") => "photo",
        Some("audio") => "audio",
        Some("video") => "video",
        _ => "document",
    };
    Some(Attachment {
        kind: kind.into(),
        id: a["url"].as_str()?.to_owned(),
        name: a["filename"].as_str().map(str::to_owned),
        mime,
        size: a["size"].as_u64(),
    })
}

fn random_byte() -> u8 {
    let mut b = [0u8; 1];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    b[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_by_their_content_type() {
        let a = attachment(&json!({"id": "1", "filename": "cat.png", "size": 12, "url": "https://cdn.discordapp.com/a/cat.png", "content_type": "image/png"})).unwrap();
        assert_eq!((a.kind.as_str(), a.name.as_deref(), a.size), ("photo", Some("cat.png"), Some(12)));
        assert_eq!(attachment(&json!({"url": "https://cdn.discordapp.com/x"})).unwrap().kind, "document");
    }
}
