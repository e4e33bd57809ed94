//! What the `acp` subcommands do, below the argument parsing in `main.rs`: `acp serve` on stdio,
//! `acp run` (the agent in this process, driven over in-memory pipes by the terminal client's
//! code), `acp sessions` (the store from the command line), `acp mcp` (the configured MCP servers), `acp memory`, `acp gateway`, `acp pairing`,
//! `acp channels` and `acp cron` (asking the running gateway), `acp hooks`, `acp models`, `acp agents`, and the signal
//! thread they share.

pub mod agents;
pub mod cron;
pub mod gateway;
pub mod hooks;
pub mod lsp;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod pairing;
pub mod run;
pub mod serve;
pub mod sessions;
pub mod signals;
