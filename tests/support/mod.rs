//! Shared test harness: the mock model server and the agent process driver.

pub mod agent;
pub mod mock_model;

use mock_model::MockModel;

/// The three wire APIs, by fixture directory name.
pub const APIS: [&str; 3] = ["anthropic", "openai-chat", "openai-responses"];

/// Fast retries so error tests take milliseconds, not seconds.
pub const FAST_RETRY: &str = "[retry]\ninitial_delay = 0.01\nmax_backoff = 0.05\n";

/// Agent options that send the given wire API to the mock.
pub fn options_for(api: &str, mock: &MockModel) -> agent::Options {
    let options = agent::Options::default();
    match api {
        "anthropic" => options.anthropic(&mock.base()),
        "openai-chat" => options.openai(&mock.base_v1(), false),
        "openai-responses" => options.openai(&mock.base_v1(), true),
        other => panic!("unknown api {other}"),
    }
}

/// The request path each wire API uses.
pub fn path_for(api: &str) -> &'static str {
    match api {
        "anthropic" => "/v1/messages",
        "openai-chat" => "/v1/chat/completions",
        _ => "/v1/responses",
    }
}
