//! Who is connected and what they are sent: each connection's outbound queue with its own event
//! `seq`, broadcasts, and the runtime's events turned into the gateway's `chat` and `agent`
//! events of the run they belong to. A slow client loses droppable frames (ticks, deltas — the
//! next delta's cumulative text repairs the gap) and is closed when its queue passes the cap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use acp_protocol::gateway::events::{
    AgentData, AgentEvent, Block, ChatEvent, ChatMessage, ChatState, DiffData, Lifecycle, SessionMessage,
    SessionsChanged, StateVersion, TextData, ToolData, UsageData, name,
};
use acp_protocol::gateway::{Frame, StopReason as WireStop, event_text};
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use crate::clock::now_ms;
use crate::runtime::{Event, EventKind, StopReason, ToolCallState, ToolStatus, TurnId, TurnOutcome};
use crate::sync::lock;

/// Bytes a client may have queued before droppable frames are dropped for it.
pub const SOFT_BUFFER: usize = 1 << 20;
/// Bytes a client may have queued before it is disconnected (`policy.maxBufferedBytes`).
pub const MAX_BUFFERED: usize = 50 << 20;

/// What goes out on one connection.
#[derive(Debug)]
pub enum Out {
    Text(String),
    /// Close with this code and reason.
    Close(u16, String),
}

/// One connection, as the hub sees it.
pub struct Conn {
    pub id: u64,
    tx: mpsc::UnboundedSender<Out>,
    seq: AtomicU64,
    /// Bytes queued and not yet written.
    pub queued: Arc<AtomicUsize>,
    /// Whether it gets `sessions.changed` and `session.message`.
    pub subscribed: std::sync::atomic::AtomicBool,
    /// Whether it may answer approval questions (and gets them).
    pub approver: std::sync::atomic::AtomicBool,
    pub dropped: AtomicU64,
    /// Past the buffer cap: it is being closed, and nothing more is queued for it.
    pub closing: std::sync::atomic::AtomicBool,
    /// Fires when it is closed as too slow (its reader stops waiting for it).
    pub dropped_out: tokio_util::sync::CancellationToken,
    /// Its place in the order connections joined the hub (once authenticated).
    joined: AtomicU64,
}

impl Conn {
    pub fn new(id: u64, tx: mpsc::UnboundedSender<Out>) -> Self {
        Self {
            id,
            tx,
            seq: AtomicU64::new(0),
            queued: Arc::new(AtomicUsize::new(0)),
            subscribed: Default::default(),
            approver: Default::default(),
            dropped: AtomicU64::new(0),
            closing: Default::default(),
            dropped_out: tokio_util::sync::CancellationToken::new(),
            joined: AtomicU64::new(u64::MAX),
        }
    }

    /// Queues a frame, unless the client is too far behind: then it is closed instead (a client
    /// that sends requests and never reads cannot make the gateway hold their answers forever).
    fn push(&self, text: String) {
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        if self.queued.load(Ordering::Relaxed) > MAX_BUFFERED {
            self.closing.store(true, Ordering::Relaxed);
            self.dropped_out.cancel();
            tracing::warn!(conn = self.id, "a client fell too far behind; closing it");
            let _ = self.tx.send(Out::Close(acp_protocol::gateway::close::TRY_AGAIN, "slow consumer".into()));
            return;
        }
        self.queued.fetch_add(text.len(), Ordering::Relaxed);
        let _ = self.tx.send(Out::Text(text));
    }

    /// Sends a frame (responses are dropped only for a client being closed as too slow).
    pub fn send(&self, frame: &Frame) {
        self.push(frame.to_text());
    }

    /// Sends a frame already serialised.
    pub fn send_text(&self, text: String) {
        self.push(text);
    }

    /// Sends an event with this connection's next `seq`; a droppable one is dropped for a client
    /// that is behind.
    pub fn event(&self, event: &str, payload: &impl Serialize, droppable: bool, state_version: Option<&StateVersion>) {
        let shared = Shared::new(event, payload, state_version);
        self.shared_event(&shared, droppable);
    }

    /// The same, for an event serialised once for every connection.
    fn shared_event(&self, event: &Shared, droppable: bool) {
        let queued = self.queued.load(Ordering::Relaxed);
        if droppable && queued > SOFT_BUFFER {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.push(event.with_seq(seq));
    }

    /// Closes with `code`; `reason` is cut to the 123 bytes a close frame holds.
    pub fn close(&self, code: u16, reason: &str) {
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let _ = self.tx.send(Out::Close(code, reason[..end].into()));
    }
}

/// An event serialised once: everything but the connection's `seq`, which is spliced in.
struct Shared {
    /// `{"type":"event","event":…,"payload":…` (and `stateVersion`), without the closing brace.
    head: String,
}

impl Shared {
    fn new(event: &str, payload: &impl Serialize, state_version: Option<&StateVersion>) -> Self {
        let mut head = event_text(event, payload, state_version, None);
        head.pop(); // the closing brace
        Self { head }
    }

    fn with_seq(&self, seq: u64) -> String {
        let mut text = String::with_capacity(self.head.len() + 24);
        text.push_str(&self.head);
        text.push_str(",\"seq\":");
        text.push_str(&seq.to_string());
        text.push('}');
        text
    }
}

/// A run: one `chat.send` (or `agent`) turn, as its events are numbered and accumulated.
struct Run {
    run_id: String,
    session_key: String,
    /// The per-run sequence shared by `chat` and `agent` events.
    seq: u64,
    text: String,
    /// The reasoning shown so far.
    thinking: String,
    started_at: i64,
    ended: watch::Sender<Option<RunEnd>>,
    /// Where the run's text, reasoning and tool calls go as they stream (a channel delivering
    /// them), if anywhere.
    listener: Option<mpsc::UnboundedSender<Heard>>,
    /// The message the listener last had text of: the next one starts a new paragraph.
    heard: String,
}

/// What a run's listener hears.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// Reply text (`\n\n` between the model's messages).
    Text(String),
    /// Reasoning, as it streams.
    Thinking(String),
    /// A tool call began.
    ToolStarted { title: String },
    /// A tool call ended: what it showed (rendered only by a chat that shows it).
    ToolEnded { title: String, failed: bool, content: Vec<crate::runtime::ToolContent> },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    Final { text: String, stop_reason: String },
    Aborted { text: String },
    Error { message: String },
}

/// How a run ends, as it is watched.
pub type EndWatch = watch::Receiver<Option<RunEnd>>;

/// Who an event relayed between gateways is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Every connection (a run's `chat` and `agent` events).
    All,
    /// The connections subscribed to session events.
    Subscribers,
    /// The connections that may answer approval questions.
    Approvers,
}

/// A session's event, as it goes to the other gateways of a bus: serialised once, without
/// `seq` (each connection's own is spliced in where it is delivered).
#[derive(Debug)]
pub struct Relayed {
    pub audience: Audience,
    pub droppable: bool,
    pub session_key: String,
    /// The run it belongs to, its number in that run, and whether it is the run's last.
    pub run: Option<(String, u64, bool)>,
    pub head: String,
}

/// Connections and runs.
pub struct Hub {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    runs: Mutex<HashMap<TurnId, Run>>,
    next_conn: AtomicU64,
    /// How many connections have joined (authenticated), ever.
    joins: AtomicU64,
    /// Where the sessions' events go for the other gateways (a bus, when there is one).
    relay: std::sync::OnceLock<mpsc::Sender<Relayed>>,
    /// How many connections there are, watched by the bus (events from elsewhere are taken
    /// only while someone is here to see them).
    watchers: std::sync::OnceLock<watch::Sender<usize>>,
    /// How many of them may answer approval questions (told to the other gateways, whose runs
    /// may ask them).
    approvers: watch::Sender<usize>,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            conns: Mutex::default(),
            runs: Mutex::default(),
            next_conn: AtomicU64::default(),
            joins: AtomicU64::default(),
            relay: std::sync::OnceLock::new(),
            watchers: std::sync::OnceLock::new(),
            approvers: watch::channel(0).0,
        }
    }
}

impl Hub {
    pub fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The place of the connection that joined last (places only grow).
    pub fn newest_conn(&self) -> u64 {
        self.joins.load(Ordering::Relaxed)
    }

    pub fn add(&self, conn: Arc<Conn>) {
        let mut conns = lock(&self.conns);
        conn.joined.store(self.joins.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
        conns.insert(conn.id, conn);
        self.counted(&conns);
    }

    /// The connections were counted anew.
    fn counted(&self, conns: &HashMap<u64, Arc<Conn>>) {
        if let Some(watchers) = self.watchers.get() {
            watchers.send_replace(conns.len());
        }
        let approvers = conns.values().filter(|c| c.approver.load(Ordering::Relaxed)).count();
        self.approvers.send_if_modified(|n| std::mem::replace(n, approvers) != approvers);
    }

    /// How many connections may answer approval questions, watched.
    pub fn approvers(&self) -> watch::Receiver<usize> {
        self.approvers.subscribe()
    }

    pub fn remove(&self, id: u64) {
        let mut conns = lock(&self.conns);
        conns.remove(&id);
        self.counted(&conns);
    }

    /// Connection `id`, if it is here.
    pub fn conn(&self, id: u64) -> Option<Arc<Conn>> {
        lock(&self.conns).get(&id).cloned()
    }

    /// Sends the sessions' events to `relay` too from now on; the count of connections is
    /// watched through the receiver.
    pub fn relay_to(&self, relay: mpsc::Sender<Relayed>) -> watch::Receiver<usize> {
        let _ = self.relay.set(relay);
        let watchers = self.watchers.get_or_init(|| watch::channel(0).0);
        watchers.send_replace(lock(&self.conns).len());
        watchers.subscribe()
    }

    /// An event from another gateway's session, to the connections here it is for.
    pub fn deliver(&self, audience: Audience, droppable: bool, head: String) {
        let shared = Shared { head };
        for conn in self.all() {
            let to = match audience {
                Audience::All => true,
                Audience::Subscribers => conn.subscribed.load(Ordering::Relaxed),
                Audience::Approvers => conn.approver.load(Ordering::Relaxed),
            };
            if to {
                conn.shared_event(&shared, droppable);
            }
        }
    }

    /// Hands a session's event to the bus, if there is one. A bus that cannot keep up loses
    /// deltas (the next one's cumulative text repairs them) and, past that, is told of the loss:
    /// its watchers read the run's end from the store.
    fn relay(&self, shared: &Shared, audience: Audience, droppable: bool, key: &str, run: Option<(String, u64, bool)>) {
        let Some(relay) = self.relay.get() else { return };
        let relayed = Relayed { audience, droppable, session_key: key.to_owned(), run, head: shared.head.clone() };
        if relay.try_send(relayed).is_err() {
            tracing::debug!(session = %key, "the bus is behind; an event for other gateways was dropped");
        }
    }

    /// An event of session `key` (of its `run`, if it has one) to every connection, here and
    /// on the other gateways.
    pub fn session_broadcast(
        &self,
        key: &str,
        event: &str,
        payload: &impl Serialize,
        droppable: bool,
        run: Option<(String, u64, bool)>,
    ) {
        let shared = Shared::new(event, payload, None);
        for conn in self.all() {
            conn.shared_event(&shared, droppable);
        }
        self.relay(&shared, Audience::All, droppable, key, run);
    }

    pub fn count(&self) -> usize {
        lock(&self.conns).len()
    }

    fn all(&self) -> Vec<Arc<Conn>> {
        lock(&self.conns).values().cloned().collect()
    }

    /// An event to every connection (serialised once).
    pub fn broadcast(&self, event: &str, payload: &impl Serialize, droppable: bool) {
        let shared = Shared::new(event, payload, None);
        for conn in self.all() {
            conn.shared_event(&shared, droppable);
        }
    }

    /// An event to the connections that joined before the one in place `newest` did (and that
    /// one), never dropped.
    pub fn broadcast_to_older(&self, event: &str, payload: &impl Serialize, newest: u64) {
        let shared = Shared::new(event, payload, None);
        for conn in self.all() {
            if conn.joined.load(Ordering::Relaxed) <= newest {
                conn.shared_event(&shared, false);
            }
        }
    }

    /// An event of session `key`'s question to the connections that may answer approvals, here
    /// and (with a key) on the other gateways.
    pub fn to_approvers(&self, key: Option<&str>, event: &str, payload: &impl Serialize) {
        let shared = Shared::new(event, payload, None);
        for conn in self.all() {
            if conn.approver.load(Ordering::Relaxed) {
                conn.shared_event(&shared, false);
            }
        }
        if let Some(key) = key {
            self.relay(&shared, Audience::Approvers, false, key, None);
        }
    }

    /// Whether anyone connected may answer approvals.
    pub fn has_approver(&self) -> bool {
        lock(&self.conns).values().any(|c| c.approver.load(Ordering::Relaxed))
    }

    /// An event carrying `stateVersion` to every connection (never dropped).
    pub fn broadcast_versioned(&self, event: &str, payload: &impl Serialize, state_version: &StateVersion) {
        let shared = Shared::new(event, payload, Some(state_version));
        for conn in self.all() {
            conn.shared_event(&shared, false);
        }
    }

    /// An event of session `key` to the connections that subscribed to session events, here
    /// and on the other gateways.
    pub fn to_subscribers(&self, key: &str, event: &str, payload: &impl Serialize) {
        let shared = Shared::new(event, payload, None);
        for conn in self.all() {
            if conn.subscribed.load(Ordering::Relaxed) {
                conn.shared_event(&shared, false);
            }
        }
        self.relay(&shared, Audience::Subscribers, false, key, None);
    }

    pub fn close_all(&self, code: u16, reason: &str) {
        for conn in self.all() {
            conn.close(code, reason);
        }
    }

    /// Registers a run for `turn`; its end is watched through the receiver.
    pub fn start_run(&self, turn: TurnId, run_id: &str, session_key: &str) -> watch::Receiver<Option<RunEnd>> {
        self.start_run_to(turn, run_id, session_key, None)
    }

    /// [`Self::start_run`], what the run shows also sent to `listener` as it streams.
    pub fn start_run_to(
        &self,
        turn: TurnId,
        run_id: &str,
        session_key: &str,
        listener: Option<mpsc::UnboundedSender<Heard>>,
    ) -> watch::Receiver<Option<RunEnd>> {
        let (ended, rx) = watch::channel(None);
        let started_at = now_ms();
        let run = Run {
            run_id: run_id.into(),
            session_key: session_key.into(),
            seq: 0,
            text: String::new(),
            thinking: String::new(),
            started_at,
            ended,
            listener,
            heard: String::new(),
        };
        lock(&self.runs).insert(turn, run);
        let start = Lifecycle { phase: "start".into(), started_at, ..Lifecycle::default() };
        self.agent(turn, "lifecycle", AgentData::Lifecycle(start), false);
        rx
    }

    /// The turn of a running run, by run id and session.
    pub fn turn_of(&self, session_key: &str, run_id: Option<&str>) -> Vec<TurnId> {
        lock(&self.runs)
            .iter()
            .filter(|(_, r)| r.session_key == session_key && run_id.is_none_or(|id| r.run_id == id))
            .map(|(t, _)| *t)
            .collect()
    }

    /// Watches how run `turn` ends.
    pub fn end_of(&self, turn: TurnId) -> Option<watch::Receiver<Option<RunEnd>>> {
        lock(&self.runs).get(&turn).map(|r| r.ended.subscribe())
    }

    pub fn run_id(&self, turn: TurnId) -> Option<String> {
        lock(&self.runs).get(&turn).map(|r| r.run_id.clone())
    }

    /// Numbers an event of run `turn` and builds its payload; `None` if the turn is no run.
    fn stamp<T>(&self, turn: TurnId, build: impl FnOnce(&mut Run, u64) -> T) -> Option<T> {
        let mut runs = lock(&self.runs);
        let run = runs.get_mut(&turn)?;
        run.seq += 1;
        let seq = run.seq;
        Some(build(run, seq))
    }

    fn agent(&self, turn: TurnId, stream: &str, data: AgentData, droppable: bool) {
        if let Some(event) = self.stamp(turn, |run, seq| agent_event(run, seq, stream, data, now_ms())) {
            let run = (event.run_id.clone(), event.seq, false);
            self.session_broadcast(&event.session_key, name::AGENT, &event, droppable, Some(run));
        }
    }

    fn text(&self, turn: TurnId, message_id: &str, delta: &str, thought: bool) {
        let events = self.stamp(turn, |run, seq| {
            let stream = if thought { "thinking" } else { "assistant" };
            if thought {
                run.thinking.push_str(delta)
            } else {
                run.text.push_str(delta)
            }
            if let Some(listener) = run.listener.as_ref() {
                if thought {
                    let _ = listener.send(Heard::Thinking(delta.to_owned()));
                } else {
                    // The text of the model's next message (after a tool call) is a paragraph of its own.
                    if run.heard != message_id {
                        if !run.heard.is_empty() {
                            let _ = listener.send(Heard::Text("\n\n".to_owned()));
                        }
                        run.heard = message_id.to_owned();
                    }
                    let _ = listener.send(Heard::Text(delta.to_owned()));
                }
            }
            let cumulative = if thought { &run.thinking } else { &run.text };
            let now = now_ms();
            let data = TextData { text: cumulative.clone(), delta: delta.to_owned(), item_id: message_id.to_owned() };
            let chat = ChatEvent {
                delta_text: Some(if thought { String::new() } else { delta.to_owned() }),
                message: Some(message(run, now)),
                ..chat_event(run, seq, ChatState::Delta)
            };
            (agent_event(run, seq, stream, AgentData::Text(data), now), chat)
        });
        if let Some((agent, chat)) = events {
            let run = Some((agent.run_id.clone(), agent.seq, false));
            self.session_broadcast(&agent.session_key, name::AGENT, &agent, true, run.clone());
            self.session_broadcast(&chat.session_key, name::CHAT, &chat, true, run);
        }
    }

    fn tool(&self, turn: TurnId, state: &ToolCallState, first: bool) {
        let phase = match (first, state.status) {
            (true, _) => "start",
            (false, ToolStatus::Completed | ToolStatus::Failed) => "result",
            _ => "update",
        };
        let diffs = state
            .content
            .iter()
            .filter_map(|c| match c {
                crate::runtime::ToolContent::Diff { path, old_text, new_text } => Some(DiffData {
                    path: path.display().to_string(),
                    old_text: old_text.clone(),
                    new_text: new_text.clone(),
                }),
                _ => None,
            })
            .collect();
        let failed = state.status == ToolStatus::Failed;
        let result = phase == "result";
        let data = ToolData {
            phase: phase.into(),
            tool_call_id: state.id.clone(),
            name: state.name.clone(),
            title: state.title.clone(),
            kind: wire_name(&state.kind),
            status: wire_name(&state.status),
            args: state.raw_input.clone(),
            diffs,
            result: if result { result_text(&state.content).into() } else { serde_json::Value::Null },
            is_error: result.then_some(failed),
        };
        if phase != "update"
            && let Some(listener) = lock(&self.runs).get(&turn).and_then(|r| r.listener.clone())
        {
            let title = state.title.clone();
            let _ = listener.send(match phase {
                "start" => Heard::ToolStarted { title },
                _ => Heard::ToolEnded { title, failed, content: state.content.clone() },
            });
        }
        self.agent(turn, "tool", AgentData::Tool(Box::new(data)), false);
    }

    fn ended(&self, turn: TurnId, outcome: &TurnOutcome) {
        let (usage, state) = match outcome {
            TurnOutcome::Stopped { reason: StopReason::Cancelled, usage } => (usage, ChatState::Aborted),
            TurnOutcome::Stopped { usage, .. } => (usage, ChatState::Final),
            TurnOutcome::Failed { usage, .. } => (usage, ChatState::Error),
        };
        let used =
            UsageData { output_tokens: Some(usage.output), input_tokens: Some(usage.input), ..Default::default() };
        self.agent(turn, "usage", AgentData::Usage(used), false);
        let aborted = state == ChatState::Aborted;
        let stop = match outcome {
            TurnOutcome::Stopped { reason, .. } => wire_stop(*reason).as_str().to_owned(),
            TurnOutcome::Failed { .. } => WireStop::Error.as_str().to_owned(),
        };
        let started_at = lock(&self.runs).get(&turn).map(|r| r.started_at).unwrap_or_default();
        let end = Lifecycle {
            phase: "end".into(),
            stop_reason: Some(stop.clone()),
            aborted: Some(aborted),
            ended_at: Some(now_ms()),
            started_at,
            status: aborted.then(|| "cancelled".into()),
        };
        self.agent(turn, "lifecycle", AgentData::Lifecycle(end), false);
        let event = self.stamp(turn, |run, seq| match outcome {
            TurnOutcome::Failed { error, .. } => {
                ChatEvent { error_message: Some(error.message.clone()), ..chat_event(run, seq, state) }
            }
            _ => ChatEvent {
                stop_reason: Some(stop.clone()),
                message: Some(message(run, now_ms())),
                ..chat_event(run, seq, state)
            },
        });
        if let Some(event) = event {
            if let (ChatState::Final, Some(message)) = (event.state, &event.message) {
                let said = SessionMessage {
                    session_key: event.session_key.clone(),
                    run_id: Some(event.run_id.clone()),
                    message: message.clone(),
                };
                self.to_subscribers(&event.session_key, name::SESSION_MESSAGE, &said);
            }
            let run = Some((event.run_id.clone(), event.seq, true));
            self.session_broadcast(&event.session_key, name::CHAT, &event, false, run);
        }
        if let Some(run) = lock(&self.runs).remove(&turn) {
            self.changed(&run.session_key, "run", None);
            let end = match outcome {
                TurnOutcome::Failed { error, .. } => RunEnd::Error { message: error.message.clone() },
                _ if aborted => RunEnd::Aborted { text: run.text },
                _ => RunEnd::Final { text: run.text, stop_reason: stop },
            };
            run.ended.send_replace(Some(end));
        }
    }

    /// `sessions.changed` to subscribers.
    pub fn changed(&self, key: &str, reason: &str, title: Option<String>) {
        let changed = SessionsChanged { session_key: key.to_owned(), reason: reason.to_owned(), title };
        self.to_subscribers(key, name::SESSIONS_CHANGED, &changed);
    }
}

fn agent_event(run: &Run, seq: u64, stream: &str, data: AgentData, ts: i64) -> AgentEvent<AgentData> {
    AgentEvent {
        run_id: run.run_id.clone(),
        stream: stream.to_owned(),
        data,
        session_key: run.session_key.clone(),
        agent_id: crate::config::agents::agent_or_main(&run.session_key).to_owned(),
        seq,
        ts,
        is_heartbeat: false,
    }
}

fn chat_event(run: &Run, seq: u64, state: ChatState) -> ChatEvent {
    ChatEvent {
        run_id: run.run_id.clone(),
        session_key: run.session_key.clone(),
        agent_id: crate::config::agents::agent_or_main(&run.session_key).to_owned(),
        seq,
        state,
        ..ChatEvent::default()
    }
}

/// A runtime enum (`ToolKind`, `ToolStatus`) by its wire name.
pub(super) fn wire_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

/// A tool call's text output, its parts joined.
pub fn result_text(content: &[crate::runtime::ToolContent]) -> String {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            crate::runtime::ToolContent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    parts.join("\n")
}

/// The stop reason as the reference's clients know them.
fn wire_stop(reason: StopReason) -> WireStop {
    match reason {
        StopReason::EndTurn => WireStop::Stop,
        StopReason::MaxTokens => WireStop::Length,
        StopReason::MaxTurnRequests => WireStop::MaxTurnRequests,
        StopReason::Refusal => WireStop::Refusal,
        StopReason::Cancelled => WireStop::Aborted,
    }
}

/// An assistant message with its text.
pub fn assistant(text: &str, timestamp: i64) -> ChatMessage {
    ChatMessage::assistant(vec![Block::Text { text: text.to_owned() }], Some(timestamp))
}

/// A run's message so far: its reasoning (when there is some) as a `thinking` block, then its text.
fn message(run: &Run, timestamp: i64) -> ChatMessage {
    let mut blocks = Vec::with_capacity(2);
    if !run.thinking.is_empty() {
        blocks.push(Block::Thinking { thinking: run.thinking.clone() });
    }
    blocks.push(Block::Text { text: run.text.clone() });
    ChatMessage::assistant(blocks, Some(timestamp))
}

impl Hub {
    /// A runtime event, as the gateway's events.
    pub fn emit(&self, event: &Event) {
        let turn = event.turn;
        match &event.kind {
            EventKind::TextDelta { message_id, text } => self.text(turn, message_id, text, false),
            EventKind::ThoughtDelta { message_id, text } => self.text(turn, message_id, text, true),
            // Not the model's words: a stream of its own, which clients that know it show apart.
            EventKind::Notice(text) => {
                self.agent(turn, "notice", AgentData::Notice { text: text.clone(), failover: None }, false)
            }
            EventKind::Failover(f) => {
                let failover = Some(serde_json::json!({ "from": f.from, "to": f.to, "reason": f.reason }));
                self.agent(turn, "notice", AgentData::Notice { text: f.text.clone(), failover }, false)
            }
            EventKind::Usage { used, size } => {
                let usage =
                    UsageData { context_tokens: Some(*used), context_window: Some(*size), ..Default::default() };
                self.agent(turn, "usage", AgentData::Usage(usage), true);
            }
            EventKind::ToolCall(state) => self.tool(turn, state, true),
            EventKind::ToolCallUpdate(state) => self.tool(turn, state, false),
            EventKind::TurnEnded(outcome) => self.ended(turn, outcome),
            EventKind::Title(title) => self.changed(&event.session, "title", Some(title.clone())),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_shared_event_reads_as_one_serialised_whole() {
        let payload = json!({"a": [1, "}"]});
        let version = StateVersion { presence: 2, health: 1 };
        let shared = Shared::new("chat", &payload, Some(&version));
        let frame = Frame::Event {
            event: "chat".into(),
            payload: Some(payload),
            seq: Some(7),
            state_version: Some(json!({"presence": 2, "health": 1})),
        };
        let spliced: Value = serde_json::from_str(&shared.with_seq(7)).unwrap();
        assert_eq!(spliced, serde_json::to_value(&frame).unwrap());
    }
}
