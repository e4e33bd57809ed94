//! Language servers: a client for LSP over a server's stdio (`wire.rs` frames, `server.rs` one
//! server with its documents and diagnostics), shared by sessions through a pool keyed by server
//! and project root (`pool.rs`), checking what the edit tools write (`check.rs`, behind
//! `tools::check::Checker`) and answering the `lsp` tool (`tool.rs`). See docs/lsp.md.

pub mod check;
pub mod pool;
pub mod server;
pub mod text;
pub mod tool;
pub mod wire;

pub use pool::{Pool, Servers};
