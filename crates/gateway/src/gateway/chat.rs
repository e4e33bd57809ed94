//! What `chat.send` and `agent` do once their params are checked: start a run (deduplicated by
//! idempotency key, admitted against the caps, its settings applied first), answer, and wait for
//! its end (`agent`, `agent.wait`); and the other chat methods: `chat.history`, `chat.inject`,
//! `chat.abort`.

use std::time::Duration;

use acp_protocol::gateway::events::{Block, ChatEvent, ChatMessage, ChatState, SessionMessage, name};
use acp_protocol::gateway::methods::{
    Aborted, AgentDone, AgentOutput, AgentParams, AgentPayload, ChatSendParams, History, Injected, RunAck, RunResult,
    TerminalReply,
};
use acp_protocol::gateway::{ErrorShape, Frame, StopReason as WireStop, code, ok_text};
use serde_json::Value;

use super::Gateway;
use super::hub::Conn;
use super::hub::{RunEnd, wire_name};
use crate::clock::now_ms;
use crate::runtime::{Op, Shown, UserBlock};

/// A request being answered: its gateway, connection and id.
pub(super) struct Asked<'a> {
    pub gw: &'a Gateway,
    pub conn: &'a Conn,
    pub id: &'a str,
}

pub(super) async fn send(c: &Asked<'_>, p: ChatSendParams) -> Result<(), ErrorShape> {
    let key = c.gw.key(&p.session_key);
    let run_id = p.idempotency_key;
    let timeout = p.timeout_ms.filter(|t| *t > 0).map(Duration::from_millis);
    let run = Start {
        key: &key,
        message: &p.message,
        images: attachments("chat.send", p.attachments.as_ref()).map_err(ErrorShape::invalid)?,
        run_id: &run_id,
        timeout,
        ops: run_ops("chat.send", p.thinking.as_deref()).map_err(ErrorShape::invalid)?,
    };
    let ack = |status: &str| RunAck { run_id: run_id.clone(), status: status.into(), ..RunAck::default() };
    if let Some(seen) = start_run(c, run, |_| ack("started")).await? {
        c.conn.send_text(ok_text(c.id, &ack(seen)));
    }
    Ok(())
}

/// The `agent` method: answered twice on one id — `accepted`, then the result when the run ends.
pub(super) async fn agent(c: &Asked<'_>, p: AgentParams) -> Result<(), ErrorShape> {
    let agent = p.agent_id.as_deref().map(str::trim).filter(|a| !a.is_empty()).map(str::to_lowercase);
    let key = match (p.session_key.as_deref().filter(|k| !k.trim().is_empty()), &agent) {
        (Some(key), _) => c.gw.key(key),
        (None, Some(agent)) => format!("agent:{agent}:main"),
        (None, None) => c.gw.key("main"),
    };
    if let Some(agent) = &agent
        && crate::config::agents::agent_or_main(&key) != agent.as_str()
    {
        return Err(ErrorShape::invalid(format!(
            "invalid agent params: agent \"{agent}\" does not match session key agent \"{}\"",
            crate::config::agents::agent_or_main(&key).to_owned()
        )));
    }
    let run_id = p.idempotency_key;
    let timeout = p.timeout.filter(|t| *t > 0).map(Duration::from_secs);
    let accepted = |key: &str, at: Option<i64>| RunAck {
        run_id: run_id.clone(),
        status: "accepted".into(),
        session_key: Some(key.to_owned()),
        agent_id: Some(crate::config::agents::agent_or_main(key).to_owned()),
        accepted_at: at,
    };
    let run = Start {
        key: &key,
        message: &p.message,
        images: attachments("agent", p.attachments.as_ref()).map_err(ErrorShape::invalid)?,
        run_id: &run_id,
        timeout,
        ops: run_ops("agent", p.thinking.as_deref()).map_err(ErrorShape::invalid)?,
    };
    let seen = start_run(c, run, |key| accepted(key, Some(now_ms()))).await?;
    if seen.is_some() {
        c.conn.send_text(ok_text(c.id, &accepted(&key, None)));
    }
    let done = |status: &str, summary: &str, text: Option<String>| AgentDone {
        run_id: run_id.clone(),
        status: status.into(),
        summary: summary.into(),
        result: text.map(|text| AgentOutput {
            payloads: vec![AgentPayload { text, media_url: None }],
            meta: Default::default(),
        }),
    };
    let result = match wait_for(c.gw, &run_id, None).await {
        Some((RunEnd::Final { text, .. }, _)) => done("ok", "completed", Some(text)),
        Some((RunEnd::Aborted { text }, _)) => done("aborted", "aborted", Some(text)),
        Some((RunEnd::Error { message }, _)) => {
            c.conn.send(&Frame::err(c.id, ErrorShape::new(code::UNAVAILABLE, message)));
            return Ok(());
        }
        None => done("ok", "completed", None),
    };
    c.conn.send_text(ok_text(c.id, &result));
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

/// Starts the run, after answering `first` on the call; `Some` (`in_flight` or `ok`) when its run
/// id was seen already and nothing started.
async fn start_run(
    c: &Asked<'_>,
    run: Start<'_>,
    first: impl FnOnce(&str) -> RunAck,
) -> Result<Option<&'static str>, ErrorShape> {
    let gw = c.gw;
    let Start { key, message, images, run_id, timeout, ops } = run;
    if let Some(status) = gw.runs.seen(run_id) {
        return Ok(Some(status));
    }
    if message.trim().is_empty() && images.is_empty() {
        gw.runs.forget(run_id);
        return Err(ErrorShape::invalid("`message` is empty"));
    }
    let mut blocks = Vec::with_capacity(1 + images.len());
    if !message.trim().is_empty() {
        blocks.push(UserBlock::Text { text: message.to_owned() });
    }
    blocks.extend(images);
    // What waits on the session (and on all of them) is capped.
    let ticket = match gw.open.admit(key, blocks.iter().map(UserBlock::size).sum()) {
        Ok(t) => t,
        Err(e) => {
            gw.runs.forget(run_id);
            return Err(*e);
        }
    };
    // Kept in the store too, before the session is opened: a retry after a restart, or on
    // another gateway of a shared store, finds the run and starts none.
    let claimed = match gw.runtime.claim_key(&run_key(run_id), key).await {
        Ok(None) => true,
        Ok(Some(_)) => {
            gw.runs.finish(run_id);
            return Ok(Some("ok"));
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not record an idempotency key; a retry after a restart would run again");
            false
        }
    };
    let handle = match gw.open(key).await {
        Ok(h) => h,
        Err(e) => {
            gw.runs.forget(run_id);
            // Nothing ran: a retry may.
            if claimed && let Err(e) = gw.runtime.forget_key(&run_key(run_id)).await {
                tracing::warn!(error = %e, "could not free an idempotency key of a run that never started");
            }
            return Err(ErrorShape::new(code::UNAVAILABLE, e));
        }
    };
    c.conn.send_text(ok_text(c.id, &first(key)));
    gw.open.driven_by_client(key);
    for op in ops {
        handle.send(op);
    }
    let (turn, ended, outcome) = gw.runs.begin(&handle, key, run_id, blocks, gw.open.run_options(), None);
    gw.runs.attach(run_id, ended.clone());
    let runs = gw.runs.clone();
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
        runs.finish(&run);
        if let Some(end) = end
            && let Err(e) = runtime.end_key(&run_key(&run), &recorded(&run, &end, None)).await
        {
            tracing::warn!(error = %e, "could not record how a run ended");
        }
    });
    Ok(None)
}

/// The store's key for run `id`.
pub(super) fn run_key(id: &str) -> String {
    format!("run:{id}")
}

/// How run `id` ended, as `agent.wait` says it, and the store keeps it (the text cut to 16 KiB).
fn recorded(id: &str, end: &RunEnd, at: Option<i64>) -> RunResult {
    let cut = |text: &str| {
        let mut end = text.len().min(16 << 10);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_owned()
    };
    let reply = |text: &str| Some(TerminalReply { disposition: "visible".into(), text: cut(text) });
    let result = RunResult { run_id: id.to_owned(), ended_at: at, ..RunResult::default() };
    match end {
        RunEnd::Final { text, stop_reason } => RunResult {
            status: "ok".into(),
            stop_reason: Some(stop_reason.clone()),
            terminal_reply: reply(text),
            ..result
        },
        RunEnd::Aborted { text } => RunResult {
            status: "aborted".into(),
            stop_reason: Some(WireStop::Aborted.as_str().into()),
            terminal_reply: reply(text),
            ..result
        },
        RunEnd::Error { message } => RunResult { status: "error".into(), error: Some(message.clone()), ..result },
    }
}

/// Waits (up to `limit`) for run `id` to end: how, and when (Unix ms).
async fn wait_for(gw: &Gateway, id: &str, limit: Option<Duration>) -> Option<(RunEnd, i64)> {
    let (end, finished) = gw.runs.watch(id)?;
    let mut end = end?;
    let waited = async { end.wait_for(Option::is_some).await.ok()?.clone() };
    let ended = match limit {
        Some(limit) => tokio::time::timeout(limit, waited).await.ok().flatten(),
        None => waited.await,
    }?;
    Some((ended, finished.unwrap_or_else(now_ms)))
}

pub(super) async fn agent_wait(gw: &Gateway, id: &str, timeout_ms: Option<u64>) -> Result<RunResult, ErrorShape> {
    let watched = gw.runs.watch(id);
    let answer = |status: &str| RunResult { run_id: id.to_owned(), status: status.into(), ..RunResult::default() };
    // Not run here (or already finished when it was seen again): as the store recorded it. A
    // run just starting (neither watched nor finished yet) is waited for as any other.
    if watched.as_ref().is_none_or(|(end, finished)| end.is_none() && finished.is_some()) {
        // A run of an earlier process (or one forgotten here): as the store recorded it.
        return match gw.runtime.key(&run_key(id)).await {
            Ok(Some(record)) => {
                let ended: RunResult =
                    record.outcome.as_deref().and_then(|o| serde_json::from_str(o).ok()).unwrap_or_else(|| RunResult {
                        error: Some("the gateway stopped during the run (it was interrupted)".into()),
                        ..answer("error")
                    });
                Ok(RunResult { run_id: id.to_owned(), ended_at: record.ended_at, ..ended })
            }
            _ if watched.is_some() => Ok(answer("ok")),
            _ => Err(ErrorShape::new(code::NOT_FOUND, format!("unknown run: {id}"))),
        };
    }
    let limit = Duration::from_millis(timeout_ms.unwrap_or(30_000));
    Ok(match wait_for(gw, id, Some(limit)).await {
        Some((end, at)) => recorded(id, &end, Some(at)),
        None => answer("timeout"),
    })
}

/// Images a run's message brings (`attachments`: `{type: "image", mimeType, content: base64}`,
/// as the reference takes them), each at most [`MAX_IMAGE_BYTES`] decoded, at most
/// [`MAX_IMAGES`].
fn attachments(method: &str, given: Option<&Value>) -> Result<Vec<UserBlock>, String> {
    use base64::Engine as _;
    let Some(list) = given.filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
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
fn run_ops(method: &str, thinking: Option<&str>) -> Result<Vec<Op>, String> {
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
pub(super) async fn history(gw: &Gateway, key: &str, limit: Option<u64>) -> Result<History, ErrorShape> {
    let key = gw.key(key);
    let shown = gw
        .runtime
        .history(&key)
        .await
        .map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?
        .ok_or_else(|| ErrorShape::new(code::NOT_FOUND, format!("no session `{key}`")))?;
    let mut history = Messages::default();
    for item in shown {
        history.add(item);
    }
    history.close();
    let messages = history.messages;
    let total = messages.len();
    let limit = limit.map_or(total, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let messages: Vec<Value> = messages
        .into_iter()
        .skip(total.saturating_sub(limit))
        .map(|m| serde_json::to_value(m).unwrap_or_default())
        .collect();
    Ok(History {
        session_id: key.clone(),
        session_key: key,
        has_more: messages.len() < total,
        messages,
        total_messages: total as u64,
    })
}

/// Builds `chat.history` messages from what a session shows.
#[derive(Default)]
struct Messages {
    messages: Vec<ChatMessage>,
    /// The blocks of the assistant message being built.
    blocks: Vec<Block>,
    /// The message id of the last text or thinking block, which the next piece with that id
    /// extends.
    last_id: Option<String>,
}

impl Messages {
    /// The assistant message being built is done.
    fn close(&mut self) {
        if !self.blocks.is_empty() {
            let content = std::mem::take(&mut self.blocks);
            self.messages.push(ChatMessage::assistant(content, None));
        }
        self.last_id = None;
    }

    fn has_text(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Text { .. }))
    }

    fn add(&mut self, item: Shown) {
        match item {
            Shown::User { blocks, at, .. } => {
                self.close();
                let text = crate::runtime::plain_text(&blocks);
                self.messages.push(ChatMessage::user(text, (at > 0).then_some(at)));
            }
            Shown::Text { id, text } | Shown::Thought { id, text } if self.last_id.as_deref() == Some(id.as_str()) => {
                if let Some(Block::Text { text: shown } | Block::Thinking { thinking: shown }) = self.blocks.last_mut()
                {
                    shown.push_str(&text);
                }
            }
            Shown::Text { id, text } => {
                // A reply that already has text, and a new message id: a new message.
                if self.has_text() {
                    self.close();
                }
                self.blocks.push(Block::Text { text });
                self.last_id = Some(id);
            }
            Shown::Thought { id, text } => {
                if self.has_text() {
                    self.close();
                }
                self.blocks.push(Block::Thinking { thinking: text });
                self.last_id = Some(id);
            }
            Shown::Tool(state) => {
                self.blocks.push(Block::ToolCall {
                    result: super::hub::result_text(&state.content).into(),
                    kind: wire_name(&state.kind),
                    status: wire_name(&state.status),
                    id: state.id,
                    name: state.name,
                    arguments: state.raw_input,
                    title: state.title,
                });
                self.last_id = None;
            }
            _ => self.close(),
        }
    }
}

/// Posts a message into a session as the assistant's, without a run (`[label]` first when given):
/// saved, shown to every client as a `chat` final of run `inject-<id>`, and in the model's context
/// from the next run on (as a note of what was shown).
pub(super) async fn inject(gw: &Gateway, key: &str, message: &str, label: &str) -> Result<Injected, ErrorShape> {
    let key = gw.key(key);
    if label.chars().count() > 100 {
        return Err(ErrorShape::invalid(
            "invalid chat.inject params: at /label: must NOT have more than 100 characters",
        ));
    }
    if gw.open.handle(&key).is_none() {
        gw.resolve(&key).await?;
    }
    let handle = gw.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
    let text = if label.is_empty() { message.to_owned() } else { format!("[{label}]\n\n{message}") };
    let id = handle
        .inject(text.clone())
        .await
        .ok_or_else(|| ErrorShape::new(code::UNAVAILABLE, format!("session `{key}` closed")))?;
    let stop = "injected";
    let shown = ChatMessage { stop_reason: Some(stop.into()), ..super::hub::assistant(&text, now_ms()) };
    let run_id = format!("inject-{id}");
    let said = SessionMessage { session_key: key.clone(), run_id: Some(run_id.clone()), message: shown.clone() };
    gw.hub.to_subscribers(&key, name::SESSION_MESSAGE, &said);
    let event = ChatEvent {
        run_id: run_id.clone(),
        agent_id: crate::config::agents::agent_or_main(&key).to_owned(),
        session_key: key.clone(),
        seq: 0,
        state: ChatState::Final,
        stop_reason: Some(stop.into()),
        message: Some(shown),
        ..ChatEvent::default()
    };
    gw.hub.session_broadcast(&key, name::CHAT, &event, false, None);
    Ok(Injected { ok: true, message_id: id, run_id })
}

pub(super) async fn abort(gw: &Gateway, key: &str, run_id: Option<&str>) -> Result<Aborted, ErrorShape> {
    let key = gw.key(key);
    let turns = gw.hub.turn_of(&key, run_id);
    let Some(handle) = gw.open.handle(&key) else {
        return Ok(Aborted { ok: true, aborted: false, run_ids: Vec::new() });
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
    Ok(Aborted { ok: true, aborted: !ids.is_empty(), run_ids: ids })
}
