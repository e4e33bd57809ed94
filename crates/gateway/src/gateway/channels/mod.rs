//! Messaging channels on the gateway: routing an inbound message to its agent and session key
//! (`routing.rs`), who may talk to the agent and the deduplication of redelivered messages
//! (`access.rs`), what every channel does with a message — queueing, replies, questions, chat
//! commands (`inbox.rs`, with the [`inbox::Channel`] trait a channel implements; `queue.rs`,
//! `policy.rs`) — how a reply is cut into messages (`chunker.rs`), and Telegram: its Bot API
//! channel (`telegram/mod.rs`) on its Bot API client (`telegram/bot_api.rs`). A channel reaches
//! the gateway only through [`Host`]; the gateway reaches the channels through [`Channels`].

pub mod access;
pub mod chunker;
pub mod discord;
pub mod election;
pub mod inbox;
pub mod kept;
pub mod matrix;
pub mod policy;
pub mod queue;
pub mod routing;
pub mod settings;
pub mod slack;
pub mod telegram;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use acp_protocol::gateway::methods::{ChannelsInfo, SendParams, Sent};
use acp_protocol::gateway::{ErrorShape, canonical_key, code};
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::approvals::ChatAsker;
use super::hub::{EndWatch, Heard};
use crate::runtime::host::{ChatFile, ChatTarget};
use crate::runtime::media;
use crate::runtime::{Mode, Runtime, UserBlock};
use crate::sync::lock;

/// What a channel asks of the gateway.
pub trait Host: Send + Sync {
    /// Runs `prompt` on session `key`: the reply streams to the receiver, the watch says how the
    /// run ended. `mode_cap`: the most its tool calls get (a sender who is not an owner: `ask`);
    /// `from_agent`: the words are another agent's (never read for directives).
    fn run(
        &self,
        key: &str,
        prompt: Vec<UserBlock>,
        mode_cap: Option<Mode>,
        from_agent: bool,
    ) -> BoxFuture<'_, Result<(mpsc::UnboundedReceiver<Heard>, EndWatch), String>>;
    /// Steers `text` into session `key`'s running turn; resolves to whether the turn took it.
    fn steer(&self, key: &str, text: &str) -> BoxFuture<'static, bool>;
    /// Cancels the runs going on session `key`.
    fn abort_runs(&self, key: &str);
    /// Session `key`'s permission questions are also asked in `chat`.
    fn route_questions(&self, key: &str, chat: Arc<dyn ChatAsker>);
    /// A question answered from a chat with option `option`; the option's label.
    fn answer_question(&self, id: &str, option: &str, by: &str) -> Result<String, String>;
    /// The state of `account` on `channel`, as `channels.status` shows it.
    fn channel_status(&self, channel: &str, account: &str, change: &mut dyn FnMut(&mut Map<String, Value>));
    /// Runs the user's hooks for a message `event` (`MessageReceived`, `MessageSent`) on
    /// `channel`, with `fields`; what they decide (`None`: none matches).
    fn message_hooks(
        &self,
        event: crate::config::hooks::HookEvent,
        channel: &str,
        fields: Value,
    ) -> BoxFuture<'static, Option<crate::hooks::Verdict>>;
}

/// The gateway's side of its channels: who may talk through them, what chats chose, the
/// channels to send through, their state, where webhooks go, and `send`'s idempotency.
pub struct Channels {
    /// Who may talk to the agent through channels.
    pub pairings: Arc<access::Pairings>,
    /// What chats chose for their sessions (`/queue`, `/send`, `sessions.patch sendPolicy`).
    pub prefs: Arc<policy::SessionPrefs>,
    /// The channels served, to send through.
    pub outbox: Outbox,
    /// Each account's state on each channel, as `channels.status` shows it.
    status: Mutex<BTreeMap<(String, String), Map<String, Value>>>,
    /// Webhook paths a channel receives on: the secret the caller must present, and where the
    /// updates go.
    webhooks: Mutex<HashMap<String, (String, mpsc::UnboundedSender<Value>)>>,
    /// `send` answers by idempotency key (a retried call sends nothing twice).
    sent: Mutex<VecDeque<(String, Sent)>>,
    /// The chat someone last wrote to each agent from (where `last` delivers), by agent.
    last: Mutex<HashMap<String, ChatTarget>>,
}

impl Channels {
    pub fn new(pairings: Arc<access::Pairings>, prefs: Arc<policy::SessionPrefs>) -> Self {
        Self {
            pairings,
            prefs,
            outbox: Outbox::default(),
            status: Mutex::default(),
            webhooks: Mutex::default(),
            sent: Mutex::default(),
            last: Mutex::default(),
        }
    }

    /// Someone wrote to session `key` from a chat: it is its agent's last one (if a channel's
    /// direct chat: what goes to `last` is the agent's own, never for a group).
    pub fn wrote_from(&self, key: &str, direct: bool) {
        if let Some(chat) = self.outbox.own_chat(key).filter(|_| direct) {
            let agent = crate::config::agents::agent_or_main(key).to_owned();
            lock(&self.last).insert(agent, chat);
        }
    }

    /// The direct chat someone last wrote to agent `agent` from, since the gateway started
    /// (never another agent's: its replies may carry what that agent knows).
    pub fn last_chat(&self, agent: &str) -> Option<ChatTarget> {
        lock(&self.last).get(agent).cloned()
    }

    /// Every account of every channel, as `channels.status` shows them.
    pub fn status(&self) -> ChannelsInfo {
        let all = lock(&self.status);
        let mut info = ChannelsInfo { ts: crate::clock::now_ms(), ..ChannelsInfo::default() };
        for ((channel, account), state) in all.iter() {
            if !info.channel_order.contains(channel) {
                info.channel_order.push(channel.clone());
                info.channel_labels.insert(channel.clone(), label(channel).into());
            }
            info.channel_accounts.entry(channel.clone()).or_default().push(Value::Object(state.clone()));
            if account == "default" || !info.channel_default_account_id.contains_key(channel) {
                info.channel_default_account_id.insert(channel.clone(), account.clone());
            }
        }
        for (channel, accounts) in &info.channel_accounts {
            let running = accounts.iter().filter(|a| a["running"] == true).count();
            let summary = serde_json::json!({"configured": true, "accounts": accounts.len(), "running": running});
            info.channels.insert(channel.clone(), summary);
        }
        info
    }

    pub fn change_status(&self, channel: &str, account: &str, change: &mut dyn FnMut(&mut Map<String, Value>)) {
        let mut all = lock(&self.status);
        let entry = all.entry((channel.to_owned(), account.to_owned())).or_insert_with(|| {
            let mut entry = Map::new();
            entry.insert("id".into(), channel.into());
            entry.insert("accountId".into(), account.into());
            entry
        });
        change(entry);
    }

    /// A channel receives updates posted to `path` with `secret` (webhook mode).
    pub fn add_webhook(&self, path: &str, secret: &str) -> mpsc::UnboundedReceiver<Value> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.webhooks).insert(path.to_owned(), (secret.to_owned(), tx));
        rx
    }

    /// Whether `secret` is the one a webhook at `path` takes: `None` if no channel receives there.
    pub fn webhook_secret_ok(&self, path: &str, secret: Option<&str>) -> Option<bool> {
        let hooks = lock(&self.webhooks);
        let (want, _) = hooks.get(path)?;
        Some(secret.is_some_and(|s| super::handshake::same(s, want)))
    }

    /// An update posted to `path` (its secret checked already); false if no channel receives
    /// there.
    pub fn webhook(&self, path: &str, update: Value) -> bool {
        lock(&self.webhooks).get(path).is_some_and(|(_, tx)| tx.send(update).is_ok())
    }

    pub fn has_webhook(&self, path: &str) -> bool {
        lock(&self.webhooks).contains_key(path)
    }

    /// `send`: delivers a message to a chat (the send policy applies); a retry with the same key
    /// sends nothing again, also after a restart (the key is kept in `runtime`'s store).
    /// `media`: the files `mediaUrl` and `mediaUrls` name, read by [`Channels::media`].
    pub async fn send(
        &self,
        runtime: &Runtime,
        p: &SendParams,
        media: impl Future<Output = Result<Vec<ChatFile>, ErrorShape>>,
    ) -> Result<Sent, ErrorShape> {
        let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
        let idempotency = p.idempotency_key.trim().to_owned();
        if let Some((_, done)) = lock(&self.sent).iter().find(|(k, _)| *k == idempotency) {
            return Ok(done.clone());
        }
        let message = p.message.trim();
        if message.is_empty() && media_of(p).next().is_none() {
            return Err(ErrorShape::invalid("invalid send params: `message` is empty (and no `mediaUrl` is given)"));
        }
        if media_of(p).count() > MAX_FILES {
            return Err(ErrorShape::invalid(format!("invalid send params: at most {MAX_FILES} files a message")));
        }
        let own = given(&p.session_key).and_then(|k| self.outbox.own_chat(&canonical_key(&k)));
        let channel = match (given(&p.channel), &own, self.outbox.ids().as_slice()) {
            (Some(c), _, _) => match given(&p.account_id) {
                Some(account) if !c.contains(':') => inbox::scope_of(&c, &account),
                _ => c,
            },
            (None, Some(own), _) => own.channel.clone(),
            (None, None, [only]) => (*only).to_owned(),
            (None, None, []) => return Err(ErrorShape::new(code::UNAVAILABLE, "no messaging channel is configured")),
            (None, None, many) => {
                return Err(ErrorShape::invalid(format!("invalid send params: give `channel` ({})", many.join(", "))));
            }
        };
        let to = p.to.trim();
        if to.is_empty() {
            return Err(ErrorShape::invalid("invalid send params: `to` is empty"));
        }
        let target = ChatTarget { channel, to: to.to_owned(), thread: given(&p.thread_id) };
        let done =
            Sent { ok: true, channel: target.channel.clone(), to: target.to.clone(), run_id: idempotency.clone() };
        // Kept in the store too, so a retry after a restart sends nothing again.
        let stored = format!("send:{idempotency}");
        match runtime.claim_key(&stored, "").await {
            Ok(None) => {}
            Ok(Some(record)) => {
                return Ok(record.outcome.as_deref().and_then(|o| serde_json::from_str(o).ok()).unwrap_or(done));
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not record an idempotency key; a retry after a restart would send again")
            }
        }
        // Read once the key is claimed (a retry of a finished send reads nothing); a file that
        // cannot be had leaves the key free.
        let files = match media.await {
            Ok(files) => files,
            Err(e) => {
                let _ = runtime.forget_key(&stored).await;
                return Err(e);
            }
        };
        let outcome = if files.is_empty() {
            self.outbox.send(&target, message, None).await.map_err(|e| (e, false))
        } else {
            self.send_files(&target, message, &files).await
        };
        match outcome {
            Ok(()) => {}
            // Not sent: a retry may try again.
            Err((e, false)) => {
                let _ = runtime.forget_key(&stored).await;
                return Err(ErrorShape::new(code::UNAVAILABLE, e));
            }
            // Some sent: a retry would send them again, so the key counts as used.
            Err((e, true)) => {
                let _ = runtime.end_key(&stored, &done).await;
                return Err(ErrorShape::new(code::UNAVAILABLE, format!("{e}; a retry with this key sends nothing")));
            }
        }
        if let Err(e) = runtime.end_key(&stored, &done).await {
            tracing::warn!(error = %e, "could not record a delivery");
        }
        let mut sent = lock(&self.sent);
        sent.push_back((idempotency, done.clone()));
        if sent.len() > 1000 {
            sent.pop_front();
        }
        Ok(done)
    }

    /// Each file in turn, the caption with the first, until one fails: why, and whether any
    /// went before it.
    async fn send_files(&self, target: &ChatTarget, caption: &str, files: &[ChatFile]) -> Result<(), (String, bool)> {
        for (i, file) in files.iter().enumerate() {
            let caption = if i == 0 { caption } else { "" };
            if let Err(e) = self.outbox.send(target, caption, Some(file)).await {
                return Err((format!("sent {i} of {} files, then {}: {e}", files.len(), file.name), i > 0));
            }
        }
        Ok(())
    }

    /// The files a `send` names (`mediaUrl`, `mediaUrls`): an http(s) URL is downloaded (public
    /// addresses only, as `web_fetch` reaches), anything else is a path in `workspace` (relative
    /// to it, or absolute inside it; never in `$ACP_HOME` unless the workspace is).
    pub async fn media(
        p: &SendParams,
        config: &crate::config::Config,
        workspace: &Path,
    ) -> Result<Vec<ChatFile>, ErrorShape> {
        let invalid = |e: String| ErrorShape::invalid(format!("invalid send params: {e}"));
        let mut files: Vec<ChatFile> = Vec::new();
        for spec in media_of(p) {
            let scheme = spec.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
            let file = match scheme.as_deref() {
                // A download that fails may work later: not the caller's mistake.
                Some("http" | "https") => {
                    media::download(spec, config).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?
                }
                Some("file") | None => {
                    let path = spec.strip_prefix("file://").unwrap_or(spec);
                    let full = inside_workspace(path, config, workspace).map_err(invalid)?;
                    let seen = media::check(&full).map_err(invalid)?;
                    let name = full.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
                    media::read(&full, &name, Some(seen)).await.map_err(invalid)?
                }
                Some(other) => {
                    return Err(invalid(format!(
                        "`{spec}`: {other}: URLs are not fetched; give an http(s) URL or a workspace path"
                    )));
                }
            };
            files.push(file);
            // One call holds at most what one file may be.
            if files.iter().map(|f| f.bytes.len() as u64).sum::<u64>() > media::MAX_BYTES {
                return Err(invalid(format!(
                    "the files are larger than {} together, the most one `send` takes",
                    media::human_size(media::MAX_BYTES)
                )));
            }
        }
        Ok(files)
    }
}

/// The most files one `send` takes.
const MAX_FILES: usize = 10;

fn media_of(p: &SendParams) -> impl Iterator<Item = &str> {
    p.media_url.iter().chain(&p.media_urls).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// `path` (relative to `workspace`, or absolute; a `file://` URL's path) resolved as it really is
/// (links followed), if it lies in `workspace` and not in the agent's home (its configuration,
/// keys, sessions), unless the workspace itself does.
fn inside_workspace(path: &str, config: &crate::config::Config, workspace: &Path) -> Result<PathBuf, String> {
    // As it really is if it exists, else as it reads (`..` taken away).
    let real = |p: &Path| {
        std::fs::canonicalize(p).unwrap_or_else(|_| {
            let mut out = PathBuf::new();
            for part in p.components() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => out.push(other),
                }
            }
            out
        })
    };
    let workspace = real(workspace);
    let home = real(&config.home);
    let full = real(&workspace.join(path));
    if !full.starts_with(&workspace) {
        return Err(format!(
            "`{path}` is outside the workspace ({}); only its files (or http(s) URLs) can be sent",
            workspace.display()
        ));
    }
    if full.starts_with(&home) && !workspace.starts_with(&home) {
        return Err(format!(
            "`{path}` is in the agent's own home ({}: its configuration, keys and sessions), which is never sent",
            home.display()
        ));
    }
    if !full.exists() {
        return Err(format!("`{path}` does not exist in the workspace ({})", workspace.display()));
    }
    Ok(full)
}

/// A channel as the rest of the gateway sends through it (the `send` method, the `message`
/// tool); the send policy applies.
pub trait Outbound: Send + Sync {
    /// Sends `text` to chat `to` (in `thread`), with `file` if given (`text` its caption).
    fn send<'a>(
        &'a self,
        to: &'a str,
        thread: Option<&'a str>,
        text: &'a str,
        file: Option<&'a ChatFile>,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// The chat session `key` last spoke from on this channel: (peer, thread).
    fn chat_of(&self, key: &str) -> Option<(String, Option<String>)>;
    /// Runs `text` on session `key` as a message of the chat it talks in, queued as any
    /// other, its reply delivered there; `false` if the session is not this channel's.
    fn wake(self: Arc<Self>, key: &str, text: &str) -> bool;
}

/// The channels being served, by what sending calls them: the channel for its default account
/// (`telegram`), else `channel:account` (`telegram:work`).
#[derive(Default)]
pub struct Outbox(Mutex<BTreeMap<String, Arc<dyn Outbound>>>);

impl Outbox {
    pub fn add(&self, id: String, channel: Arc<dyn Outbound>) {
        lock(&self.0).insert(id, channel);
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    pub fn get(&self, id: &str) -> Option<Arc<dyn Outbound>> {
        lock(&self.0).get(id).cloned()
    }

    /// The channels' ids.
    pub fn ids(&self) -> Vec<String> {
        lock(&self.0).keys().cloned().collect()
    }

    /// Runs `text` on session `key` in the chat it talks in ([`Outbound::wake`]), if any
    /// channel's.
    pub fn wake(&self, key: &str, text: &str) -> bool {
        let all: Vec<Arc<dyn Outbound>> = lock(&self.0).values().cloned().collect();
        all.into_iter().any(|channel| channel.wake(key, text))
    }

    /// The chat session `key` talks in, on whichever channel it came from.
    pub fn own_chat(&self, key: &str) -> Option<ChatTarget> {
        let all: Vec<(String, Arc<dyn Outbound>)> = lock(&self.0).iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.into_iter().find_map(|(id, ch)| ch.chat_of(key).map(|(to, thread)| ChatTarget { channel: id, to, thread }))
    }

    /// Sends `text` to `target`, with `file` if given.
    pub async fn send(&self, target: &ChatTarget, text: &str, file: Option<&ChatFile>) -> Result<(), String> {
        let channel = self.get(&target.channel).ok_or_else(|| {
            format!("no channel `{}` is served here (served: {})", target.channel, self.ids().join(", "))
        })?;
        channel.send(&target.to, target.thread.as_deref(), text, file).await
    }
}

/// A channel's name as people write it.
fn label(channel: &str) -> &str {
    match channel {
        "telegram" => "Telegram",
        "matrix" => "Matrix",
        "discord" => "Discord",
        "slack" => "Slack",
        other => other,
    }
}

/// A response's body, refused beyond `limit` bytes (a server that sends more is not believed).
pub async fn read_capped(response: reqwest::Response, limit: u64) -> Result<Vec<u8>, String> {
    use futures_util::StreamExt as _;
    let too_large = || format!("the file is larger than {} KB, the most taken here", limit / 1024);
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("the download broke off: {}", e.without_url()))?;
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// `file` as a part of a multipart form: its name, its type (`application/octet-stream` if
/// what it says is no MIME type), its bytes.
pub fn file_part(file: &ChatFile) -> reqwest::multipart::Part {
    let part = || {
        let body = reqwest::Body::from(file.bytes.clone());
        reqwest::multipart::Part::stream_with_length(body, file.bytes.len() as u64).file_name(file.name.clone())
    };
    part().mime_str(&file.mime).or_else(|_| part().mime_str("application/octet-stream")).unwrap_or_else(|_| part())
}

/// The retry policy of the channels' API clients: three attempts, at least 400 ms apart (more
/// each time) with jitter; a server's "retry after" is waited out up to 5 minutes (a longer one
/// fails at once). `attempt` makes one call: its error and the wait the server asked for;
/// `retryable` says which errors are worth another try (unreachable, 429, 5xx).
pub async fn with_retries<T, E, Fut>(mut attempt: impl FnMut() -> Fut, retryable: impl Fn(&E) -> bool) -> Result<T, E>
where
    Fut: std::future::Future<Output = Result<T, (E, Option<std::time::Duration>)>>,
{
    use std::time::Duration;
    const ATTEMPTS: u32 = 3;
    const MIN_DELAY: Duration = Duration::from_millis(400);
    const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
    let mut n = 0;
    loop {
        n += 1;
        let (error, retry_after) = match attempt().await {
            Ok(done) => return Ok(done),
            Err(failed) => failed,
        };
        if !retryable(&error) || n >= ATTEMPTS {
            return Err(error);
        }
        let wait = match retry_after {
            Some(after) if after > MAX_RETRY_AFTER => return Err(error),
            Some(after) => after.max(MIN_DELAY),
            None => MIN_DELAY * n,
        };
        let mut b = [0u8; 1];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
        tokio::time::sleep(wait + Duration::from_millis(u64::from(b[0]) % 100)).await;
    }
}

/// The wait before a channel connects again after `failures` failures in a row: 1 s, doubling,
/// at most a minute.
pub fn backoff(failures: u32) -> std::time::Duration {
    std::time::Duration::from_secs(1 << failures.saturating_sub(1).min(6)).min(std::time::Duration::from_secs(60))
}

/// Waits `wait`; false if `stop` came first.
pub async fn pause(stop: &tokio_util::sync::CancellationToken, wait: std::time::Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}
