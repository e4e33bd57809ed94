//! Protocol-neutral helpers for streaming state to a client.

pub mod tool_update;
