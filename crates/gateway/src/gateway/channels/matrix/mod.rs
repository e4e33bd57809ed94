//! The Matrix channel on the gateway, over the Client-Server API of any homeserver: `/sync` long
//! polling (the `since` token and the ids of the last 1,000 messages taken in are kept in
//! `$ACP_HOME/channels/matrix.sync.json`, written as each message is taken and each batch ends,
//! so a restart, a dropped connection or a batch synced again neither loses nor repeats a
//! message; history from before the first start is skipped), invitations accepted from those who may talk
//! to the bot, each `m.room.message` an [`Envelope`] for the account's [`Inbox`], replies sent
//! as `m.text` with HTML built from the reply's Markdown (in the thread the message came in).
//! A room the bot was invited to as a direct chat (`is_direct`, as clients open one; kept in its
//! `m.direct` account data as clients keep it) is a direct chat; any other a group, answered when
//! addressed (the bot's
//! user id or name, `m.mentions`, a reply to the bot, or `mention_patterns`). End-to-end
//! encrypted rooms are not read: the status says which rooms are.

pub mod client_api;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Host;
use super::access::Pairings;
use super::inbox::{Channel, Inbox};
use super::kept::Kept;
use super::policy::SessionPrefs;
use super::routing::{Attachment, Envelope, PeerKind, Routing};
use crate::clock::now_ms;
use crate::config::Config;
use crate::runtime::host::ChatFile;
use crate::sync::lock;
use client_api::Api;

/// The most characters of one message sent (a Matrix event is at most 64 KiB, and the HTML goes
/// with the plain text).
pub const TEXT_LIMIT: usize = 8000;
/// How long one `/sync` waits for something new.
const POLL: Duration = Duration::from_secs(30);

/// One Matrix account as a [`Channel`].
pub struct Account {
    api: Api,
    /// Its user id, once `whoami` said it.
    me: OnceLock<String>,
    /// What each room is, by room id.
    kinds: Mutex<HashMap<String, PeerKind>>,
    /// The events it sent lately (a reply to one of them addresses it).
    sent: Mutex<VecDeque<String>>,
}

impl Account {
    fn remember(&self, room: &str, kind: PeerKind) {
        let mut kinds = lock(&self.kinds);
        if kinds.len() >= 10_000 && !kinds.contains_key(room) {
            kinds.clear();
        }
        kinds.insert(room.to_owned(), kind);
    }

    fn sent_by_me(&self, event: &str) -> bool {
        lock(&self.sent).iter().any(|e| e == event)
    }

    /// Sends a message event `content` to `room` (in thread `thread`), kept as the account's own.
    async fn post(&self, room: &str, thread: Option<&str>, mut content: Value) -> Result<(), String> {
        if let Some(root) = thread {
            content["m.relates_to"] = json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": root}});
        }
        // One transaction id for all the attempts: the homeserver keeps one message.
        let txn = format!("acp-{}", uuid::Uuid::new_v4().simple());
        let event = self.api.send(room, &txn, &content).await.map_err(|e| e.to_string())?;
        let mut sent = lock(&self.sent);
        sent.push_back(event);
        if sent.len() > 1000 {
            sent.pop_front();
        }
        Ok(())
    }
}

impl Channel for Account {
    fn id(&self) -> &'static str {
        "matrix"
    }

    async fn send(&self, room: &str, thread: Option<&str>, text: &str) -> Result<(), String> {
        let content = json!({
            "msgtype": "m.text",
            "body": text,
            "format": "org.matrix.custom.html",
            "formatted_body": super::telegram::bot_api::to_html(text),
        });
        self.post(room, thread, content).await
    }

    /// Uploaded to the homeserver's media repository, then sent as an `m.image` (`m.video`,
    /// `m.audio`) or `m.file` event whose `body` is the caption when there is one (with
    /// `filename` beside it, as Matrix 1.10 has captions).
    async fn send_file(&self, room: &str, thread: Option<&str>, file: &ChatFile, caption: &str) -> Result<(), String> {
        let uri = self.api.upload(file).await.map_err(|e| format!("{} could not be uploaded: {e}", file.name))?;
        let msgtype = match file.mime.split('/').next() {
            _ if file.is_image() => "m.image",
            Some("video") => "m.video",
            Some("audio") => "m.audio",
            _ => "m.file",
        };
        let mut content = json!({
            "msgtype": msgtype,
            "body": file.name,
            "filename": file.name,
            "url": uri,
            "info": {"mimetype": file.mime, "size": file.bytes.len()},
        });
        if !caption.trim().is_empty() {
            content["body"] = json!(caption);
            content["format"] = json!("org.matrix.custom.html");
            content["formatted_body"] = json!(super::telegram::bot_api::to_html(caption));
        }
        self.post(room, thread, content).await
    }

    async fn typing(&self, room: &str, _thread: Option<&str>) {
        if let Some(me) = self.me.get() {
            self.api.typing(room, me).await;
        }
    }

    /// A room among the account's direct chats (`m.direct`) is one; any other is a group.
    async fn kind_of(&self, room: &str) -> Result<PeerKind, String> {
        if let Some(kind) = lock(&self.kinds).get(room) {
            return Ok(*kind);
        }
        let me = self.me.get().map_or("", String::as_str);
        let direct = self
            .api
            .direct_rooms(me)
            .await
            .map_err(|e| format!("the homeserver did not say what `{room}` is ({e}), so it was not sent"))?;
        let listed = direct.as_object().into_iter().flat_map(|m| m.values()).filter_map(Value::as_array).flatten();
        let direct = listed.into_iter().any(|r| r == room);
        let kind = if direct { PeerKind::Direct } else { PeerKind::Group };
        self.remember(room, kind);
        Ok(kind)
    }

    async fn fetch(&self, attachment: &Attachment, limit: u64) -> Result<Vec<u8>, String> {
        self.api.download(&attachment.id, limit).await
    }
}

pub struct Matrix {
    account: Arc<Account>,
    pub inbox: Arc<Inbox<Account>>,
    /// `default`, or its name under `[channels.matrix.accounts]`.
    pub name: String,
    pairings: Arc<Pairings>,
    allow_from: Vec<String>,
    open_dms: bool,
    open_groups: bool,
    auto_join: bool,
    mention_patterns: Vec<String>,
    /// The sync token and the events taken in lately.
    kept: Kept,
    /// Encrypted rooms seen (not read), for the status.
    encrypted: Mutex<HashSet<String>>,
}

/// The channel's accounts from `[channels.matrix]` and `[channels.matrix.accounts.NAME]`.
pub fn start(
    config: &Config,
    host: Arc<dyn Host>,
    pairings: Arc<Pairings>,
    prefs: Arc<SessionPrefs>,
    http: reqwest::Client,
) -> Result<Vec<Arc<Matrix>>, String> {
    let Some(m) = &config.channels.matrix else { return Ok(Vec::new()) };
    let routing = Arc::new(Routing::from_config(config)?);
    let accounts = super::settings::accounts("matrix", m, "access_token", "MATRIX_ACCESS_TOKEN")?;
    let mut out = Vec::new();
    for (name, m, token) in accounts {
        let section = super::settings::section("matrix", &name);
        let Some(homeserver) = m.homeserver.clone().filter(|h| !h.is_empty()) else {
            return Err(format!("{section} needs homeserver (its base URL, https://matrix.example.org)"));
        };
        if !homeserver.starts_with("https://") && !homeserver.starts_with("http://") {
            return Err(format!("{section} homeserver `{homeserver}` is not an http(s) URL"));
        }
        let settings = super::settings::common!(&section, "matrix", &name, m, 4000, TEXT_LIMIT)
            .settings(config, routing.clone())?;
        let open_dms = settings.policy != super::access::DmPolicy::Allowlist;
        let open_groups = settings.group_policy == super::inbox::GroupPolicy::Open;
        let account = Arc::new(Account {
            api: Api::new(http.clone(), &homeserver, &token),
            me: OnceLock::new(),
            kinds: Mutex::default(),
            sent: Mutex::default(),
        });
        let inbox = Inbox::new(account.clone(), host.clone(), pairings.clone(), prefs.clone(), settings);
        let state = if name == "default" { "matrix.sync.json".to_owned() } else { format!("matrix-{name}.sync.json") };
        out.push(Arc::new(Matrix {
            account,
            inbox,
            name,
            pairings: pairings.clone(),
            allow_from: m.allow_from.clone(),
            open_dms,
            open_groups,
            auto_join: m.auto_join.unwrap_or(true),
            mention_patterns: m.mention_patterns.iter().map(|p| p.to_lowercase()).collect(),
            kept: Kept::load(config.home.join("channels").join(state)),
            encrypted: Mutex::default(),
        }));
    }
    Ok(out)
}

impl Matrix {
    /// Syncs until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        self.inbox.status(|s| {
            s.insert("state".into(), "connecting".into());
            s.insert("configured".into(), true.into());
            s.insert("running".into(), true.into());
            s.insert("mode".into(), "sync".into());
            s.insert("dmPolicy".into(), self.inbox.policy_name().into());
        });
        let me = loop {
            match self.account.api.whoami().await {
                Ok(me) => break me,
                Err(e) => {
                    self.failed(&e.to_string());
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        };
        let _ = self.account.me.set(me.clone());
        tracing::info!(user = %me, "Matrix channel receiving");
        self.inbox.status(|s| {
            s.insert("user".into(), me.clone().into());
        });
        let mut since = self.kept.get("since").and_then(|s| s.as_str().map(str::to_owned));
        loop {
            // The first start skips what was said before it (answering old history would surprise).
            let wait = if since.is_some() { POLL } else { Duration::ZERO };
            let batch = tokio::select! {
                () = stop.cancelled() => return,
                b = self.account.api.sync(since.as_deref(), wait) => b,
            };
            match batch {
                Ok(batch) => {
                    let Some(next) = batch["next_batch"].as_str().map(str::to_owned) else {
                        // Not a sync answer: tried again in a while, not at once.
                        self.failed("the homeserver's sync gave no next_batch");
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(Duration::from_secs(2)) => {}
                        }
                        continue;
                    };
                    self.inbox.status(|s| {
                        s.insert("state".into(), "syncing".into());
                        s.insert("lastPollAt".into(), now_ms().into());
                        s.remove("lastError");
                    });
                    self.take(&batch, since.is_some()).await;
                    self.kept.set(json!({"since": next}));
                    since = Some(next);
                }
                Err(e) => {
                    self.failed(&e.to_string());
                    // A token the homeserver no longer knows: start afresh from now.
                    if e.status == Some(400) || e.code == "M_UNKNOWN_POS" {
                        since = None;
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            }
        }
    }

    fn failed(&self, error: &str) {
        tracing::warn!(account = %self.name, %error, "Matrix: sync failed");
        self.inbox.status(|s| {
            s.insert("state".into(), "error".into());
            s.insert("lastError".into(), error.into());
        });
    }

    /// Whether `sender` may bring the bot into a room: an owner, someone paired, or anyone where
    /// the policy lets strangers in (to be told a pairing code, in a direct chat).
    fn may_invite(&self, sender: &str, direct: bool) -> bool {
        let scope = super::inbox::scope_of("matrix", &self.name);
        self.pairings.known(&scope, &self.allow_from, sender) || if direct { self.open_dms } else { self.open_groups }
    }

    /// One sync batch: invitations, then each room's new messages (none unless `live`: the
    /// first sync's messages are history).
    async fn take(&self, batch: &Value, live: bool) {
        let me = self.account.me.get().cloned().unwrap_or_default();
        if let Some(invites) = batch["rooms"]["invite"].as_object() {
            for (room, invite) in invites {
                let events = invite["invite_state"]["events"].as_array().map(Vec::as_slice).unwrap_or_default();
                let Some(mine) = events.iter().find(|e| e["type"] == "m.room.member" && e["state_key"] == me.as_str())
                else {
                    continue;
                };
                let inviter = mine["sender"].as_str().unwrap_or_default();
                let direct = mine["content"]["is_direct"] == true;
                if !self.auto_join || !self.may_invite(inviter, direct) {
                    tracing::info!(%room, %inviter, "Matrix: an invitation not accepted");
                    continue;
                }
                match self.account.api.join(room).await {
                    Ok(()) => {
                        self.account.remember(room, if direct { PeerKind::Direct } else { PeerKind::Group });
                        if direct && let Err(e) = self.account.api.add_direct_room(&me, inviter, room).await {
                            tracing::warn!(%room, error = %e, "Matrix: could not keep the direct chat in m.direct");
                        }
                    }
                    Err(e) => tracing::warn!(%room, error = %e, "Matrix: could not join"),
                }
            }
        }
        let Some(joined) = batch["rooms"]["join"].as_object() else { return };
        for (room, state) in joined {
            let encrypted = state["state"]["events"]
                .as_array()
                .into_iter()
                .chain(state["timeline"]["events"].as_array())
                .flatten()
                .any(|e| e["type"] == "m.room.encryption");
            if encrypted && lock(&self.encrypted).insert(room.clone()) {
                tracing::warn!(%room, "Matrix: an end-to-end encrypted room; its messages are not read");
                let rooms: Vec<String> = lock(&self.encrypted).iter().cloned().collect();
                self.inbox.status(|s| {
                    s.insert("encryptedRooms".into(), rooms.clone().into());
                });
            }
            if !live {
                continue;
            }
            let Some(events) = state["timeline"]["events"].as_array() else { continue };
            for event in events {
                if event["type"] != "m.room.message" || event["sender"] == me.as_str() {
                    continue;
                }
                // A batch synced again (a restart before its token was kept) repeats nothing.
                let Some(id) = event["event_id"].as_str() else { continue };
                if !self.kept.first_time(id) {
                    tracing::debug!(event = id, "Matrix: a message taken in already");
                    continue;
                }
                let kind = match self.account.kind_of(room).await {
                    Ok(kind) => kind,
                    Err(e) => {
                        tracing::warn!(%room, error = %e, "Matrix: a message from a room of unknown kind, dropped");
                        continue;
                    }
                };
                if let Some(env) = envelope(&self.account, room, kind, event, &me, &self.mention_patterns, &self.name) {
                    self.inbox.take(env).await;
                }
            }
        }
    }
}

/// A message's attachment: an image, file, voice note or video (by its `mxc://` URI).
fn attachment(content: &Value) -> Option<Attachment> {
    let kind = match content["msgtype"].as_str()? {
        "m.image" => "photo",
        "m.file" => "document",
        "m.audio" => "audio",
        "m.video" => "video",
        _ => return None,
    };
    Some(Attachment {
        kind: kind.into(),
        id: content["url"].as_str()?.to_owned(),
        name: content["filename"].as_str().or(content["body"].as_str()).map(str::to_owned),
        mime: content["info"]["mimetype"].as_str().map(str::to_owned),
        size: content["info"]["size"].as_u64(),
    })
}

/// The text of a reply without the quoted message Matrix clients put first (`> <@x> …`).
fn without_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    match body.find("\n\n") {
        Some(at) if body[..at].lines().all(|l| l.starts_with('>')) => &body[at + 2..],
        _ => body,
    }
}

/// An `m.room.message` as an inbound envelope, its text without the bot's mention; `None` for
/// edits and what carries neither text nor a file.
fn envelope(
    account: &Account,
    room: &str,
    kind: PeerKind,
    event: &Value,
    me: &str,
    patterns: &[String],
    name: &str,
) -> Option<Envelope> {
    let content = &event["content"];
    let relates = &content["m.relates_to"];
    if relates["rel_type"] == "m.replace" {
        return None;
    }
    let attachments: Vec<Attachment> = attachment(content).into_iter().collect();
    let body = content["body"].as_str().unwrap_or_default();
    let text = if attachments.is_empty() {
        match content["msgtype"].as_str() {
            Some("m.text" | "m.notice" | "m.emote") => without_fallback(body).to_owned(),
            _ => return None,
        }
    } else {
        // A file's body is its name; a caption is a body that differs from `filename`.
        match content["filename"].as_str() {
            Some(file) if file != body => body.to_owned(),
            _ => String::new(),
        }
    };
    let localpart = me.trim_start_matches('@').split(':').next().unwrap_or_default().to_lowercase();
    let lower = text.to_lowercase();
    let reply_to = relates["m.in_reply_to"]["event_id"].as_str().map(str::to_owned);
    let thread = (relates["rel_type"] == "m.thread").then(|| relates["event_id"].as_str().map(str::to_owned)).flatten();
    let mentioned = content["m.mentions"]["user_ids"].as_array().is_some_and(|ids| ids.iter().any(|i| i == me))
        || (!me.is_empty() && lower.contains(&me.to_lowercase()))
        || has_word(&lower, &localpart)
        || reply_to.as_deref().is_some_and(|e| account.sent_by_me(e) && thread.as_deref() != Some(e))
        || patterns.iter().any(|p| !p.is_empty() && lower.contains(p.as_str()));
    let sender = event["sender"].as_str()?.to_owned();
    let sender_name = sender.trim_start_matches('@').split(':').next().unwrap_or_default().to_owned();
    Some(Envelope {
        channel: "matrix".into(),
        account: name.to_owned(),
        peer: room.to_owned(),
        kind,
        sender,
        sender_name,
        message_id: event["event_id"].as_str()?.to_owned(),
        text: strip_mention(&text, me, &localpart),
        attachments,
        reply_to,
        thread,
        mentioned,
        guild: None,
        team: None,
    })
}

/// Whether `word` stands in `text` as a word of its own (not inside another).
fn has_word(text: &str, word: &str) -> bool {
    !word.is_empty()
        && text.match_indices(word).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
}

/// The text without the bot's user id, or its name as a client's mention pill writes it
/// (`acp: …`).
fn strip_mention(text: &str, me: &str, localpart: &str) -> String {
    let mut out = text.replace(me, "");
    if !localpart.is_empty() {
        let lower = out.to_lowercase();
        for prefix in [format!("{localpart}:"), format!("{localpart},"), format!("@{localpart}")] {
            if lower.trim_start().starts_with(&prefix) {
                let start = out.len() - out.trim_start().len();
                out.replace_range(start..start + prefix.len(), "");
                break;
            }
        }
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_loses_its_quote_and_the_mention_goes() {
        assert_eq!(without_fallback("> <@ada:x> earlier\n> more\n\nthe answer"), "the answer");
        assert_eq!(without_fallback("> a quote of my own"), "> a quote of my own");
        assert_eq!(strip_mention("@bot:example.org what now", "@bot:example.org", "bot"), "what now");
        assert_eq!(strip_mention("bot: what now", "@bot:example.org", "bot"), "what now");
        assert_eq!(strip_mention("Bot, hi", "@bot:example.org", "bot"), "hi");
        assert_eq!(strip_mention("robots are fine", "@bot:example.org", "bot"), "robots are fine");
        assert!(has_word("hey bot, hi", "bot") && has_word("bot", "bot") && !has_word("robots", "bot"));
    }

    #[test]
    fn files_become_attachments_with_their_captions() {
        let content = json!({"msgtype": "m.image", "body": "a cat", "filename": "cat.png",
            "url": "mxc://localhost/abc", "info": {"mimetype": "image/png", "size": 12}});
        let a = attachment(&content).unwrap();
        assert_eq!((a.kind.as_str(), a.id.as_str(), a.size), ("photo", "mxc://localhost/abc", Some(12)));
        assert_eq!(a.name.as_deref(), Some("cat.png"));
        assert!(attachment(&json!({"msgtype": "m.text", "body": "x"})).is_none());
    }
}
