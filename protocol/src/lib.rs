//! Wire types shared by the `acp` server and its clients: the JSON-RPC 2.0 envelope, the NDJSON line
//! codec and the ACP schema. No async runtime and no I/O policy live here.

pub mod acp;
pub mod codec;
pub mod gateway;
pub mod jsonrpc;
