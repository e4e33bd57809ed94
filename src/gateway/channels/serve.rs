//! The Telegram channel on the gateway: long-polls updates (the offset kept in
//! `$ACP_HOME/channels/telegram.offset`, written once each update has been taken in, so a restart
//! neither loses nor repeats one), drops redeliveries, lets in only those the DM policy admits
//! (an unknown sender is given a pairing code), answers groups only when addressed, routes each
//! message to its session and streams the reply back in messages cut by the chunker, with the
//! typing indicator while it runs. A reply that is exactly `NO_REPLY` is not delivered. Messages
//! that arrive while their session runs follow its queue mode (`/queue`): `collect` (default: they
//! run as one prompt after the run), `followup` (each after the run, in order; `steer` for now),
//! or `interrupt` (the run stops; the newest runs).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::access::{Admission, Dedupe, DmPolicy, Pairings};
use super::chunker::{Chunker, Limits};
use super::routing::{DmScope, Envelope, PeerKind, Routing};
use super::telegram::{Api, TEXT_LIMIT};
use crate::config::Config;
use crate::gateway::Gateway;
use crate::gateway::hub::RunEnd;

const POLL: Duration = Duration::from_secs(25);
/// Messages a session's queue holds while it runs; the oldest go first beyond that.
const QUEUE_CAP: usize = 20;

/// What happens to a message that arrives while its session runs (`/queue MODE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum QueueMode {
    /// Everything that arrived runs as one prompt when the run ends.
    #[default]
    Collect,
    /// Each runs on its own, in order, after the run.
    Followup,
    /// The run is stopped and the newest message runs instead.
    Interrupt,
}

impl QueueMode {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "collect" => Some(Self::Collect),
            // Steering into a running turn is not offered yet: it queues as a follow-up.
            "followup" | "steer" => Some(Self::Followup),
            "interrupt" => Some(Self::Interrupt),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Collect => "collect",
            Self::Followup => "followup",
            Self::Interrupt => "interrupt",
        }
    }
}

/// One session's lane: whether a run is going, and what waits for it.
#[derive(Default)]
struct Lane {
    running: bool,
    mode: QueueMode,
    pending: std::collections::VecDeque<String>,
}

pub struct Telegram {
    api: Api,
    gw: Arc<Gateway>,
    pairings: Arc<Pairings>,
    dedupe: Dedupe,
    routing: Routing,
    policy: DmPolicy,
    allow_from: Vec<String>,
    mention_patterns: Vec<String>,
    limits: Limits,
    offset_path: PathBuf,
    lanes: std::sync::Mutex<std::collections::HashMap<String, Lane>>,
}

/// The channel from `[channels.telegram]`, if configured with a token; an error for a setting
/// that cannot be used (the gateway then refuses to start, saying which).
pub fn telegram(
    config: &Config,
    gw: Arc<Gateway>,
    pairings: Arc<Pairings>,
    http: reqwest::Client,
) -> Result<Option<Arc<Telegram>>, String> {
    let Some(t) = &config.channels.telegram else { return Ok(None) };
    let token = t.bot_token.clone().or_else(|| std::env::var("TELEGRAM_BOT_TOKEN").ok()).filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err("[channels.telegram] needs bot_token (or TELEGRAM_BOT_TOKEN)".into());
    };
    let policy = match t.dm_policy.as_deref() {
        None | Some("pairing") => DmPolicy::Pairing,
        Some("allowlist") => DmPolicy::Allowlist,
        Some("open") => DmPolicy::Open,
        Some(other) => return Err(format!("[channels.telegram] dm_policy `{other}`: use pairing, allowlist or open")),
    };
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
    let routing = Routing {
        dm_scope,
        main_key: config.session.main_key.clone(),
        identity_links: config.session.identity_links.clone(),
        bindings: Vec::new(),
    };
    let base = t.api_base_url.clone().unwrap_or_else(|| "https://api.telegram.org".into());
    Ok(Some(Arc::new(Telegram {
        api: Api::new(http, &base, &token),
        gw,
        pairings,
        dedupe: Dedupe::new(Duration::from_secs(24 * 3600), 100_000),
        routing,
        policy,
        allow_from: t.allow_from.clone(),
        mention_patterns: t.mention_patterns.iter().map(|p| p.to_lowercase()).collect(),
        limits: Limits::new(t.chunk_min_chars.unwrap_or(800), t.chunk_max_chars.unwrap_or(3500), TEXT_LIMIT),
        offset_path: config.home.join("channels").join("telegram.offset"),
        lanes: std::sync::Mutex::default(),
    })))
}

impl Telegram {
    /// Records the channel's state for `channels.status`.
    fn status(&self, change: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let mut all = crate::sync::lock(&self.gw.channel_status);
        let entry = all.entry("telegram".into()).or_insert_with(|| serde_json::json!({"id": "telegram"}));
        if let Some(map) = entry.as_object_mut() {
            change(map);
        }
    }

    /// Polls until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        self.status(|s| {
            s.insert("state".into(), "connecting".into());
            s.insert("dmPolicy".into(), format!("{:?}", self.policy).to_lowercase().into());
        });
        let username = loop {
            match self.api.username().await {
                Ok(name) => break name,
                Err(e) => {
                    self.status(|s| {
                        s.insert("state".into(), "error".into());
                        s.insert("lastError".into(), e.to_string().into());
                    });
                    tracing::warn!(error = %e, "Telegram: getMe failed; retrying");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        };
        tracing::info!(bot = %username, "Telegram channel polling");
        self.status(|s| {
            s.insert("state".into(), "polling".into());
            s.insert("bot".into(), format!("@{username}").into());
        });
        let mut offset: i64 =
            std::fs::read_to_string(&self.offset_path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        loop {
            let updates = tokio::select! {
                () = stop.cancelled() => return,
                u = self.api.updates(offset, POLL) => u,
            };
            match updates {
                Ok(updates) => {
                    self.status(|s| {
                        s.insert("state".into(), "polling".into());
                        s.insert("lastPollAt".into(), crate::gateway::hub::now_ms().into());
                    });
                    for update in updates {
                        let Some(id) = update["update_id"].as_i64() else { continue };
                        if id < offset {
                            continue;
                        }
                        self.take(&update, &username).await;
                        offset = id + 1;
                        self.save_offset(offset);
                    }
                }
                Err(e) => {
                    self.status(|s| {
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

    /// One update taken in: admitted and started (its reply streams on in the background).
    async fn take(self: &Arc<Self>, update: &Value, username: &str) {
        let Some(env) = envelope(update, username, &self.mention_patterns) else { return };
        self.status(|s| {
            let n = s.get("messagesIn").and_then(Value::as_u64).unwrap_or(0);
            s.insert("messagesIn".into(), (n + 1).into());
            s.insert("lastInboundAt".into(), crate::gateway::hub::now_ms().into());
        });
        if !self.dedupe.first(&env.channel, &env.account, &env.peer, &env.message_id) {
            tracing::debug!(message = %env.message_id, "Telegram: a redelivered message, dropped");
            return;
        }
        let thread = env.thread.clone();
        match env.kind {
            PeerKind::Direct => {
                match self.pairings.admit("telegram", self.policy, &self.allow_from, &env.sender, &env.sender_name) {
                    Admission::Allowed => {}
                    Admission::Denied => return,
                    Admission::Pair { code, .. } => {
                        let text = format!(
                            "I don't know you yet. To talk to me, ask my owner to approve this code:\n\n`acp pairing approve telegram {code}`\n\n(It expires in an hour.)"
                        );
                        self.deliver(&env.peer, None, &text).await;
                        return;
                    }
                    Admission::PairingFull => {
                        self.deliver(&env.peer, None, "Too many pairing requests are waiting; please try again later.")
                            .await;
                        return;
                    }
                }
            }
            PeerKind::Group | PeerKind::Channel if !env.mentioned => return,
            _ => {}
        }
        let key = self.routing.session_key(&env);
        let text = strip_mention(&env.text, username);
        if text.trim().is_empty() {
            return;
        }
        if let Some(rest) = text.strip_prefix("/queue") {
            let reply = self.set_queue(&key, rest.trim());
            self.deliver(&env.peer, thread.as_deref(), &reply).await;
            return;
        }
        let start = {
            let mut lanes = crate::sync::lock(&self.lanes);
            let lane = lanes.entry(key.clone()).or_default();
            if lane.running {
                if lane.mode == QueueMode::Interrupt {
                    lane.pending.clear();
                }
                lane.pending.push_back(text.clone());
                while lane.pending.len() > QUEUE_CAP {
                    lane.pending.pop_front();
                }
                if lane.mode == QueueMode::Interrupt {
                    self.gw.abort_runs(&key);
                }
                false
            } else {
                lane.running = true;
                true
            }
        };
        if start {
            self.start(key, env.peer, thread, text);
        }
    }

    /// `/queue [mode]`: shows or sets what happens to messages that arrive during a run.
    fn set_queue(&self, key: &str, asked: &str) -> String {
        let mut lanes = crate::sync::lock(&self.lanes);
        let lane = lanes.entry(key.to_owned()).or_default();
        if asked.is_empty() {
            return format!("Queue mode: {} (collect, followup, steer, interrupt).", lane.mode.name());
        }
        match QueueMode::parse(&asked.to_lowercase()) {
            Some(mode) => {
                lane.mode = mode;
                format!("Queue mode: {}.", mode.name())
            }
            None => format!("Unknown queue mode `{asked}`: use collect, followup, steer or interrupt."),
        }
    }

    /// Runs `text` on session `key`, replying in `chat`; then what waited meanwhile.
    fn start(self: &Arc<Self>, key: String, chat: String, thread: Option<String>, text: String) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut text = text;
            loop {
                this.api.typing(&chat, thread.as_deref()).await;
                match this.gw.channel_run(&key, &text).await {
                    Ok((deltas, ended)) => this.reply(chat.clone(), thread.clone(), deltas, ended).await,
                    Err(e) => {
                        this.deliver(&chat, thread.as_deref(), &format!("Sorry, I could not run that: {e}")).await
                    }
                }
                let next = {
                    let mut lanes = crate::sync::lock(&this.lanes);
                    let lane = lanes.entry(key.clone()).or_default();
                    let next = match lane.mode {
                        QueueMode::Collect if !lane.pending.is_empty() => {
                            Some(lane.pending.drain(..).collect::<Vec<_>>().join("\n\n"))
                        }
                        _ => lane.pending.pop_front(),
                    };
                    lane.running = next.is_some();
                    next
                };
                match next {
                    Some(queued) => text = queued,
                    None => return,
                }
            }
        });
    }

    /// Streams a run's reply into the chat, in messages the chunker cuts.
    async fn reply(
        &self,
        chat: String,
        thread: Option<String>,
        mut deltas: tokio::sync::mpsc::UnboundedReceiver<String>,
        mut ended: tokio::sync::watch::Receiver<Option<RunEnd>>,
    ) {
        let mut chunker = Chunker::new(self.limits);
        let mut whole = String::new();
        let mut sent_any = false;
        let mut typing = tokio::time::interval(Duration::from_secs(4));
        loop {
            tokio::select! {
                delta = deltas.recv() => match delta {
                    Some(delta) => {
                        whole.push_str(&delta);
                        for message in chunker.push(&delta) {
                            sent_any = true;
                            self.deliver(&chat, thread.as_deref(), &message).await;
                        }
                    }
                    None => break,
                },
                _ = typing.tick() => self.api.typing(&chat, thread.as_deref()).await,
            }
        }
        let end = ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone());
        // A stopped run (`interrupt`, `/stop`) delivers what it had sent, not its unsent rest.
        if (!sent_any && whole.trim() == "NO_REPLY") || matches!(end, Some(RunEnd::Aborted { .. })) {
            return;
        }
        for message in chunker.finish() {
            self.deliver(&chat, thread.as_deref(), &message).await;
        }
        if let Some(RunEnd::Error { message }) = end {
            self.deliver(&chat, thread.as_deref(), &format!("(The run failed: {message})")).await;
        }
    }

    async fn deliver(&self, chat: &str, thread: Option<&str>, text: &str) {
        if let Err(e) = self.api.send(chat, thread, text).await {
            tracing::warn!(error = %e, "Telegram: a message could not be delivered");
        }
    }
}

/// A Telegram update as an inbound envelope (text messages only).
fn envelope(update: &Value, username: &str, patterns: &[String]) -> Option<Envelope> {
    let m = update.get("message")?;
    let text = m["text"].as_str()?.to_owned();
    let chat = &m["chat"];
    let kind = match chat["type"].as_str() {
        Some("private") => PeerKind::Direct,
        Some("group" | "supergroup") => PeerKind::Group,
        _ => PeerKind::Channel,
    };
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
        account: "default".into(),
        peer: id(&chat["id"])?,
        kind,
        sender: id(&from["id"]).unwrap_or_default(),
        sender_name: name,
        message_id: id(&m["message_id"])?,
        text,
        reply_to: id(&m["reply_to_message"]["message_id"]),
        thread,
        mentioned,
    })
}

/// The text without the bot's `@name`.
fn strip_mention(text: &str, username: &str) -> String {
    if username.is_empty() {
        return text.to_owned();
    }
    let handle = format!("@{username}");
    let mut out = text.to_owned();
    while let Some(at) = out.to_lowercase().find(&handle.to_lowercase()) {
        out.replace_range(at..at + handle.len(), "");
    }
    out.trim().to_owned()
}
