//! Failover's cost (run by `tests/bench/run`; docs/models.md): the gap from the end of the
//! failed response (Anthropic's 529) to the fallback's request arriving (OpenAI Chat Completions,
//! on the same loopback mock) — what acp adds beyond the failed request's own time: classifying
//! the failure, cooling the model down, choosing the next candidate, building the request for
//! another wire API — beside the same gap for a plain retry of the same model with no backoff.
//! Each sample is a fresh agent (a fresh state), one turn. Prints figures, not pass/fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/agent.rs"]
mod agent;
mod measure;
#[path = "../support/mock_model.rs"]
mod mock_model;
#[path = "../support/script.rs"]
mod script;

use std::time::Duration;

use agent::{Agent, Options};
use measure::{median, ms};
use mock_model::{MockModel, Reply};

const SAMPLES: usize = 40;

/// The gap from the first (failed) request's end to the second's arrival, over `SAMPLES` fresh
/// agents; `fallback`: the second goes to OpenAI, else it is Anthropic's retry.
fn gap(fallback: bool) -> Duration {
    let mut gaps = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let mock = MockModel::start();
        mock.push(Reply::fixture("anthropic", "529"));
        mock.push(if fallback { script::text("openai-chat", "done") } else { script::text("anthropic", "done") });
        let config = if fallback {
            "fallbacks = [\"openai/gpt-4.1\"]\n"
        } else {
            // The smallest backoff the file takes: the retry's own cost, nearly without a wait.
            "[retry]\ninitial_delay = 0.000001\nmax_backoff = 0.000001\n"
        };
        let options = Options::default()
            .env("ANTHROPIC_API_KEY", "bench")
            .env("ANTHROPIC_BASE_URL", &mock.base())
            .env("OPENAI_API_KEY", "bench")
            .env("OPENAI_BASE_URL", &mock.base_v1())
            .env("RUST_LOG", "error")
            .config(config);
        let mut a = Agent::spawn(options);
        a.initialize();
        let session = a.new_session();
        let (_, response) = a.prompt(&session, "go");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 2);
        let expected = if fallback { "/v1/chat/completions" } else { "/v1/messages" };
        assert_eq!(reqs[1].path, expected);
        gaps.push(reqs[1].at - reqs[0].finished_at.unwrap());
    }
    median(gaps)
}

fn main() {
    let failover = gap(true);
    let retry = gap(false);
    println!("failover: from a failed response's end to the next request (medians of {SAMPLES} fresh agents)");
    println!("{:<58} {:>12}   (target ≤ 5 ms)", "529 on anthropic → request to the openai fallback", ms(failover));
    println!("{:<58} {:>12}   (reference)", "529 on anthropic → its own retry, no backoff", ms(retry));
}
