//! What `chat.send` and `agent` do once their params are checked: start a run (deduplicated by
//! idempotency key, admitted against the caps, its settings applied first), answer, and wait for
//! its end (`agent`, `agent.wait`); and the other chat methods: `chat.history`, `chat.inject`,
//! `chat.abort`.

use std::time::Duration;

use acp_protocol::gateway::{ErrorShape, Frame, StopReason as WireStop, code};
use serde_json::{Map, Value, json};

use super::Gateway;
use super::hub::{Conn, RunEnd};
use crate::clock::now_ms;
use crate::runtime::{Op, Shown, UserBlock};

pub(super) async fn send(gw: &Gateway, conn: &Conn, id: &str, params: &Map<String, Value>) -> Result<(), ErrorShape> {
    let text = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (key, run_id) = (super::canonical_key(&text("sessionKey")), text("idempotencyKey"));
    let timeout = params.get("timeoutMs").and_then(Value::as_u64).filter(|t| *t > 0).map(Duration::from_millis);
    let run = Start {
        key: &key,
        message: &text("message"),
        images: attachments("chat.send", params).map_err(ErrorShape::invalid)?,
        run_id: &run_id,
        timeout,
        ops: run_ops("chat.send", params).map_err(ErrorShape::invalid)?,
    };
    let started = |_: &str| json!({"runId": run_id, "status": "started"});
    if let Some(seen) = start_run(gw, conn, id, run, started).await? {
        conn.send(&Frame::ok(id, json!({"runId": run_id, "status": seen})));
    }
    Ok(())
}

/// The `agent` method: answered twice on one id — `accepted`, then the result when the run ends.
pub(super) async fn agent(gw: &Gateway, conn: &Conn, id: &str, params: &Map<String, Value>) -> Result<(), ErrorShape> {
    let text = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let key =
        super::canonical_key(&Some(text("sessionKey")).filter(|k| !k.is_empty()).unwrap_or_else(|| "main".into()));
    let run_id = text("idempotencyKey");
    let timeout = params.get("timeout").and_then(Value::as_u64).filter(|t| *t > 0).map(Duration::from_secs);
    let accepted = |key: &str| json!({"runId": run_id, "sessionKey": key, "agentId": "main", "status": "accepted", "acceptedAt": now_ms()});
    let run = Start {
        key: &key,
        message: &text("message"),
        images: attachments("agent", params).map_err(ErrorShape::invalid)?,
        run_id: &run_id,
        timeout,
        ops: run_ops("agent", params).map_err(ErrorShape::invalid)?,
    };
    let seen = start_run(gw, conn, id, run, accepted).await?;
    if seen.is_some() {
        conn.send(&Frame::ok(id, json!({"runId": run_id, "status": "accepted", "sessionKey": key, "agentId": "main"})));
    }
    let result = match wait_for(gw, &run_id, None).await {
        Some((RunEnd::Final { text, .. }, _)) => json!({"runId": run_id, "status": "ok", "summary": "completed",
            "result": {"payloads": [{"text": text, "mediaUrl": null}], "meta": {}}}),
        Some((RunEnd::Aborted { text }, _)) => json!({"runId": run_id, "status": "aborted", "summary": "aborted",
            "result": {"payloads": [{"text": text, "mediaUrl": null}], "meta": {}}}),
        Some((RunEnd::Error { message }, _)) => {
            conn.send(&Frame::err(id, ErrorShape::new(code::UNAVAILABLE, message)));
            return Ok(());
        }
        None => json!({"runId": run_id, "status": "ok", "summary": "completed"}),
    };
    conn.send(&Frame::ok(id, result));
    Ok(())
}

/// A run to start.
struct Start<'a> {
    key: &'a str,
    message: &'a str,
    /// Images sent with it (`attachments`).
    images: Vec<UserBlock>,
    run_id: &'a str,
    timeout: Option<Duration>,
    /// Settings the run asks for (`thinking`), applied to the session first.
    ops: Vec<Op>,
}

/// Starts the run, after answering `first` on `id`; `Some` (`in_flight` or `ok`) when its run id
/// was seen already and nothing started.
async fn start_run(
    gw: &Gateway,
    conn: &Conn,
    id: &str,
    run: Start<'_>,
    first: impl FnOnce(&str) -> Value,
) -> Result<Option<&'static str>, ErrorShape> {
    let Start { key, message, images, run_id, timeout, ops } = run;
    if let Some(status) = gw.runs_seen(run_id) {
        return Ok(Some(status));
    }
    if message.trim().is_empty() && images.is_empty() {
        gw.run_done(run_id);
        return Err(ErrorShape::invalid("`message` is empty"));
    }
    let mut blocks = Vec::with_capacity(1 + images.len());
    if !message.trim().is_empty() {
        blocks.push(UserBlock::Text { text: message.to_owned() });
    }
    blocks.extend(images);
    // What waits on the session (and on all of them) is capped.
    let ticket = match gw.admit(key, blocks.iter().map(UserBlock::size).sum()) {
        Ok(t) => t,
        Err(e) => {
            gw.run_done(run_id);
            return Err(*e);
        }
    };
    let handle = match gw.open(key).await {
        Ok(h) => h,
        Err(e) => {
            gw.run_done(run_id);
            return Err(ErrorShape::new(code::UNAVAILABLE, e));
        }
    };
    // Kept in the store too: a retry after a restart finds the run and starts none.
    match gw.runtime.claim_key(&run_key(run_id), key).await {
        Ok(None) => {}
        Ok(Some(_)) => {
            gw.runs_handle().finish(run_id);
            return Ok(Some("ok"));
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not record an idempotency key; a retry after a restart would run again")
        }
    }
    conn.send(&Frame::ok(id, first(key)));
    for op in ops {
        handle.send(op);
    }
    let (turn, ended, outcome) = gw.begin_run(&handle, key, run_id, blocks, gw.run_options(), None);
    gw.runs_handle().attach(run_id, ended.clone());
    let done = gw.runs_handle();
    let run = run_id.to_owned();
    let mut ended = ended;
    let runtime = gw.runtime.clone();
    tokio::spawn(async move {
        match timeout {
            Some(limit) => {
                tokio::pin!(outcome);
                if tokio::time::timeout(limit, &mut outcome).await.is_err() {
                    handle.send(Op::CancelTurn(turn));
                    outcome.await;
                }
            }
            None => {
                outcome.await;
            }
        }
        drop(ticket);
        // Every event of the turn is out once its outcome is in.
        let end = ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone());
        done.finish(&run);
        if let Some(end) = end
            && let Err(e) = runtime.end_key(&run_key(&run), &recorded(&end)).await
        {
            tracing::warn!(error = %e, "could not record how a run ended");
        }
    });
    Ok(None)
}

/// The store's key for run `id`.
fn run_key(id: &str) -> String {
    format!("run:{id}")
}

/// How a run ended, as the store keeps it (its text cut to 16 KiB).
fn recorded(end: &RunEnd) -> Value {
    let cut = |text: &str| {
        let mut at = text.len().min(16 << 10);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text[..at].to_owned()
    };
    match end {
        RunEnd::Final { text, stop_reason } => json!({"status": "ok", "stopReason": stop_reason, "text": cut(text)}),
        RunEnd::Aborted { text } => {
            json!({"status": "aborted", "stopReason": WireStop::Aborted.as_str(), "text": cut(text)})
        }
        RunEnd::Error { message } => json!({"status": "error", "error": message}),
    }
}

/// Waits (up to `limit`) for run `id` to end: how, and when (Unix ms).
async fn wait_for(gw: &Gateway, id: &str, limit: Option<Duration>) -> Option<(RunEnd, i64)> {
    let (end, finished) = gw.runs_handle().watch(id)?;
    let mut end = end?;
    let waited = async { end.wait_for(Option::is_some).await.ok()?.clone() };
    let ended = match limit {
        Some(limit) => tokio::time::timeout(limit, waited).await.ok().flatten(),
        None => waited.await,
    }?;
    Some((ended, finished.unwrap_or_else(now_ms)))
}

pub(super) async fn agent_wait(gw: &Gateway, id: &str, timeout_ms: Option<u64>) -> Result<Value, ErrorShape> {
    let watched = gw.runs_handle().watch(id);
    // Not run here (or already finished when it was seen again): as the store recorded it. A
    // run just starting (neither watched nor finished yet) is waited for as any other.
    if watched.as_ref().is_none_or(|(end, finished)| end.is_none() && finished.is_some()) {
        // A run of an earlier process (or one forgotten here): as the store recorded it.
        return match gw.runtime.key(&run_key(id)).await {
            Ok(Some(record)) => {
                let ended: Value = record.outcome.as_deref().and_then(|o| serde_json::from_str(o).ok()).unwrap_or_else(
                    || json!({"status": "error", "error": "the gateway stopped during the run (it was interrupted)"}),
                );
                let mut answer = json!({"runId": id, "status": ended["status"], "endedAt": record.ended_at});
                if let Some(stop) = ended.get("stopReason") {
                    answer["stopReason"] = stop.clone();
                    answer["terminalReply"] = json!({"disposition": "visible", "text": ended["text"]});
                }
                if let Some(error) = ended.get("error") {
                    answer["error"] = error.clone();
                }
                Ok(answer)
            }
            _ if watched.is_some() => Ok(json!({"runId": id, "status": "ok"})),
            _ => Err(ErrorShape::new(code::NOT_FOUND, format!("unknown run: {id}"))),
        };
    }
    let limit = Duration::from_millis(timeout_ms.unwrap_or(30_000));
    Ok(match wait_for(gw, id, Some(limit)).await {
        Some((RunEnd::Final { text, stop_reason }, at)) => json!({"runId": id, "status": "ok", "endedAt": at,
            "stopReason": stop_reason, "terminalReply": {"disposition": "visible", "text": text}}),
        Some((RunEnd::Aborted { text }, at)) => json!({"runId": id, "status": "aborted", "endedAt": at,
            "stopReason": WireStop::Aborted.as_str(), "terminalReply": {"disposition": "visible", "text": text}}),
        Some((RunEnd::Error { message }, at)) => {
            json!({"runId": id, "status": "error", "endedAt": at, "error": message})
        }
        None => json!({"runId": id, "status": "timeout"}),
    })
}

/// Images a run's message brings (`attachments`: `{type: "image", mimeType, content: base64}`,
/// as the reference takes them), each at most [`MAX_IMAGE_BYTES`] decoded, at most
/// [`MAX_IMAGES`].
fn attachments(method: &str, params: &Map<String, Value>) -> Result<Vec<UserBlock>, String> {
    use base64::Engine as _;
    let Some(list) = params.get("attachments").filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let Some(list) = list.as_array() else { return Err(format!("invalid {method} params: at /attachments: an array")) };
    if list.len() > MAX_IMAGES {
        return Err(format!("invalid {method} params: at /attachments: at most {MAX_IMAGES} images"));
    }
    let mut images = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        let at = format!("invalid {method} params: at /attachments/{i}");
        let field = |k: &str| a.get(k).and_then(Value::as_str);
        if field("type").is_some_and(|t| t != "image") {
            return Err(format!("{at}: only images can be attached"));
        }
        let mime = field("mimeType").ok_or_else(|| format!("{at}: `mimeType` is missing"))?;
        if !matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
            return Err(format!("{at}: `{mime}` is not an image type models read (png, jpeg, gif, webp)"));
        }
        let content = field("content").ok_or_else(|| format!("{at}: `content` (base64) is missing"))?;
        let content = content.split_once(";base64,").map_or(content, |(_, data)| data);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|_| format!("{at}: `content` is not base64"))?;
        if bytes.is_empty() {
            return Err(format!("{at}: the image is empty"));
        }
        if bytes.len() > MAX_IMAGE_BYTES {
            return Err(format!("{at}: the image is over {} MB", MAX_IMAGE_BYTES / 1_000_000));
        }
        images.push(UserBlock::Image { mime_type: mime.to_owned(), data: content.trim().to_owned(), uri: None });
    }
    Ok(images)
}

/// The largest image a run's message may bring, decoded (as the reference).
const MAX_IMAGE_BYTES: usize = 5_000_000;
/// Images per message.
const MAX_IMAGES: usize = 8;

/// The settings a run asks for (`thinking`), as ops applied to its session first.
fn run_ops(method: &str, params: &Map<String, Value>) -> Result<Vec<Op>, String> {
    let thinking = params.get("thinking").and_then(Value::as_str);
    Ok(thinking.map(|l| reasoning(method, l)).transpose()?.into_iter().collect())
}

/// `thinking` as the session's reasoning effort.
pub(super) fn reasoning(method: &str, level: &str) -> Result<Op, String> {
    let effort = match level {
        "off" | "default" => None,
        other => Some(crate::runtime::ReasoningEffort::parse(other).ok_or_else(|| {
            format!("invalid {method} params: at /thinking: use off, {}", crate::runtime::ReasoningEffort::CHOICES)
        })?),
    };
    Ok(Op::SetReasoning(effort))
}

/// A session's messages as the reference's `chat.history` gives them: the user's text, and the
/// assistant's as content blocks in order — `thinking`, `toolCall` (with its title, status and
/// result) and `text`.
pub(super) async fn history(gw: &Gateway, key: &str, limit: Option<u64>) -> Result<Value, ErrorShape> {
    let key = super::canonical_key(key);
    let shown = gw
        .runtime
        .history(&key)
        .await
        .map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?
        .ok_or_else(|| ErrorShape::new(code::NOT_FOUND, format!("no session `{key}`")))?;
    let mut history = History::default();
    for item in shown {
        history.add(item);
    }
    history.close();
    let messages = history.messages;
    let total = messages.len();
    let limit = limit.map_or(total, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let messages: Vec<Value> = messages.into_iter().skip(total.saturating_sub(limit)).collect();
    Ok(json!({"sessionKey": key, "sessionId": key, "messages": messages, "hasMore": messages.len() < total,
        "totalMessages": total}))
}

/// Builds `chat.history` messages from what a session shows.
#[derive(Default)]
struct History {
    messages: Vec<Value>,
    /// The blocks of the assistant message being built.
    blocks: Vec<Value>,
    /// The message id of the last text or thinking block, which the next piece with that id
    /// extends.
    last_id: Option<String>,
}

impl History {
    /// The assistant message being built is done.
    fn close(&mut self) {
        if !self.blocks.is_empty() {
            let content = std::mem::take(&mut self.blocks);
            self.messages.push(json!({"role": "assistant", "content": content}));
        }
        self.last_id = None;
    }

    fn has_text(&self) -> bool {
        self.blocks.iter().any(|b| b["type"] == "text")
    }

    fn add(&mut self, item: Shown) {
        match item {
            Shown::User { blocks, at, .. } => {
                self.close();
                let mut message = json!({"role": "user", "content": crate::runtime::plain_text(&blocks)});
                if at > 0 {
                    message["timestamp"] = json!(at);
                }
                self.messages.push(message);
            }
            Shown::Text { id, text } | Shown::Thought { id, text } if self.last_id.as_deref() == Some(id.as_str()) => {
                if let Some(Value::Object(block)) = self.blocks.last_mut() {
                    let field = if block.get("type").is_some_and(|t| t == "text") { "text" } else { "thinking" };
                    if let Some(Value::String(s)) = block.get_mut(field) {
                        s.push_str(&text);
                    }
                }
            }
            Shown::Text { id, text } => {
                // A reply that already has text, and a new message id: a new message.
                if self.has_text() {
                    self.close();
                }
                self.blocks.push(json!({"type": "text", "text": text}));
                self.last_id = Some(id);
            }
            Shown::Thought { id, text } => {
                if self.has_text() {
                    self.close();
                }
                self.blocks.push(json!({"type": "thinking", "thinking": text}));
                self.last_id = Some(id);
            }
            Shown::Tool(state) => {
                self.blocks.push(json!({"type": "toolCall", "id": state.id, "name": state.name,
                    "arguments": state.raw_input, "title": state.title, "kind": state.kind, "status": state.status,
                    "result": super::hub::result_text(&state.content)}));
                self.last_id = None;
            }
            _ => self.close(),
        }
    }
}

/// Posts a message into a session as the assistant's, without a run (`[label]` first when given):
/// saved, shown to every client as a `chat` final of run `inject-<id>`, and in the model's context
/// from the next run on (as a note of what was shown).
pub(super) async fn inject(gw: &Gateway, key: &str, message: &str, label: &str) -> Result<Value, ErrorShape> {
    let key = super::canonical_key(key);
    if label.chars().count() > 100 {
        return Err(ErrorShape::invalid(
            "invalid chat.inject params: at /label: must NOT have more than 100 characters",
        ));
    }
    if gw.open_handle(&key).is_none() {
        gw.resolve(&key).await?;
    }
    let handle = gw.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
    let text = if label.is_empty() { message.to_owned() } else { format!("[{label}]\n\n{message}") };
    let id = handle
        .inject(text.clone())
        .await
        .ok_or_else(|| ErrorShape::new(code::UNAVAILABLE, format!("session `{key}` closed")))?;
    let mut shown = super::hub::assistant(&text, now_ms());
    shown["stopReason"] = json!("injected");
    let run_id = format!("inject-{id}");
    gw.hub.to_subscribers("session.message", &json!({"sessionKey": key, "runId": run_id, "message": shown}));
    gw.hub.broadcast(
        "chat",
        &json!({"runId": run_id, "sessionKey": key, "agentId": "main", "seq": 0, "state": "final",
            "stopReason": "injected", "message": shown}),
        false,
    );
    Ok(json!({"ok": true, "messageId": id, "runId": run_id}))
}

pub(super) async fn abort(gw: &Gateway, key: &str, run_id: Option<&str>) -> Result<Value, ErrorShape> {
    let key = super::canonical_key(key);
    let turns = gw.hub.turn_of(&key, run_id);
    let Some(handle) = gw.open_handle(&key) else {
        return Ok(json!({"ok": true, "aborted": false, "runIds": []}));
    };
    let mut ids = Vec::new();
    let mut waits = Vec::new();
    for turn in &turns {
        if let Some(id) = gw.hub.run_id(*turn) {
            ids.push(id);
        }
        if let Some(rx) = gw.hub.end_of(*turn) {
            waits.push(rx);
        }
    }
    // One cancellation: the run asked for, or everything the session runs and has queued.
    match (run_id, turns.as_slice()) {
        (_, []) => {}
        (Some(_), [turn]) => {
            handle.send(Op::CancelTurn(*turn));
        }
        _ => {
            handle.send(Op::Cancel);
        }
    }
    // The `aborted` event goes out before this answer.
    for mut rx in waits {
        let _ = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(Option::is_some)).await;
    }
    let aborted = !ids.is_empty();
    Ok(json!({"ok": true, "aborted": aborted, "runIds": ids}))
}
