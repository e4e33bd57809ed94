//! The integration test binary: drives the real `acp` binary against a local mock model server that
//! replays `fixtures/sse/`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod suite;
mod support;
