//! A running subagent as its parent sees it: shown as a tool call of the parent's turn, or as a
//! session of its own to a client that shows subagents.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::history::input::UserBlock;
use crate::runtime::event::{Event, EventKind, EventSink, SessionId, SubagentChange, SubagentEvent, TurnOutcome};
use crate::sync::lock;
use crate::tools::{ToolCallState, ToolContent, ToolStatus};

/// A running subagent as its parent sees it.
pub(super) struct Link {
    pub(super) parent: SessionId,
    pub(super) key: String,
    pub(super) label: String,
    pub(super) cwd: std::path::PathBuf,
    /// The parent's client shows the child as a session of its own (else as a tool call).
    pub(super) shows: bool,
    /// The parent's client, and the turn that spawned the child.
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) turn: crate::runtime::op::TurnId,
    /// The parent's transcript, while the parent is open (a closed parent's file is free for
    /// another process at once; a reload closes a call left running).
    pub(super) log: Option<std::sync::Weak<dyn crate::runtime::event::Recorder>>,
    /// Stops this child alone (the user cancelled it).
    pub(super) stop: CancellationToken,
    /// How its turn runs: restricted as the turn that started it, within that turn's budget.
    pub(super) options: crate::runtime::op::TurnOptions,
    /// The child as a tool call of the parent: shown to clients that do not show subagents, and
    /// always recorded in the parent's transcript (a reloaded parent shows it).
    pub(super) call: Mutex<ToolCallState>,
    pub(super) progress: Mutex<Progress>,
}

#[derive(Default)]
pub(super) struct Progress {
    pub(super) tool_calls: usize,
    pub(super) last: Option<String>,
    /// The child's text since its last tool call: its answer, once it ends.
    pub(super) text: String,
}

impl Link {
    /// The tool call's state: recorded, and shown unless the client shows the child itself.
    pub(super) fn show(&self, kind: fn(ToolCallState) -> EventKind) {
        let kind = kind(lock(&self.call).clone());
        if let Some(log) = self.log.as_ref().and_then(std::sync::Weak::upgrade) {
            log.shown(&kind);
        }
        if !self.shows {
            self.to_parent(kind);
        }
    }

    pub(super) fn to_parent(&self, kind: EventKind) {
        self.sink.emit(Event { session: self.parent.clone(), turn: self.turn, kind });
        self.sink.flush();
    }

    /// For a client that shows the child itself.
    pub(super) fn subagent(&self, change: SubagentChange) {
        if self.shows {
            let child = SessionId::from(self.key.as_str());
            self.to_parent(EventKind::Subagent(SubagentEvent { child, change }));
        }
    }

    /// A message between parent and child, for a client that shows the child itself.
    pub(super) fn message(&self, to_child: bool, text: &str) {
        let (parent, child) = (self.parent.clone(), SessionId::from(self.key.as_str()));
        let (from, to) = if to_child { (parent, child) } else { (child, parent) };
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.subagent(SubagentChange::Message { id, from, to, text: text.to_owned() });
    }

    pub(super) fn show_start(&self, task: &str) {
        lock(&self.call).content = vec![ToolContent::Text(format!("Task:\n{}", shown(task)))];
        self.show(EventKind::ToolCall);
        let title = self.label.clone();
        let description = crate::history::input::title_of(&[UserBlock::text(task.to_owned())]).unwrap_or_default();
        self.subagent(SubagentChange::Started { title, description, cwd: self.cwd.clone() });
        self.message(true, &shown(task));
    }

    pub(super) fn progressed(&self) {
        if self.shows {
            return; // the client follows the child's own updates
        }
        let line = {
            let p = lock(&self.progress);
            match &p.last {
                Some(last) => format!(
                    "Working: {} tool call{}; last: {last}",
                    p.tool_calls,
                    if p.tool_calls == 1 { "" } else { "s" }
                ),
                None => "Working…".to_owned(),
            }
        };
        {
            let mut call = lock(&self.call);
            call.content.truncate(1);
            call.content.push(ToolContent::Text(line));
        }
        self.show(EventKind::ToolCallUpdate);
    }

    pub(super) fn finish(&self, ended: &Ended, status: ToolStatus, summary: &str, result: &str) {
        if self.shows {
            if !result.is_empty() {
                self.message(false, &shown(result));
            }
            let (reason, error) = match ended {
                Ended::Done(Some(TurnOutcome::Stopped { reason, .. })) => (Some(*reason), None),
                Ended::Cancelled | Ended::ByUser => (Some(crate::runtime::event::StopReason::Cancelled), None),
                _ => (None, Some(summary.to_owned())),
            };
            self.subagent(SubagentChange::Ended { reason, error });
        }
        {
            let mut call = lock(&self.call);
            call.status = status;
            call.content.truncate(1);
            call.content.push(ToolContent::Text(summary.to_owned()));
            if !result.is_empty() {
                call.content.push(ToolContent::Text(format!("Result:\n{}", shown(result))));
            }
            call.raw_output = Some(json!({"status": summary, "result": result}));
        }
        self.show(EventKind::ToolCallUpdate);
    }
}

/// A subagent's events: to its parent's client under the child's id if that client shows
/// subagents, else kept from it except as progress of the child's tool call.
pub(super) struct ChildSink(pub(super) Arc<Link>);

impl EventSink for ChildSink {
    fn emit(&self, event: Event) {
        match &event.kind {
            EventKind::TextDelta { text, .. } => lock(&self.0.progress).text.push_str(text),
            EventKind::ToolCall(state) => {
                {
                    let mut p = lock(&self.0.progress);
                    p.tool_calls += 1;
                    p.last = Some(state.title.clone());
                    p.text.clear();
                }
                self.0.progressed();
            }
            _ => {}
        }
        if self.0.shows {
            self.0.sink.emit(event);
        }
    }

    fn flush(&self) {
        if self.0.shows {
            self.0.sink.flush();
        }
    }
}

/// How a subagent's run ended.
pub(super) enum Ended {
    Done(Option<TurnOutcome>),
    TimedOut,
    /// With the parent's turn.
    Cancelled,
    /// By the user, this child alone (ACP `session/cancel` with its id).
    ByUser,
}

/// The text shown to people for an agent-to-agent message: as sent, and decoded if OpenLang.
pub(super) fn shown(text: &str) -> String {
    match crate::openlang::is_openlang(text).then(|| crate::openlang::parse(text)) {
        Some(Ok(message)) => format!("{text}\n\nDecoded:\n{}", crate::openlang::explain(&message)),
        _ => text.to_owned(),
    }
}
