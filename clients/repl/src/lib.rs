//! The client side of ACP for the terminal: the connection to an agent (`conn`) and what is asked
//! over it (`requests`), the client's files and terminals (`host`), rendering (`render`, in the
//! looks of `look`), permission questions (`ask`) and policies (`policy`), the `acp client` REPL
//! (`repl`) and the one-shot runner behind `acp run` (`run`).
//! Depends on the `acp-protocol` crate only, so it can drive any agent.

pub mod ask;
pub mod conn;
pub mod host;
mod look;
pub mod policy;
pub mod render;
pub mod repl;
pub mod requests;
pub mod run;
