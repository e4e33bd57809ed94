//! Messaging channels on the gateway: routing an inbound message to its agent and session key
//! (`routing.rs`), who may talk to the agent and the deduplication of redelivered messages
//! (`access.rs`), what every channel does with a message — queueing, replies, questions, chat
//! commands (`inbox.rs`, with the [`inbox::Channel`] trait a channel implements; `queue.rs`,
//! `policy.rs`) — how a reply is cut into messages (`chunker.rs`), and Telegram: its Bot API
//! channel (`telegram/mod.rs`) on its Bot API client (`telegram/bot_api.rs`).

pub mod access;
pub mod chunker;
pub mod inbox;
pub mod policy;
pub mod queue;
pub mod routing;
pub mod telegram;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use crate::runtime::host::ChatTarget;
use crate::sync::lock;

/// A channel as the rest of the gateway sends through it (the `send` method, the `message`
/// tool); the send policy applies.
pub trait Outbound: Send + Sync {
    fn send<'a>(&'a self, to: &'a str, thread: Option<&'a str>, text: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// The chat session `key` last spoke from on this channel: (peer, thread).
    fn chat_of(&self, key: &str) -> Option<(String, Option<String>)>;
    /// Runs `text` on session `key` as a message of the chat it talks in, queued as any
    /// other, its reply delivered there; `false` if the session is not this channel's.
    fn wake(self: Arc<Self>, key: &str, text: &str) -> bool;
}

/// The channels being served, by id.
#[derive(Default)]
pub struct Outbox(Mutex<BTreeMap<&'static str, Arc<dyn Outbound>>>);

impl Outbox {
    pub fn add(&self, id: &'static str, channel: Arc<dyn Outbound>) {
        lock(&self.0).insert(id, channel);
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    pub fn get(&self, id: &str) -> Option<Arc<dyn Outbound>> {
        lock(&self.0).get(id).cloned()
    }

    /// The channels' ids.
    pub fn ids(&self) -> Vec<&'static str> {
        lock(&self.0).keys().copied().collect()
    }

    /// Runs `text` on session `key` in the chat it talks in ([`Outbound::wake`]), if any
    /// channel's.
    pub fn wake(&self, key: &str, text: &str) -> bool {
        let all: Vec<Arc<dyn Outbound>> = lock(&self.0).values().cloned().collect();
        all.into_iter().any(|channel| channel.wake(key, text))
    }

    /// The chat session `key` talks in, on whichever channel it came from.
    pub fn own_chat(&self, key: &str) -> Option<ChatTarget> {
        let all: Vec<(&'static str, Arc<dyn Outbound>)> = lock(&self.0).iter().map(|(k, v)| (*k, v.clone())).collect();
        all.into_iter()
            .find_map(|(id, ch)| ch.chat_of(key).map(|(to, thread)| ChatTarget { channel: id.to_owned(), to, thread }))
    }

    /// Sends `text` to `target`.
    pub async fn send(&self, target: &ChatTarget, text: &str) -> Result<(), String> {
        let channel = self.get(&target.channel).ok_or_else(|| {
            format!("no channel `{}` is served here (served: {})", target.channel, self.ids().join(", "))
        })?;
        channel.send(&target.to, target.thread.as_deref(), text).await
    }
}
