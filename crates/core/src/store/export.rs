//! A stored session for people and programs: Markdown (`acp sessions show`, `export --format md`)
//! and JSON (`export --format json`): the index row and everything the session showed, in order.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::SessionRow;
use crate::history::input::UserBlock;
use crate::history::replay::{Replay, Shown};
use crate::tools::plan::PlanStatus;
use crate::tools::{ToolContent, ToolStatus};

/// Unix milliseconds as local time, `2026-11-22 14:03`.
pub fn local_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// Unix milliseconds as ISO 8601 (UTC).
pub fn iso_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default()
}

pub fn row_json(row: &SessionRow) -> Value {
    json!({
        "id": row.id,
        "title": row.title,
        "cwd": row.cwd,
        "additionalDirectories": row.additional_dirs,
        "createdAt": iso_time(row.created_at),
        "updatedAt": iso_time(row.updated_at),
        "model": row.model,
        "mode": row.mode,
        "reasoning": row.reasoning,
        "inputTokens": row.input_tokens,
        "outputTokens": row.output_tokens,
        "contextTokens": row.context_tokens,
        "parentId": row.parent_id,
        "origin": row.origin,
    })
}

/// The session and what it showed, as one JSON document.
pub fn to_json(row: &SessionRow, replay: &Replay) -> Value {
    let items: Vec<Value> = replay.shown.iter().map(item_json).collect();
    json!({
        "session": row_json(row),
        "turns": replay.turns,
        "compactions": replay.compactions,
        "items": items,
    })
}

fn item_json(item: &Shown) -> Value {
    match item {
        Shown::User { id, blocks, .. } => json!({"type": "user", "id": id, "content": blocks}),
        Shown::Text { id, text } => json!({"type": "assistant", "id": id, "text": text}),
        Shown::Thought { id, text } => json!({"type": "thought", "id": id, "text": text}),
        Shown::Tool(state) => json!({"type": "tool_call", "call": state}),
        Shown::Plan(entries) => json!({"type": "plan", "entries": entries}),
        Shown::Compaction { id, summary, tokens_before, tokens_after } => json!({
            "type": "compaction", "id": id, "summary": summary, "tokensBefore": tokens_before, "tokensAfter": tokens_after
        }),
        Shown::Notice { id, text } => json!({"type": "notice", "id": id, "text": text.trim()}),
    }
}

/// The session as a Markdown document.
pub fn to_markdown(row: &SessionRow, replay: &Replay) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", row.title.as_deref().unwrap_or(&row.id));
    let _ = writeln!(out, "- Session: `{}`", row.id);
    let _ = writeln!(out, "- Working directory: `{}`", row.cwd.display());
    let _ = writeln!(out, "- Created: {} · Updated: {}", local_time(row.created_at), local_time(row.updated_at));
    let _ = writeln!(out, "- Model: `{}` · Mode: {}", row.model, row.mode);
    let _ = writeln!(out, "- Tokens: {} in · {} out", row.input_tokens, row.output_tokens);
    let mut last: Option<&str> = None;
    for item in &replay.shown {
        let who = match item {
            Shown::User { .. } => "User",
            _ => "Assistant",
        };
        if last != Some(who) {
            let _ = write!(out, "\n## {who}\n\n");
            last = Some(who);
        }
        match item {
            Shown::User { blocks, .. } => {
                for block in blocks {
                    let _ = writeln!(out, "{}\n", user_block(block));
                }
            }
            Shown::Text { text, .. } => {
                let _ = writeln!(out, "{}\n", text.trim());
            }
            Shown::Thought { text, .. } => {
                let quoted: Vec<String> = text.trim().lines().map(|l| format!("> {l}")).collect();
                let _ = writeln!(out, "> *Thinking*\n>\n{}\n", quoted.join("\n"));
            }
            Shown::Tool(state) => {
                let status = match state.status {
                    ToolStatus::Completed => "completed",
                    ToolStatus::Failed => "failed",
                    ToolStatus::Pending => "pending",
                    ToolStatus::InProgress => "in progress",
                };
                let _ = writeln!(out, "**Tool** `{}` — {status}\n", state.title);
                for content in &state.content {
                    match content {
                        ToolContent::Text(text) => {
                            let _ = writeln!(out, "{}\n", text.trim());
                        }
                        ToolContent::Diff { path, old_text, new_text } => {
                            let display = path.display().to_string();
                            let change = crate::tools::diff::change(path, &display, old_text.as_deref(), new_text);
                            let _ = writeln!(out, "```diff\n{}```\n", change.unified);
                        }
                        ToolContent::Terminal(id) => {
                            let _ = writeln!(out, "*(terminal {id})*\n");
                        }
                        ToolContent::Image { mime_type, data } => {
                            let _ = writeln!(out, "*(image, {mime_type}, {} bytes base64)*\n", data.len());
                        }
                    }
                }
            }
            Shown::Plan(entries) => {
                let _ = writeln!(out, "**Plan**\n");
                for e in entries {
                    let mark = match e.status {
                        PlanStatus::Completed => "[x]",
                        PlanStatus::InProgress | PlanStatus::Pending => "[ ]",
                    };
                    let now = if e.status == PlanStatus::InProgress { " *(in progress)*" } else { "" };
                    let _ = writeln!(out, "- {mark} {}{now}", e.content);
                }
                out.push('\n');
            }
            Shown::Compaction { summary, tokens_before, tokens_after, .. } => {
                let _ = writeln!(
                    out,
                    "*The conversation was compacted (~{tokens_before} → ~{tokens_after} tokens). Summary:*\n"
                );
                let quoted: Vec<String> = summary.trim().lines().map(|l| format!("> {l}")).collect();
                let _ = writeln!(out, "{}\n", quoted.join("\n"));
            }
            Shown::Notice { text, .. } => {
                let _ = writeln!(out, "{}\n", text.trim());
            }
        }
    }
    out
}

fn user_block(block: &UserBlock) -> String {
    match block {
        UserBlock::Text { text } => text.trim().to_owned(),
        UserBlock::Image { mime_type, uri, .. } => match uri {
            Some(uri) => format!("*[image {mime_type}: {uri}]*"),
            None => format!("*[image {mime_type}]*"),
        },
        UserBlock::ResourceLink { uri, name, title, .. } => format!("[{}]({uri})", title.as_deref().unwrap_or(name)),
        UserBlock::Resource { uri, text: Some(text), .. } => format!("`{uri}`:\n\n```\n{}\n```", text.trim_end()),
        UserBlock::Resource { uri, mime_type, .. } => {
            format!("*[resource {uri} ({})]*", mime_type.as_deref().unwrap_or("binary"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::plan::{PlanEntry, PlanPriority};
    use crate::tools::{ToolCallState, ToolKind};

    fn row() -> SessionRow {
        SessionRow {
            id: "s1".into(),
            cwd: "/w".into(),
            additional_dirs: vec![],
            title: Some("Fix it".into()),
            created_at: 0,
            updated_at: 1_795_305_600_000,
            model: "anthropic/claude".into(),
            mode: "code".into(),
            reasoning: None,
            input_tokens: 10,
            output_tokens: 5,
            context_tokens: 15,
            parent_id: None,
            origin: "acp".into(),
            prompted: true,
        }
    }

    fn replay() -> Replay {
        let tool = ToolCallState {
            id: "c1".into(),
            name: "edit".into(),
            title: "Edit a.rs".into(),
            kind: ToolKind::Edit,
            status: ToolStatus::Completed,
            locations: vec![],
            raw_input: json!({}),
            content: vec![ToolContent::Diff {
                path: "/w/a.rs".into(),
                old_text: Some("a - b\n".into()),
                new_text: "a + b\n".into(),
            }],
            raw_output: None,
            streams_output: false,
        };
        Replay {
            shown: vec![
                Shown::User { id: "u".into(), blocks: vec![UserBlock::text("Fix it")], at: 0 },
                Shown::Thought { id: "t".into(), text: "Look at a.rs".into() },
                Shown::Text { id: "m".into(), text: "Fixing.".into() },
                Shown::Tool(Box::new(tool)),
                Shown::Plan(vec![PlanEntry {
                    content: "Fix".into(),
                    priority: PlanPriority::High,
                    status: PlanStatus::Completed,
                }]),
            ],
            turns: 1,
            ..Replay::default()
        }
    }

    #[test]
    fn markdown_reads_like_the_conversation() {
        let md = to_markdown(&row(), &replay());
        assert!(md.starts_with("# Fix it\n"));
        assert!(md.contains("## User\n\nFix it\n"));
        assert!(md.contains("## Assistant\n\n> *Thinking*\n>\n> Look at a.rs\n\nFixing.\n"));
        assert!(md.contains("**Tool** `Edit a.rs` — completed"));
        assert!(md.contains("-a - b\n+a + b\n"), "{md}");
        assert!(md.contains("- [x] Fix"));
    }

    #[test]
    fn json_has_the_row_and_every_item() {
        let v = to_json(&row(), &replay());
        assert_eq!(v["session"]["id"], "s1");
        assert_eq!(v["session"]["updatedAt"], "2026-11-22T00:00:00Z");
        let types: Vec<&str> = v["items"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["user", "thought", "assistant", "tool_call", "plan"]);
        assert_eq!(v["items"][3]["call"]["content"][0]["diff"]["new_text"], "a + b\n");
    }
}
