//! Approval questions of gateway runs, answered by a connected client: the question goes out as
//! `exec.approval.requested` to every client that may answer (`operator.approvals` or admin), the
//! first `exec.approval.resolve` decides, and everyone hears `exec.approval.resolved`. Unanswered
//! questions are rejected after the timeout; a cancelled turn withdraws its question. With no one
//! connected who could answer, the run is told so at once (it never waits for nobody).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_protocol::gateway::events::{
    ApprovalOption, ApprovalRequest, ApprovalRequested, ApprovalResolved, ShownContent, name,
};
use acp_protocol::gateway::methods::ApprovalDone;
use acp_protocol::gateway::{ErrorShape, code};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::hub::Hub;
use crate::clock::now_ms;
use crate::runtime::ToolContent;
use crate::runtime::host::{OptionKind, PermissionAnswer, PermissionOption, PermissionRequest};
use crate::sync::lock;

/// Why a gateway run cannot ask.
pub const UNASKABLE: &str = "no one who can answer approval questions is connected to the gateway (a client \
     with the operator.approvals or operator.admin scope, such as the web chat); allow it with an \"always\" \
     rule ([[permissions]] in config.toml), change the session's mode, or run it from an editor";

/// How long a question waits for an answer, unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// A chat where a session's questions are asked (the channel conversation its runs come from).
pub trait ChatAsker: Send + Sync {
    /// Posts question `id` of session `key` in the chat; false if it cannot be asked there.
    fn ask(&self, key: &str, id: &str, question: &ChatQuestion) -> bool;
    /// Question `id` was answered elsewhere, expired or was withdrawn: `how` says which.
    fn closed(&self, key: &str, id: &str, how: &str);
}

/// A question as a chat shows it.
pub struct ChatQuestion {
    pub title: String,
    /// The command that will run, for a shell call.
    pub command: Option<String>,
    /// The files the call would change.
    pub files: Vec<String>,
    /// Text the call shows (what a message would say).
    pub texts: Vec<String>,
    pub options: Vec<PermissionOption>,
    pub timeout: Duration,
}

struct Pending {
    /// The session asking.
    key: String,
    /// The `exec.approval.requested` payload (sent again to approvers who connect later).
    event: ApprovalRequested,
    options: Vec<PermissionOption>,
    answer: oneshot::Sender<String>,
}

pub struct Approvals {
    pending: Mutex<HashMap<String, Pending>>,
    timeout: Duration,
    /// Sessions whose questions (also) go to a chat, by key.
    chats: Mutex<HashMap<String, Arc<dyn ChatAsker>>>,
}

impl Approvals {
    pub fn new(timeout: Duration) -> Self {
        Self { pending: Mutex::default(), timeout, chats: Mutex::default() }
    }

    /// From now on session `key`'s questions are also asked in `chat` (the last chat a run of
    /// it came from).
    pub fn route_to_chat(&self, key: &str, chat: Arc<dyn ChatAsker>) {
        lock(&self.chats).insert(key.to_owned(), chat);
    }

    fn chat(&self, key: &str) -> Option<Arc<dyn ChatAsker>> {
        lock(&self.chats).get(key).cloned()
    }

    /// Asks the connected approvers about a call of session `key`'s running run.
    /// `elsewhere` says whether someone who may answer is connected to another gateway of a bus
    /// and can be sent a question of so many bytes (asked only when no one here may answer).
    pub async fn ask<F: Future<Output = bool>>(
        &self,
        hub: &Arc<Hub>,
        key: &str,
        request: &PermissionRequest,
        cancel: &CancellationToken,
        elsewhere: impl FnOnce(usize) -> F,
    ) -> PermissionAnswer {
        let mut chat = self.chat(key);
        let id = uuid::Uuid::new_v4().to_string();
        let call = &request.call;
        let command = call.raw_input.get("command").and_then(Value::as_str).unwrap_or(&call.title);
        let run_id = hub.turn_of(key, None).first().and_then(|t| hub.run_id(*t));
        let created = now_ms();
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        let options = request
            .options
            .iter()
            .map(|o| ApprovalOption { id: o.id.clone(), label: o.label.clone(), kind: kind_name(o.kind).into() })
            .collect();
        let always = request.options.iter().any(|o| o.kind == OptionKind::AllowAlways);
        let asked = ApprovalRequest {
            command: command.to_owned(),
            title: call.title.clone(),
            kind: super::hub::wire_name(&call.kind),
            tool_name: call.name.clone(),
            raw_input: call.raw_input.clone(),
            content: shown(&call.content),
            host: "gateway".into(),
            agent_id: crate::config::agents::agent_or_main(key).to_owned(),
            session_key: key.to_owned(),
            run_id,
            tool_call_id: call.id.clone(),
            options,
            unavailable_decisions: if always { Vec::new() } else { vec!["allow-always".into()] },
        };
        let event = ApprovalRequested {
            approval_kind: "exec".into(),
            id: id.clone(),
            request: asked,
            created_at_ms: created,
            expires_at_ms: created.saturating_add(timeout_ms),
        };
        let (answer, answered) = oneshot::channel();
        lock(&self.pending).insert(
            id.clone(),
            Pending { key: key.to_owned(), event: event.clone(), options: request.options.clone(), answer },
        );
        if let Some(asker) = chat.clone() {
            let files = call
                .content
                .iter()
                .filter_map(|c| match c {
                    ToolContent::Diff { path, .. } => Some(path.display().to_string()),
                    _ => None,
                })
                .collect();
            let command = call.raw_input.get("command").and_then(Value::as_str).map(str::to_owned);
            let texts = call
                .content
                .iter()
                .filter_map(|c| match c {
                    ToolContent::Text(text) => Some(text.clone()),
                    _ => None,
                })
                .collect();
            let question = ChatQuestion {
                title: call.title.clone(),
                command,
                files,
                texts,
                options: request.options.clone(),
                timeout: self.timeout,
            };
            if !asker.ask(key, &id, &question) {
                chat = None;
            }
        }
        if chat.is_none() && !hub.has_approver() {
            let size = serde_json::to_string(&event).map_or(usize::MAX, |text| text.len());
            if !elsewhere(size).await {
                lock(&self.pending).remove(&id);
                // An approver who came here meanwhile was shown it: it is withdrawn (it never
                // went to the other gateways).
                if hub.has_approver() {
                    let withdrawn = ApprovalResolved {
                        id: id.clone(),
                        decision: "deny".into(),
                        reason: Some("cancelled".into()),
                        ts: now_ms(),
                        ..ApprovalResolved::default()
                    };
                    hub.to_approvers(None, name::APPROVAL_RESOLVED, &withdrawn);
                }
                return PermissionAnswer::Unaskable(UNASKABLE.into());
            }
        }
        // Unless it was answered meanwhile (by an approver who came and was shown it).
        if lock(&self.pending).contains_key(&id) {
            hub.to_approvers(Some(key), name::APPROVAL_REQUESTED, &event);
        }
        let outcome = tokio::select! {
            () = cancel.cancelled() => Err("cancelled"),
            () = tokio::time::sleep(self.timeout) => Err("expired"),
            chosen = answered => chosen.map_err(|_| "cancelled"),
        };
        if let Err(reason) = outcome {
            // Withdrawn: nobody can answer it any more.
            if lock(&self.pending).remove(&id).is_some() {
                let withdrawn = ApprovalResolved {
                    id: id.clone(),
                    decision: "deny".into(),
                    reason: Some(reason.into()),
                    ts: now_ms(),
                    ..ApprovalResolved::default()
                };
                hub.to_approvers(Some(key), name::APPROVAL_RESOLVED, &withdrawn);
                if let Some(chat) = &chat {
                    let how = if reason == "expired" {
                        "No answer in time, so it was not run."
                    } else {
                        "The run stopped; the question is withdrawn."
                    };
                    chat.closed(key, &id, how);
                }
            }
        }
        match outcome {
            Ok(option) => PermissionAnswer::Selected(option),
            Err("expired") => PermissionAnswer::NoAnswer,
            Err(_) => PermissionAnswer::Cancelled,
        }
    }

    /// `exec.approval.resolve {id, decision}`: `allow-once`, `allow-always`, `deny`, or one of the
    /// question's own option ids.
    pub fn resolve(&self, hub: &Hub, id: &str, decision: &str, by: &str) -> Result<ApprovalDone, Box<ErrorShape>> {
        let mut pending = lock(&self.pending);
        let Some(question) = pending.get(id) else {
            return Err(Box::new(ErrorShape::invalid("unknown or expired approval id")));
        };
        let wanted = |kinds: &[OptionKind]| question.options.iter().find(|o| kinds.contains(&o.kind));
        let option = match decision {
            "allow-once" => wanted(&[OptionKind::AllowOnce]),
            "allow-always" => wanted(&[OptionKind::AllowAlways]),
            "deny" => wanted(&[OptionKind::RejectOnce, OptionKind::RejectAlways]),
            other => question.options.iter().find(|o| o.id == other),
        };
        let Some(option) = option.cloned() else {
            let error = if decision == "allow-always" {
                ErrorShape::invalid("allow-always is unavailable for this request")
            } else {
                ErrorShape::invalid(
                    "invalid decision: use allow-once, allow-always, deny, or the id of one of the question's options",
                )
            };
            return Err(Box::new(error));
        };
        let Some(question) = pending.remove(id) else {
            return Err(Box::new(ErrorShape::new(code::UNAVAILABLE, "the question was withdrawn")));
        };
        drop(pending);
        let _ = question.answer.send(option.id.clone());
        let resolved = ApprovalResolved {
            id: id.to_owned(),
            decision: decision_name(option.kind).into(),
            option: Some(option.id.clone()),
            resolved_by: Some(by.to_owned()),
            reason: None,
            ts: now_ms(),
        };
        hub.to_approvers(Some(&question.key), name::APPROVAL_RESOLVED, &resolved);
        if let Some(chat) = self.chat(&question.key) {
            chat.closed(&question.key, id, &format!("Answered by {by}: {}.", option.label));
        }
        Ok(ApprovalDone { ok: true, id: id.to_owned(), decision: decision_name(option.kind).into() })
    }

    /// The label of option `option` of question `id`.
    pub fn label_of(&self, id: &str, option: &str) -> Option<String> {
        lock(&self.pending).get(id)?.options.iter().find(|o| o.id == option).map(|o| o.label.clone())
    }

    /// `exec.approval.get {id}`: the question as it was sent.
    pub fn get(&self, id: &str) -> Result<ApprovalRequested, Box<ErrorShape>> {
        lock(&self.pending)
            .get(id)
            .map(|p| p.event.clone())
            .ok_or_else(|| Box::new(ErrorShape::invalid("unknown or expired approval id")))
    }

    /// The questions waiting, for an approver who just connected.
    pub fn waiting(&self) -> Vec<ApprovalRequested> {
        lock(&self.pending).values().map(|p| p.event.clone()).collect()
    }
}

/// What the call shows (the diff it would make, text), as the question carries it.
fn shown(content: &[ToolContent]) -> Vec<ShownContent> {
    content
        .iter()
        .filter_map(|c| match c {
            ToolContent::Text(text) => Some(ShownContent::Text { text: text.clone() }),
            ToolContent::Diff { path, old_text, new_text } => Some(ShownContent::Diff {
                path: path.display().to_string(),
                old_text: old_text.clone(),
                new_text: new_text.clone(),
            }),
            ToolContent::Terminal(_) | ToolContent::Image { .. } => None,
        })
        .collect()
}

fn kind_name(kind: OptionKind) -> &'static str {
    match kind {
        OptionKind::AllowOnce => "allow_once",
        OptionKind::AllowAlways => "allow_always",
        OptionKind::RejectOnce => "reject_once",
        OptionKind::RejectAlways => "reject_always",
    }
}

fn decision_name(kind: OptionKind) -> &'static str {
    match kind {
        OptionKind::AllowOnce => "allow-once",
        OptionKind::AllowAlways => "allow-always",
        OptionKind::RejectOnce | OptionKind::RejectAlways => "deny",
    }
}
