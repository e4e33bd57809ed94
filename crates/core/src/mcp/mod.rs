//! MCP servers: the editor's and the user's tools in the agent. A [`Pool`] keeps one connection
//! per server description and workspace, shared by the sessions that use it; servers start in
//! the background and a session waits for them (bounded) when it first needs their tools. The
//! client is rmcp's (`client.rs` answers the server's questions, through what `hooks.rs` shares
//! with the server); how a server is reached is `connect.rs` (stdio, streamable HTTP) and `sse.rs`
//! (the legacy SSE transport); its tools join a session's registry as [`tool::McpTool`]s.

mod client;
mod connect;
mod hooks;
mod pool;
pub mod prompt;
mod sse;
pub mod tool;

pub use pool::{Asker, HttpSource, Lists, Pool, Server, State, describe_transport};
