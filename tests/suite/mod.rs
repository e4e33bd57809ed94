//! One module per feature.

mod approvals;
mod bridge;
mod cancel;
mod client;
mod commands;
mod conformance;
mod context;
mod editor;
mod errors;
mod gateway;
mod gateway_approvals;
mod golden;
mod hostile;
mod lifecycle;
mod mcp;
mod persistence;
mod protocol;
mod run;
mod sandbox;
mod scripts;
mod session;
mod sessions_cli;
mod streaming;
mod tidy;
mod tools;
mod webchat;
