//! Reaching a server: a child process on stdio (spawned here, in its own process group, so the
//! whole group goes when the connection does: `sandbox::child`), streamable HTTP on the agent's
//! HTTP client, or the legacy SSE transport (`sse.rs`). Each ends in an rmcp client service after `initialize`.

use std::collections::HashMap;
use std::path::Path;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransport, StreamableHttpClientTransportConfig};
use tokio::process::Command;

use super::client::Handler;
use crate::config::mcp::McpTransport;

/// The longest message a server may send (a large file read, an image).
const MAX_MESSAGE_BYTES: usize = 64 << 20;

pub(crate) type Service = RunningService<RoleClient, Handler>;

pub(crate) use crate::sandbox::child::Process;

/// A connection: the rmcp service, and the process behind it for stdio.
pub(crate) struct Connection {
    pub(crate) service: Service,
    pub(crate) process: Option<Process>,
}

/// Connects and initializes; the caller bounds the time it takes.
pub(crate) async fn connect(
    name: &str,
    transport: &McpTransport,
    cwd: &Path,
    handler: Handler,
    http: impl Future<Output = Result<reqwest::Client, String>>,
) -> Result<Connection, String> {
    match transport {
        McpTransport::Stdio { command, args, env, cwd: own_cwd } => {
            let mut cmd = Command::new(command);
            // The gateway's and the channels' credentials are acp's own: no server needs them.
            for name in crate::sandbox::env::OWN_CREDENTIALS {
                cmd.env_remove(name);
            }
            cmd.args(args).envs(env.iter().map(|(k, v)| (k, v))).current_dir(own_cwd.as_deref().unwrap_or(cwd));
            let server = name.to_owned();
            let log = move |line: &str| tracing::info!(target: "mcp", server = %server, "{line}");
            let (process, stdin, stdout) = Process::spawn(cmd, command, log)?;
            let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
            match rmcp::serve_client(handler, transport).await {
                Ok(service) => Ok(Connection { service, process: Some(process) }),
                Err(e) => {
                    let mut process = process;
                    // Give it a moment to end, and its stderr to say why.
                    let status = match process.child_mut() {
                        Some(child) => {
                            tokio::time::timeout(std::time::Duration::from_millis(200), child.wait()).await.ok()
                        }
                        None => None,
                    }
                    .and_then(Result::ok);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    let why = match (&e, status) {
                        (ClientInitializeError::ConnectionClosed(_), Some(status)) => {
                            format!("it exited before answering ({status})")
                        }
                        (ClientInitializeError::ConnectionClosed(_), None) => {
                            "it closed its output before answering".to_owned()
                        }
                        _ => describe(&e),
                    };
                    Err(format!("initialize failed: {why}{}", Process::stderr_tail(&process.stderr)))
                }
            }
        }
        McpTransport::Http { url, headers } => {
            let client = http.await?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(header_map(headers)?)
                .max_json_response_size(MAX_MESSAGE_BYTES);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let served = rmcp::serve_client(handler, transport).await;
            let error = match served {
                Ok(service) => return Ok(Connection { service, process: None }),
                Err(e) => e,
            };
            if let Some(challenge) = error.auth_challenge() {
                return Err(format!(
                    "the server refused the credentials (HTTP 401 or 403; it asks for `{}`): check the \
                     server's headers or its bearer token",
                    crate::tools::truncate::line(challenge, 200)
                ));
            }
            // rmcp words a connection that never happened as a failed send, the cause in a debug
            // dump: whether the server could be reached at all is found out and said instead.
            if let Some(unreachable) = unreachable(url).await {
                return Err(unreachable);
            }
            Err(format!("initialize failed: {}", describe(&error)))
        }
        McpTransport::Sse { url, headers } => {
            let client = http.await?;
            let headers: reqwest::header::HeaderMap = header_map(headers)?.into_iter().collect();
            let transport = match super::sse::SseTransport::connect(client, url, headers).await {
                Ok(transport) => transport,
                Err(e) => return Err(unreachable(url).await.unwrap_or(e)),
            };
            let service = rmcp::serve_client(handler, transport)
                .await
                .map_err(|e| format!("initialize failed: {}", describe(&e)))?;
            Ok(Connection { service, process: None })
        }
    }
}

/// Why nothing answers at `url`'s host and port (refused, no such host, …), if that is so.
async fn unreachable(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = parsed.port_or_known_default()?;
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Some(format!("could not connect to {host}:{port}: connection refused (is the server running?)"))
        }
        Ok(Err(e)) => Some(format!("could not connect to {host}:{port}: {e}")),
        Err(_) => Some(format!("could not connect to {host}:{port}: no answer within 5 s")),
    }
}

fn header_map(headers: &[(String, String)]) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("`{k}` is not a valid header name"))?;
            let value = HeaderValue::from_str(v).map_err(|_| format!("the value of header `{k}` is not valid"))?;
            Ok((name, value))
        })
        .collect()
}

/// An rmcp error as a user reads it: its causes, without the Rust type names rmcp puts in.
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let text = crate::http::error_chain(e);
    // "Transport [rmcp::transport::worker::WorkerTransport<…>] error: HTTP 500" → "HTTP 500"
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(" [") {
        let Some(end) = rest[start..].find("] ") else { break };
        let inner = &rest[start + 2..start + end];
        out.push_str(&rest[..start]);
        if !inner.contains("::") {
            out.push_str(&rest[start..start + end + 1]);
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}
