//! `acp gateway`: OpenClaw's gateway protocol (v4) over WebSocket, the web chat and the messaging
//! channels, on the runtime of `acp-core`; the frames are in `acp-protocol`. The modules of
//! `acp-core` it may use (docs/architecture.md's layer table) are imported here, so its files name
//! them as `crate::runtime`, `crate::config`, … as they would inside one crate.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use acp_core::{clock, config, hooks, http, runtime, sync};

pub mod gateway;
