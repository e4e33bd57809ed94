//! acp — an Agent Client Protocol agent server. The code map:
//!
//! - `main.rs` — the command line (clap): arguments, tracing to stderr; [`cli`] does each
//!   subcommand and owns the signal thread: `acp serve` (the default; `--gateway URL` bridges to a
//!   gateway), `acp run` (one prompt in process), `acp client` (the terminal client, in the
//!   `acp-repl` crate), `acp sessions` (list, show, export, delete), `acp gateway`, `acp mcp` (list,
//!   test), `acp pairing` and `acp channels` (ask the running gateway).
//! - [`sync`], [`clock`], [`settings`], [`files`], [`http`] — the bottom layer: locks that outlive
//!   a panic, wall-clock milliseconds, the settings vocabulary (modes, rules, reasoning effort),
//!   reading untrusted files, the shared HTTP client.
//! - [`sandbox`] — the exec sandbox `exec` runs commands in (Landlock, namespaces, limits).
//! - [`skills`] — skills found on disk and offered to the model; [`openlang`] — the compact
//!   language agents may use between themselves.
//! - [`config`] — `$ACP_HOME/config.toml` + environment → [`config::Config`]; `provider/model` refs.
//! - [`rpc`] — JSON-RPC over NDJSON: reader thread → dispatcher channel → the writer (a lock around
//!   stdout, the only code that writes it); our own requests to the client with a pending map and
//!   `$/cancel_request`.
//! - [`acp`] — the only module that knows ACP: the typed dispatch table (`acp/agent.rs`,
//!   `acp/dispatch.rs`), runtime events → `session/update` (`acp/updates.rs`), calls to the editor
//!   (`acp/editor_host.rs`), modes/config options, prompt content, `_meta` readers.
//! - [`runtime`] — the in-process agent: one actor per session (`runtime/session.rs`), `Op` in,
//!   `Event` out, the agent loop on one screen (`runtime/turn.rs`), tool calls, the system prompt.
//! - [`tools`] — one tool per file behind `Tool`; approval, policy, kinds, paths, diffs; the
//!   `Host` trait through which tools reach the editor (or the disk).
//! - [`history`] — the session's history model below the runtime and the store: content blocks, the
//!   conversation, transcript records, and their replay for `session/load`.
//! - [`store`] — sessions that last: a SQLite index (`$ACP_HOME/acp.db`) and one append-only JSONL
//!   transcript per session.
//! - [`stream`] — protocol-neutral helpers (a tool call's changed fields).
//! - [`gateway`] — `acp gateway`: OpenClaw's gateway protocol (v4) over WebSocket, on the same
//!   runtime; the frames are in `acp-protocol`.
//! - [`remote`] — a client of the gateway protocol (ours or OpenClaw's): device identity, the
//!   handshake, requests by id, events, tick watchdog, reconnect; `acp serve --gateway` rides it.
//! - [`mcp`] — MCP servers on rmcp's client: a shared pool of connections (stdio, streamable HTTP,
//!   legacy SSE) started in the background, their tools as registry tools.
//! - [`providers`] — one file per wire API (Anthropic Messages, OpenAI Chat Completions, OpenAI
//!   Responses) over one HTTP client (`client.rs`), one SSE parser (`sse.rs`) and one retry policy
//!   (`retry.rs`), all producing a provider-neutral `ResponseEvent` stream.
//!
//! The modules from [`sync`] to [`providers`] are the `acp-core` crate (the agent, below every
//! surface) and [`gateway`] the `acp-gateway` crate; this crate holds the surfaces that speak to
//! editors and terminals ([`acp`], [`rpc`], [`remote`], [`cli`]). Wire types (JSON-RPC envelope,
//! NDJSON codec, ACP schema) live in the `acp-protocol` crate.
//! Each module imports only those above it in the layer table of docs/architecture.md (the table's
//! one copy, read and checked by `tests/suite/tidy.rs`).
//! Invariants: only `acp` knows ACP; only `rpc` and `acp-protocol` know JSON-RPC; stdout carries
//! protocol frames only; every request gets exactly one response; every prompt ends with exactly one
//! stop reason (or error).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod acp;
pub mod cli;
pub mod remote;
pub mod rpc;

// The agent below the surfaces (`acp-core`), and the gateway (`acp-gateway`), under the names the
// surfaces use for them.
pub use acp_core::{
    clock, config, files, history, hooks, http, lsp, mcp, memory, models, openlang, providers, runtime, sandbox,
    settings, skills, store, stream, sync, tools,
};
pub use acp_gateway::gateway;
