//! Messaging channels on the gateway. What is built so far: routing an inbound message to its
//! agent and session key (`routing.rs`), who may talk to the agent and the deduplication of
//! redelivered messages (`access.rs`), how a reply is cut into messages for channels that
//! cannot edit one (`chunker.rs`), the Telegram Bot API client (`telegram.rs`) and the Telegram
//! channel that joins them to gateway runs (`serve.rs`).

pub mod access;
pub mod chunker;
pub mod routing;
pub mod serve;
pub mod telegram;
