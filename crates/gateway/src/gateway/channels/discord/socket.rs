//! One connection to Discord's Gateway (v10, JSON): `Hello` gives the heartbeat interval; the
//! first frame sent is `Identify` or `Resume` (the caller's); heartbeats carry the last sequence
//! number, the first after a random part of the interval, and one not acknowledged before the
//! next is due (and a moment's grace) means the connection is dead (closed, to be resumed); the server may ask for a
//! heartbeat (op 1), a reconnect (op 7) or say the session is invalid (op 9); every dispatch
//! (op 0) goes to [`Events`] with its sequence number. How it ended says whether to resume,
//! identify anew, or stop trying (close codes 4004 and 4010–4014: a bad token or intents).

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

/// What is done with the Gateway's dispatches.
pub trait Events: Send + Sync {
    /// Dispatch `name` (`READY`, `MESSAGE_CREATE`, …) with its data and sequence number; the
    /// next is read once this returns.
    fn dispatch(&self, name: &str, data: &Value, seq: Option<u64>) -> impl Future<Output = ()> + Send;
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub enum Ended {
    /// The gateway is stopping (the session is left resumable).
    Stopped,
    /// Not worth trying again (a bad token, intents not allowed): why.
    Fatal(String),
    /// Connect again: resuming the session, or identifying anew.
    Again { resume: bool, why: String },
}

/// How long the server has to say hello, and to finish the WebSocket handshake.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to `url`, sends `first` (an `Identify` or `Resume` frame), and serves the
/// connection until it ends. `seq`: the last sequence number seen (heartbeats carry it); kept
/// up to date here.
pub async fn run(
    url: &str,
    first: &Value,
    seq: &mut Option<u64>,
    events: &impl Events,
    stop: &CancellationToken,
) -> Ended {
    let again = |why: String| Ended::Again { resume: true, why };
    let url = with_query(url);
    let stream = match tokio::time::timeout(OPEN_TIMEOUT, crate::http::open_stream(&url)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return again(e),
        Err(_) => return again("connecting timed out".into()),
    };
    let mut config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
    config.max_message_size = Some(16 << 20);
    config.max_frame_size = Some(16 << 20);
    let mut ws = match tokio::time::timeout(
        OPEN_TIMEOUT,
        tokio_tungstenite::client_async_with_config(&url, stream, Some(config)),
    )
    .await
    {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => return again(format!("WebSocket handshake: {e}")),
        Err(_) => return again("the WebSocket handshake timed out".into()),
    };
    // Hello (op 10) first.
    let interval = match tokio::time::timeout(OPEN_TIMEOUT, ws.next()).await {
        Ok(Some(Ok(Message::Text(text)))) => {
            let hello: Value = serde_json::from_str(&text).unwrap_or_default();
            match hello["d"]["heartbeat_interval"].as_u64().filter(|_| hello["op"] == 10) {
                Some(ms) => Duration::from_millis(ms.clamp(1000, 600_000)),
                None => return again(format!("the Gateway said something else than hello: {}", clip(&text))),
            }
        }
        Ok(Some(Ok(Message::Close(frame)))) => return closed(frame.as_ref()),
        Ok(other) => return again(format!("no hello from the Gateway ({other:?})")),
        Err(_) => return again("the Gateway did not say hello".into()),
    };
    if let Err(e) = ws.send(Message::text(first.to_string())).await {
        return again(format!("sending identify/resume: {e}"));
    }
    let mut next_beat = tokio::time::Instant::now() + interval.mul_f64(jitter());
    let mut acked = true;
    let mut late = false;
    loop {
        let frame = tokio::select! {
            () = stop.cancelled() => {
                // Not 1000/1001: those end the session, and a restart should resume it.
                let close = CloseFrame { code: CloseCode::Library(4000), reason: "restarting".into() };
                let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(Some(close))).await;
                return Ended::Stopped;
            }
            frame = ws.next() => frame,
            () = tokio::time::sleep_until(next_beat) => {
                // An acknowledgement may be in a frame not read yet: a moment's grace first.
                if !acked && !late {
                    late = true;
                    next_beat = tokio::time::Instant::now() + (interval / 4).min(Duration::from_secs(5));
                    continue;
                }
                if !acked {
                    let close = CloseFrame { code: CloseCode::Library(4000), reason: "no heartbeat ack".into() };
                    let _ = tokio::time::timeout(Duration::from_secs(5), ws.close(Some(close))).await;
                    return again("the Gateway did not acknowledge a heartbeat".into());
                }
                if let Err(e) = ws.send(Message::text(json!({"op": 1, "d": *seq}).to_string())).await {
                    return again(format!("heartbeat: {e}"));
                }
                acked = false;
                late = false;
                next_beat = tokio::time::Instant::now() + interval;
                continue;
            }
        };
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => return closed(frame.as_ref()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return again(e.to_string()),
            None => return again("the Gateway closed the connection".into()),
        };
        let Ok(payload) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!(frame = %clip(&text), "Discord: a Gateway frame that is not JSON, ignored");
            continue;
        };
        match payload["op"].as_u64() {
            Some(0) => {
                let s = payload["s"].as_u64();
                if s.is_some() {
                    *seq = s;
                }
                let name = payload["t"].as_str().unwrap_or_default();
                events.dispatch(name, &payload["d"], s).await;
            }
            // The server asks for a heartbeat now.
            Some(1) => {
                if let Err(e) = ws.send(Message::text(json!({"op": 1, "d": *seq}).to_string())).await {
                    return again(format!("heartbeat: {e}"));
                }
            }
            Some(7) => return again("the Gateway asked for a reconnect".into()),
            Some(9) => {
                let resume = payload["d"] == true;
                return Ended::Again { resume, why: "the Gateway said the session is invalid".into() };
            }
            Some(11) => acked = true,
            _ => {}
        }
    }
}

/// What a close from the Gateway means.
fn closed(frame: Option<&CloseFrame>) -> Ended {
    let Some(frame) = frame else { return Ended::Again { resume: true, why: "closed".into() } };
    let code = u16::from(frame.code);
    let why = format!("the Gateway closed the connection ({code}: {})", frame.reason);
    match code {
        4004 => Ended::Fatal(format!("{why}: the bot token was refused")),
        4010..=4013 => Ended::Fatal(why),
        4014 => Ended::Fatal(format!(
            "{why}: turn on the Message Content intent for the bot in the Discord developer portal"
        )),
        // An invalid sequence, or a session that timed out: identify anew.
        4007 | 4009 => Ended::Again { resume: false, why },
        _ => Ended::Again { resume: true, why },
    }
}

/// The Gateway URL with the version and encoding asked for.
fn with_query(url: &str) -> String {
    let base = url.split('?').next().unwrap_or(url).trim_end_matches('/');
    format!("{base}/?v=10&encoding=json")
}

/// A number in [0, 1) (the first heartbeat's share of the interval, as Discord asks).
fn jitter() -> f64 {
    let mut b = [0u8; 2];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    f64::from(u16::from_le_bytes(b)) / 65536.0
}

fn clip(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_say_whether_to_try_again() {
        let frame = |code: u16| CloseFrame { code: CloseCode::from(code), reason: "x".into() };
        assert!(matches!(closed(Some(&frame(4004))), Ended::Fatal(_)));
        assert!(matches!(closed(Some(&frame(4014))), Ended::Fatal(_)));
        assert!(matches!(closed(Some(&frame(4009))), Ended::Again { resume: false, .. }));
        assert!(matches!(closed(Some(&frame(4000))), Ended::Again { resume: true, .. }));
        assert!(matches!(closed(Some(&frame(1001))), Ended::Again { resume: true, .. }));
        assert_eq!(with_query("wss://gateway.discord.gg"), "wss://gateway.discord.gg/?v=10&encoding=json");
        assert_eq!(with_query("wss://x.discord.gg/?v=9"), "wss://x.discord.gg/?v=10&encoding=json");
    }
}
