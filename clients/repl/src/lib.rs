//! The client side of ACP for the terminal: the connection to an agent (`conn`), permission
//! policies (`policy`) and the one-shot runner behind `acp run` (`run`). The `acp client` REPL is
//! built on the same pieces. Depends on the `acp-protocol` crate only, so it can drive any agent.

pub mod conn;
pub mod host;
pub mod policy;
pub mod render;
pub mod run;
