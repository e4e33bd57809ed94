//! The Telegram channel on the gateway: updates come by long polling (the offset kept in
//! `$ACP_HOME/channels/telegram.offset`, written once each update has been taken in, so a restart
//! neither loses nor repeats one) or, with `webhook_url`, by Telegram calling the gateway (each
//! call carries the configured secret); each message becomes an [`Envelope`] for the channel's
//! [`Inbox`], and the inbox's replies go out through the Bot API.

pub mod bot_api;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Host;
use super::access::Pairings;
use super::inbox::{self, Channel, Inbox};
use super::policy::SessionPrefs;
use super::routing::{Attachment, Envelope, PeerKind, Routing};
use crate::clock::now_ms;
use crate::config::{Config, TelegramConfig};
use crate::runtime::host::ChatFile;
use bot_api::{Api, TEXT_LIMIT};

const POLL: Duration = Duration::from_secs(25);
/// The gateway path Telegram calls in webhook mode, unless configured.
pub const WEBHOOK_PATH: &str = "/telegram-webhook";

/// The Bot API as a [`Channel`].
pub struct Bot {
    api: Api,
    username: OnceLock<String>,
    /// The kind of each chat seen or asked about, by id.
    kinds: std::sync::Mutex<std::collections::HashMap<String, PeerKind>>,
}

impl Bot {
    /// Keeps the kind of a group or channel (a person's is known from the id).
    fn remember(&self, peer: &str, kind: PeerKind) {
        if kind == PeerKind::Direct {
            return;
        }
        let mut kinds = crate::sync::lock(&self.kinds);
        if kinds.get(peer) == Some(&kind) {
            return;
        }
        if kinds.len() >= 10_000 {
            kinds.clear();
        }
        kinds.insert(peer.to_owned(), kind);
    }
}

/// A Telegram chat type as a kind of peer.
fn kind_of_type(chat_type: &str) -> PeerKind {
    match chat_type {
        "private" => PeerKind::Direct,
        "group" | "supergroup" => PeerKind::Group,
        _ => PeerKind::Channel,
    }
}

impl Channel for Bot {
    fn id(&self) -> &'static str {
        "telegram"
    }

    async fn send(&self, peer: &str, thread: Option<&str>, text: &str) -> Result<(), String> {
        self.api.send(peer, thread, text).await.map(drop).map_err(|e| e.to_string())
    }

    async fn typing(&self, peer: &str, thread: Option<&str>) {
        self.api.typing(peer, thread).await;
    }

    async fn send_file(&self, peer: &str, thread: Option<&str>, file: &ChatFile, caption: &str) -> Result<(), String> {
        // Telegram counts in UTF-16 units (after its markup is taken out: the Markdown is longer).
        let fits = caption.encode_utf16().count() <= bot_api::CAPTION_LIMIT;
        let with = if fits { caption } else { "" };
        self.api.send_file(peer, thread, file, with).await.map_err(|e| e.to_string())?;
        if !fits {
            // The file went: say so, so it is not sent again.
            self.send(peer, thread, caption)
                .await
                .map_err(|e| format!("{} was sent, but the text after it was not: {e}", file.name))?;
        }
        Ok(())
    }

    async fn fetch(&self, attachment: &Attachment, limit: u64) -> Result<Vec<u8>, String> {
        self.api.file(&attachment.id, limit).await
    }

    /// A person's id is positive; for a group or channel (negative) the chat's messages tell,
    /// else `getChat`. Should Telegram not answer, the kind is unknown and nothing is sent.
    async fn kind_of(&self, peer: &str) -> Result<PeerKind, String> {
        if !peer.starts_with('-') {
            return Ok(PeerKind::Direct);
        }
        if let Some(kind) = crate::sync::lock(&self.kinds).get(peer) {
            return Ok(*kind);
        }
        let chat_type = self
            .api
            .chat_type(peer)
            .await
            .map_err(|e| format!("Telegram did not say what kind of chat `{peer}` is ({e}), so it was not sent"))?;
        let kind = kind_of_type(&chat_type);
        self.remember(peer, kind);
        Ok(kind)
    }
}

/// Webhook mode: where Telegram delivers, and the secret it proves itself with.
struct Webhook {
    url: String,
    secret: String,
    path: String,
}

pub struct Telegram {
    bot: Arc<Bot>,
    pub inbox: Arc<Inbox<Bot>>,
    /// `default`, or its name under `[channels.telegram.accounts]`.
    pub account: String,
    mention_patterns: Vec<String>,
    offset_path: PathBuf,
    webhook: Option<Webhook>,
    /// The bot's id: its token's part before `:` (not the secret part).
    bot_id: String,
}

/// The channel's accounts from `[channels.telegram]` (the `default` one) and
/// `[channels.telegram.accounts.NAME]`, each a bot of its own; an error for a setting that cannot
/// be used (the gateway then refuses to start, saying which).
pub fn start(
    config: &Config,
    host: Arc<dyn Host>,
    pairings: Arc<Pairings>,
    prefs: Arc<SessionPrefs>,
    http: reqwest::Client,
) -> Result<Vec<Arc<Telegram>>, String> {
    let Some(t) = &config.channels.telegram else { return Ok(Vec::new()) };
    let routing = Arc::new(Routing::from_config(config)?);
    let accounts = super::settings::accounts("telegram", t, "bot_token", "TELEGRAM_BOT_TOKEN")?;
    let mut out = Vec::new();
    for (name, t, token) in accounts {
        let section = super::settings::section("telegram", &name);
        let one = account(config, &section, &name, &t, token, routing.clone())?;
        let base = t.api_base_url.clone().unwrap_or_else(|| "https://api.telegram.org".into());
        let bot = Arc::new(Bot {
            api: Api::new(http.clone(), &base, &one.token),
            username: OnceLock::new(),
            kinds: Default::default(),
        });
        let inbox = Inbox::new(bot.clone(), host.clone(), pairings.clone(), prefs.clone(), one.settings);
        let offset = if name == "default" { "telegram.offset".to_owned() } else { format!("telegram-{name}.offset") };
        out.push(Arc::new(Telegram {
            bot,
            inbox,
            account: name,
            mention_patterns: t.mention_patterns.iter().map(|p| p.to_lowercase()).collect(),
            offset_path: config.home.join("channels").join(offset),
            webhook: one.webhook,
            bot_id: match one.token.split_once(':') {
                Some((id, _)) if (1..=20).contains(&id.len()) && id.chars().all(|c| c.is_ascii_digit()) => {
                    id.to_owned()
                }
                _ => String::new(),
            },
        }));
    }
    let mut paths: Vec<&str> = out.iter().filter_map(|t| t.webhook.as_ref().map(|w| w.path.as_str())).collect();
    paths.sort_unstable();
    if paths.windows(2).any(|w| w[0] == w[1]) {
        return Err("[channels.telegram]: two accounts receive on the same webhook_path; give each its own".into());
    }
    Ok(out)
}

/// One account's settings, checked.
struct Account {
    token: String,
    settings: inbox::Settings,
    webhook: Option<Webhook>,
}

fn account(
    config: &Config,
    section: &str,
    name: &str,
    t: &TelegramConfig,
    token: String,
    routing: Arc<Routing>,
) -> Result<Account, String> {
    let webhook = match (&t.webhook_url, &t.webhook_secret) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(format!(
                "{section} webhook_url needs webhook_secret (1–256 of A-Z a-z 0-9 _ -), which Telegram sends with each update"
            ));
        }
        (Some(url), Some(secret)) => {
            let valid = (1..=256).contains(&secret.len())
                && secret.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid {
                return Err(format!("{section} webhook_secret: 1–256 characters of A-Z a-z 0-9 _ -"));
            }
            if !url.starts_with("https://") && !url.starts_with("http://") {
                return Err(format!("{section} webhook_url `{url}` is not an http(s) URL"));
            }
            let default_path =
                if name == "default" { WEBHOOK_PATH.to_owned() } else { format!("{WEBHOOK_PATH}/{name}") };
            let path = t.webhook_path.clone().unwrap_or(default_path);
            if !path.starts_with('/') {
                return Err(format!("{section} webhook_path `{path}` must start with /"));
            }
            Some(Webhook { url: url.clone(), secret: secret.clone(), path })
        }
    };
    if t.webhook_secret.is_some() && t.webhook_url.is_none() {
        return Err(format!("{section} webhook_secret is set without webhook_url"));
    }
    let settings =
        super::settings::common!(section, "telegram", name, t, 3500, TEXT_LIMIT).settings(config, routing)?;
    Ok(Account { token, settings, webhook })
}

impl Telegram {
    /// The bot's id (its token's public part), or its account's name.
    pub fn bot_id(&self) -> String {
        match self.bot_id.as_str() {
            "" => self.account.clone(),
            id => id.to_owned(),
        }
    }

    /// The webhook's path and secret, in webhook mode.
    pub fn webhook(&self) -> Option<(String, String)> {
        self.webhook.as_ref().map(|w| (w.path.clone(), w.secret.clone()))
    }

    /// Receives until `stop`: by webhook (`updates` carries what Telegram posts to the gateway)
    /// or by long polling — while this gateway wins `election`, when there is one (gateways
    /// sharing a store).
    pub async fn run(
        self: Arc<Self>,
        stop: CancellationToken,
        updates: Option<tokio::sync::mpsc::UnboundedReceiver<Value>>,
        election: Option<super::election::Election>,
    ) {
        let mode = if self.webhook.is_some() { "webhook" } else { "polling" };
        self.inbox.status(|s| {
            s.insert("state".into(), "connecting".into());
            s.insert("configured".into(), true.into());
            s.insert("running".into(), true.into());
            s.insert("mode".into(), mode.into());
            s.insert("dmPolicy".into(), self.inbox.policy_name().into());
        });
        let Some(username) = self.connect(&stop).await else { return };
        tracing::info!(bot = %username, webhook = self.webhook.is_some(), "Telegram channel receiving");
        self.inbox.status(|s| {
            s.insert("state".into(), mode.into());
            s.insert("bot".into(), format!("@{username}").into());
        });
        match updates {
            Some(mut updates) => loop {
                let update = tokio::select! {
                    () = stop.cancelled() => return,
                    u = updates.recv() => u,
                };
                let Some(update) = update else { return };
                self.take(&update).await;
            },
            None => self.poll(&stop, election.as_ref()).await,
        }
    }

    /// `getMe` (and in webhook mode `setWebhook`), retried until they work; the bot's username.
    async fn connect(&self, stop: &CancellationToken) -> Option<String> {
        loop {
            let connected = async {
                let name = self.bot.api.username().await?;
                if let Some(w) = &self.webhook {
                    self.bot.api.set_webhook(&w.url, &w.secret).await?;
                }
                Ok::<_, bot_api::ApiError>(name)
            };
            match connected.await {
                Ok(name) => {
                    let _ = self.bot.username.set(name.clone());
                    return Some(name);
                }
                Err(e) => {
                    self.inbox.status(|s| {
                        s.insert("state".into(), "error".into());
                        s.insert("lastError".into(), e.to_string().into());
                    });
                    tracing::warn!(error = %e, "Telegram: could not connect; retrying");
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        }
    }

    async fn poll(&self, stop: &CancellationToken, election: Option<&super::election::Election>) {
        let mut offset: i64 =
            std::fs::read_to_string(&self.offset_path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        let mut cleared_webhook = false;
        let lost = async || match election {
            Some(e) => e.lost().await,
            None => std::future::pending().await,
        };
        loop {
            if let Some(election) = election.filter(|e| !e.leading()) {
                self.inbox.status(|s| {
                    s.insert("state".into(), "standby".into());
                });
                tracing::info!("Telegram: another gateway polls this bot; standing by");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = election.lead() => {}
                }
            }
            let updates = tokio::select! {
                () = stop.cancelled() => return,
                () = lost() => continue,
                u = self.bot.api.updates(offset, POLL) => u,
            };
            match updates {
                Ok(updates) => {
                    self.inbox.status(|s| {
                        s.insert("state".into(), "polling".into());
                        s.insert("lastPollAt".into(), now_ms().into());
                        // Recovered: an old error is not the state any more.
                        s.remove("lastError");
                    });
                    for update in updates {
                        let Some(id) = update["update_id"].as_i64() else { continue };
                        if id < offset {
                            continue;
                        }
                        if let Some(election) = election
                            && !election.first(&format!("telegram:{}:{id}", self.bot_id())).await
                        {
                            tracing::info!(update = id, "Telegram: an update another gateway took already; skipped");
                        } else {
                            self.take(&update).await;
                        }
                        offset = id + 1;
                        self.save_offset(offset);
                    }
                }
                // A webhook left from webhook mode blocks polling: remove it, once.
                Err(e) if e.code == Some(409) && !cleared_webhook => {
                    cleared_webhook = true;
                    tracing::info!("Telegram: a webhook is set; removing it to poll");
                    if let Err(e) = self.bot.api.delete_webhook().await {
                        tracing::warn!(error = %e, "Telegram: deleteWebhook failed");
                    }
                }
                Err(e) => {
                    self.inbox.status(|s| {
                        s.insert("state".into(), "error".into());
                        s.insert("lastError".into(), e.to_string().into());
                    });
                    tracing::warn!(error = %e, "Telegram: getUpdates failed");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            }
        }
    }

    fn save_offset(&self, offset: i64) {
        if let Some(dir) = self.offset_path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = self.offset_path.with_extension("tmp");
        let written = std::fs::write(&tmp, offset.to_string()).and_then(|()| std::fs::rename(&tmp, &self.offset_path));
        if let Err(e) = written {
            tracing::warn!(error = %e, "Telegram: could not keep the update offset");
        }
    }

    /// One update taken in.
    async fn take(&self, update: &Value) {
        let username = self.bot.username.get().map_or("", String::as_str);
        if let Some(env) = envelope(update, username, &self.mention_patterns, &self.account) {
            self.bot.remember(&env.peer, env.kind);
            self.inbox.take(env).await;
        }
    }
}

/// What a Telegram message carries besides text: the largest size of a photo; a document,
/// voice note, audio, video or sticker.
fn attachments(m: &Value) -> Vec<Attachment> {
    let mut out = Vec::new();
    let of = |kind: &str, v: &Value| {
        Some(Attachment {
            kind: kind.to_owned(),
            id: v["file_id"].as_str()?.to_owned(),
            name: v["file_name"].as_str().map(str::to_owned),
            mime: v["mime_type"].as_str().map(str::to_owned),
            size: v["file_size"].as_u64(),
        })
    };
    if let Some(largest) = m["photo"].as_array().and_then(|sizes| sizes.last()) {
        out.extend(of("photo", largest));
    }
    for kind in ["document", "voice", "audio", "video", "video_note", "animation", "sticker"] {
        if m.get(kind).is_some_and(Value::is_object) {
            out.extend(of(kind, &m[kind]));
        }
    }
    out
}

/// A Telegram update as an inbound envelope (text, or media with its caption), its text without
/// the bot's `@name`.
fn envelope(update: &Value, username: &str, patterns: &[String], account: &str) -> Option<Envelope> {
    let m = update.get("message")?;
    let attachments = attachments(m);
    let text = m["text"].as_str().or(m["caption"].as_str()).unwrap_or_default().to_owned();
    if text.is_empty() && attachments.is_empty() {
        return None;
    }
    let chat = &m["chat"];
    let kind = kind_of_type(chat["type"].as_str().unwrap_or_default());
    let id = |v: &Value| v.as_i64().map(|n| n.to_string()).or_else(|| v.as_str().map(str::to_owned));
    let lower = text.to_lowercase();
    let handle = format!("@{}", username.to_lowercase());
    let replied_to_bot =
        m["reply_to_message"]["from"]["username"].as_str().is_some_and(|u| u.eq_ignore_ascii_case(username));
    let mentioned = (!username.is_empty() && lower.contains(&handle))
        || replied_to_bot
        || patterns.iter().any(|p| !p.is_empty() && lower.contains(p.as_str()));
    let thread = (m["is_topic_message"] == true).then(|| id(&m["message_thread_id"])).flatten();
    let from = &m["from"];
    let name = from["first_name"].as_str().or(from["username"].as_str()).unwrap_or("someone").to_owned();
    Some(Envelope {
        channel: "telegram".into(),
        account: account.to_owned(),
        peer: id(&chat["id"])?,
        kind,
        sender: id(&from["id"]).unwrap_or_default(),
        sender_name: name,
        message_id: id(&m["message_id"])?,
        text: strip_mention(&text, username),
        attachments,
        reply_to: id(&m["reply_to_message"]["message_id"]),
        thread,
        mentioned,
        guild: None,
        team: None,
    })
}

/// The text without the bot's `@name` (usernames are ASCII, matched in any case).
fn strip_mention(text: &str, username: &str) -> String {
    if username.is_empty() {
        return text.to_owned();
    }
    let handle = format!("@{username}");
    let mut out = text.to_owned();
    while let Some(at) = out.as_bytes().windows(handle.len()).position(|w| w.eq_ignore_ascii_case(handle.as_bytes())) {
        // An ASCII match starts and ends on character boundaries.
        out.replace_range(at..at + handle.len(), "");
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mention_goes_whatever_the_case_and_other_text_stays() {
        assert_eq!(strip_mention("@Acp_Bot hello @acp_bot", "acp_bot"), "hello");
        assert_eq!(strip_mention("İİ @ACP_BOT ß", "acp_bot"), "İİ  ß");
        assert_eq!(strip_mention("no mention", "acp_bot"), "no mention");
    }
}
