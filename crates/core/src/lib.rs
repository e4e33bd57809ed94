//! acp's agent, below every surface: the runtime and everything it runs on. The code map:
//!
//! - [`sync`], [`clock`], [`settings`], [`files`], [`http`] — the bottom layer: locks that outlive
//!   a panic, wall-clock milliseconds, the settings vocabulary (modes, rules, reasoning effort),
//!   reading untrusted files, the shared HTTP client.
//! - [`sandbox`] — the exec sandbox `exec` runs commands in (Landlock, namespaces, limits).
//! - [`skills`] — skills found on disk and offered to the model; [`openlang`] — the compact
//!   language agents may use between themselves.
//! - [`config`] — `$ACP_HOME/config.toml` + environment → [`config::Config`]; `provider/model` refs.
//! - [`runtime`] — the in-process agent: one actor per session (`runtime/session.rs`), `Op` in,
//!   `Event` out, the agent loop on one screen (`runtime/turn.rs`), tool calls, the system prompt.
//! - [`tools`] — one tool per file behind `Tool`; approval, policy, kinds, paths, diffs; the
//!   `Host` trait through which tools reach the editor (or the disk).
//! - [`memory`] — the agent's memory files (`MEMORY.md`, `memory/YYYY-MM-DD.md`) and their
//!   full-text index (SQLite FTS5, BM25; CJK text as character pairs).
//! - [`history`] — the session's history model below the runtime and the store: content blocks, the
//!   conversation, transcript records, and their replay for `session/load`.
//! - [`store`] — sessions that last: a SQLite index (`$ACP_HOME/acp.db`) and one append-only JSONL
//!   transcript per session.
//! - [`stream`] — protocol-neutral helpers (a tool call's changed fields).
//! - [`mcp`] — MCP servers on rmcp's client: a shared pool of connections (stdio, streamable HTTP,
//!   legacy SSE) started in the background, their tools as registry tools.
//! - [`providers`] — one file per wire API (Anthropic Messages, OpenAI Chat Completions, OpenAI
//!   Responses) over one HTTP client (`client.rs`), one SSE parser (`sse.rs`) and one retry policy
//!   (`retry.rs`), all producing a provider-neutral `ResponseEvent` stream.
//!
//! Nothing here knows ACP, JSON-RPC or WebSockets: the surfaces (the `acp` crate's ACP server and
//! `acp-gateway`) drive the runtime through its API. Each module imports only those above it in
//! the layer table of docs/architecture.md (checked by `tests/suite/tidy.rs`).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod clock;
pub mod config;
pub mod files;
pub mod history;
pub mod hooks;
pub mod http;
pub mod lsp;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod openlang;
pub mod providers;
pub mod runtime;
pub mod sandbox;
pub mod settings;
pub mod skills;
pub mod store;
pub mod stream;
pub mod sync;
pub mod tools;
