//! One module per feature.

mod cancel;
mod errors;
mod lifecycle;
mod protocol;
mod session;
mod streaming;
