//! A Telegram Bot API stand-in on loopback (no real one runs offline), faithful to the documented
//! behaviour of the methods the channel uses: `getMe`; `getUpdates` long-polling (held until an
//! update arrives or `timeout` passes; updates below `offset` are confirmed and dropped; a newer
//! call ends one still waiting with 409 "terminated by other getUpdates request");
//! `sendMessage` (recorded; HTML that does not parse is refused with 400 "can't parse
//! entities"); `sendPhoto` and `sendDocument` as multipart uploads (413 beyond 50 MB, a caption
//! of at most 1,024 characters, recorded with the file's bytes); `sendChatAction`; `getChat` (the type of a chat the bot is in, else 400 "chat not
//! found"); `setWebhook`/`deleteWebhook` (while a webhook is set,
//! `getUpdates` is refused with 409 and updates are POSTed to it, in order, with the secret in
//! `X-Telegram-Bot-Api-Secret-Token`, each retried until it is answered 2xx). Tests push messages as users would send them, may make the next
//! call answer 429 with `retry_after`, and read what the bot sent.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub const BOT: &str = "acp_test_bot";

#[derive(Default)]
struct State {
    updates: VecDeque<Value>,
    next_update: i64,
    next_message: i64,
    sent: Vec<Value>,
    /// When each was sent.
    sent_at: Vec<Instant>,
    /// Answer the next call of this method with 429 and this `retry_after`.
    throttle: Option<(String, u64)>,
    /// `getUpdates` offsets asked for, in order.
    offsets: Vec<i64>,
    /// `setWebhook`'s url and secret.
    webhook: Option<(String, String)>,
    /// Webhook deliveries: (update id, HTTP status answered).
    deliveries: Vec<(i64, u16)>,
    /// Files users sent, by file id: (file path, bytes).
    files: std::collections::HashMap<String, (String, Vec<u8>)>,
    /// Files the bot sent (`sendPhoto`, `sendDocument`): the call's fields with `method`,
    /// `file_name` and `mime_type`, and the file's bytes.
    uploads: Vec<(Value, Vec<u8>)>,
    /// Chats the bot is in, by id: their type (`getChat`).
    chats: std::collections::HashMap<String, String>,
    /// `getUpdates` calls so far: a newer one ends the one waiting (409).
    polls: u64,
    /// `getUpdates` calls ended by a newer one.
    conflicts: u64,
}

#[derive(Clone)]
pub struct FakeTelegram {
    pub base: String,
    state: Arc<Mutex<State>>,
    notify: Arc<tokio::sync::Notify>,
}

impl FakeTelegram {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State { next_update: 1000, next_message: 1, ..State::default() }));
        let notify = Arc::new(tokio::sync::Notify::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, n) = (state.clone(), notify.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((socket, _)) = listener.accept().await else { continue };
                    let _ = socket.set_nodelay(true);
                    tokio::spawn(serve(socket, s.clone(), n.clone()));
                }
            });
        });
        let addr = rx.recv().unwrap();
        let deliverer = state.clone();
        std::thread::spawn(move || deliver(&deliverer));
        Self { base: format!("http://{addr}"), state, notify }
    }

    /// A user's text message arrives (`chat_type`: private, group, supergroup).
    pub fn message(&self, chat: i64, chat_type: &str, from: i64, text: &str) -> i64 {
        let mut s = self.state.lock().unwrap();
        s.chats.insert(chat.to_string(), chat_type.to_owned());
        s.next_message += 1;
        let message_id = s.next_message;
        let update = json!({"message": {"message_id": message_id, "date": 0,
            "chat": {"id": chat, "type": chat_type}, "from": {"id": from, "is_bot": false, "first_name": format!("User{from}")},
            "text": text}});
        drop(s);
        self.push(update);
        message_id
    }

    /// The bot is a member (an admin, for a `channel`) of chat `id` of type `chat_type`, which
    /// has said nothing yet.
    pub fn add_chat(&self, id: i64, chat_type: &str) {
        self.state.lock().unwrap().chats.insert(id.to_string(), chat_type.to_owned());
    }

    /// A user sends a photo (Telegram offers it in sizes; the last is the largest).
    pub fn photo(&self, chat: i64, from: i64, caption: &str, bytes: &[u8]) {
        let id = self.file("photos/file_7.jpg", bytes);
        self.media(
            chat,
            from,
            json!({"caption": caption, "photo": [
            {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
            {"file_id": id, "file_unique_id": "l", "width": 800, "height": 600, "file_size": bytes.len()}]}),
        );
    }

    /// A user sends a file.
    pub fn document(&self, chat: i64, from: i64, name: &str, mime: &str, bytes: &[u8]) {
        let id = self.file(&format!("documents/{name}"), bytes);
        self.media(
            chat,
            from,
            json!({"document": {"file_id": id, "file_unique_id": "d", "file_name": name,
            "mime_type": mime, "file_size": bytes.len()}}),
        );
    }

    fn file(&self, path: &str, bytes: &[u8]) -> String {
        let mut s = self.state.lock().unwrap();
        let id = format!("file-{}", s.files.len() + 1);
        s.files.insert(id.clone(), (path.to_owned(), bytes.to_vec()));
        id
    }

    fn media(&self, chat: i64, from: i64, fields: Value) {
        let mut s = self.state.lock().unwrap();
        s.next_message += 1;
        let mut message = json!({"message_id": s.next_message, "date": 0, "chat": {"id": chat, "type": "private"},
            "from": {"id": from, "is_bot": false, "first_name": format!("User{from}")}});
        for (k, v) in fields.as_object().unwrap() {
            message[k] = v.clone();
        }
        drop(s);
        self.push(json!({"message": message}));
    }

    /// The same message delivered again (Telegram may redeliver).
    pub fn redeliver(&self, chat: i64, chat_type: &str, from: i64, text: &str, message_id: i64) {
        self.push(json!({"message": {"message_id": message_id, "date": 0, "chat": {"id": chat, "type": chat_type},
            "from": {"id": from, "is_bot": false, "first_name": format!("User{from}")}, "text": text}}));
    }

    fn push(&self, mut update: Value) {
        let mut s = self.state.lock().unwrap();
        s.next_update += 1;
        update["update_id"] = json!(s.next_update);
        s.updates.push_back(update);
        drop(s);
        self.notify.notify_waiters();
    }

    pub fn throttle_next(&self, method: &str, retry_after: u64) {
        self.state.lock().unwrap().throttle = Some((method.into(), retry_after));
    }

    pub fn sent(&self) -> Vec<Value> {
        self.state.lock().unwrap().sent.clone()
    }

    /// Each sent message and when it was sent.
    pub fn sent_timed(&self) -> Vec<(Instant, Value)> {
        let s = self.state.lock().unwrap();
        s.sent_at.iter().copied().zip(s.sent.iter().cloned()).collect()
    }

    /// A webhook left set (as by an earlier run in webhook mode).
    pub fn set_webhook(&self, url: &str, secret: &str) {
        self.state.lock().unwrap().webhook = Some((url.into(), secret.into()));
    }

    pub fn webhook(&self) -> Option<(String, String)> {
        self.state.lock().unwrap().webhook.clone()
    }

    pub fn deliveries(&self) -> Vec<(i64, u16)> {
        self.state.lock().unwrap().deliveries.clone()
    }

    /// Waits until `setWebhook` was called (or panics after 20 s).
    pub fn wait_webhook(&self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(hook) = self.webhook() {
                return hook;
            }
            assert!(Instant::now() < deadline, "setWebhook was never called");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many `getUpdates` calls a newer one ended (two pollers of one bot).
    pub fn conflicts(&self) -> u64 {
        self.state.lock().unwrap().conflicts
    }

    pub fn offsets(&self) -> Vec<i64> {
        self.state.lock().unwrap().offsets.clone()
    }

    /// Waits until the bot has sent `n` files to `chat` (or panics after 20 s): each call's
    /// fields and the file's bytes.
    pub fn wait_files(&self, chat: i64, n: usize) -> Vec<(Value, Vec<u8>)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let files: Vec<(Value, Vec<u8>)> =
                self.uploads().into_iter().filter(|(m, _)| m["chat_id"] == json!(chat.to_string())).collect();
            if files.len() >= n {
                return files;
            }
            assert!(Instant::now() < deadline, "the bot sent {} of {n} files to {chat}", files.len());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn uploads(&self) -> Vec<(Value, Vec<u8>)> {
        self.state.lock().unwrap().uploads.clone()
    }

    /// Waits until the bot has sent `n` messages to `chat` (or panics after 20 s).
    pub fn wait_sent(&self, chat: i64, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let texts: Vec<String> = self
                .sent()
                .iter()
                .filter(|m| m["chat_id"] == json!(chat.to_string()) || m["chat_id"] == json!(chat))
                .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
                .collect();
            if texts.len() >= n {
                return texts;
            }
            assert!(Instant::now() < deadline, "the bot sent {} of {n} messages to {chat}: {texts:#?}", texts.len());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Webhook mode: POSTs each update, oldest first, until the receiver answers 2xx.
fn deliver(state: &Arc<Mutex<State>>) {
    use std::io::{Read as _, Write as _};
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let next = {
            let s = state.lock().unwrap();
            match (&s.webhook, s.updates.front()) {
                (Some(hook), Some(update)) => Some((hook.clone(), update.clone())),
                _ => None,
            }
        };
        let Some(((url, secret), update)) = next else { continue };
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
        let body = update.to_string();
        let status = std::net::TcpStream::connect(host).ok().and_then(|mut c| {
            let request = format!(
                "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nx-telegram-bot-api-secret-token: {secret}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            c.write_all(request.as_bytes()).ok()?;
            let mut answer = String::new();
            c.read_to_string(&mut answer).ok()?;
            answer.split_whitespace().nth(1)?.parse::<u16>().ok()
        });
        let mut s = state.lock().unwrap();
        let id = update["update_id"].as_i64().unwrap_or(0);
        s.deliveries.push((id, status.unwrap_or(0)));
        if status.is_some_and(|c| (200..300).contains(&c)) && s.updates.front() == Some(&update) {
            s.updates.pop_front();
        } else {
            drop(s);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

async fn serve(mut socket: tokio::net::TcpStream, state: Arc<Mutex<State>>, notify: Arc<tokio::sync::Notify>) {
    loop {
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        let (path, body, file) = loop {
            let n = match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            let Some(head_end) = text.find("\r\n\r\n") else { continue };
            let length: usize = text[..head_end]
                .lines()
                .find_map(|l| l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                .unwrap_or(0);
            if request.len() < head_end + 4 + length {
                continue;
            }
            let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let raw = &request[head_end + 4..head_end + 4 + length];
            let content_type = text[..head_end]
                .lines()
                .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")))
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_default();
            // A multipart upload: its text fields as the JSON body, its file beside it.
            let (body, file) = match super::stub_http::multipart(&content_type, raw) {
                Some(parts) => {
                    let mut body = json!({});
                    let mut file = None;
                    for part in parts {
                        if part.filename.is_some() {
                            file = Some(part);
                        } else {
                            body[&part.name] = json!(String::from_utf8_lossy(&part.body));
                        }
                    }
                    (body, file)
                }
                None => (serde_json::from_slice(raw).unwrap_or(json!({})), None),
            };
            break (path, body, file);
        };
        // A file download: `/file/bot<token>/<file_path>`.
        if let Some(rest) = path.strip_prefix("/file/bot") {
            let file_path = rest.split_once('/').map(|(_, p)| p.to_owned()).unwrap_or_default();
            let found = state.lock().unwrap().files.values().find(|(p, _)| *p == file_path).map(|(_, b)| b.clone());
            let (status, bytes) = found.map_or((404, b"not found".to_vec()), |b| (200, b));
            let mut response = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
                bytes.len()
            )
            .into_bytes();
            response.extend_from_slice(&bytes);
            if socket.write_all(&response).await.is_err() {
                return;
            }
            continue;
        }
        let method = path.rsplit('/').next().unwrap_or_default().to_owned();
        let (status, answer) = match file {
            Some(file) => upload(&method, &body, file, &state),
            None => answer(&method, &body, &state, &notify).await,
        };
        let answer = answer.to_string();
        // One write (head and body together), so no Nagle delay sits between them.
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if socket.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn answer(method: &str, body: &Value, state: &Arc<Mutex<State>>, notify: &tokio::sync::Notify) -> (u16, Value) {
    {
        let mut s = state.lock().unwrap();
        if s.throttle.as_ref().is_some_and(|(m, _)| m == method) {
            let (_, after) = s.throttle.take().unwrap();
            return (
                429,
                json!({"ok": false, "error_code": 429,
                "description": format!("Too Many Requests: retry after {after}"), "parameters": {"retry_after": after}}),
            );
        }
    }
    match method {
        "getMe" => {
            (200, json!({"ok": true, "result": {"id": 1, "is_bot": true, "first_name": "acp", "username": BOT}}))
        }
        "setWebhook" => {
            let url = body["url"].as_str().unwrap_or_default().to_owned();
            let secret = body["secret_token"].as_str().unwrap_or_default().to_owned();
            state.lock().unwrap().webhook = Some((url, secret));
            (200, json!({"ok": true, "result": true, "description": "Webhook was set"}))
        }
        "deleteWebhook" => {
            state.lock().unwrap().webhook = None;
            (200, json!({"ok": true, "result": true, "description": "Webhook was deleted"}))
        }
        "getUpdates" if state.lock().unwrap().webhook.is_some() => (
            409,
            json!({"ok": false, "error_code": 409,
                "description": "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}),
        ),
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
            let me = {
                let mut s = state.lock().unwrap();
                s.offsets.push(offset);
                s.polls += 1;
                s.polls
            };
            // One poller at a time: this call ends the one waiting, as Telegram does.
            notify.notify_waiters();
            loop {
                let waiting = notify.notified();
                {
                    let mut s = state.lock().unwrap();
                    if s.polls != me {
                        s.conflicts += 1;
                        return (
                            409,
                            json!({"ok": false, "error_code": 409,
                            "description": "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}),
                        );
                    }
                    // Updates below the offset are confirmed: Telegram forgets them.
                    while s.updates.front().is_some_and(|u| u["update_id"].as_i64().unwrap_or(0) < offset) {
                        s.updates.pop_front();
                    }
                    if !s.updates.is_empty() {
                        let all: Vec<Value> = s.updates.iter().cloned().collect();
                        return (200, json!({"ok": true, "result": all}));
                    }
                }
                if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                    return (200, json!({"ok": true, "result": []}));
                }
            }
        }
        "sendMessage" => {
            let text = body["text"].as_str().unwrap_or_default();
            if body["parse_mode"] == "HTML" && !balanced_html(text) {
                return (
                    400,
                    json!({"ok": false, "error_code": 400,
                    "description": "Bad Request: can't parse entities: unclosed start tag"}),
                );
            }
            let mut s = state.lock().unwrap();
            s.next_message += 1;
            let id = s.next_message;
            s.sent.push(body.clone());
            s.sent_at.push(Instant::now());
            (200, json!({"ok": true, "result": {"message_id": id, "chat": {"id": body["chat_id"]}, "text": text}}))
        }
        "sendChatAction" => (200, json!({"ok": true, "result": true})),
        "getChat" => {
            let id = match &body["chat_id"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match state.lock().unwrap().chats.get(&id) {
                Some(kind) => {
                    (200, json!({"ok": true, "result": {"id": id.parse::<i64>().unwrap_or(0), "type": kind}}))
                }
                None => (400, json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"})),
            }
        }
        "getFile" => {
            let id = body["file_id"].as_str().unwrap_or_default();
            match state.lock().unwrap().files.get(id) {
                Some((path, bytes)) => (
                    200,
                    json!({"ok": true, "result": {"file_id": id, "file_unique_id": "u",
                    "file_size": bytes.len(), "file_path": path}}),
                ),
                None => (400, json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"})),
            }
        }
        other => (404, json!({"ok": false, "error_code": 404, "description": format!("Not Found: method {other}")})),
    }
}

/// `sendPhoto` and `sendDocument` with the file uploaded as `photo` or `document`: 413 beyond
/// 50 MB (10 MB for a photo: 400), the caption at most 1,024 characters and, in HTML, well
/// formed; kept with its bytes.
fn upload(method: &str, body: &Value, file: super::stub_http::Part, state: &Arc<Mutex<State>>) -> (u16, Value) {
    let bad = |description: &str| (400, json!({"ok": false, "error_code": 400, "description": description}));
    let field = match method {
        "sendPhoto" => "photo",
        "sendDocument" => "document",
        other => {
            return (404, json!({"ok": false, "error_code": 404, "description": format!("Not Found: method {other}")}));
        }
    };
    if file.name != field {
        return bad(&format!("Bad Request: there is no {field} in the request"));
    }
    if file.body.len() > 50 << 20 {
        return (413, json!({"ok": false, "error_code": 413, "description": "Request Entity Too Large"}));
    }
    if field == "photo" && file.body.len() > 10 << 20 {
        return bad("Bad Request: PHOTO_INVALID_DIMENSIONS");
    }
    // A photo must be a picture (JPEG, PNG, WebP).
    let picture = file.body.starts_with(&[0xff, 0xd8, 0xff])
        || file.body.starts_with(b"\x89PNG\r\n\x1a\n")
        || (file.body.starts_with(b"RIFF") && file.body.get(8..12) == Some(b"WEBP"));
    if field == "photo" && !picture {
        return bad("Bad Request: IMAGE_PROCESS_FAILED");
    }
    if body["chat_id"].as_str().unwrap_or_default().is_empty() {
        return bad("Bad Request: chat_id is empty");
    }
    let caption = body["caption"].as_str().unwrap_or_default();
    // Counted in UTF-16 units once the markup is taken out.
    let visible = if body["parse_mode"] == "HTML" { visible_text(caption) } else { caption.to_owned() };
    if visible.encode_utf16().count() > 1024 {
        return bad("Bad Request: message caption is too long");
    }
    if body["parse_mode"] == "HTML" && !balanced_html(caption) {
        return bad("Bad Request: can't parse entities: unclosed start tag");
    }
    let mut s = state.lock().unwrap();
    s.next_message += 1;
    let id = s.next_message;
    let mut record = body.clone();
    record["method"] = json!(method);
    record["file_name"] = json!(file.filename);
    record["mime_type"] = json!(file.content_type);
    s.uploads.push((record, file.body.clone()));
    let mut message = json!({"message_id": id, "date": 0, "chat": {"id": body["chat_id"]}, "caption": caption});
    message[field] = if field == "photo" {
        json!([{"file_id": format!("sent-{id}"), "file_unique_id": "p", "width": 1, "height": 1, "file_size": file.body.len()}])
    } else {
        json!({"file_id": format!("sent-{id}"), "file_unique_id": "d", "file_name": file.filename,
            "mime_type": file.content_type, "file_size": file.body.len()})
    };
    (200, json!({"ok": true, "result": message}))
}

/// HTML's text without its tags, its entities decoded.
fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&")
}

/// Telegram's HTML: the tags it knows, each closed.
fn balanced_html(text: &str) -> bool {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else { return false };
        let tag = &rest[open + 1..open + close];
        let name = tag.trim_start_matches('/').split_whitespace().next().unwrap_or_default().to_owned();
        if !["b", "i", "u", "s", "a", "code", "pre", "strong", "em", "blockquote", "tg-spoiler"]
            .contains(&name.as_str())
        {
            return false;
        }
        if tag.starts_with('/') {
            if stack.pop().as_deref() != Some(name.as_str()) {
                return false;
            }
        } else {
            stack.push(name);
        }
        rest = &rest[open + close + 1..];
    }
    stack.is_empty()
}
