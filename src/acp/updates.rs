//! Runtime events → ACP. Deltas become `session/update`s (buffered, flushed at the end of each
//! burst); tool calls become `tool_call` then `tool_call_update`s carrying only what changed;
//! command output streams as increments (Zed's `_meta.terminal_output` when the client asks for
//! it, else a bounded, throttled tail), never re-sent whole; the end of a turn answers its
//! `session/prompt` — after everything of that turn, since all of it leaves through one writer.

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_protocol::acp::client_methods::SESSION_UPDATE;
use acp_protocol::acp::schema::{
    CompactionStatus, CompactionUpdate, ConfigOptionUpdate, Content, ContentBlock, ContentChunk, CurrentModeUpdate,
    Diff, MessageId, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionInfoUpdate, SessionNotification,
    SessionUpdate, StopReason, Terminal, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, Usage, UsageUpdate,
};
use acp_protocol::acp::schema::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, RequiresActionStateUpdate, RunningStateUpdate,
    SessionCancelCapabilities, SessionId, SessionInfo, SessionMessage, StateUpdate, SubagentSessionCapabilities,
    SubagentUpdate,
};
use serde_json::{Map, Value, json};

use super::prompt;
use super::state::State;
use crate::runtime::{
    self, CompactionEvent, CompactionPhase, Event, EventKind, EventSink, SessionSummary, Shown, SubagentChange,
    SubagentEvent, ToolCallState, ToolStatus,
};
use crate::stream::tool_update;

/// The most command output shown as a running tail to clients without terminal support.
const TAIL_BYTES: usize = 4 * 1024;
/// How often that tail is refreshed.
const TAIL_EVERY: Duration = Duration::from_millis(300);

/// The runtime's [`EventSink`] for an ACP connection.
pub struct AcpSink {
    state: Arc<State>,
    /// By session and call id (a subagent's calls arrive on the same connection as its parent's).
    tools: Mutex<HashMap<(String, String), Tracked>>,
}

/// A tool call as the client currently sees it.
struct Tracked {
    shown: ToolCallState,
    /// Output streams through `_meta.terminal_output`.
    meta_terminal: bool,
    tail: String,
    last_tail: Option<Instant>,
}

/// A `session/update`'s params.
pub(super) fn notification(session: &str, update: SessionUpdate) -> SessionNotification {
    SessionNotification::new(session.to_owned(), update)
}

impl AcpSink {
    pub(super) fn new(state: Arc<State>) -> Self {
        Self { state, tools: Mutex::default() }
    }

    /// A slash command changed the session's settings: update the client's view of them.
    fn settings(&self, session: &str, change: runtime::SettingsChange) {
        let config = self.state.config.get();
        let (mode_changed, list) = {
            let mut sessions = self.state.sessions();
            let Some(s) = sessions.get_mut(session) else { return };
            let changed = s.mode != change.mode;
            s.set_model(change.model.clone());
            s.mode = change.mode;
            s.reasoning = change.reasoning;
            (changed, s.options(&config))
        };
        self.update(session, SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(list)));
        if mode_changed {
            self.update(session, SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(change.mode.id())));
        }
    }

    fn compaction(&self, session: &str, event: CompactionEvent) {
        if let Some(update) = compaction_update(&event, self.state.caps.compaction()) {
            self.update(session, update);
        }
    }

    fn update(&self, session: &str, update: SessionUpdate) {
        self.state.conn.notify_batched(SESSION_UPDATE, &notification(session, update));
    }

    fn tool_call(&self, session: &str, state: ToolCallState) {
        let meta_terminal =
            state.streams_output && !self.state.caps.terminal() && self.state.caps.terminal_output_meta();
        let mut call = ToolCall::new(state.id.clone(), state.title.clone())
            .kind(kind(state.kind))
            .status(status(state.status))
            .content(state.content.iter().map(content).collect())
            .locations(state.locations.iter().map(location).collect())
            .raw_input(state.raw_input.clone());
        // The tool's own name, for clients that set policies per tool (`acp run --allow edit`).
        call = call.meta(if meta_terminal {
            meta(json!({ "toolName": state.name, "terminal_info": { "terminal_id": state.id } }))
        } else {
            meta(json!({ "toolName": state.name }))
        });
        self.update(session, SessionUpdate::ToolCall(call));
        if is_final(state.status) {
            return;
        }
        lock(&self.tools).insert(
            (session.to_owned(), state.id.clone()),
            Tracked { shown: state, meta_terminal, tail: String::new(), last_tail: None },
        );
    }

    fn tool_call_update(&self, session: &str, state: ToolCallState) {
        let mut tools = lock(&self.tools);
        let key = (session.to_owned(), state.id.clone());
        let Some(tracked) = tools.get_mut(&key) else {
            tracing::warn!(call = %state.id, "update for a tool call that was not announced");
            return;
        };
        let patch = tool_update::changes(&tracked.shown, &state);
        let finished = is_final(state.status);
        if !patch.is_empty() || (finished && tracked.meta_terminal) {
            let mut fields = ToolCallUpdateFields::new();
            if let Some(title) = patch.title {
                fields = fields.title(title);
            }
            if let Some(k) = patch.kind {
                fields = fields.kind(kind(k));
            }
            if let Some(s) = patch.status {
                fields = fields.status(status(s));
            }
            if let Some(locations) = patch.locations {
                fields = fields.locations(locations.iter().map(location).collect::<Vec<_>>());
            }
            if let Some(c) = patch.content {
                fields = fields.content(c.iter().map(content).collect::<Vec<_>>());
            }
            if let Some(input) = patch.raw_input {
                fields = fields.raw_input(input);
            }
            if let Some(output) = patch.raw_output {
                fields = fields.raw_output(output);
            }
            let mut update = ToolCallUpdate::new(state.id.clone(), fields);
            if finished && tracked.meta_terminal {
                let raw = state.raw_output.clone().unwrap_or(Value::Null);
                update = update.meta(meta(json!({
                    "terminal_exit": { "terminal_id": state.id, "exit_code": raw["exitCode"], "signal": raw["signal"] }
                })));
            }
            self.update(session, SessionUpdate::ToolCallUpdate(update));
        }
        if finished {
            tools.remove(&key);
        } else {
            tracked.shown = state;
        }
    }

    /// A subagent of `session`, for clients that show child sessions (ACP's unstable
    /// `subagent_update` and `session_message`).
    fn subagent(&self, session: &str, event: SubagentEvent) {
        let child = event.child.to_string();
        let state = |state: StateUpdate| SessionUpdate::SubagentUpdate(SubagentUpdate::new(child.clone()).state(state));
        match event.change {
            SubagentChange::Started { title, description, cwd } => {
                let update = SubagentUpdate::new(child.clone())
                    .title(title)
                    .description(description)
                    .cwd(cwd)
                    .capabilities(SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()))
                    .state(StateUpdate::Running(RunningStateUpdate::new()));
                self.update(session, SessionUpdate::SubagentUpdate(update));
            }
            SubagentChange::Running => self.update(session, state(StateUpdate::Running(RunningStateUpdate::new()))),
            SubagentChange::Waiting => {
                self.update(session, state(StateUpdate::RequiresAction(RequiresActionStateUpdate::new())));
            }
            SubagentChange::Ended { reason, error } => {
                let stop = match (reason, error) {
                    (Some(reason), _) => match stop_reason(reason) {
                        StopReason::EndTurn => IdleStopReason::EndTurn,
                        StopReason::MaxTokens => IdleStopReason::MaxTokens,
                        StopReason::MaxTurnRequests => IdleStopReason::MaxTurnRequests,
                        StopReason::Refusal => IdleStopReason::Refusal,
                        _ => IdleStopReason::Cancelled,
                    },
                    (None, error) => IdleStopReason::Error(ErrorStopReason::new().error(
                        acp_protocol::acp::schema::Error::new(-32603, error.unwrap_or_else(|| "failed".to_owned())),
                    )),
                };
                // The child is closed with its work: no more cancelling it.
                let update = SubagentUpdate::new(child.clone())
                    .state(StateUpdate::Idle(IdleStateUpdate::new().stop_reason(stop)))
                    .capabilities(None);
                self.update(session, SessionUpdate::SubagentUpdate(update));
            }
            SubagentChange::Message { id, from, to, text } => {
                // Both views of the message: in the sender's transcript and in the recipient's.
                for transcript in [&from, &to] {
                    let message = SessionMessage::new(id.clone())
                        .sender_session_id(SessionId::new(from.to_string()))
                        .recipient_session_id(SessionId::new(to.to_string()))
                        .sender_message_id(MessageId::new(id.as_str()))
                        .recipient_message_id(MessageId::new(id.as_str()))
                        .content(vec![ContentBlock::from(text.clone())]);
                    self.update(transcript, SessionUpdate::SessionMessage(message));
                }
            }
        }
    }

    fn tool_output(&self, session: &str, call_id: String, text: String) {
        let mut tools = lock(&self.tools);
        let Some(tracked) = tools.get_mut(&(session.to_owned(), call_id.clone())) else { return };
        if tracked.meta_terminal {
            let update = ToolCallUpdate::new(call_id.clone(), ToolCallUpdateFields::new())
                .meta(meta(json!({ "terminal_output": { "terminal_id": call_id, "data": text } })));
            self.update(session, SessionUpdate::ToolCallUpdate(update));
            return;
        }
        tracked.tail.push_str(&text);
        if tracked.tail.len() > TAIL_BYTES {
            let mut cut = tracked.tail.len() - TAIL_BYTES;
            while !tracked.tail.is_char_boundary(cut) {
                cut += 1;
            }
            tracked.tail.drain(..cut);
        }
        if tracked.last_tail.is_some_and(|t| t.elapsed() < TAIL_EVERY) {
            return;
        }
        tracked.last_tail = Some(Instant::now());
        let shown = vec![runtime::ToolContent::Text(format!("```\n{}\n```", tracked.tail.trim_end()))];
        let fields = ToolCallUpdateFields::new().content(shown.iter().map(content).collect::<Vec<_>>());
        tracked.shown.content = shown;
        self.update(session, SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id, fields)));
    }
}

impl EventSink for AcpSink {
    fn emit(&self, event: Event) {
        let Event { session, kind, .. } = event;
        match kind {
            EventKind::TextDelta { message_id, text } => {
                self.update(&session, SessionUpdate::AgentMessageChunk(chunk(text, &message_id)));
            }
            EventKind::ThoughtDelta { message_id, text } => {
                self.update(&session, SessionUpdate::AgentThoughtChunk(chunk(text, &message_id)));
            }
            // A message of its own, marked: clients that show notices apart (`acp run`, `acp
            // client`) can; the others show a paragraph of text.
            EventKind::Notice(text) => {
                let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                let notice = chunk(format!("{text}\n\n"), &message_id).meta(meta(json!({ "notice": true })));
                self.update(&session, SessionUpdate::AgentMessageChunk(notice));
            }
            // A notice, marked as a failover: which model answers instead of which, and why.
            EventKind::Failover(f) => {
                let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
                let failover = json!({ "from": f.from, "to": f.to, "reason": f.reason });
                let notice = chunk(format!("{}\n\n", f.text), &message_id)
                    .meta(meta(json!({ "notice": true, "failover": failover })));
                self.update(&session, SessionUpdate::AgentMessageChunk(notice));
            }
            EventKind::Usage { used, size } => {
                self.update(&session, SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)))
            }
            EventKind::ToolCall(state) => self.tool_call(&session, state),
            EventKind::ToolCallUpdate(state) => self.tool_call_update(&session, state),
            EventKind::ToolOutput { call_id, text } => self.tool_output(&session, call_id, text),
            // The prompt's handler answers it, from the outcome its session hands back.
            EventKind::TurnEnded(_) => {}
            EventKind::Plan(entries) => self.update(&session, SessionUpdate::Plan(plan(&entries))),
            EventKind::Compaction(event) => self.compaction(&session, event),
            EventKind::Settings(change) => self.settings(&session, change),
            EventKind::Title(title) => {
                let info = SessionInfoUpdate::new().title(title).updated_at(iso_now());
                self.update(&session, SessionUpdate::SessionInfoUpdate(info));
            }
            EventKind::Subagent(event) => self.subagent(&session, event),
        }
    }

    fn shows_subagents(&self) -> bool {
        self.state.caps.subagents()
    }

    fn flush(&self) {
        self.state.conn.flush();
    }
}

/// A compaction as the client shows it: `compaction_update`s for clients that asked for them, a
/// line of thought for the others.
fn compaction_update(event: &CompactionEvent, gated: bool) -> Option<SessionUpdate> {
    let id = event.id.as_str();
    if gated {
        let update = match &event.phase {
            CompactionPhase::Started => CompactionUpdate::new(id.to_owned(), CompactionStatus::InProgress),
            CompactionPhase::Completed { summary, .. } => {
                CompactionUpdate::new(id.to_owned(), CompactionStatus::Completed)
                    .summary(vec![ContentBlock::from(summary.clone())])
            }
            CompactionPhase::Failed { error } => {
                CompactionUpdate::new(id.to_owned(), CompactionStatus::Failed).error(error.clone())
            }
        };
        return Some(SessionUpdate::CompactionUpdate(update));
    }
    let text = match &event.phase {
        CompactionPhase::Started => return None,
        CompactionPhase::Completed { tokens_before, tokens_after, .. } => compacted_line(*tokens_before, *tokens_after),
        CompactionPhase::Failed { error } => format!("Could not compact the conversation: {error}\n"),
    };
    Some(SessionUpdate::AgentThoughtChunk(chunk(text, id)))
}

fn compacted_line(before: u64, after: u64) -> String {
    use crate::runtime::commands::thousands;
    format!(
        "Compacted the conversation to fit the context window (~{} → ~{} tokens).\n",
        thousands(before),
        thousands(after)
    )
}

/// What a reloaded session shows, as `session/update`s, made one at a time as they are sent.
pub(super) fn replay_updates(shown: Vec<Shown>, compaction_gated: bool) -> impl Iterator<Item = SessionUpdate> {
    shown.into_iter().flat_map(move |item| shown_updates(item, compaction_gated))
}

fn shown_updates(item: Shown, compaction_gated: bool) -> Vec<SessionUpdate> {
    match item {
        Shown::User { id, blocks, .. } => blocks
            .iter()
            .map(|block| {
                SessionUpdate::UserMessageChunk(
                    ContentChunk::new(prompt::to_content_block(block)).message_id(MessageId::new(id.as_str())),
                )
            })
            .collect(),
        Shown::Text { id, text } | Shown::Notice { id, text } => {
            vec![SessionUpdate::AgentMessageChunk(chunk(text, &id))]
        }
        Shown::Thought { id, text } => vec![SessionUpdate::AgentThoughtChunk(chunk(text, &id))],
        Shown::Tool(state) => {
            let state = *state;
            let mut call = ToolCall::new(state.id, state.title)
                .kind(kind(state.kind))
                .status(status(state.status))
                .content(state.content.iter().map(content).collect())
                .locations(state.locations.iter().map(location).collect())
                .raw_input(state.raw_input)
                .meta(meta(json!({ "toolName": state.name })));
            if let Some(raw) = state.raw_output {
                call = call.raw_output(raw);
            }
            vec![SessionUpdate::ToolCall(call)]
        }
        Shown::Plan(entries) => vec![SessionUpdate::Plan(plan(&entries))],
        Shown::Compaction { id, summary, tokens_before, tokens_after } => {
            let event =
                CompactionEvent { id, phase: CompactionPhase::Completed { summary, tokens_before, tokens_after } };
            compaction_update(&event, compaction_gated).into_iter().collect()
        }
    }
}

fn plan(entries: &[runtime::PlanEntry]) -> Plan {
    Plan::new(
        entries
            .iter()
            .map(|e| {
                let priority = match e.priority {
                    runtime::PlanPriority::High => PlanEntryPriority::High,
                    runtime::PlanPriority::Medium => PlanEntryPriority::Medium,
                    runtime::PlanPriority::Low => PlanEntryPriority::Low,
                };
                let status = match e.status {
                    runtime::PlanStatus::Pending => PlanEntryStatus::Pending,
                    runtime::PlanStatus::InProgress => PlanEntryStatus::InProgress,
                    runtime::PlanStatus::Completed => PlanEntryStatus::Completed,
                };
                PlanEntry::new(e.content.clone(), priority, status)
            })
            .collect(),
    )
}

/// Now, as ISO 8601 (UTC).
pub(super) fn iso_now() -> String {
    jiff::Timestamp::now().to_string()
}

/// Unix milliseconds as ISO 8601 (UTC).
pub(super) fn iso(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| String::new(), |t| t.to_string())
}

fn is_final(s: ToolStatus) -> bool {
    matches!(s, ToolStatus::Completed | ToolStatus::Failed)
}

pub(super) fn meta(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub(super) fn chunk(text: String, message_id: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text)).message_id(MessageId::new(message_id))
}

pub(super) fn kind(k: runtime::ToolKind) -> ToolKind {
    match k {
        runtime::ToolKind::Read => ToolKind::Read,
        runtime::ToolKind::Edit => ToolKind::Edit,
        runtime::ToolKind::Delete => ToolKind::Delete,
        runtime::ToolKind::Move => ToolKind::Move,
        runtime::ToolKind::Search => ToolKind::Search,
        runtime::ToolKind::Execute => ToolKind::Execute,
        runtime::ToolKind::Think => ToolKind::Think,
        runtime::ToolKind::Fetch => ToolKind::Fetch,
        runtime::ToolKind::SwitchMode => ToolKind::SwitchMode,
        runtime::ToolKind::Other => ToolKind::Other,
    }
}

fn status(s: ToolStatus) -> ToolCallStatus {
    match s {
        ToolStatus::Pending => ToolCallStatus::Pending,
        ToolStatus::InProgress => ToolCallStatus::InProgress,
        ToolStatus::Completed => ToolCallStatus::Completed,
        ToolStatus::Failed => ToolCallStatus::Failed,
    }
}

pub(super) fn content(c: &runtime::ToolContent) -> ToolCallContent {
    match c {
        runtime::ToolContent::Text(text) => ToolCallContent::Content(Content::new(ContentBlock::from(text.clone()))),
        runtime::ToolContent::Diff { path, old_text, new_text } => {
            ToolCallContent::Diff(Diff::new(path.clone(), new_text.clone()).old_text(old_text.clone()))
        }
        runtime::ToolContent::Terminal(id) => ToolCallContent::Terminal(Terminal::new(id.clone())),
        runtime::ToolContent::Image { mime_type, data } => ToolCallContent::Content(Content::new(ContentBlock::Image(
            acp_protocol::acp::schema::ImageContent::new(data.clone(), mime_type.clone()),
        ))),
    }
}

pub(super) fn location(l: &runtime::Location) -> ToolCallLocation {
    ToolCallLocation::new(l.path.clone()).line(l.line)
}

pub(super) fn stop_reason(reason: runtime::StopReason) -> StopReason {
    match reason {
        runtime::StopReason::EndTurn => StopReason::EndTurn,
        runtime::StopReason::MaxTokens => StopReason::MaxTokens,
        runtime::StopReason::MaxTurnRequests => StopReason::MaxTurnRequests,
        runtime::StopReason::Refusal => StopReason::Refusal,
        runtime::StopReason::Cancelled => StopReason::Cancelled,
    }
}

pub(super) fn acp_usage(u: &runtime::Usage) -> Usage {
    let mut usage = Usage::new(u.total(), u.input, u.output);
    if let Some(r) = u.reasoning {
        usage = usage.thought_tokens(r);
    }
    if u.cache_read > 0 {
        usage = usage.cached_read_tokens(u.cache_read);
    }
    if u.cache_write > 0 {
        usage = usage.cached_write_tokens(u.cache_write);
    }
    usage
}

impl State {
    pub fn send_update(&self, session_id: &str, update: SessionUpdate) {
        self.conn.notify(acp_protocol::acp::client_methods::SESSION_UPDATE, &notification(session_id, update));
    }
}

/// A stored session as `session/list` shows it.
pub(super) fn session_info(row: SessionSummary) -> SessionInfo {
    let mut meta = json!({
        "createdAt": iso(row.created_at),
        "model": row.model,
        "mode": row.mode,
        "origin": row.origin,
        "inputTokens": row.input_tokens,
        "outputTokens": row.output_tokens,
        "contextTokens": row.context_tokens,
    });
    // A subagent: the session that spawned it.
    if let Some(parent) = row.parent_id {
        meta["parentId"] = json!(parent);
    }
    let mut info = SessionInfo::new(row.id, row.cwd)
        .additional_directories(row.additional_dirs)
        .title(row.title)
        .updated_at(iso(row.updated_at));
    if let Value::Object(map) = meta {
        info = info.meta(map);
    }
    info
}
