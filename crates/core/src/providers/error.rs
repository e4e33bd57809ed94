//! Provider errors: what failed, whether a retry can help, and a message for the user that says
//! what to do about it.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 401: the key is missing or wrong.
    Auth,
    /// 403: the key may not use this model or region.
    PermissionDenied,
    /// 402, `insufficient_quota`, `billing_error`: money, not time, fixes it.
    Billing,
    /// 429.
    RateLimited,
    /// 529, 503 or an in-stream `overloaded_error`.
    Overloaded,
    /// Other 5xx, 408, 409, or an in-stream server error.
    Server,
    /// 404: usually an unknown model id or a wrong base URL.
    NotFound,
    /// The prompt does not fit the model's context window.
    ContextLength,
    /// 400 and other 4xx: the request itself is wrong; retrying cannot help.
    InvalidRequest,
    /// Could not connect (DNS, refused, TLS).
    Connect,
    /// No first byte or too long a silence.
    Timeout,
    /// The stream ended without its terminal event.
    Truncated,
    /// The provider sent something that is not its protocol.
    Protocol,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::PermissionDenied => "permission_denied",
            Self::Billing => "billing",
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::Server => "server_error",
            Self::NotFound => "not_found",
            Self::ContextLength => "context_length",
            Self::InvalidRequest => "invalid_request",
            Self::Connect => "connect",
            Self::Timeout => "timeout",
            Self::Truncated => "truncated",
            Self::Protocol => "protocol",
        }
    }

    fn retryable(self) -> bool {
        matches!(
            self,
            Self::RateLimited | Self::Overloaded | Self::Server | Self::Connect | Self::Timeout | Self::Truncated
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderError {
    pub kind: ErrorKind,
    /// The provider's own words (or ours, for transport failures).
    pub message: String,
    pub status: Option<u16>,
    /// Delay the server asked for (`retry-after-ms`, `retry-after`, "try again in Xs").
    pub retry_after: Option<Duration>,
    /// `x-should-retry`, when the server sent it.
    pub should_retry: Option<bool>,
    /// Filled in by the client: which provider, and where its key comes from.
    pub provider: String,
    pub key_env: Option<String>,
    pub request_id: Option<String>,
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            retry_after: None,
            should_retry: None,
            provider: String::new(),
            key_env: None,
            request_id: None,
        }
    }

    /// Classifies an HTTP error status (the body's error type can refine it, see `refine`).
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let kind = match status {
            401 => ErrorKind::Auth,
            402 => ErrorKind::Billing,
            403 => ErrorKind::PermissionDenied,
            404 => ErrorKind::NotFound,
            408 | 409 => ErrorKind::Server,
            413 => ErrorKind::InvalidRequest,
            429 => ErrorKind::RateLimited,
            503 | 529 => ErrorKind::Overloaded,
            s if s >= 500 => ErrorKind::Server,
            _ => ErrorKind::InvalidRequest,
        };
        let mut e = Self::new(kind, message);
        e.status = Some(status);
        e
    }

    /// Refines the kind from a provider error `type`/`code` string.
    #[must_use]
    pub fn refine(mut self, code: &str) -> Self {
        let code = code.to_ascii_lowercase();
        if code.contains("insufficient_quota") || code.contains("billing") {
            self.kind = ErrorKind::Billing;
        } else if code.contains("context_length") || code.contains("exceed_context") {
            self.kind = ErrorKind::ContextLength;
        } else if code.contains("overloaded") {
            self.kind = ErrorKind::Overloaded;
        } else if code.contains("rate_limit") {
            self.kind = ErrorKind::RateLimited;
        } else if code.contains("authentication") || code == "invalid_api_key" {
            self.kind = ErrorKind::Auth;
        } else if self.status.is_none() {
            // In-stream errors carry no HTTP status: the type alone says what happened.
            if code.contains("api_error") || code.contains("server_error") {
                self.kind = ErrorKind::Server;
            } else if code.contains("permission") {
                self.kind = ErrorKind::PermissionDenied;
            } else if code.contains("not_found") {
                self.kind = ErrorKind::NotFound;
            } else if code.contains("invalid_request") || code.contains("too_large") || code.contains("invalid_prompt")
            {
                self.kind = ErrorKind::InvalidRequest;
            }
        }
        if self.kind == ErrorKind::InvalidRequest
            && ["context length", "maximum context", "prompt is too long", "exceeds the maximum number of tokens"]
                .iter()
                .any(|m| self.message.contains(m))
        {
            self.kind = ErrorKind::ContextLength;
        }
        self
    }

    /// Whether trying again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self.should_retry {
            Some(forced) => forced && self.kind != ErrorKind::Billing,
            None => self.kind.retryable(),
        }
    }

    /// One paragraph for the user: what failed, then what to do.
    pub fn user_message(&self) -> String {
        let who = if self.provider.is_empty() { "the model provider" } else { self.provider.as_str() };
        let status = self.status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
        let message = self.message.trim();
        let detail = if message.is_empty() { String::new() } else { format!(": {message}") };
        let what = format!("{who} request failed{status}{detail}");
        let advice = match self.kind {
            ErrorKind::Auth => match &self.key_env {
                Some(var) => format!(
                    "Check the API key in {var} (it must be set in acp's environment: your shell's, or the one your editor starts acp with), then try again."
                ),
                None => "Check the provider's API key in ~/.acp/config.toml, then try again.".to_owned(),
            },
            ErrorKind::PermissionDenied => {
                "The key is not allowed to use this model or from this region; choose another model or check the account."
                    .to_owned()
            }
            ErrorKind::Billing => "The account is out of credit or quota; check billing with the provider.".to_owned(),
            ErrorKind::RateLimited => match self.retry_after {
                Some(d) => format!("The provider is rate limiting requests; try again in {} s.", d.as_secs().max(1)),
                None => "The provider is rate limiting requests; wait a little and try again.".to_owned(),
            },
            ErrorKind::Overloaded | ErrorKind::Server => {
                "The provider is having trouble; retries did not help. Try again shortly, or switch model.".to_owned()
            }
            ErrorKind::NotFound => {
                "The model id or the base URL is probably wrong; check the model you chose and the provider's base_url."
                    .to_owned()
            }
            ErrorKind::ContextLength => {
                "The conversation is too long for this model: run /compact to summarise it, /new to start over, or choose a model with a larger context window."
                    .to_owned()
            }
            ErrorKind::InvalidRequest => "The provider refused the request; check the model and provider settings.".to_owned(),
            ErrorKind::Connect => {
                "Could not reach the provider; check the network and the base URL (is a local server running?).".to_owned()
            }
            ErrorKind::Timeout => "The provider stopped answering; try again.".to_owned(),
            ErrorKind::Truncated | ErrorKind::Protocol => {
                "The reply was cut off or garbled; try again. If it keeps happening, check the provider's base URL and API type."
                    .to_owned()
            }
        };
        // The provider's words may end their own sentence.
        let stop = if what.ends_with(['.', '!', '?']) { "" } else { "." };
        format!("{what}{stop} {advice}")
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.message, self.kind.as_str())?;
        if let Some(s) = self.status {
            write!(f, ", HTTP {s}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for ProviderError {}

/// Reads "try again in 1.4s" / "try again in 20ms" from an error message (OpenAI puts the delay
/// only there on some 429s).
pub fn delay_from_message(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("try again in ")? + "try again in ".len();
    let rest = &lower[at..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let value: f64 = rest[..end].parse().ok()?;
    let unit = rest[end..].trim_start();
    let secs = if unit.starts_with("ms") {
        value / 1000.0
    } else if unit.starts_with('s') {
        value
    } else {
        return None;
    };
    server_delay(secs)
}

/// The first 300 characters of a body, on one line.
pub fn snippet(body: &str) -> String {
    let one_line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s: String = one_line.chars().take(300).collect();
    if one_line.chars().count() > 300 {
        s.push('…');
    }
    if s.is_empty() { "(empty body)".to_owned() } else { s }
}

/// The longest delay a server's answer is taken to ask for: anything longer (`retry-after: 1e30`)
/// is this, which is past any `max_retry_after`, so the request is not retried and the user hears
/// why at once.
pub const MAX_SERVER_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A delay in seconds that a server sent: negative or NaN is none; huge ones are capped (never a
/// panic, whatever the number).
pub fn server_delay(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).map_or(MAX_SERVER_DELAY, |d| d.min(MAX_SERVER_DELAY)))
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(delay) =
        get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()).and_then(|ms| server_delay(ms / 1000.0))
    {
        return Some(delay);
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return server_delay(secs);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default().min(MAX_SERVER_DELAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classify_and_only_transient_ones_retry() {
        for (status, retry) in [
            (400, false),
            (401, false),
            (403, false),
            (404, false),
            (413, false),
            (408, true),
            (429, true),
            (500, true),
            (529, true),
        ] {
            assert_eq!(ProviderError::from_status(status, "x").is_retryable(), retry, "{status}");
        }
    }

    #[test]
    fn codes_refine_the_kind() {
        let e = ProviderError::from_status(429, "You exceeded your current quota").refine("insufficient_quota");
        assert_eq!(e.kind, ErrorKind::Billing);
        assert!(!e.is_retryable());
        let e = ProviderError::new(ErrorKind::Protocol, "Overloaded").refine("overloaded_error");
        assert_eq!(e.kind, ErrorKind::Overloaded);
        assert!(e.is_retryable());
        let e = ProviderError::from_status(400, "x").refine("context_length_exceeded");
        assert_eq!(e.kind, ErrorKind::ContextLength);
        let e = ProviderError::from_status(400, "prompt is too long: 213442 tokens > 200000 maximum")
            .refine("invalid_request_error");
        assert_eq!(e.kind, ErrorKind::ContextLength);
        // In-stream errors have no status: their type decides, and a bad request is not retried.
        let e = ProviderError::new(ErrorKind::Server, "bad").refine("invalid_request_error");
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(!e.is_retryable());
        // With a status, a generic type does not override a specific code: OpenAI's 401 body says
        // `type: invalid_request_error`, `code: invalid_api_key`.
        let e = ProviderError::from_status(401, "x").refine("invalid_api_key").refine("invalid_request_error");
        assert_eq!(e.kind, ErrorKind::Auth);
    }

    #[test]
    fn should_retry_header_overrides() {
        let mut e = ProviderError::from_status(400, "x");
        e.should_retry = Some(true);
        assert!(e.is_retryable());
        let mut e = ProviderError::from_status(500, "x");
        e.should_retry = Some(false);
        assert!(!e.is_retryable());
    }

    #[test]
    fn delays_in_messages() {
        assert_eq!(delay_from_message("Please try again in 1.4s."), Some(Duration::from_millis(1400)));
        assert_eq!(delay_from_message("try again in 20ms"), Some(Duration::from_millis(20)));
        assert_eq!(delay_from_message("try again later"), None);
        // Absurd numbers are capped, never a panic.
        let day = super::MAX_SERVER_DELAY;
        assert_eq!(delay_from_message("try again in 100000000000000000000000s"), Some(day));
        assert_eq!(delay_from_message(&format!("try again in {}ms", "9".repeat(400))), Some(day));
    }

    #[test]
    fn server_delays_are_capped_whatever_the_number() {
        use super::{MAX_SERVER_DELAY, retry_after, server_delay};
        assert_eq!(server_delay(1.5), Some(Duration::from_millis(1500)));
        for huge in [1e30, f64::INFINITY, f64::MAX, 1e19] {
            assert_eq!(server_delay(huge), Some(MAX_SERVER_DELAY), "{huge}");
        }
        for none in [-1.0, f64::NAN, f64::NEG_INFINITY] {
            assert_eq!(server_delay(none), None, "{none}");
        }
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after-ms", "1e30".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(MAX_SERVER_DELAY));
        headers.clear();
        headers.insert("retry-after", "1e300".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(MAX_SERVER_DELAY));
    }

    #[test]
    fn user_messages_say_what_to_do() {
        let mut e = ProviderError::from_status(401, "invalid x-api-key");
        e.provider = "anthropic".into();
        e.key_env = Some("ANTHROPIC_API_KEY".into());
        let m = e.user_message();
        assert!(m.starts_with("anthropic request failed (HTTP 401): invalid x-api-key."), "{m}");
        assert!(m.contains("ANTHROPIC_API_KEY"), "{m}");
    }
}
