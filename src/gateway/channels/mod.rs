//! Messaging channels on the gateway: routing an inbound message to its agent and session key
//! (`routing.rs`), who may talk to the agent and the deduplication of redelivered messages
//! (`access.rs`), what every channel does with a message — queueing, replies, questions, chat
//! commands (`inbox.rs`, with the [`inbox::Channel`] trait a channel implements; `queue.rs`,
//! `policy.rs`) — how a reply is cut into messages (`chunker.rs`), and Telegram: its Bot API
//! client (`telegram.rs`) and the channel on it (`serve.rs`).

pub mod access;
pub mod chunker;
pub mod inbox;
pub mod policy;
pub mod queue;
pub mod routing;
pub mod serve;
pub mod telegram;
