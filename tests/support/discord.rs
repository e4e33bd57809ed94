//! A Discord stand-in on loopback (no real one runs offline), faithful to the documented behaviour
//! the channel uses. The Gateway (v10, JSON) on its own port: `Hello` with the heartbeat
//! interval; `Identify` (a wrong token is closed with 4004; without the Message Content intent,
//! server messages that do not mention the bot come with empty content) answered with `READY`
//! (`session_id`, `resume_gateway_url`) and a `GUILD_CREATE` per server; heartbeats acknowledged
//! (op 11) unless told not to; every dispatch numbered in its session (`s`) and kept, so a
//! `Resume` with a sequence number replays what came after it, then `RESUMED` (an unknown session
//! gets op 9, not resumable); events dispatched while no connection is open wait in the session.
//! Tests may drop the connection (no close frame), ask for a reconnect (op 7), stop acknowledging
//! heartbeats, and dispatch a message again. The REST API under `/api/v10`: `GET /gateway/bot`,
//! `GET /channels/{id}` (404 code 10003 for an unknown one), `POST /users/@me/channels`, `POST
//! /channels/{id}/typing`, `POST /channels/{id}/messages` (over 2,000 characters: 400 code 50035;
//! each answer has the `X-RateLimit-*` headers of its channel's bucket; a call past the bucket's
//! limit, or one the test throttles, gets 429 with `retry_after` in seconds and `Retry-After`;
//! with files, multipart with `payload_json` and `files[n]` each named in `attachments`, 413
//! code 40005 beyond 10 MiB; the bot's own message is dispatched as a `MESSAGE_CREATE` too, as
//! Discord does), and the
//! attachments users sent (as the CDN would serve them).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::stub_http::{self, Request, Response};

pub const TOKEN: &str = "discord-test-token";
pub const BOT_ID: &str = "9000";
pub const GUILD: &str = "100";
/// A text channel of the server.
pub const GENERAL: &str = "200";
pub const ADA: &str = "301";
pub const BOB: &str = "302";

enum Ctl {
    Frame(String),
    Close(u16),
    Drop,
}

struct Session {
    seq: u64,
    events: Vec<(u64, Value)>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Session>,
    /// The session events go to (the last identified).
    current: Option<String>,
    /// The open connection: its session and its control line.
    live: Option<(u64, String, mpsc::UnboundedSender<Ctl>)>,
    connections: u64,
    channels: HashMap<String, Value>,
    next_id: u64,
    sent: Vec<(Instant, Value)>,
    typing: Vec<String>,
    throttle: Option<f64>,
    /// Calls per bucket window, and the window.
    bucket: Option<(usize, Duration)>,
    calls: HashMap<String, Vec<Instant>>,
    rate_limited: usize,
    identifies: Vec<u64>,
    resumes: Vec<(String, u64)>,
    heartbeats: Vec<Value>,
    urls: Vec<String>,
    heartbeat_interval: u64,
    ack: bool,
    /// The Gateway's URL.
    gateway: String,
    intents: u64,
    /// Attachments by file name.
    files: HashMap<String, Vec<u8>>,
    throttled_at: Vec<Instant>,
    /// Every message by id (to dispatch one again).
    messages: HashMap<String, Value>,
    /// Files the bot sent: the message's channel and content and the attachment as Discord
    /// lists it, and the file's bytes.
    uploads: Vec<(Value, Vec<u8>)>,
}

#[derive(Clone)]
pub struct FakeDiscord {
    /// The REST API's base (`http://127.0.0.1:PORT/api/v10`).
    pub api: String,
    pub gateway: String,
    state: Arc<Mutex<State>>,
}

impl FakeDiscord {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State {
            next_id: 1_000_000,
            heartbeat_interval: 41_250,
            ack: true,
            ..State::default()
        }));
        {
            let mut s = state.lock().unwrap();
            s.channels.insert(GENERAL.into(), json!({"id": GENERAL, "type": 0, "guild_id": GUILD, "name": "general"}));
        }
        let gateway = start_gateway(state.clone());
        state.lock().unwrap().gateway = gateway.clone();
        let s = state.clone();
        let gw = gateway.clone();
        let base = stub_http::serve(Arc::new(move |r: &Request| rest(r, &s, &gw)));
        Self { api: format!("{base}/api/v10"), gateway, state }
    }

    /// The config section for this bot (`more`: further settings).
    pub fn config(&self, more: &str) -> String {
        format!(
            "[channels.discord]\nbot_token = \"{TOKEN}\"\napi_base_url = \"{}\"\nallow_from = [\"{ADA}\"]\n{more}",
            self.api
        )
    }

    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.state.lock().unwrap().heartbeat_interval = ms;
    }

    /// Heartbeats are (not) acknowledged from now on.
    pub fn ack_heartbeats(&self, ack: bool) {
        self.state.lock().unwrap().ack = ack;
    }

    fn id(s: &mut State) -> String {
        s.next_id += 1;
        s.next_id.to_string()
    }

    /// `user`'s direct chat with the bot (opened if need be).
    fn dm_channel(s: &mut State, user: &str) -> String {
        let found = s.channels.values().find(|c| c["type"] == 1 && c["recipients"][0]["id"] == user).cloned();
        if let Some(c) = found {
            return c["id"].as_str().unwrap().to_owned();
        }
        let id = Self::id(s);
        s.channels
            .insert(id.clone(), json!({"id": id, "type": 1, "recipients": [{"id": user, "username": name(user)}]}));
        id
    }

    pub fn dm_channel_of(&self, user: &str) -> String {
        Self::dm_channel(&mut self.state.lock().unwrap(), user)
    }

    /// `user` writes to the bot in a direct message: its id.
    pub fn dm(&self, user: &str, text: &str) -> String {
        self.post(None, user, text, Vec::new(), None)
    }

    /// `user` writes `text` in server channel (or thread) `channel`.
    pub fn say(&self, channel: &str, user: &str, text: &str) -> String {
        self.post(Some(channel), user, text, Vec::new(), None)
    }

    /// `user` replies to message `to` in `channel`.
    pub fn reply(&self, channel: &str, user: &str, to: &str, text: &str) -> String {
        self.post(Some(channel), user, text, Vec::new(), Some(to))
    }

    /// `user` sends a file in a direct message.
    pub fn dm_file(&self, user: &str, file: &str, mime: &str, bytes: &[u8], caption: &str) -> String {
        let url = {
            let mut s = self.state.lock().unwrap();
            s.files.insert(file.to_owned(), bytes.to_vec());
            format!("{}/attachments/{file}", self.api)
        };
        let a = json!({"id": "77", "filename": file, "size": bytes.len(), "url": url, "proxy_url": url, "content_type": mime});
        self.post(None, user, caption, vec![a], None)
    }

    /// `user` sends a direct message with these attachment objects.
    pub fn dm_with(&self, user: &str, text: &str, attachments: Vec<Value>) -> String {
        self.post(None, user, text, attachments, None)
    }

    /// The sequence number of the current session's last dispatch.
    pub fn seq(&self) -> u64 {
        let s = self.state.lock().unwrap();
        s.current.as_ref().map_or(0, |c| s.sessions[c].seq)
    }

    /// When the throttled calls were refused.
    pub fn throttled_at(&self) -> Vec<Instant> {
        self.state.lock().unwrap().throttled_at.clone()
    }

    fn post(
        &self,
        channel: Option<&str>,
        user: &str,
        text: &str,
        attachments: Vec<Value>,
        reply: Option<&str>,
    ) -> String {
        let (id, payload) = {
            let mut s = self.state.lock().unwrap();
            let channel = match channel {
                Some(c) => c.to_owned(),
                None => Self::dm_channel(&mut s, user),
            };
            let id = Self::id(&mut s);
            let mut mentions: Vec<Value> = Vec::new();
            if text.contains(&format!("<@{BOT_ID}>")) {
                mentions.push(json!({"id": BOT_ID, "username": "acp", "bot": true}));
            }
            let referenced = reply.and_then(|r| s.messages.get(r).cloned());
            let mut d = json!({
                "id": id, "channel_id": channel, "type": if reply.is_some() { 19 } else { 0 },
                "author": {"id": user, "username": name(user), "global_name": name(user).to_uppercase()},
                "content": text, "mentions": mentions, "mention_roles": [], "mention_everyone": false,
                "attachments": attachments, "embeds": [], "tts": false, "pinned": false,
                "timestamp": "2026-11-28T12:00:00.000000+00:00",
            });
            if let Some(referenced) = referenced {
                d["message_reference"] = json!({"message_id": referenced["id"], "channel_id": channel});
                d["referenced_message"] = referenced;
            }
            if s.channels.get(&channel).is_some_and(|c| c["guild_id"] == GUILD || c["type"] != 1) {
                d["guild_id"] = json!(GUILD);
                d["member"] = json!({"roles": [], "joined_at": "2026-01-01T00:00:00.000000+00:00"});
            }
            s.messages.insert(id.clone(), d.clone());
            (id, d)
        };
        self.dispatch("MESSAGE_CREATE", payload);
        id
    }

    /// Message `id` dispatched again (a second delivery of the same message).
    pub fn redeliver(&self, id: &str) {
        let d = self.state.lock().unwrap().messages[id].clone();
        self.dispatch("MESSAGE_CREATE", d);
    }

    /// A thread under `parent`: its id (`THREAD_CREATE` dispatched).
    pub fn thread(&self, parent: &str, title: &str) -> String {
        let d = {
            let mut s = self.state.lock().unwrap();
            let id = Self::id(&mut s);
            let d = json!({"id": id, "type": 11, "guild_id": GUILD, "parent_id": parent, "name": title});
            s.channels.insert(id, d.clone());
            d
        };
        let id = d["id"].as_str().unwrap().to_owned();
        self.dispatch("THREAD_CREATE", d);
        id
    }

    /// Dispatches event `t` in the current session (sent now if a connection is open, else kept
    /// for a resume).
    pub fn dispatch(&self, t: &str, d: Value) {
        dispatch(&self.state, t, d);
    }

    /// The open connection ends without a close frame (a network drop).
    pub fn drop_connection(&self) {
        if let Some((_, _, tx)) = self.state.lock().unwrap().live.take() {
            let _ = tx.send(Ctl::Drop);
        }
    }

    /// The server asks the bot to reconnect (op 7).
    pub fn ask_reconnect(&self) {
        if let Some((_, _, tx)) = &self.state.lock().unwrap().live {
            let _ = tx.send(Ctl::Frame(json!({"op": 7, "d": null}).to_string()));
        }
    }

    /// The server closes the connection with `code`.
    pub fn close(&self, code: u16) {
        if let Some((_, _, tx)) = self.state.lock().unwrap().live.take() {
            let _ = tx.send(Ctl::Close(code));
        }
    }

    /// Sessions are forgotten (a resume gets op 9, not resumable).
    pub fn forget_sessions(&self) {
        self.state.lock().unwrap().sessions.clear();
    }

    pub fn throttle_next(&self, retry_after: f64) {
        self.state.lock().unwrap().throttle = Some(retry_after);
    }

    /// Each channel's messages are limited to `limit` per `window`.
    pub fn set_bucket(&self, limit: usize, window: Duration) {
        self.state.lock().unwrap().bucket = Some((limit, window));
    }

    /// Calls refused for going past the bucket's limit.
    pub fn rate_limited(&self) -> usize {
        self.state.lock().unwrap().rate_limited
    }

    pub fn identifies(&self) -> usize {
        self.state.lock().unwrap().identifies.len()
    }

    pub fn intents(&self) -> u64 {
        self.state.lock().unwrap().intents
    }

    /// Resumes asked for: (session, sequence number).
    pub fn resumes(&self) -> Vec<(String, u64)> {
        self.state.lock().unwrap().resumes.clone()
    }

    pub fn heartbeats(&self) -> Vec<Value> {
        self.state.lock().unwrap().heartbeats.clone()
    }

    /// The URLs the bot opened the Gateway at.
    pub fn urls(&self) -> Vec<String> {
        self.state.lock().unwrap().urls.clone()
    }

    /// Whether a connection is open and identified or resumed.
    pub fn connected(&self) -> bool {
        self.state.lock().unwrap().live.is_some()
    }

    pub fn wait_connected(&self) {
        wait(|| self.connected().then_some(()), "the bot to connect to the Gateway");
    }

    /// Messages the bot sent: (channel, body), in order.
    pub fn sent(&self) -> Vec<Value> {
        self.state.lock().unwrap().sent.iter().map(|(_, v)| v.clone()).collect()
    }

    pub fn sent_timed(&self) -> Vec<(Instant, Value)> {
        self.state.lock().unwrap().sent.clone()
    }

    pub fn typing(&self) -> Vec<String> {
        self.state.lock().unwrap().typing.clone()
    }

    /// The texts the bot sent to `channel`.
    pub fn texts(&self, channel: &str) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|m| m["channel_id"] == channel)
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until the bot has sent `n` files to `channel`: each with its message's content
    /// and attachment, and the file's bytes.
    pub fn wait_files(&self, channel: &str, n: usize) -> Vec<(Value, Vec<u8>)> {
        wait(
            || {
                let files: Vec<(Value, Vec<u8>)> = self
                    .state
                    .lock()
                    .unwrap()
                    .uploads
                    .iter()
                    .filter(|(m, _)| m["channel_id"] == channel)
                    .cloned()
                    .collect();
                (files.len() >= n).then_some(files)
            },
            &format!("{n} files in channel {channel}"),
        )
    }

    /// Waits until the bot has sent `n` messages to `channel`; their texts.
    pub fn wait_texts(&self, channel: &str, n: usize) -> Vec<String> {
        wait(
            || {
                let texts = self.texts(channel);
                (texts.len() >= n).then_some(texts)
            },
            &format!("{n} messages in channel {channel} (sent: {:?})", self.sent()),
        )
    }
}

fn name(user: &str) -> &'static str {
    match user {
        ADA => "ada",
        BOB => "bob",
        _ => "someone",
    }
}

/// Waits up to 30 s for `f` to give something.
pub fn wait<T>(mut f: impl FnMut() -> Option<T>, what: &str) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "waited in vain for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn dispatch(state: &Mutex<State>, t: &str, d: Value) {
    let mut s = state.lock().unwrap();
    let Some(current) = s.current.clone() else { return };
    // Without the Message Content intent, server messages not mentioning the bot come empty.
    let mut d = d;
    if t == "MESSAGE_CREATE"
        && s.intents & (1 << 15) == 0
        && d["guild_id"].is_string()
        && !d["mentions"].as_array().is_some_and(|m| m.iter().any(|u| u["id"] == BOT_ID))
    {
        d["content"] = json!("");
    }
    let session = s.sessions.get_mut(&current).unwrap();
    session.seq += 1;
    let payload = json!({"op": 0, "t": t, "s": session.seq, "d": d});
    session.events.push((session.seq, payload.clone()));
    if let Some((_, live, tx)) = &s.live
        && *live == current
    {
        let _ = tx.send(Ctl::Frame(payload.to_string()));
    }
}

fn start_gateway(state: Arc<Mutex<State>>) -> String {
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
    let url = Arc::new(Mutex::new(String::new()));
    let seen = url.clone();
    let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                         res: tokio_tungstenite::tungstenite::handshake::server::Response| {
        let host = req.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or_default();
        *seen.lock().unwrap() = format!("{host}{}", req.uri());
        Ok(res)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(socket, callback).await else { return };
    let (number, interval) = {
        let mut s = state.lock().unwrap();
        s.urls.push(url.lock().unwrap().clone());
        s.connections += 1;
        (s.connections, s.heartbeat_interval)
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}});
    if ws.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    loop {
        tokio::select! {
            ctl = rx.recv() => match ctl {
                Some(Ctl::Frame(text)) => {
                    if ws.send(Message::text(text)).await.is_err() {
                        break;
                    }
                }
                Some(Ctl::Close(code)) => {
                    let _ = ws.close(Some(CloseFrame { code: code.into(), reason: "closed by the test".into() })).await;
                    break;
                }
                Some(Ctl::Drop) | None => break,
            },
            frame = ws.next() => {
                let Some(Ok(Message::Text(text))) = frame else {
                    match frame {
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                        _ => break,
                    }
                };
                let frame: Value = serde_json::from_str(&text).unwrap_or_default();
                match frame["op"].as_u64() {
                    Some(1) => {
                        let ack = {
                            let mut s = state.lock().unwrap();
                            s.heartbeats.push(frame["d"].clone());
                            s.ack
                        };
                        if ack && ws.send(Message::text(json!({"op": 11}).to_string())).await.is_err() {
                            break;
                        }
                    }
                    Some(2) => {
                        if frame["d"]["token"] != TOKEN {
                            let close = CloseFrame { code: 4004.into(), reason: "Authentication failed.".into() };
                            let _ = ws.close(Some(close)).await;
                            break;
                        }
                        let session = format!("session-{number}");
                        {
                            let mut s = state.lock().unwrap();
                            s.identifies.push(number);
                            s.intents = frame["d"]["intents"].as_u64().unwrap_or(0);
                            s.sessions.insert(session.clone(), Session { seq: 0, events: Vec::new() });
                            s.current = Some(session.clone());
                            s.live = Some((number, session.clone(), tx.clone()));
                        }
                        // Resumes go elsewhere, as Discord's do: here the same port by another name.
                        let resume_url = state.lock().unwrap().gateway.replace("127.0.0.1", "localhost");
                        dispatch(&state, "READY", json!({
                            "v": 10, "session_id": session, "resume_gateway_url": resume_url,
                            "user": {"id": BOT_ID, "username": "acp", "bot": true},
                            "guilds": [{"id": GUILD, "unavailable": true}], "application": {"id": BOT_ID},
                        }));
                        let (channels, threads): (Vec<Value>, Vec<Value>) = {
                            let s = state.lock().unwrap();
                            s.channels.values().filter(|c| c["guild_id"] == GUILD).cloned().partition(|c| c["type"] != 11)
                        };
                        dispatch(&state, "GUILD_CREATE", json!({"id": GUILD, "name": "Test server", "channels": channels, "threads": threads}));
                    }
                    Some(6) => {
                        let session = frame["d"]["session_id"].as_str().unwrap_or_default().to_owned();
                        let seq = frame["d"]["seq"].as_u64().unwrap_or(0);
                        let replay = {
                            let mut s = state.lock().unwrap();
                            s.resumes.push((session.clone(), seq));
                            let ok = frame["d"]["token"] == TOKEN && s.sessions.get(&session).is_some_and(|x| seq <= x.seq);
                            if ok {
                                s.live = Some((number, session.clone(), tx.clone()));
                                s.current = Some(session.clone());
                                let events = s.sessions[&session].events.iter().filter(|(n, e)| *n > seq && e["t"] != "RESUMED");
                                Some(events.map(|(_, e)| e.to_string()).collect::<Vec<_>>())
                            } else {
                                None
                            }
                        };
                        match replay {
                            Some(events) => {
                                for e in events {
                                    if ws.send(Message::text(e)).await.is_err() {
                                        break;
                                    }
                                }
                                dispatch(&state, "RESUMED", json!(null));
                            }
                            None => {
                                if ws.send(Message::text(json!({"op": 9, "d": false}).to_string())).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let mut s = state.lock().unwrap();
    if s.live.as_ref().is_some_and(|(n, _, _)| *n == number) {
        s.live = None;
    }
}

fn rest(r: &Request, state: &Arc<Mutex<State>>, gateway: &str) -> Response {
    let path = r.path.split('?').next().unwrap_or_default();
    if let Some(file) = path.strip_prefix("/api/v10/attachments/") {
        let bytes = state.lock().unwrap().files.get(file).cloned();
        return match bytes {
            Some(b) => Response {
                status: 200,
                headers: vec![("content-type".into(), "application/octet-stream".into())],
                body: b,
            },
            None => Response::json(404, &json!({"message": "404: Not Found", "code": 0})),
        };
    }
    if r.headers.get("authorization").map(String::as_str) != Some(&format!("Bot {TOKEN}")) {
        return Response::json(401, &json!({"message": "401: Unauthorized", "code": 0}));
    }
    let Some(route) = path.strip_prefix("/api/v10") else {
        return Response::json(404, &json!({"message": "404: Not Found", "code": 0}));
    };
    let parts: Vec<&str> = route.trim_matches('/').split('/').collect();
    let mut s = state.lock().unwrap();
    match (r.method.as_str(), parts.as_slice()) {
        ("GET", ["gateway", "bot"]) => Response::json(
            200,
            &json!({
                "url": gateway, "shards": 1,
                "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1},
            }),
        ),
        ("GET", ["channels", id]) => match s.channels.get(*id) {
            Some(c) => Response::json(200, c),
            None => Response::json(404, &json!({"message": "Unknown Channel", "code": 10003})),
        },
        ("POST", ["users", "@me", "channels"]) => {
            let user = r.json()["recipient_id"].as_str().unwrap_or_default().to_owned();
            let id = FakeDiscord::dm_channel(&mut s, &user);
            Response::json(200, &s.channels[&id])
        }
        ("POST", ["channels", id, "typing"]) => {
            s.typing.push((*id).to_owned());
            Response { status: 204, headers: Vec::new(), body: Vec::new() }
        }
        ("POST", ["channels", id, "messages"]) => {
            let id = (*id).to_owned();
            if !s.channels.contains_key(&id) {
                return Response::json(404, &json!({"message": "Unknown Channel", "code": 10003}));
            }
            // With files: multipart, the message as `payload_json`, each file as `files[n]`,
            // named by an entry of its `attachments` (at most 10 MiB in all, else 413).
            let (body, files) = match r.parts() {
                Some(parts) => {
                    let Some(payload) = parts.iter().find(|p| p.name == "payload_json") else {
                        return Response::json(400, &json!({"message": "Cannot send an empty message", "code": 50006}));
                    };
                    let body: Value = serde_json::from_slice(&payload.body).unwrap_or_default();
                    let files: Vec<stub_http::Part> =
                        parts.into_iter().filter(|p| p.name.starts_with("files[")).collect();
                    (body, files)
                }
                None => (r.json(), Vec::new()),
            };
            if files.iter().map(|f| f.body.len()).sum::<usize>() > 10 << 20 {
                return Response::json(413, &json!({"message": "Request entity too large", "code": 40005}));
            }
            let mut attachments = Vec::new();
            for file in &files {
                let n = file.name.trim_start_matches("files[").trim_end_matches(']');
                let listed = body["attachments"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| a["id"].as_u64().map(|id| id.to_string()).as_deref() == Some(n) || a["id"] == n);
                let Some(listed) = listed else {
                    return Response::json(400, &json!({"message": "Invalid Form Body", "code": 50035}));
                };
                let name = listed["filename"].as_str().or(file.filename.as_deref()).unwrap_or("file").to_owned();
                attachments.push(json!({"id": FakeDiscord::id(&mut s), "filename": name, "size": file.body.len(),
                    "content_type": file.content_type, "url": format!("https://cdn.discordapp.com/attachments/{id}/{n}/{name}")}));
            }
            if files.is_empty() && body["content"].as_str().unwrap_or_default().is_empty() {
                return Response::json(400, &json!({"message": "Cannot send an empty message", "code": 50006}));
            }
            let bucket = format!("bucket-{id}");
            if let Some(after) = s.throttle.take() {
                s.throttled_at.push(Instant::now());
                return Response::json(
                    429,
                    &json!({"message": "You are being rate limited.", "retry_after": after, "global": false}),
                )
                .header("Retry-After", after.ceil())
                .header("X-RateLimit-Scope", "user");
            }
            let (limit, window) = s.bucket.unwrap_or((1000, Duration::from_secs(1)));
            let now = Instant::now();
            let calls = s.calls.entry(id.clone()).or_default();
            calls.retain(|t| now.duration_since(*t) < window);
            let reset_after = calls.first().map_or(window, |t| window.saturating_sub(now.duration_since(*t)));
            if calls.len() >= limit {
                s.rate_limited += 1;
                let after = reset_after.as_secs_f64();
                return Response::json(
                    429,
                    &json!({"message": "You are being rate limited.", "retry_after": after, "global": false}),
                )
                .header("Retry-After", after.ceil())
                .header("X-RateLimit-Limit", limit)
                .header("X-RateLimit-Remaining", 0)
                .header("X-RateLimit-Reset-After", format!("{after:.3}"))
                .header("X-RateLimit-Bucket", &bucket);
            }
            calls.push(now);
            let remaining = limit - calls.len();
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            if content.chars().count() > 2000 {
                return Response::json(
                    400,
                    &json!({"message": "Invalid Form Body", "code": 50035,
                    "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}),
                );
            }
            let message_id = FakeDiscord::id(&mut s);
            let mut message = json!({
                "id": message_id, "channel_id": id, "type": 0, "content": content,
                "author": {"id": BOT_ID, "username": "acp", "bot": true},
                "mentions": [], "attachments": attachments, "embeds": [],
                "allowed_mentions": body["allowed_mentions"],
            });
            s.sent.push((now, message.clone()));
            for (file, attachment) in files.iter().zip(&attachments) {
                s.uploads
                    .push((json!({"channel_id": id, "content": content, "attachment": attachment}), file.body.clone()));
            }
            if let Some(c) = s.channels.get(&id)
                && c["guild_id"] == GUILD
            {
                message["guild_id"] = json!(GUILD);
            }
            message.as_object_mut().unwrap().remove("allowed_mentions");
            s.messages.insert(message_id, message.clone());
            drop(s);
            // Discord tells the bot of its own message too.
            dispatch(state, "MESSAGE_CREATE", message.clone());
            Response::json(200, &message)
                .header("X-RateLimit-Limit", limit)
                .header("X-RateLimit-Remaining", remaining)
                .header("X-RateLimit-Reset-After", format!("{:.3}", reset_after.as_secs_f64()))
                .header("X-RateLimit-Bucket", bucket)
        }
        _ => Response::json(404, &json!({"message": "404: Not Found", "code": 0})),
    }
}
