//! Gateway events → ACP `session/update`s, for this bridge's own runs only (matched by run id):
//! `chat` deltas carry the cumulative reply, of which only the new suffix is sent (text and
//! thinking apart), and `final` flushes whatever tail the last delta did not carry; `agent` tool
//! events become `tool_call` / `tool_call_update` with the heuristic kind and the diffs the event
//! carries; usage becomes `usage_update`. Approval questions for a run of ours go to the editor
//! as `session/request_permission`, and its choice back as `exec.approval.resolve`.

use std::path::PathBuf;
use std::sync::Arc;

use acp_protocol::acp::client_methods::{SESSION_REQUEST_PERMISSION, SESSION_UPDATE};
use acp_protocol::acp::schema::{
    ContentBlock, ContentChunk, Diff, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionResponse, SessionUpdate, StopReason, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, UsageUpdate,
};
use acp_protocol::gateway::StopReason as WireStop;
use acp_protocol::gateway::events::{
    AgentEvent, ApprovalRequest, ApprovalRequested, ChatEvent, ChatMessage, ChatState, DiffData, ShownContent,
    ToolData, UsageData,
};
use acp_protocol::gateway::methods::{ApprovalResolve, ApprovalResolveParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::super::updates;
use super::{Bridge, CONNECT_WAIT, PromptEnd};
use crate::sync::lock;

/// The part of `now` (a cumulative text) after `sent`, which becomes `now`; `None` when nothing
/// is new. A text that does not extend what was sent (a gateway that rewrote it, or framed
/// another reply's text as ours) sends nothing: text already shown cannot be taken back, and a
/// cut by length would show text that is not the reply's. What extends it later is sent.
pub(super) fn new_suffix(sent: &mut String, now: &str) -> Option<String> {
    if now.len() <= sent.len() {
        return None;
    }
    if !now.starts_with(sent.as_str()) {
        tracing::warn!("the gateway sent a reply's text that does not extend what was shown; not shown");
        return None;
    }
    let suffix = now[sent.len()..].to_owned();
    *sent = now.to_owned();
    Some(suffix)
}

/// Whether an event of run `run` is framed for the session that run belongs to: its
/// `sessionKey` is the run's, in either spelling (`x`, or `agent:<id>:x` as the gateway gives
/// it back).
fn same_session(framed: &str, key: &str) -> bool {
    let tail = |k: &str| -> String {
        k.strip_prefix("agent:").and_then(|r| r.split_once(':')).map_or(k, |(_, rest)| rest).to_owned()
    };
    framed == key || (framed.starts_with("agent:") != key.starts_with("agent:") && tail(framed) == tail(key))
}

/// The text blocks of a chat message (as history gives it), joined (and its thinking blocks,
/// joined).
fn message_text(message: &Value) -> (String, String) {
    serde_json::from_value::<ChatMessage>(message.clone()).unwrap_or_default().text_and_thinking()
}

fn stop_reason(wire: &str) -> StopReason {
    match WireStop::parse(wire) {
        WireStop::Length => StopReason::MaxTokens,
        WireStop::MaxTurnRequests => StopReason::MaxTurnRequests,
        WireStop::Refusal => StopReason::Refusal,
        WireStop::Stop | WireStop::Aborted | WireStop::Error => StopReason::EndTurn,
    }
}

impl Bridge {
    pub(super) fn send(&self, session: &str, update: SessionUpdate) {
        self.conn.notify(SESSION_UPDATE, &updates::notification(session, update));
    }

    pub(super) fn send_text(&self, session: &str, run_id: &str, text: String, thought: bool) {
        let chunk = updates::chunk(text, run_id);
        self.send(
            session,
            if thought { SessionUpdate::AgentThoughtChunk(chunk) } else { SessionUpdate::AgentMessageChunk(chunk) },
        );
    }

    /// A `chat` event: the reply so far, or the end of a run.
    pub(super) fn on_chat(&self, event: &ChatEvent) {
        let run_id = event.run_id.as_str();
        let (text, thinking) = event.message.as_ref().map(ChatMessage::text_and_thinking).unwrap_or_default();
        let (session, new_thought, new_text) = {
            let mut runs = lock(&self.runs);
            let Some(run) = runs.get_mut(run_id) else { return };
            if !same_session(&event.session_key, &run.key) {
                tracing::warn!(run = run_id, "a chat event of our run framed for another session; ignored");
                return;
            }
            let thought = new_suffix(&mut run.thought, &thinking);
            let text = new_suffix(&mut run.sent, &text);
            (run.session_id.clone(), thought, text)
        };
        if let Some(thought) = new_thought {
            self.send_text(&session, run_id, thought, true);
        }
        if let Some(text) = new_text {
            self.send_text(&session, run_id, text, false);
        }
        match event.state {
            ChatState::Final => {
                let stop = stop_reason(event.stop_reason.as_deref().unwrap_or_default());
                self.end_run(run_id, PromptEnd::Stopped(stop));
            }
            ChatState::Aborted => self.end_run(run_id, PromptEnd::Stopped(StopReason::Cancelled)),
            ChatState::Error => {
                let message = event.error_message.as_deref().unwrap_or("the run failed on the gateway");
                self.end_run(run_id, PromptEnd::Failed(message.to_owned()));
            }
            ChatState::Delta | ChatState::Other => {}
        }
    }

    /// An `agent` event: tool calls and usage of one of our runs.
    pub(super) fn on_agent(&self, event: &AgentEvent) {
        let run_id = event.run_id.as_str();
        let framed = lock(&self.runs).get(run_id).map(|run| same_session(&event.session_key, &run.key));
        if framed == Some(false) {
            tracing::warn!(run = run_id, "an agent event of our run framed for another session; ignored");
            return;
        }
        match event.stream.as_str() {
            "tool" => self.on_tool(run_id, &event.data_as::<ToolData>()),
            "usage" => {
                let usage: UsageData = event.data_as();
                let session = lock(&self.runs).get(run_id).map(|r| r.session_id.clone());
                if let (Some(session), Some(used), Some(size)) = (session, usage.context_tokens, usage.context_window) {
                    self.send(&session, SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)));
                }
            }
            _ => {}
        }
    }

    fn on_tool(&self, run_id: &str, data: &ToolData) {
        let id = data.tool_call_id.as_str();
        if id.is_empty() {
            return;
        }
        let (session, cwd, announced) = {
            let mut runs = lock(&self.runs);
            let Some(run) = runs.get_mut(run_id) else { return };
            (run.session_id.clone(), run.cwd.clone(), !run.tools.insert(id.to_owned()))
        };
        let name = if data.name.is_empty() { "tool" } else { data.name.as_str() };
        let args = data.args.clone();
        let (kind, title, locations) = crate::runtime::describe_foreign(name, &args, &cwd);
        let title = Some(data.title.clone()).filter(|t| !t.is_empty()).unwrap_or(title);
        let mut content: Vec<ToolCallContent> = diffs(&data.diffs, &cwd);
        let status = match data.phase.as_str() {
            "result" if data.is_error == Some(true) => ToolCallStatus::Failed,
            "result" => ToolCallStatus::Completed,
            _ => ToolCallStatus::InProgress,
        };
        let result = match &data.result {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        if let Some(text) = result.as_ref().filter(|t| !t.is_empty()) {
            content.push(ToolCallContent::from(ContentBlock::from(text.clone())));
        }
        let locations: Vec<_> = locations.iter().map(updates::location).collect();
        if !announced {
            let call = ToolCall::new(id.to_owned(), title)
                .kind(updates::kind(kind))
                .status(status)
                .raw_input(args)
                .locations(locations)
                .content(content)
                .meta(updates::meta(json!({"toolName": name})));
            self.send(&session, SessionUpdate::ToolCall(call));
            return;
        }
        let mut fields = ToolCallUpdateFields::new().status(status);
        if !content.is_empty() {
            fields = fields.content(content);
        }
        if let Some(output) = result {
            fields = fields.raw_output(json!(output));
        }
        self.send(&session, SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_owned(), fields)));
    }

    /// `exec.approval.requested` for one of our runs: asked of the editor, answered back.
    pub(super) fn on_question(self: Arc<Self>, question: ApprovalRequested) {
        let request = &question.request;
        let id = question.id.clone();
        if id.is_empty() {
            return;
        }
        let run = request.run_id.as_deref().unwrap_or_default();
        let key = request.session_key.as_str();
        let ours = {
            let runs = lock(&self.runs);
            runs.get(run)
                .filter(|r| same_session(key, &r.key))
                .or_else(|| runs.values().find(|r| r.started && r.key == key))
                .map(|r| (r.session_id.clone(), r.cwd.clone()))
        };
        let Some((session, cwd)) = ours else { return };
        let asked = CancellationToken::new();
        lock(&self.questions).insert(id.clone(), asked.clone());
        let options = question_options(request);
        let given = |s: &str| Some(s.to_owned()).filter(|s| !s.is_empty());
        let call_id = given(&request.tool_call_id).unwrap_or_else(|| format!("approval:{id}"));
        let title = given(&request.title).or_else(|| given(&request.command));
        let title = title.unwrap_or_else(|| "Approve this action?".into());
        let mut fields = ToolCallUpdateFields::new().title(title).status(ToolCallStatus::Pending);
        if !request.raw_input.is_null() {
            fields = fields.raw_input(request.raw_input.clone());
        } else if let Some(command) = given(&request.command) {
            fields = fields.raw_input(json!({"command": command}));
        }
        let shown = diffs(
            &request
                .content
                .iter()
                .filter_map(|c| match c {
                    ShownContent::Diff { path, old_text, new_text } => {
                        Some(DiffData { path: path.clone(), old_text: old_text.clone(), new_text: new_text.clone() })
                    }
                    _ => None,
                })
                .collect::<Vec<_>>(),
            &cwd,
        );
        if !shown.is_empty() {
            fields = fields.content(shown);
        }
        let params =
            json!({"sessionId": session, "toolCall": ToolCallUpdate::new(call_id, fields), "options": options});
        tokio::spawn(async move {
            let answer = self.conn.request(SESSION_REQUEST_PERMISSION, &params, &asked).await;
            let still_open = lock(&self.questions).remove(&id).is_some();
            if !still_open {
                return; // answered elsewhere, or withdrawn
            }
            let decision = match answer.ok().and_then(|v| serde_json::from_value::<RequestPermissionResponse>(v).ok()) {
                Some(RequestPermissionResponse { outcome: RequestPermissionOutcome::Selected(s), .. }) => {
                    s.option_id.0.to_string()
                }
                _ => "deny".to_owned(),
            };
            let answer = ApprovalResolveParams { id, decision };
            let resolved = self.gateway.call::<ApprovalResolve>(&answer, CONNECT_WAIT).await;
            if let Err(e) = resolved {
                tracing::warn!(error = %e, "could not answer the gateway's approval question");
            }
        });
    }
}

/// The choices of a question: those it offers, else the reference's three decisions.
fn question_options(request: &ApprovalRequest) -> Vec<PermissionOption> {
    let kind = |k: &str| match k {
        "allow_always" => PermissionOptionKind::AllowAlways,
        "reject_once" => PermissionOptionKind::RejectOnce,
        "reject_always" => PermissionOptionKind::RejectAlways,
        _ => PermissionOptionKind::AllowOnce,
    };
    let offered: Vec<PermissionOption> = request
        .options
        .iter()
        .filter(|o| !o.id.is_empty())
        .map(|o| PermissionOption::new(o.id.clone(), o.label.clone(), kind(&o.kind)))
        .collect();
    if !offered.is_empty() {
        return offered;
    }
    let always_unavailable = request.unavailable_decisions.iter().any(|d| d == "allow-always");
    let mut options = vec![PermissionOption::new("allow-once", "Allow once", PermissionOptionKind::AllowOnce)];
    if !always_unavailable {
        options.push(PermissionOption::new("allow-always", "Always allow", PermissionOptionKind::AllowAlways));
    }
    options.push(PermissionOption::new("deny", "Reject", PermissionOptionKind::RejectOnce));
    options
}

/// The diffs an event or question carries, as the editor shows them (paths under `cwd`).
fn diffs(list: &[DiffData], cwd: &std::path::Path) -> Vec<ToolCallContent> {
    list.iter()
        .filter(|d| !d.path.is_empty())
        .map(|d| {
            let path = PathBuf::from(&d.path);
            let path = if path.is_absolute() { path } else { cwd.join(path) };
            ToolCallContent::Diff(Diff::new(path, d.new_text.clone()).old_text(d.old_text.clone()))
        })
        .collect()
}

/// A replayed message, as the editor shows it: the user's text (without the working-directory
/// line this bridge put first), the assistant's blocks in order — thoughts, text, tool calls.
pub(super) fn replay(message: &Value, id: &str, cwd: &std::path::Path) -> Vec<SessionUpdate> {
    let chunk = |text: String| ContentChunk::new(ContentBlock::from(text)).message_id(Some(id.to_owned().into()));
    match message["role"].as_str() {
        Some("user") => {
            let (text, _) = message_text(message);
            let text = match text.strip_prefix("[Working directory: ") {
                Some(rest) => rest.split_once("]\n\n").map_or(text.clone(), |(_, t)| t.to_owned()),
                None => text,
            };
            vec![SessionUpdate::UserMessageChunk(chunk(text))]
        }
        Some("assistant") => match &message["content"] {
            Value::String(text) => vec![SessionUpdate::AgentMessageChunk(chunk(text.clone()))],
            Value::Array(blocks) => blocks.iter().filter_map(|b| replay_block(b, &chunk, cwd)).collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn replay_block(block: &Value, chunk: &dyn Fn(String) -> ContentChunk, cwd: &std::path::Path) -> Option<SessionUpdate> {
    let text = |k: &str| block[k].as_str().filter(|t| !t.is_empty()).map(str::to_owned);
    match block["type"].as_str()? {
        "text" => Some(SessionUpdate::AgentMessageChunk(chunk(text("text")?))),
        "thinking" => Some(SessionUpdate::AgentThoughtChunk(chunk(text("thinking")?))),
        "toolCall" | "tool_use" => {
            let name = block["name"].as_str().unwrap_or("tool");
            let args = block.get("arguments").or(block.get("input")).cloned().unwrap_or(Value::Null);
            let (kind, title, locations) = crate::runtime::describe_foreign(name, &args, cwd);
            let status = if block["status"] == "failed" { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
            let mut call =
                ToolCall::new(block["id"].as_str().unwrap_or_default().to_owned(), text("title").unwrap_or(title))
                    .kind(updates::kind(kind))
                    .status(status)
                    .raw_input(args)
                    .locations(locations.iter().map(updates::location).collect::<Vec<_>>());
            if let Some(result) = text("result") {
                call = call.content(vec![ToolCallContent::from(ContentBlock::from(result))]);
            }
            Some(SessionUpdate::ToolCall(call))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_new_suffix_is_sent_and_a_longer_final_flushes_the_tail() {
        let mut sent = String::new();
        assert_eq!(new_suffix(&mut sent, "Hel").as_deref(), Some("Hel"));
        assert_eq!(new_suffix(&mut sent, "Hello"), Some("lo".into()));
        assert_eq!(new_suffix(&mut sent, "Hello"), None, "a repeat adds nothing");
        assert_eq!(new_suffix(&mut sent, "Hel"), None, "a shorter (stale) snapshot adds nothing");
        assert_eq!(new_suffix(&mut sent, "Hello, world."), Some(", world.".into()), "the tail the final carries");
        let mut sent = "héllo".to_owned();
        assert_eq!(new_suffix(&mut sent, "FOREIGN text, longer"), None, "not an extension: nothing shown");
        assert_eq!(sent, "héllo", "and what was shown stays what is extended");
        assert_eq!(new_suffix(&mut sent, "héllo there"), Some(" there".into()));
    }

    #[test]
    fn messages_read_text_and_thinking_blocks() {
        let m = json!({"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "a"},
            {"type": "text", "text": "b"}]});
        assert_eq!(message_text(&m), ("a\nb".into(), "hmm".into()));
        assert_eq!(message_text(&json!({"content": "plain"})), ("plain".into(), String::new()));
        let user = json!({"role": "user", "content": "[Working directory: ~/p]\n\nfix it"});
        let SessionUpdate::UserMessageChunk(c) = &replay(&user, "m", std::path::Path::new("/"))[0] else { panic!() };
        assert_eq!(c.content, ContentBlock::from("fix it".to_owned()));
    }
}
