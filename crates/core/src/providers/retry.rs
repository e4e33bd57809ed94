//! Retrying model requests the way the official SDKs do: transient failures (connection errors,
//! timeouts, 408/409/429/5xx/529, in-stream overload, truncated streams) are retried with the
//! server's `retry-after` or a jittered exponential backoff — but never once output has reached the
//! user, and never for 400/401/403/404 or billing errors.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::client::ProviderClient;
use super::error::ProviderError;
use super::wire::{ModelRequest, ResponseEvent};
use crate::config::RetryConfig;

/// How a streamed request ended, when it did not complete.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    Cancelled,
    Provider(ProviderError),
}

/// `min(initial · 2^n, cap) · (1 − 0.25 · random)`, n = retries already made.
pub fn backoff(policy: &RetryConfig, retries_made: u32) -> Duration {
    let base = policy.initial_delay.as_secs_f64() * 2f64.powi(retries_made.min(30) as i32);
    let capped = base.min(policy.max_backoff.as_secs_f64());
    Duration::try_from_secs_f64(capped * (1.0 - 0.25 * fastrand::f64())).unwrap_or(policy.max_backoff)
}

/// The delay before the next attempt, or `None` when the error must not be retried.
pub fn delay_for(policy: &RetryConfig, error: &ProviderError, retries_made: u32) -> Option<Duration> {
    if !error.is_retryable() || retries_made >= policy.max_retries {
        return None;
    }
    match error.retry_after {
        Some(d) if d > policy.max_retry_after => None,
        Some(d) if !d.is_zero() => Some(d),
        _ => Some(backoff(policy, retries_made)),
    }
}

/// Receives a streamed reply.
pub trait StreamSink {
    fn event(&mut self, event: ResponseEvent);

    /// Every event received so far has been handed over and the next one needs more input from
    /// the network: a good moment to flush what was produced.
    fn idle(&mut self) {}

    /// The sink takes no more: the stream is dropped (hanging up stops the generation) and the
    /// request ends as if it had completed.
    fn full(&self) -> bool {
        false
    }
}

/// How one attempt at a request ended.
#[derive(Debug)]
pub enum Attempt {
    /// The stream completed (or the sink took no more).
    Done,
    Cancelled,
    Failed {
        error: ProviderError,
        /// Output reached the user before it failed: it must not be tried again.
        delivered: bool,
        /// Events reached the sink: they must be forgotten ([`ResponseEvent::Restarted`]) before
        /// another attempt.
        emitted: bool,
    },
}

/// Sends `request` once, handing every event to `sink`, until the stream completes, fails, or
/// `cancel` fires (dropping the connection, which stops the generation).
pub async fn attempt(
    client: &ProviderClient,
    request: &ModelRequest<'_>,
    cancel: &CancellationToken,
    sink: &mut impl StreamSink,
) -> Attempt {
    let started = tokio::select! {
        () = cancel.cancelled() => return Attempt::Cancelled,
        r = client.start(request) => r,
    };
    let mut stream = match started {
        Err(error) => return Attempt::Failed { error, delivered: false, emitted: false },
        Ok(stream) => stream,
    };
    let mut delivered = false;
    let mut emitted = false;
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return Attempt::Cancelled,
            n = stream.next() => n,
        };
        match next {
            None => return Attempt::Done,
            Some(Ok(event)) => {
                delivered |= event.is_output();
                emitted = true;
                sink.event(event);
                if sink.full() {
                    sink.idle();
                    return Attempt::Done;
                }
                if !stream.has_buffered() {
                    sink.idle();
                }
            }
            Some(Err(error)) => {
                if delivered {
                    tracing::warn!(error = %error, "model stream failed after output was shown; not retrying");
                }
                return Attempt::Failed { error, delivered, emitted };
            }
        }
    }
}

/// Runs `request`, handing every event to `sink`, retrying per `policy` while nothing has been
/// shown to the user yet. Returns when the stream completed, failed for good, or `cancel` fired
/// (dropping the connection, which stops the generation).
pub async fn stream_with_retry(
    client: &ProviderClient,
    request: &ModelRequest<'_>,
    policy: &RetryConfig,
    cancel: &CancellationToken,
    sink: &mut impl StreamSink,
) -> Result<(), Failure> {
    let mut retries = 0;
    loop {
        let error = match attempt(client, request, cancel, sink).await {
            Attempt::Done => return Ok(()),
            Attempt::Cancelled => return Err(Failure::Cancelled),
            Attempt::Failed { error, delivered: true, .. } => return Err(Failure::Provider(error)),
            Attempt::Failed { error, emitted, .. } => {
                if emitted {
                    sink.event(ResponseEvent::Restarted);
                }
                error
            }
        };
        let Some(delay) = delay_for(policy, &error, retries) else {
            return Err(Failure::Provider(error));
        };
        retries += 1;
        wait(&error, retries, delay, cancel).await?;
    }
}

/// Waits `delay` before retry number `attempt` (logged), unless `cancel` fires first.
pub async fn wait(
    error: &ProviderError,
    attempt: u32,
    delay: Duration,
    cancel: &CancellationToken,
) -> Result<(), Failure> {
    tracing::warn!(
        provider = %error.provider,
        error = %error,
        attempt,
        delay_ms = delay.as_millis() as u64,
        "model request failed; retrying"
    );
    tokio::select! {
        () = cancel.cancelled() => Err(Failure::Cancelled),
        () = tokio::time::sleep(delay) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ErrorKind;

    fn policy() -> RetryConfig {
        RetryConfig::default()
    }

    #[test]
    fn backoff_grows_to_the_cap_with_jitter() {
        for n in 0..10 {
            let d = backoff(&policy(), n).as_secs_f64();
            let nominal = (0.5 * 2f64.powi(n as i32)).min(8.0);
            assert!(d <= nominal && d >= nominal * 0.75, "retry {n}: {d}");
        }
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        let mut e = ProviderError::from_status(429, "slow down");
        e.retry_after = Some(Duration::from_secs(3));
        assert_eq!(delay_for(&policy(), &e, 0), Some(Duration::from_secs(3)));
        e.retry_after = Some(Duration::from_secs(600));
        assert_eq!(delay_for(&policy(), &e, 0), None, "a delay over the limit fails the turn instead");
    }

    #[test]
    fn budget_and_non_retryable_errors() {
        let e = ProviderError::from_status(529, "overloaded");
        assert!(delay_for(&policy(), &e, 3).is_some());
        assert!(delay_for(&policy(), &e, 4).is_none());
        for status in [400, 401, 403, 404] {
            assert!(delay_for(&policy(), &ProviderError::from_status(status, "x"), 0).is_none(), "{status}");
        }
        assert!(delay_for(&policy(), &ProviderError::new(ErrorKind::Truncated, "eof"), 0).is_some());
    }
}
