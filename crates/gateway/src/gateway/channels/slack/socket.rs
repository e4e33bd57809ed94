//! One Socket Mode connection: Slack says `hello`, then sends envelopes (`events_api`, and
//! others the channel does not use), each acknowledged with its `envelope_id` once handled — an
//! envelope not acknowledged is sent again (`retry_attempt`), so nothing is lost, and the
//! channel drops what it took already. A `disconnect` (Slack refreshes connections every few
//! hours, and warns before) ends the connection for a new one; `link_disabled` (Socket Mode
//! turned off for the app) ends the channel. A connection silent for a minute is pinged, and
//! given up if the ping goes unanswered.

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// What is done with the envelopes' events.
pub trait Envelopes: Send + Sync {
    /// An `events_api` envelope's payload (`event_callback`), how many times it was sent before,
    /// and its id: whether to acknowledge it now (else its id comes back through `acks` once
    /// it is taken).
    fn event(&self, payload: &Value, retry_attempt: u64, envelope: &str) -> impl Future<Output = bool> + Send;
    /// Slack said hello: the connection is up.
    fn hello(&self);
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Stopped,
    /// Socket Mode is off for the app: why.
    Fatal(String),
    /// Connect again (a refresh, a drop): why, and whether Slack asked for it with a refresh
    /// (`warning`, `refresh_requested` after hello: a new connection at once is what it wants).
    Again {
        why: String,
        asked: bool,
    },
}

const OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// Silence this long gets a ping; an unanswered ping this long ends the connection.
const IDLE: Duration = Duration::from_secs(60);
const PING_ANSWER: Duration = Duration::from_secs(30);

pub async fn run(
    url: &str,
    envelopes: &impl Envelopes,
    acks: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    stop: &CancellationToken,
) -> Ended {
    let again = |why: String| Ended::Again { why, asked: false };
    let stream = match tokio::time::timeout(OPEN_TIMEOUT, crate::http::open_stream(url)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return again(e),
        Err(_) => return again("connecting timed out".into()),
    };
    let mut config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
    config.max_message_size = Some(16 << 20);
    config.max_frame_size = Some(16 << 20);
    let handshake = tokio_tungstenite::client_async_with_config(url, stream, Some(config));
    let mut ws = match tokio::time::timeout(OPEN_TIMEOUT, handshake).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => return again(format!("WebSocket handshake: {e}")),
        Err(_) => return again("the WebSocket handshake timed out".into()),
    };
    let mut said_hello = false;
    let mut pinged = false;
    let mut quiet = tokio::time::Instant::now() + OPEN_TIMEOUT;
    loop {
        let frame = tokio::select! {
            () = stop.cancelled() => {
                let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
                return Ended::Stopped;
            }
            () = tokio::time::sleep_until(quiet) => {
                if !said_hello {
                    return again("Slack did not say hello".into());
                }
                if pinged {
                    return again("Slack did not answer a ping".into());
                }
                if let Err(e) = ws.send(Message::Ping(Vec::new().into())).await {
                    return again(format!("ping: {e}"));
                }
                pinged = true;
                quiet = tokio::time::Instant::now() + PING_ANSWER;
                continue;
            }
            Some(id) = acks.recv() => {
                if let Err(e) = ws.send(Message::text(json!({"envelope_id": id}).to_string())).await {
                    return again(format!("acknowledging an envelope: {e}"));
                }
                continue;
            }
            frame = ws.next() => frame,
        };
        pinged = false;
        quiet = tokio::time::Instant::now() + IDLE;
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => {
                return again(
                    frame.map_or_else(|| "closed".into(), |f| format!("closed ({}): {}", u16::from(f.code), f.reason)),
                );
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return again(e.to_string()),
            None => return again("Slack closed the connection".into()),
        };
        let Ok(frame) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!(frame = %text.chars().take(200).collect::<String>(), "Slack: a frame that is not JSON, ignored");
            continue;
        };
        match frame["type"].as_str().unwrap_or_default() {
            "hello" => {
                said_hello = true;
                envelopes.hello();
            }
            "disconnect" => {
                let reason = frame["reason"].as_str().unwrap_or_default();
                if reason == "link_disabled" {
                    return Ended::Fatal("Socket Mode is turned off for the app (link_disabled)".into());
                }
                let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
                let refresh = said_hello && matches!(reason, "warning" | "refresh_requested");
                return Ended::Again { why: format!("Slack asked for a new connection ({reason})"), asked: refresh };
            }
            kind => {
                let Some(id) = frame["envelope_id"].as_str() else { continue };
                let now = kind != "events_api"
                    || envelopes.event(&frame["payload"], frame["retry_attempt"].as_u64().unwrap_or(0), id).await;
                // Every envelope is acknowledged (those not used too, or Slack sends them again).
                if now && let Err(e) = ws.send(Message::text(json!({"envelope_id": id}).to_string())).await {
                    return again(format!("acknowledging an envelope: {e}"));
                }
            }
        }
    }
}
