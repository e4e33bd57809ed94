//! `sessions_list` and `sessions_history`: reading the store.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::me::Me;
use crate::history::replay::Shown;
use crate::runtime::shared::Runtime;
use crate::tools::{Access, Action, Prepared, Tool, ToolContext, ToolKind, ToolOutput};

// ---------------------------------------------------------------- sessions_list, sessions_history

pub(super) struct List(pub(super) Arc<Me>);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// At most this many (default 20)
    #[schemars(range(min = 1, max = 200))]
    limit: Option<u64>,
    /// Only the subagents this session started
    children: Option<bool>,
}

impl Tool for List {
    const NAME: &'static str = "sessions_list";
    type Args = ListArgs;

    fn description(&self) -> String {
        "List sessions, most recent first: key, title, whether it is open, the session that started it.".into()
    }

    async fn prepare(&self, args: ListArgs, _ctx: &ToolContext) -> Result<Prepared, String> {
        Ok(Prepared {
            title: "List sessions".into(),
            kind: ToolKind::Read,
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access::default(),
            action: Box::new(ListAction {
                me: self.0.clone(),
                limit: args.limit.unwrap_or(20).clamp(1, 200) as usize,
                children: args.children.unwrap_or(false),
            }),
        })
    }
}

struct ListAction {
    me: Arc<Me>,
    limit: usize,
    children: bool,
}

impl Action for ListAction {
    async fn run(self, _ctx: &ToolContext) -> ToolOutput {
        let runtime = Runtime { shared: self.me.shared.clone() };
        let page = match runtime.list_sessions(None, None, if self.children { 200 } else { self.limit }).await {
            Ok(page) => page,
            Err(e) => return ToolOutput::error(format!("the sessions cannot be listed: {e:?}")),
        };
        let rows: Vec<serde_json::Value> = page
            .sessions
            .into_iter()
            .filter(|s| !self.children || s.parent_id.as_deref() == Some(&*self.me.session))
            .filter(|s| self.me.may_see(&s.id) || s.parent_id.as_deref() == Some(&*self.me.session))
            .take(self.limit)
            .map(|s| {
                json!({"sessionKey": s.id, "title": s.title, "open": self.me.shared.session(&s.id).is_some(),
                    "parent": s.parent_id, "updatedAt": s.updated_at})
            })
            .collect();
        ToolOutput::ok(serde_json::to_string_pretty(&rows).unwrap_or_default(), Vec::new())
    }
}

pub(super) struct History(pub(super) Arc<Me>);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryArgs {
    #[serde(rename = "sessionKey")]
    session_key: String,
    /// The last this many messages (default 20)
    #[schemars(range(min = 1, max = 200))]
    limit: Option<u64>,
}

impl Tool for History {
    const NAME: &'static str = "sessions_history";
    type Args = HistoryArgs;

    fn description(&self) -> String {
        "Read another session's conversation: its messages, and its tool calls by title.".into()
    }

    async fn prepare(&self, args: HistoryArgs, _ctx: &ToolContext) -> Result<Prepared, String> {
        if !self.0.may_see(&args.session_key) {
            return Err(format!("session `{}` is another agent's", args.session_key));
        }
        Ok(Prepared {
            title: format!("Read session {}", args.session_key),
            kind: ToolKind::Read,
            locations: Vec::new(),
            preview: Vec::new(),
            access: self.0.access(&args.session_key, "the conversation"),
            action: Box::new(HistoryAction {
                me: self.0.clone(),
                key: args.session_key,
                limit: args.limit.unwrap_or(20).clamp(1, 200) as usize,
            }),
        })
    }
}

struct HistoryAction {
    me: Arc<Me>,
    key: String,
    limit: usize,
}

impl Action for HistoryAction {
    async fn run(self, _ctx: &ToolContext) -> ToolOutput {
        let runtime = Runtime { shared: self.me.shared.clone() };
        let shown = match runtime.history(&self.key).await {
            Ok(Some(shown)) => shown,
            Ok(None) => return ToolOutput::error(format!("no session `{}`", self.key)),
            Err(e) => return ToolOutput::error(format!("the session cannot be read: {e}")),
        };
        let mut lines: Vec<String> = Vec::new();
        for item in shown {
            match item {
                Shown::User { blocks, .. } => {
                    lines.push(format!("user: {}", crate::history::input::plain_text(&blocks)))
                }
                Shown::Text { text, .. } => match lines.last_mut() {
                    Some(last) if last.starts_with("assistant: ") => last.push_str(&text),
                    _ => lines.push(format!("assistant: {text}")),
                },
                Shown::Tool(call) => lines.push(format!("tool: {} ({:?})", call.title, call.status)),
                Shown::Notice { text, .. } => lines.push(format!("note: {text}")),
                _ => {}
            }
        }
        let skip = lines.len().saturating_sub(self.limit);
        ToolOutput::ok(lines[skip..].join("\n"), Vec::new())
    }
}
