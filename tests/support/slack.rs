//! A Slack stand-in on loopback (no real one runs offline), faithful to the documented behaviour
//! the channel uses. Web API (`POST /api/<method>`, answered HTTP 200 with `ok`, or `ok: false`
//! and an `error`): `apps.connections.open` (app-level token only; a one-use `wss` ticket URL,
//! here `ws`), `auth.test` (bot token), `chat.postMessage` (`channel_not_found` for an unknown
//! channel; a user id posts to the app's direct chat with them; `msg_too_long` past 40,000
//! characters; one the test throttles gets HTTP 429 with `Retry-After`; the bot's own message is
//! sent back as a `message` event with its `bot_id`, as Slack does), `conversations.open`, and
//! file uploads as Slack has them since 2024: `files.getUploadURLExternal` (a form body only)
//! (`filename`, `length`) gives an upload URL and a file id, the bytes are posted there, and
//! `files.completeUploadExternal` shares the uploaded files (`file_not_found` for one not
//! uploaded, a size that differs from `length` refused) in a channel or direct chat, in a thread
//! if given, with `initial_comment`. Socket Mode: a connection
//! with an unused ticket gets `hello`; events come as `events_api` envelopes; an envelope not
//! acknowledged within the ack window is sent again with `retry_attempt` + 1 and `retry_reason`
//! `timeout` (three retries at most), on whatever connection is open; envelopes wait while none
//! is. Tests may drop the connection, send `disconnect` (`refresh_requested`, `warning`,
//! `link_disabled`), and send an envelope again.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::stub_http::{self, Request, Response};

pub const BOT_TOKEN: &str = "xoxb-test-bot-token";
pub const APP_TOKEN: &str = "xapp-test-app-token";
pub const BOT_USER: &str = "UBOT0001";
pub const TEAM: &str = "T0TEST01";
pub const GENERAL: &str = "C0GENERAL";
pub const ADA: &str = "U0ADA0001";
pub const BOB: &str = "U0BOB0001";

struct Pending {
    id: String,
    payload: Value,
    attempt: u64,
    sent_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    tickets: HashMap<String, bool>,
    live: Option<(u64, mpsc::UnboundedSender<Option<String>>)>,
    connections: u64,
    /// Envelopes not acknowledged yet, oldest first.
    pending: Vec<Pending>,
    acks: Vec<String>,
    next: u64,
    sent: Vec<(Instant, Value)>,
    throttle: Option<u64>,
    ack_window: Duration,
    opened: usize,
    /// Every envelope sent: (envelope id, retry attempt).
    deliveries: Vec<(String, u64)>,
    /// When throttled calls were refused.
    throttled_at: Vec<Instant>,
    /// Every envelope's payload, by id.
    payloads: HashMap<String, Value>,
    /// Files asked an upload URL for, by id: name, length, the bytes once uploaded.
    files: HashMap<String, (String, usize, Option<Vec<u8>>)>,
    /// Files shared in a chat: where, the comment, the name and title; the bytes.
    uploads: Vec<(Value, Vec<u8>)>,
}

#[derive(Clone)]
pub struct FakeSlack {
    pub api: String,
    socket: String,
    state: Arc<Mutex<State>>,
}

impl FakeSlack {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State { next: 1, ack_window: Duration::from_secs(3), ..State::default() }));
        let socket = start_socket(state.clone());
        let (s, sock) = (state.clone(), socket.clone());
        let base = stub_http::serve(Arc::new(move |r: &Request| web_api(r, &s, &sock)));
        let fake = Self { api: format!("{base}/api"), socket, state: state.clone() };
        let pump = state;
        // Unacknowledged envelopes are sent again once their window passes.
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(20));
                resend(&pump);
            }
        });
        fake
    }

    pub fn config(&self, more: &str) -> String {
        format!(
            "[channels.slack]\nbot_token = \"{BOT_TOKEN}\"\napp_token = \"{APP_TOKEN}\"\napi_base_url = \"{}\"\nallow_from = [\"{ADA}\"]\n{more}",
            self.api
        )
    }

    pub fn set_ack_window(&self, window: Duration) {
        self.state.lock().unwrap().ack_window = window;
    }

    /// `user`'s direct chat with the app.
    pub fn dm_channel(user: &str) -> String {
        format!("D{}", &user[1..])
    }

    /// `user` writes to the app in a direct message: the message's ts.
    pub fn dm(&self, user: &str, text: &str) -> String {
        self.message(&Self::dm_channel(user), "im", user, text, None)
    }

    /// `user` writes in channel `channel` (in thread `thread` if given): the message's ts.
    pub fn say(&self, channel: &str, user: &str, text: &str, thread: Option<&str>) -> String {
        self.message(channel, "channel", user, text, thread)
    }

    fn message(&self, channel: &str, channel_type: &str, user: &str, text: &str, thread: Option<&str>) -> String {
        let ts = {
            let mut s = self.state.lock().unwrap();
            s.next += 1;
            format!("1764331200.{:06}", s.next)
        };
        let escaped = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        // Slack keeps mentions as `<@U…>`.
        let escaped = escaped.replace(&format!("&lt;@{BOT_USER}&gt;"), &format!("<@{BOT_USER}>"));
        let mut event = json!({
            "type": "message", "channel": channel, "user": user, "text": escaped, "ts": ts,
            "event_ts": ts, "channel_type": channel_type, "team": TEAM,
            "user_profile": {"display_name": if user == ADA { "ada" } else { "bob" }, "real_name": "Someone"},
        });
        if let Some(thread) = thread {
            event["thread_ts"] = json!(thread);
        }
        self.event(event.clone());
        if channel_type == "channel" && text.contains(&format!("<@{BOT_USER}>")) {
            // Apps subscribed to both get an app_mention for the same message too.
            let mut mention = event;
            mention["type"] = json!("app_mention");
            mention.as_object_mut().unwrap().remove("channel_type");
            self.event(mention);
        }
        ts
    }

    /// An `events_api` envelope with `event`: its envelope id.
    pub fn event(&self, event: Value) -> String {
        enqueue(&self.state, event)
    }

    /// Envelope `id` sent again (as Slack does when it saw no acknowledgement), even though it
    /// was acknowledged.
    pub fn resend_envelope(&self, id: &str) {
        let mut s = self.state.lock().unwrap();
        let payload = s.payloads[id].clone();
        let attempt = s.deliveries.iter().filter(|(e, _)| e == id).count() as u64;
        s.pending.push(Pending { id: id.to_owned(), payload, attempt, sent_at: None });
    }

    /// The envelope that carried message `ts` (its `message` event).
    pub fn envelope_of(&self, ts: &str) -> String {
        let s = self.state.lock().unwrap();
        s.payloads
            .iter()
            .find(|(_, p)| p["event"]["ts"] == ts && p["event"]["type"] == "message")
            .map(|(id, _)| id.clone())
            .unwrap()
    }

    /// The ts of the person's message that said `text`.
    pub fn ts_of(&self, text: &str) -> String {
        let s = self.state.lock().unwrap();
        let found = s.payloads.values().find(|p| p["event"]["text"] == text && p["event"]["bot_id"].is_null());
        found.map(|p| p["event"]["ts"].as_str().unwrap().to_owned()).unwrap()
    }

    /// The open connection ends without a close frame.
    pub fn drop_connection(&self) {
        if let Some((_, tx)) = self.state.lock().unwrap().live.take() {
            let _ = tx.send(None);
        }
    }

    /// Slack sends `disconnect` with `reason` (and, unless it is a warning, closes soon after).
    pub fn disconnect(&self, reason: &str) {
        if let Some((_, tx)) = &self.state.lock().unwrap().live {
            let _ = tx.send(Some(
                json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "stand-in"}}).to_string(),
            ));
        }
    }

    pub fn throttle_next(&self, retry_after: u64) {
        self.state.lock().unwrap().throttle = Some(retry_after);
    }

    pub fn throttled_at(&self) -> Vec<Instant> {
        self.state.lock().unwrap().throttled_at.clone()
    }

    pub fn connected(&self) -> bool {
        self.state.lock().unwrap().live.is_some()
    }

    /// Connections opened (`apps.connections.open` calls).
    pub fn opened(&self) -> usize {
        self.state.lock().unwrap().opened
    }

    pub fn acks(&self) -> Vec<String> {
        self.state.lock().unwrap().acks.clone()
    }

    /// Every envelope sent: (envelope id, retry attempt).
    pub fn deliveries(&self) -> Vec<(String, u64)> {
        self.state.lock().unwrap().deliveries.clone()
    }

    /// Envelopes not acknowledged yet.
    pub fn unacked(&self) -> usize {
        self.state.lock().unwrap().pending.len()
    }

    pub fn sent(&self) -> Vec<Value> {
        self.state.lock().unwrap().sent.iter().map(|(_, v)| v.clone()).collect()
    }

    pub fn sent_timed(&self) -> Vec<(Instant, Value)> {
        self.state.lock().unwrap().sent.clone()
    }

    /// The texts the app sent to `channel` (a direct chat: its `D…` id).
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|m| m["channel"] == channel)
            .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until `n` files were shared in `channel`: each with where and how, and its bytes.
    pub fn wait_files(&self, channel: &str, n: usize) -> Vec<(Value, Vec<u8>)> {
        super::discord::wait(
            || {
                let files: Vec<(Value, Vec<u8>)> = self
                    .state
                    .lock()
                    .unwrap()
                    .uploads
                    .iter()
                    .filter(|(m, _)| m["channel"] == channel)
                    .cloned()
                    .collect();
                (files.len() >= n).then_some(files)
            },
            &format!("{n} files in {channel}"),
        )
    }

    pub fn wait_texts(&self, channel: &str, n: usize) -> Vec<String> {
        super::discord::wait(
            || {
                let texts = self.texts(channel);
                (texts.len() >= n).then_some(texts)
            },
            &format!("{n} messages in {channel} (sent: {:?})", self.sent()),
        )
    }
}

fn enqueue(state: &Mutex<State>, event: Value) -> String {
    let mut s = state.lock().unwrap();
    s.next += 1;
    let id = format!("env-{}", s.next);
    let payload = json!({
        "token": "verification-token", "team_id": TEAM, "api_app_id": "A0APP0001", "event": event,
        "type": "event_callback", "event_id": format!("Ev{}", s.next), "event_time": 1_764_331_200,
        "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": true}],
    });
    s.payloads.insert(id.clone(), payload.clone());
    s.pending.push(Pending { id: id.clone(), payload, attempt: 0, sent_at: None });
    drop(s);
    resend(state);
    id
}

/// Sends what waits: envelopes never sent, and those unacknowledged past the window (again,
/// with the next `retry_attempt`; after three retries Slack gives up on one).
fn resend(state: &Mutex<State>) {
    let mut s = state.lock().unwrap();
    let Some((_, tx)) = s.live.clone() else { return };
    let window = s.ack_window;
    let now = Instant::now();
    let mut frames = Vec::new();
    let mut deliveries = Vec::new();
    s.pending.retain_mut(|p| {
        match p.sent_at {
            None => {}
            Some(at) if now.duration_since(at) >= window => {
                if p.attempt >= 3 {
                    return false;
                }
                p.attempt += 1;
            }
            Some(_) => return true,
        }
        p.sent_at = Some(now);
        let mut frame = json!({"envelope_id": p.id, "payload": p.payload, "type": "events_api",
            "accepts_response_payload": false, "retry_attempt": p.attempt, "retry_reason": ""});
        if p.attempt > 0 {
            frame["retry_reason"] = json!("timeout");
        }
        frames.push(frame.to_string());
        deliveries.push((p.id.clone(), p.attempt));
        true
    });
    s.deliveries.extend(deliveries);
    for frame in frames {
        let _ = tx.send(Some(frame));
    }
}

fn start_socket(state: Arc<Mutex<State>>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let _ = socket.set_nodelay(true);
                tokio::spawn(connection(socket, state.clone()));
            }
        });
    });
    format!("ws://{}", rx.recv().unwrap())
}

#[allow(clippy::result_large_err)]
async fn connection(socket: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let path = Arc::new(Mutex::new(String::new()));
    let seen = path.clone();
    let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                         res: tokio_tungstenite::tungstenite::handshake::server::Response| {
        *seen.lock().unwrap() = req.uri().to_string();
        Ok(res)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(socket, callback).await else { return };
    let ticket = path
        .lock()
        .unwrap()
        .split("ticket=")
        .nth(1)
        .unwrap_or_default()
        .split('&')
        .next()
        .unwrap_or_default()
        .to_owned();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let number = {
        let mut s = state.lock().unwrap();
        // A ticket is good for one connection.
        if s.tickets.get(&ticket) != Some(&false) {
            None
        } else {
            s.tickets.insert(ticket, true);
            s.connections += 1;
            let number = s.connections;
            // Envelopes sent on a connection that went away are sent again on this one.
            for p in &mut s.pending {
                if p.sent_at.is_some() {
                    p.sent_at = Some(Instant::now() - Duration::from_secs(3600));
                }
            }
            s.live = Some((number, tx));
            Some(number)
        }
    };
    let Some(number) = number else {
        let _ = ws.close(None).await;
        return;
    };
    let hello = json!({"type": "hello", "num_connections": 1, "debug_info": {"host": "stand-in", "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A0APP0001"}});
    if ws.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    resend(&state);
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Some(text)) => {
                    if ws.send(Message::text(text)).await.is_err() {
                        break;
                    }
                }
                _ => break,
            },
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let ack: Value = serde_json::from_str(&text).unwrap_or_default();
                    if let Some(id) = ack["envelope_id"].as_str() {
                        let mut s = state.lock().unwrap();
                        s.acks.push(id.to_owned());
                        s.pending.retain(|p| p.id != id);
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break,
            },
        }
    }
    let mut s = state.lock().unwrap();
    if s.live.as_ref().is_some_and(|(n, _)| *n == number) {
        s.live = None;
    }
}

fn web_api(r: &Request, state: &Arc<Mutex<State>>, socket: &str) -> Response {
    let path = r.path.split('?').next().unwrap_or_default();
    let token = r.headers.get("authorization").and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default();
    let refuse = |error: &str| Response::json(200, &json!({"ok": false, "error": error}));
    let mut s = state.lock().unwrap();
    match path {
        "/api/apps.connections.open" => {
            if token != APP_TOKEN {
                return refuse(if token == BOT_TOKEN { "not_allowed_token_type" } else { "invalid_auth" });
            }
            s.next += 1;
            let ticket = format!("ticket-{}", s.next);
            s.tickets.insert(ticket.clone(), false);
            s.opened += 1;
            Response::json(200, &json!({"ok": true, "url": format!("{socket}/link/?ticket={ticket}&app_id=A0APP0001")}))
        }
        "/api/auth.test" => {
            if token != BOT_TOKEN {
                return refuse("invalid_auth");
            }
            Response::json(
                200,
                &json!({"ok": true, "url": "https://test.slack.com/", "team": "Test", "user": "acp",
                "team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT0001", "is_enterprise_install": false}),
            )
        }
        "/api/chat.postMessage" => {
            if token != BOT_TOKEN {
                return refuse("invalid_auth");
            }
            if let Some(after) = s.throttle.take() {
                s.throttled_at.push(Instant::now());
                return Response::json(429, &json!({"ok": false, "error": "ratelimited"})).header("Retry-After", after);
            }
            let body = r.json();
            let mut channel = body["channel"].as_str().unwrap_or_default().to_owned();
            if channel.starts_with('U') {
                channel = FakeSlack::dm_channel(&channel);
            }
            if !(channel == GENERAL || channel.starts_with('D')) {
                return refuse("channel_not_found");
            }
            let text = body["text"].as_str().unwrap_or_default().to_owned();
            if text.is_empty() {
                return refuse("no_text");
            }
            if text.chars().count() > 40_000 {
                return refuse("msg_too_long");
            }
            s.next += 1;
            let ts = format!("1764331200.{:06}", s.next);
            let mut record = json!({"channel": channel, "text": text, "ts": ts});
            if let Some(thread) = body["thread_ts"].as_str() {
                record["thread_ts"] = json!(thread);
            }
            s.sent.push((Instant::now(), record));
            drop(s);
            // Slack tells the app of its own message too.
            let mut event = json!({"type": "message", "channel": channel, "user": BOT_USER, "bot_id": "B0BOT0001",
                "text": text, "ts": ts, "channel_type": if channel.starts_with('D') { "im" } else { "channel" }});
            if let Some(thread) = body["thread_ts"].as_str() {
                event["thread_ts"] = json!(thread);
            }
            enqueue(state, event);
            Response::json(200, &json!({"ok": true, "channel": channel, "ts": ts, "message": {"text": text}}))
        }
        "/api/conversations.open" => {
            if token != BOT_TOKEN {
                return refuse("invalid_auth");
            }
            match r.field("users") {
                Some(user) if user.starts_with('U') && !user.contains(',') => {
                    Response::json(200, &json!({"ok": true, "channel": {"id": FakeSlack::dm_channel(&user)}}))
                }
                _ => refuse("user_not_found"),
            }
        }
        // Asking for an upload URL takes a form body only.
        "/api/files.getUploadURLExternal"
            if !r.headers.get("content-type").is_some_and(|t| t.starts_with("application/x-www-form-urlencoded")) =>
        {
            refuse("invalid_arguments")
        }
        "/api/files.getUploadURLExternal" => {
            if token != BOT_TOKEN {
                return refuse("invalid_auth");
            }
            let (Some(filename), Some(length)) = (r.field("filename"), r.field("length")) else {
                return refuse("invalid_arguments");
            };
            let Some(length) = length.parse::<usize>().ok().filter(|n| *n > 0) else { return refuse("invalid_length") };
            s.next += 1;
            let id = format!("F0FILE{:04}", s.next);
            let host = r.headers.get("host").cloned().unwrap_or_default();
            s.files.insert(id.clone(), (filename, length, None));
            Response::json(
                200,
                &json!({"ok": true, "upload_url": format!("http://{host}/upload/v1/{id}"), "file_id": id}),
            )
        }
        _ if path.starts_with("/upload/v1/") => {
            let id = path.trim_start_matches("/upload/v1/");
            let bytes = match r.parts() {
                Some(parts) => parts.into_iter().find(|p| p.name == "file").map(|p| p.body).unwrap_or_default(),
                None => r.body.clone(),
            };
            match s.files.get_mut(id) {
                Some(file) => {
                    let n = bytes.len();
                    file.2 = Some(bytes);
                    Response {
                        status: 200,
                        headers: vec![("content-type".into(), "text/plain".into())],
                        body: format!("OK - {n}").into_bytes(),
                    }
                }
                None => Response { status: 404, headers: Vec::new(), body: b"not found".to_vec() },
            }
        }
        "/api/files.completeUploadExternal" => {
            if token != BOT_TOKEN {
                return refuse("invalid_auth");
            }
            let listed: Value = r.field("files").and_then(|f| serde_json::from_str(&f).ok()).unwrap_or_default();
            let Some(listed) = listed.as_array().filter(|l| !l.is_empty()) else { return refuse("invalid_arguments") };
            let channel = r.field("channel_id").unwrap_or_default();
            if !(channel == GENERAL || channel.starts_with('D')) {
                return refuse("channel_not_found");
            }
            let mut shared = Vec::new();
            for entry in listed {
                let id = entry["id"].as_str().unwrap_or_default();
                let Some((filename, length, Some(bytes))) = s.files.get(id).cloned() else {
                    return refuse("file_not_found");
                };
                if bytes.len() != length {
                    return refuse("file_upload_size_mismatch");
                }
                let record = json!({"channel": channel, "thread_ts": r.field("thread_ts"), "initial_comment": r.field("initial_comment"),
                    "id": id, "title": entry["title"], "name": filename});
                shared.push((record, bytes));
            }
            let files: Vec<Value> = shared.iter().map(|(r, _)| json!({"id": r["id"], "title": r["title"]})).collect();
            s.uploads.extend(shared);
            Response::json(200, &json!({"ok": true, "files": files}))
        }
        _ => refuse("unknown_method"),
    }
}
