//! Model providers: one file per wire API (Anthropic Messages, OpenAI Chat Completions, OpenAI
//! Responses, Gemini), all producing one provider-neutral stream of [`ResponseEvent`]s. `client` does the
//! HTTP and timeouts, `sse` the framing, `retry` the retry policy; each wire file only builds the
//! request body and decodes its events, over the vocabulary they share (`wire.rs`: messages,
//! the request, usage, response events, and the limits on what a reply may hold).

pub mod anthropic;
pub mod client;
pub mod error;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
pub mod retry;
pub mod sse;
pub mod wire;

pub use client::{ProviderClient, ResponseStream};
pub use error::{ErrorKind, ProviderError};
pub use wire::*;
