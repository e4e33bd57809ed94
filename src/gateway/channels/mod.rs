//! Messaging channels on the gateway: how a reply is cut into messages for channels that cannot
//! edit one (`chunker.rs`).

pub mod chunker;
