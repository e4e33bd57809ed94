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
/// `sessionKey` is the run's, in either spelling (`x` or `agent:main:x`).
fn same_session(payload: &Value, key: &str) -> bool {
    payload["sessionKey"]
        .as_str()
        .is_some_and(|k| acp_protocol::gateway::canonical_key(k) == acp_protocol::gateway::canonical_key(key))
}

/// The text blocks of a chat message, joined (and its thinking blocks, joined).
fn message_text(message: &Value) -> (String, String) {
    let (mut text, mut thinking) = (Vec::new(), Vec::new());
    match &message["content"] {
        Value::String(s) => text.push(s.as_str()),
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str() {
                    Some("text") => text.extend(block["text"].as_str()),
                    Some("thinking") => thinking.extend(block["thinking"].as_str()),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    (text.join("\n"), thinking.join("\n"))
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
    pub(super) fn on_chat(&self, payload: &Value) {
        let Some(run_id) = payload["runId"].as_str() else { return };
        let (text, thinking) = message_text(&payload["message"]);
        let (session, new_thought, new_text) = {
            let mut runs = lock(&self.runs);
            let Some(run) = runs.get_mut(run_id) else { return };
            if !same_session(payload, &run.key) {
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
        match payload["state"].as_str() {
            Some("final") => {
                let stop = stop_reason(payload["stopReason"].as_str().unwrap_or_default());
                self.end_run(run_id, PromptEnd::Stopped(stop));
            }
            Some("aborted") => self.end_run(run_id, PromptEnd::Stopped(StopReason::Cancelled)),
            Some("error") => {
                let message = payload["errorMessage"].as_str().unwrap_or("the run failed on the gateway");
                self.end_run(run_id, PromptEnd::Failed(message.to_owned()));
            }
            _ => {}
        }
    }

    /// An `agent` event: tool calls and usage of one of our runs.
    pub(super) fn on_agent(&self, payload: &Value) {
        let Some(run_id) = payload["runId"].as_str() else { return };
        let framed = lock(&self.runs).get(run_id).map(|run| same_session(payload, &run.key));
        if framed == Some(false) {
            tracing::warn!(run = run_id, "an agent event of our run framed for another session; ignored");
            return;
        }
        let data = &payload["data"];
        match payload["stream"].as_str() {
            Some("tool") => self.on_tool(run_id, data),
            Some("usage") => {
                let session = lock(&self.runs).get(run_id).map(|r| r.session_id.clone());
                if let (Some(session), Some(used), Some(size)) =
                    (session, data["contextTokens"].as_u64(), data["contextWindow"].as_u64())
                {
                    self.send(&session, SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)));
                }
            }
            _ => {}
        }
    }

    fn on_tool(&self, run_id: &str, data: &Value) {
        let Some(id) = data["toolCallId"].as_str() else { return };
        let phase = data["phase"].as_str().unwrap_or_default();
        let (session, cwd, announced) = {
            let mut runs = lock(&self.runs);
            let Some(run) = runs.get_mut(run_id) else { return };
            (run.session_id.clone(), run.cwd.clone(), !run.tools.insert(id.to_owned()))
        };
        let name = data["name"].as_str().unwrap_or("tool");
        let args = data.get("args").cloned().unwrap_or(Value::Null);
        let (kind, title, locations) = crate::runtime::describe_foreign(name, &args, &cwd);
        let title = data["title"].as_str().filter(|t| !t.is_empty()).map_or(title, str::to_owned);
        let mut content: Vec<ToolCallContent> = diffs(data, &cwd);
        let status = match phase {
            "result" if data["isError"] == true => ToolCallStatus::Failed,
            "result" => ToolCallStatus::Completed,
            _ => ToolCallStatus::InProgress,
        };
        let result = match &data["result"] {
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
    pub(super) fn on_question(self: Arc<Self>, question: Value) {
        let request = &question["request"];
        let Some(id) = question["id"].as_str().map(str::to_owned) else { return };
        let run = request["runId"].as_str().unwrap_or_default();
        let key = request["sessionKey"].as_str().unwrap_or_default();
        let ours = {
            let runs = lock(&self.runs);
            runs.get(run)
                .filter(|r| same_session(request, &r.key))
                .or_else(|| runs.values().find(|r| r.started && r.key == key))
                .map(|r| (r.session_id.clone(), r.cwd.clone()))
        };
        let Some((session, cwd)) = ours else { return };
        let asked = CancellationToken::new();
        lock(&self.questions).insert(id.clone(), asked.clone());
        let options = question_options(request);
        let call_id = request["toolCallId"].as_str().map_or_else(|| format!("approval:{id}"), str::to_owned);
        let title = request["title"].as_str().or(request["command"].as_str()).unwrap_or("Approve this action?");
        let mut fields = ToolCallUpdateFields::new().title(title.to_owned()).status(ToolCallStatus::Pending);
        if let Some(input) = request.get("rawInput").filter(|v| !v.is_null()) {
            fields = fields.raw_input(input.clone());
        } else if let Some(command) = request["command"].as_str() {
            fields = fields.raw_input(json!({"command": command}));
        }
        let shown = diffs(request, &cwd);
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
            let resolved = self
                .gateway
                .request("exec.approval.resolve", json!({"id": id, "decision": decision}), CONNECT_WAIT)
                .await;
            if let Err(e) = resolved {
                tracing::warn!(error = %e, "could not answer the gateway's approval question");
            }
        });
    }
}

/// The choices of a question: those it offers, else the reference's three decisions.
fn question_options(request: &Value) -> Vec<PermissionOption> {
    let kind = |k: &str| match k {
        "allow_always" => PermissionOptionKind::AllowAlways,
        "reject_once" => PermissionOptionKind::RejectOnce,
        "reject_always" => PermissionOptionKind::RejectAlways,
        _ => PermissionOptionKind::AllowOnce,
    };
    if let Some(offered) = request["options"].as_array().filter(|o| !o.is_empty()) {
        return offered
            .iter()
            .filter_map(|o| {
                Some(PermissionOption::new(
                    o["id"].as_str()?.to_owned(),
                    o["label"].as_str().unwrap_or_default().to_owned(),
                    kind(o["kind"].as_str().unwrap_or_default()),
                ))
            })
            .collect();
    }
    let always_unavailable =
        request["unavailableDecisions"].as_array().is_some_and(|u| u.iter().any(|d| d == "allow-always"));
    let mut options = vec![PermissionOption::new("allow-once", "Allow once", PermissionOptionKind::AllowOnce)];
    if !always_unavailable {
        options.push(PermissionOption::new("allow-always", "Always allow", PermissionOptionKind::AllowAlways));
    }
    options.push(PermissionOption::new("deny", "Reject", PermissionOptionKind::RejectOnce));
    options
}

/// The diffs an event or question carries (`diffs: [{path, oldText, newText}]`, or `content`
/// blocks of type `diff`).
fn diffs(data: &Value, cwd: &std::path::Path) -> Vec<ToolCallContent> {
    let from_list = data["diffs"].as_array().into_iter().flatten();
    let from_content = data["content"].as_array().into_iter().flatten().filter(|c| c["type"] == "diff");
    from_list
        .chain(from_content)
        .filter_map(|d| {
            let path = PathBuf::from(d["path"].as_str()?);
            let path = if path.is_absolute() { path } else { cwd.join(path) };
            let new_text = d["newText"].as_str()?.to_owned();
            let diff = Diff::new(path, new_text).old_text(d["oldText"].as_str().map(str::to_owned));
            Some(ToolCallContent::Diff(diff))
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
