//! The HTTP client the providers and `web_fetch` share, how its errors are told, and the byte
//! stream (TCP, or TLS with the system's roots) a WebSocket client runs over.

use std::time::Duration;

use crate::config::Timeouts;

/// Builds the shared HTTP client (connection pool, TLS roots). Costly (it loads the system's root
/// certificates), so callers build it once and off the request path.
pub fn build_http(timeouts: &Timeouts) -> Result<reqwest::Client, String> {
    builder(timeouts).build().map_err(|e| error_chain(&e))
}

/// A client for plain `http://` only (a provider on loopback or a LAN): no certificate store is
/// read, so it is ready at once. It trusts no certificate, so an `https://` request through it
/// fails rather than going unverified.
pub fn build_plain_http(timeouts: &Timeouts) -> Result<reqwest::Client, String> {
    builder(timeouts).tls_certs_only(std::iter::empty()).build().map_err(|e| error_chain(&e))
}

fn builder(timeouts: &Timeouts) -> reqwest::ClientBuilder {
    // Only one provider is compiled in; a second install attempt is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .tcp_keepalive(Duration::from_secs(30))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("acp/", env!("CARGO_PKG_VERSION")))
}

/// Whether `url` is plain `http://` (no TLS needed to reach it).
pub fn is_plain(url: &str) -> bool {
    url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://"))
}

/// An error with its causes, e.g. "error sending request: connection refused".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Whether the connection was refused (nothing listens there).
pub fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = s.source();
    }
    false
}

/// Whether `url` names this machine (`localhost`, a loopback address).
pub fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost"),
    }
}

/// A byte stream a WebSocket runs over: plain TCP or TLS.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// Connects to the host of `url` (`ws://` or `wss://`): TCP, with TLS verified against the
/// system's roots for `wss://` (the same crates reqwest builds; no second TLS stack).
pub async fn open_stream(url: &str) -> Result<Box<dyn Stream>, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a ws:// or wss:// URL: {e}"))?;
    let tls = match parsed.scheme() {
        "wss" => true,
        "ws" => false,
        other => return Err(format!("`{url}` is not a ws:// or wss:// URL (it is {other}://)")),
    };
    let host = parsed.host_str().ok_or_else(|| format!("`{url}` is not a ws:// or wss:// URL: no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = parsed.port().unwrap_or(if tls { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(|e| format!("{host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    if !tls {
        return Ok(Box::new(tcp));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = <rustls::ClientConfig as rustls_platform_verifier::ConfigVerifierExt>::with_platform_verifier()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {host}: {e}"))?;
    Ok(Box::new(stream))
}
