//! What every channel does with an inbound message, whatever the channel: drop redeliveries, let
//! in only those the DM policy admits (an unknown sender is given a pairing code), answer groups
//! only when addressed, route to the session, batch a sender's rapid messages
//! (`[messages.inbound] debounce_ms`), queue what arrives during a run by the session's queue
//! mode, and stream the reply back in messages the chunker cuts — a pause in the reply sends what
//! has gathered — unless the send policy says not to deliver there. A run's permission questions
//! are asked in the chat (numbered options, answered by the person whose message started the run
//! or an owner), and the chat has its own commands: `/queue`, `/send`, `/pair`, `/approve`,
//! `/deny`, `/stop`, `/verbose`, `/reasoning`, besides the runtime's (`/status`, `/new`, `/model`, …).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::Host;
use super::access::{Admission, Dedupe, DmPolicy, Pairings};
use super::chunker::Limits;
use super::policy::{SendPolicy, SessionPrefs, Show};
use super::queue::{self, Mode, Waiting};
use super::routing::{Attachment, Envelope, PeerKind, Routing};
use crate::clock::now_ms;
use crate::config::hooks::HookEvent;
use crate::gateway::approvals::ChatAsker;
use crate::hooks::Verdict;
use crate::runtime::commands::{Command, Parsed};
use crate::runtime::directives;
use crate::runtime::host::{ChatFile, PermissionOption};
use crate::sync::lock;

mod chat;
mod reply;

/// An envelope for [`Inbox::intake`], and what to do once it is taken.
pub type Intake = (Envelope, Box<dyn FnOnce() + Send>);

/// A messaging service the gateway talks through.
pub trait Channel: Send + Sync + 'static {
    /// `telegram`, …
    fn id(&self) -> &'static str;
    /// Sends `text` (Markdown) to chat `peer` (in forum topic `thread`).
    fn send(&self, peer: &str, thread: Option<&str>, text: &str) -> impl Future<Output = Result<(), String>> + Send;
    /// Shows that a reply is being written.
    fn typing(&self, peer: &str, thread: Option<&str>) -> impl Future<Output = ()> + Send;
    /// What kind of chat `peer` is (for a message the agent sends on its own).
    /// An error if the channel cannot tell (the message is then not sent: the send policy
    /// could not be applied).
    fn kind_of(&self, peer: &str) -> impl Future<Output = Result<PeerKind, String>> + Send;
    /// An attachment's bytes, refused beyond `limit`.
    fn fetch(&self, attachment: &Attachment, limit: u64) -> impl Future<Output = Result<Vec<u8>, String>> + Send;
    /// Sends `file` to chat `peer` (in `thread`) with `caption` (Markdown, may be empty); a
    /// caption too long to go with the file follows it as a message.
    fn send_file(
        &self,
        peer: &str,
        thread: Option<&str>,
        file: &ChatFile,
        caption: &str,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// How a channel's inbox behaves: from its `[channels.*]` section, `[session]` and `[messages]`.
/// Who may use the bot in groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Those let in to direct chats: `allow_from` and approved pairings.
    Allowlist,
    /// Anyone who mentions the bot.
    Open,
    Disabled,
}

pub struct Settings {
    /// The account (bot) this inbox receives for: `default`, or its name under
    /// `[channels.<channel>.accounts]`.
    pub account: String,
    pub policy: DmPolicy,
    pub group_policy: GroupPolicy,
    /// Senders always let in; also the owners (who may use `/pair` and `/send`).
    pub allow_from: Vec<String>,
    pub routing: Arc<Routing>,
    pub limits: Limits,
    /// Send the reply in pieces as it streams; else all at the end.
    pub block_streaming: bool,
    /// A pause this long sends what has gathered.
    pub idle: Duration,
    pub queue: queue::Settings,
    /// A sender's rapid messages wait this long for more.
    pub inbound_debounce: Duration,
    pub send_policy: SendPolicy,
    /// The most a run started by a guest (a sender who is not an owner) gets.
    pub guest_mode: crate::runtime::Mode,
}

/// Where a session's replies go.
#[derive(Debug, Clone)]
struct Route {
    peer: String,
    thread: Option<String>,
    kind: PeerKind,
}

impl Route {
    /// A message from `sender` in this chat, as the queue keeps where it came from.
    fn origin(&self, sender: &str) -> queue::Origin {
        queue::Origin {
            peer: self.peer.clone(),
            thread: self.thread.clone(),
            kind: self.kind,
            sender: sender.to_owned(),
        }
    }
}

/// A permission question waiting in a chat.
struct Question {
    id: String,
    options: Vec<PermissionOption>,
    /// The message that asks it.
    text: String,
}

/// One session's lane.
struct Lane {
    running: bool,
    waiting: Waiting,
    /// Messages steered into the running turn: whether it took each, and whether one it did not
    /// take is to be queued (not under `steer-backlog`, which queued it already).
    steered: Vec<(queue::Prompt, oneshot::Receiver<bool>, bool)>,
    /// When the last message was queued (the queue's debounce counts from it).
    last_in: Instant,
    route: Route,
    /// Whose message started the running run (they may answer its questions).
    starter: String,
    /// The running run has a guest's words in it: it is restricted to `guest_mode`, and under
    /// `ask` only an owner answers its questions.
    guest_run: bool,
    /// Where the running run replies and asks (the chat of the message that started it).
    run_route: Route,
    /// Who wrote last (the next run's starter).
    last_sender: String,
    question: Option<Question>,
    /// Questions asked while another waits (a subagent's, say): posted one at a time, so a
    /// number always answers the question it was read with.
    later: std::collections::VecDeque<Question>,
}

/// A sender's messages gathering under the inbound debounce.
struct Burst {
    texts: Vec<String>,
    generation: u64,
}

pub struct Inbox<C: Channel> {
    channel: Arc<C>,
    /// The gateway, as far as a channel needs it.
    host: Arc<dyn Host>,
    pairings: Arc<Pairings>,
    prefs: Arc<SessionPrefs>,
    settings: Settings,
    /// Who pairing, status and sending know this inbox as: the channel (`telegram`), or with
    /// its account (`telegram:work`).
    scope: String,
    dedupe: Dedupe,
    lanes: Mutex<HashMap<String, Lane>>,
    bursts: Mutex<HashMap<(String, String), Burst>>,
    me: Weak<Self>,
}

impl<C: Channel> Inbox<C> {
    pub fn new(
        channel: Arc<C>,
        host: Arc<dyn Host>,
        pairings: Arc<Pairings>,
        prefs: Arc<SessionPrefs>,
        settings: Settings,
    ) -> Arc<Self> {
        let scope = scope_of(channel.id(), &settings.account);
        Arc::new_cyclic(|me| Self {
            scope,
            channel,
            host,
            pairings,
            prefs,
            settings,
            dedupe: Dedupe::new(Duration::from_secs(24 * 3600), 100_000),
            lanes: Mutex::default(),
            bursts: Mutex::default(),
            me: me.clone(),
        })
    }

    /// Records the channel's state for `channels.status`.
    pub fn status(&self, change: impl FnOnce(&mut serde_json::Map<String, Value>)) {
        let mut change = Some(change);
        self.host.channel_status(self.channel.id(), &self.settings.account, &mut |map| {
            if let Some(change) = change.take() {
                change(map);
            }
        });
    }

    /// `pairing`, `allowlist` or `open`.
    pub fn policy_name(&self) -> String {
        format!("{:?}", self.settings.policy).to_lowercase()
    }

    fn is_owner(&self, sender: &str) -> bool {
        self.settings.allow_from.iter().any(|a| a == sender)
    }

    /// One inbound message (its text without the bot's mention).
    /// A line into [`Inbox::take`]: envelopes sent there are taken one at a time, in order, off
    /// the sender's loop (a slow take — a file to fetch, a code to send — never holds up a
    /// connection's heartbeats or acknowledgements); each one's `done` runs once it is taken (to
    /// mark it taken, acknowledge it: not before, so a stop meanwhile loses nothing).
    pub fn intake(self: &Arc<Self>) -> tokio::sync::mpsc::UnboundedSender<Intake> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Intake>();
        let inbox = self.clone();
        tokio::spawn(async move {
            while let Some((env, done)) = rx.recv().await {
                inbox.take(env).await;
                done();
            }
        });
        tx
    }

    pub async fn take(self: &Arc<Self>, env: Envelope) {
        self.status(|s| {
            let n = s.get("messagesIn").and_then(Value::as_u64).unwrap_or(0);
            s.insert("messagesIn".into(), (n + 1).into());
            s.insert("lastInboundAt".into(), now_ms().into());
        });
        if !self.dedupe.first(&env.channel, &env.account, &env.peer, &env.message_id) {
            tracing::debug!(channel = %env.channel, message = %env.message_id, "a redelivered message, dropped");
            return;
        }
        let route = Route { peer: env.peer.clone(), thread: env.thread.clone(), kind: env.kind };
        if env.kind == PeerKind::Direct {
            let (policy, allow) = (self.settings.policy, &self.settings.allow_from);
            match self.pairings.admit(&self.scope, policy, allow, &env.sender, &env.sender_name) {
                Admission::Allowed => {}
                Admission::Denied => return,
                Admission::Pair { code, new } => {
                    let left = self.pairings.minutes_left(&self.scope, &env.sender).unwrap_or(60);
                    let expires = if left >= 60 { "in an hour".to_owned() } else { format!("in {left} min") };
                    let text = format!(
                        "I don't know you yet. To talk to me, ask my owner to approve this code:\n\n`acp pairing approve {} {code}`\n\n(It expires {expires}.)",
                        self.scope
                    );
                    if new {
                        let who = if env.sender_name.is_empty() {
                            env.sender.clone()
                        } else {
                            format!("{} ({})", env.sender_name, env.sender)
                        };
                        self.tell_owners(&format!(
                            "New pairing request on {} from {who}: `/pair approve {code}` lets them talk to me, `/pair reject {code}` turns them away.",
                            self.scope
                        ))
                        .await;
                    }
                    return self.say(&route, &text).await;
                }
                Admission::TryLater { minutes } => {
                    let text =
                        format!("Your last pairing request was turned down; you can ask again in {minutes} min.");
                    return self.say(&route, &text).await;
                }
                Admission::Busy { first } => {
                    if first {
                        self.tell_owners(&format!(
                            "More than {} pairing requests came on {} in {} minutes; new senders are told to try again later. `/pair` lists those waiting.",
                            super::access::CODES_PER_WINDOW,
                            self.scope,
                            super::access::WINDOW_MS / 60_000
                        ))
                        .await;
                    }
                    return self
                        .say(&route, "Many people asked to pair just now; please try again in a few minutes.")
                        .await;
                }
            }
        }
        if env.kind != PeerKind::Direct {
            let member = match self.settings.group_policy {
                GroupPolicy::Open => true,
                GroupPolicy::Disabled => false,
                GroupPolicy::Allowlist => self.pairings.known(&self.scope, &self.settings.allow_from, &env.sender),
            };
            if !member {
                tracing::debug!(channel = self.channel.id(), sender = %env.sender, "a group message from someone not let in");
                return;
            }
        }
        let key = self.settings.routing.session_key(&env);
        let text = env.text.trim().to_owned();
        if text.is_empty() && env.attachments.is_empty() {
            return;
        }
        // An answer to a waiting question needs no mention, even in a group.
        let addressed = env.kind == PeerKind::Direct || env.mentioned;
        if env.attachments.is_empty()
            && self.answered(&key, &env.sender, &env.sender_name, &text, &route, addressed).await
        {
            return;
        }
        if !addressed {
            return;
        }
        // The user's `MessageReceived` hooks: a block drops the message (logged); what they add
        // goes with it to the agent (not with a command).
        let fields = serde_json::json!({
            "channel": self.channel.id(),
            "account": env.account,
            "chat_id": env.peer,
            "thread_id": env.thread,
            "chat_type": if env.kind == PeerKind::Direct { "direct" } else { "group" },
            "sender": env.sender,
            "sender_name": env.sender_name,
            "message_id": env.message_id,
            "text": text,
            "session_key": key,
        });
        let hooks = self.host.message_hooks(HookEvent::MessageReceived, self.channel.id(), fields).await;
        let added = match hooks {
            Some(Verdict::Block(reason)) => {
                tracing::info!(channel = self.channel.id(), sender = %env.sender, %reason, "a hook dropped a message");
                return;
            }
            Some(Verdict::Go(context)) => context,
            _ => None,
        };
        if text.starts_with('/') && env.attachments.is_empty() {
            if let Some(reply) = self.chat_command(&key, &env.sender, &text, &route) {
                return self.say(&route, &reply).await;
            }
            // A command runs on its own; directives among other words make it a message.
            let chat = directives::scan(&text, directives::CHAT, |name, arg| Show::default().take(name, arg));
            let parsed = crate::runtime::commands::parse(&[crate::runtime::UserBlock::text(text.clone())]);
            if chat.directives.is_empty() && !matches!(parsed, Parsed::NotACommand) {
                return self.dispatch(key, route, env.sender, text.into(), true);
            }
        }
        let text = match added {
            Some(context) => format!("{text}\n\n{context}"),
            None => text,
        };
        let prompt = self.prompt(text, &env.attachments).await;
        let wait = self.inbound_debounce();
        let burst = (key.clone(), env.sender.clone());
        if wait.is_zero() || !prompt.attached.is_empty() {
            // Media is not held back: it goes now, with whatever this sender's burst gathered.
            let held = lock(&self.bursts).remove(&burst).map(|b| b.texts).unwrap_or_default();
            let prompt = if held.is_empty() {
                prompt
            } else {
                let text = held.into_iter().chain((!prompt.text.is_empty()).then_some(prompt.text)).collect::<Vec<_>>();
                queue::Prompt { text: text.join("\n"), attached: prompt.attached, ..queue::Prompt::default() }
            };
            return self.dispatch(key, route, env.sender, prompt, false);
        }
        // Rapid messages from one sender run as one, once they pause.
        let generation = {
            let mut bursts = lock(&self.bursts);
            let b = bursts.entry(burst.clone()).or_insert(Burst { texts: Vec::new(), generation: 0 });
            b.texts.push(prompt.text);
            b.generation += 1;
            b.generation
        };
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let texts = {
                let mut bursts = lock(&this.bursts);
                match bursts.get(&burst) {
                    Some(b) if b.generation == generation => bursts.remove(&burst).map(|b| b.texts),
                    _ => None,
                }
            };
            if let Some(texts) = texts {
                this.dispatch(burst.0, route, burst.1, texts.join("\n").into(), false);
            }
        });
    }

    /// The prompt for a message: its text, images (up to 5 MB) as images, small text files (up
    /// to 256 KB) embedded, anything else named (the model is told it cannot open it).
    async fn prompt(&self, text: String, attachments: &[Attachment]) -> queue::Prompt {
        const IMAGE_MAX: u64 = 5 << 20;
        const TEXT_MAX: u64 = 256 << 10;
        let mut prompt = queue::Prompt::from(text);
        let mut notes = Vec::new();
        for a in attachments {
            let mime =
                a.mime.clone().unwrap_or_else(|| if a.kind == "photo" { "image/jpeg".into() } else { String::new() });
            let name = a.name.clone().unwrap_or_else(|| a.kind.clone());
            let size = a.size.map_or(String::new(), |n| format!(", {}", crate::runtime::media::human_size(n)));
            let image = matches!(mime.as_str(), "image/jpeg" | "image/png" | "image/gif" | "image/webp");
            let textual = mime.starts_with("text/")
                || matches!(
                    mime.as_str(),
                    "application/json" | "application/xml" | "application/x-yaml" | "application/toml"
                );
            let limit = if image { IMAGE_MAX } else { TEXT_MAX };
            if !(image || textual) || a.size.is_some_and(|n| n > limit) {
                notes.push(format!(
                    "[The user attached {} `{name}` ({}{size}); it cannot be opened here.]",
                    a.kind,
                    if mime.is_empty() { "unknown type" } else { &mime }
                ));
                continue;
            }
            match self.channel.fetch(a, limit).await {
                Ok(bytes) if image => {
                    use base64::Engine as _;
                    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                    prompt.attached.push(crate::runtime::UserBlock::Image { mime_type: mime, data, uri: None });
                }
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => prompt.attached.push(crate::runtime::UserBlock::Resource {
                        uri: format!("{}:file/{name}", self.channel.id()),
                        mime_type: Some(mime),
                        text: Some(text),
                        blob: None,
                    }),
                    Err(_) => {
                        notes.push(format!("[The user attached `{name}`; it is not text and cannot be opened here.]"))
                    }
                },
                Err(e) => notes.push(format!("[The user attached `{name}`, but it could not be fetched: {e}.]")),
            }
        }
        if !notes.is_empty() {
            let notes = notes.join("\n");
            prompt.text = if prompt.text.is_empty() { notes } else { format!("{}\n\n{notes}", prompt.text) };
        }
        prompt
    }

    fn inbound_debounce(&self) -> Duration {
        self.settings.inbound_debounce
    }

    fn queue_settings(&self, key: &str) -> queue::Settings {
        self.prefs.get(key).queue.unwrap_or(self.settings.queue)
    }

    /// Runs `text` on session `key`, or queues it behind the running run by the queue mode.
    /// `command`: a slash command (never joined with other messages; `/stop` and the reports
    /// are answered at once).
    fn dispatch(self: &Arc<Self>, key: String, route: Route, sender: String, mut prompt: queue::Prompt, command: bool) {
        let parsed = command
            .then(|| crate::runtime::commands::parse(&[crate::runtime::UserBlock::Text { text: prompt.text.clone() }]));
        let settings = self.queue_settings(&key);
        let mut lanes = lock(&self.lanes);
        let lane = lanes.entry(key.clone()).or_insert_with(|| Lane {
            running: false,
            waiting: Waiting::default(),
            steered: Vec::new(),
            last_in: Instant::now(),
            route: route.clone(),
            starter: sender.clone(),
            guest_run: false,
            run_route: route.clone(),
            last_sender: sender.clone(),
            question: None,
            later: std::collections::VecDeque::new(),
        });
        lane.route = route.clone();
        lane.last_sender = sender.clone();
        // A queued message's run answers the chat it came from, and its sender answers questions.
        prompt.from = Some(route.origin(&sender));
        prompt.guest = !self.is_owner(&sender);
        if let Some(Parsed::Command(Command::Stop)) = parsed {
            lane.waiting.clear();
            lane.steered.clear();
            let was = lane.running;
            drop(lanes);
            if was {
                self.host.abort_runs(&key);
            }
            let this = self.clone();
            let reply = if was { "Stopped." } else { "Nothing is running." };
            tokio::spawn(async move { this.say(&route, reply).await });
            return;
        }
        let immediate = matches!(&parsed, Some(Parsed::Command(c)) if c.is_immediate());
        if immediate || matches!(parsed, Some(Parsed::BadArgs(_))) {
            // Reports and usage answers: on their own, beside the lane.
            drop(lanes);
            let this = self.clone();
            tokio::spawn(async move { this.run_once(&key, &route, prompt).await });
            return;
        }
        if !lane.running {
            lane.running = true;
            drop(lanes);
            self.start(key, prompt);
            return;
        }
        lane.last_in = Instant::now();
        let queued = if command {
            lane.waiting.push_command(prompt, &settings)
        } else {
            match settings.mode {
                // Text steers; what comes with images or files waits for the next run, and so does
                // a guest's message to a run that is not restricted (it would be read with more
                // than a guest gets).
                Mode::Steer | Mode::SteerBacklog if prompt.attached.is_empty() && (!prompt.guest || lane.guest_run) => {
                    let steer = self.host.steer(&key, &prompt.text);
                    let (tx, rx) = oneshot::channel();
                    tokio::spawn(async move {
                        let _ = tx.send(steer.await);
                    });
                    let backlog = settings.mode == Mode::SteerBacklog;
                    if backlog {
                        lane.waiting.push(prompt.clone(), &settings);
                    }
                    lane.steered.push((prompt, rx, !backlog));
                    true
                }
                Mode::Interrupt => {
                    lane.waiting.push(prompt, &settings);
                    drop(lanes);
                    self.host.abort_runs(&key);
                    return;
                }
                _ => lane.waiting.push(prompt, &settings),
            }
        };
        drop(lanes);
        if !queued {
            let this = self.clone();
            tokio::spawn(async move {
                this.say(&route, "The queue is full, so this message was dropped; please send it again later.").await;
            });
        }
    }

    /// Runs `text` on session `key` and then whatever waited meanwhile, until nothing does.
    fn start(self: &Arc<Self>, key: String, prompt: queue::Prompt) {
        let this = self.clone();
        let asker: Arc<dyn ChatAsker> = self.clone();
        self.host.route_questions(&key, asker);
        tokio::spawn(async move {
            let mut prompt = prompt;
            loop {
                let route = this.begin_run(&key, prompt.from.take(), prompt.guest);
                this.run_once(&key, &route, prompt).await;
                match this.next(&key).await {
                    Some(queued) => prompt = queued,
                    None => return,
                }
            }
        });
    }

    /// A run of session `key` begins: it answers, and asks, the chat its message came from (else
    /// the latest message's), whose writer may answer its questions.
    fn begin_run(&self, key: &str, from: Option<queue::Origin>, guest: bool) -> Route {
        let mut lanes = lock(&self.lanes);
        match lanes.get_mut(key) {
            Some(lane) => {
                (lane.run_route, lane.starter) = match from {
                    Some(o) => (Route { peer: o.peer, thread: o.thread, kind: o.kind }, o.sender),
                    None => (lane.route.clone(), lane.last_sender.clone()),
                };
                lane.guest_run = guest;
                lane.run_route.clone()
            }
            None => Route { peer: String::new(), thread: None, kind: PeerKind::Direct },
        }
    }

    /// What runs next on session `key` after its run ended (the lane stops when nothing).
    async fn next(&self, key: &str) -> Option<queue::Prompt> {
        loop {
            // Steered messages the run did not take become follow-ups, in order.
            let steered = lock(&self.lanes).get_mut(key).map(|l| std::mem::take(&mut l.steered)).unwrap_or_default();
            if !steered.is_empty() {
                for (prompt, taken, requeue) in steered {
                    if !taken.await.unwrap_or(false) && requeue {
                        let settings = self.queue_settings(key);
                        if let Some(lane) = lock(&self.lanes).get_mut(key) {
                            lane.waiting.push(prompt, &settings);
                        }
                    }
                }
                continue;
            }
            let settings = self.queue_settings(key);
            // The queue's debounce: wait until messages stop arriving.
            let quiet = lock(&self.lanes).get(key).and_then(|l| {
                let since = l.last_in.elapsed();
                (!l.waiting.is_empty() && since < settings.debounce).then(|| settings.debounce - since)
            });
            if let Some(wait) = quiet {
                tokio::time::sleep(wait).await;
                continue;
            }
            let mut lanes = lock(&self.lanes);
            let lane = lanes.get_mut(key)?;
            if !lane.steered.is_empty() {
                continue;
            }
            let next = lane.waiting.next(settings.mode);
            lane.running = next.is_some();
            return next;
        }
    }

    /// One run of `text` on session `key`, its reply delivered to `route`; restricted to
    /// `guest_mode` if a guest's words are in it.
    async fn run_once(&self, key: &str, route: &Route, mut prompt: queue::Prompt) {
        // `/verbose` and `/reasoning` among the words: this run's, from an owner or in a direct chat.
        let mut show = Show::of(&self.prefs.get(key));
        let found = directives::scan(&prompt.text, directives::CHAT, |name, arg| Show::default().take(name, arg));
        if !found.directives.is_empty() && !prompt.agent {
            if !prompt.guest || route.kind == PeerKind::Direct {
                for d in &found.directives {
                    show.take(d.name, &d.arg);
                }
            }
            prompt.text = found.rest;
            if prompt.text.is_empty() && prompt.attached.is_empty() {
                return;
            }
        }
        let allowed = self.delivers(key, route);
        if allowed {
            self.channel.typing(&route.peer, route.thread.as_deref()).await;
        }
        let cap = prompt.guest.then_some(self.settings.guest_mode);
        let from_agent = prompt.agent;
        match self.host.run(key, prompt.blocks(), cap, from_agent).await {
            Ok((heard, ended)) => self.reply(route, allowed, show, heard, ended).await,
            Err(e) if allowed => self.say(route, &format!("Sorry, I could not run that: {e}")).await,
            Err(e) => tracing::warn!(session = key, error = %e, "a channel run could not start"),
        }
    }

    /// Whether replies to session `key` may be delivered (`[session.send_policy]`, `/send`).
    fn delivers(&self, key: &str, route: &Route) -> bool {
        self.settings.send_policy.allows(self.channel.id(), route.kind, key, self.prefs.get(key).send)
    }

    async fn deliver(&self, peer: &str, thread: Option<&str>, text: &str) {
        match self.channel.send(peer, thread, text).await {
            Ok(()) => {
                self.count_out();
                self.sent(peer, thread, text, None);
            }
            Err(e) => tracing::warn!(channel = self.channel.id(), error = %e, "a message could not be delivered"),
        }
    }

    /// One more message out, in the status.
    fn count_out(&self) {
        self.status(|s| {
            let n = s.get("messagesOut").and_then(Value::as_u64).unwrap_or(0);
            s.insert("messagesOut".into(), (n + 1).into());
            s.insert("lastOutboundAt".into(), now_ms().into());
        });
    }

    /// The user's `MessageSent` hooks for a message the channel sent, in the background (they
    /// hold no reply back).
    fn sent(&self, peer: &str, thread: Option<&str>, text: &str, file: Option<&ChatFile>) {
        let mut fields = serde_json::json!({
            "channel": self.channel.id(),
            "chat_id": peer,
            "thread_id": thread,
            "text": text,
        });
        if let Some(file) = file {
            fields["file"] = serde_json::json!({"name": file.name, "mime": file.mime, "size": file.bytes.len()});
        }
        let hooks = self.host.message_hooks(HookEvent::MessageSent, self.channel.id(), fields);
        tokio::spawn(hooks);
    }

    /// A notice to the owners (`allow_from`), each in their direct chat with the bot (a chat they
    /// never opened cannot be written to: logged).
    async fn tell_owners(&self, text: &str) {
        for owner in &self.settings.allow_from {
            if owner == "*" {
                continue;
            }
            if let Err(e) = self.channel.send(owner, None, text).await {
                tracing::warn!(channel = self.channel.id(), owner, error = %e, "an owner could not be told");
            }
        }
    }

    /// A message of the channel's own (pairing, command answers): sent whatever the policy.
    async fn say(&self, route: &Route, text: &str) {
        self.deliver(&route.peer, route.thread.as_deref(), text).await;
    }

    /// The agent's own message to chat `to` (the gateway's `send`, the `message` tool), with
    /// `file` if given.
    pub async fn send_to(
        &self,
        to: &str,
        thread: Option<&str>,
        text: &str,
        file: Option<&ChatFile>,
    ) -> Result<(), String> {
        let kind = self.channel.kind_of(to).await?;
        let env = Envelope {
            channel: self.channel.id().into(),
            account: self.settings.account.clone(),
            peer: to.into(),
            kind,
            sender: to.into(),
            sender_name: String::new(),
            message_id: String::new(),
            text: String::new(),
            attachments: Vec::new(),
            reply_to: None,
            thread: thread.map(str::to_owned),
            mentioned: true,
            guild: None,
            team: None,
        };
        let key = self.settings.routing.session_key(&env);
        let route = Route { peer: to.into(), thread: thread.map(str::to_owned), kind };
        if !self.delivers(&key, &route) {
            return Err(format!("the send policy does not allow messages to {} `{to}`", self.channel.id()));
        }
        match file {
            Some(file) => self.channel.send_file(to, thread, file, text).await?,
            None => self.channel.send(to, thread, text).await?,
        }
        self.count_out();
        self.sent(to, thread, text, file);
        Ok(())
    }
}

/// What pairing, status and sending call the inbox of `account` on `channel`: the channel for
/// the default account, else `channel:account`.
pub fn scope_of(channel: &str, account: &str) -> String {
    if account == "default" { channel.to_owned() } else { format!("{channel}:{account}") }
}

impl<C: Channel> super::Outbound for Inbox<C> {
    fn send<'a>(
        &'a self,
        to: &'a str,
        thread: Option<&'a str>,
        text: &'a str,
        file: Option<&'a ChatFile>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(self.send_to(to, thread, text, file))
    }

    fn chat_of(&self, key: &str) -> Option<(String, Option<String>)> {
        lock(&self.lanes).get(key).map(|l| (l.route.peer.clone(), l.route.thread.clone()))
    }

    /// Queued like a follow-up, answered in the chat of the run that spawned it (the lane's
    /// last run), leaving the lane's latest writer as it is; `false` if the queue is full.
    fn wake(self: Arc<Self>, key: &str, text: &str) -> bool {
        let settings = self.queue_settings(key);
        let mut lanes = lock(&self.lanes);
        let Some(lane) = lanes.get_mut(key) else { return false };
        let from = lane.run_route.origin(&lane.starter);
        // As restricted as the run that started what is announced.
        let prompt = queue::Prompt {
            text: text.to_owned(),
            attached: Vec::new(),
            from: Some(from),
            guest: lane.guest_run,
            agent: true,
        };
        if lane.running {
            let full = lane.waiting.len() >= settings.cap;
            return !full && lane.waiting.push(prompt, &settings);
        }
        lane.running = true;
        drop(lanes);
        self.start(key.to_owned(), prompt);
        true
    }
}
