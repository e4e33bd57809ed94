//! The turn of the golden replay (`tests/suite/persistence.rs`): fix `add` in the `calc`
//! workspace with a thought, text, a plan, an edit, a new file, the plan completed and a closing
//! message. The model's script, and, as whole values, what an editor is shown when the session is
//! loaded again and the history the model is sent on the next prompt.

#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};

use super::expect::chunk;
use super::mock_model::{MockModel, fixtures_dir};
use super::script::{anthropic_thinking, calls, text};

/// What the user asks.
pub const PROMPT: &str = "Fix the add bug, then note it in NOTES.md";

/// Scripts the turn's three model replies.
pub fn push_fix_turn(mock: &MockModel) {
    mock.push(anthropic_thinking(
        "The bug is in src/lib.rs: add() subtracts.",
        Some("I'll fix `add` and note it."),
        &[
            (
                "call_plan1",
                "update_plan",
                json!({"plan": [{"step": "Fix add()", "status": "in_progress"}, {"step": "Write NOTES.md", "status": "pending"}]}),
            ),
            ("call_edit", "edit", json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"})),
        ],
    ));
    mock.push(calls(
        "anthropic",
        &[
            ("call_write", "write", json!({"path": "NOTES.md", "content": "add() now adds.\n"})),
            (
                "call_plan2",
                "update_plan",
                json!({"plan": [{"step": "Fix add()", "status": "completed"}, {"step": "Write NOTES.md", "status": "completed"}]}),
            ),
        ],
    ));
    mock.push(text("anthropic", "Fixed `add` and wrote NOTES.md."));
}

fn plan(first: &str, second: &str) -> Value {
    json!({"sessionUpdate": "plan", "entries": [
        {"content": "Fix add()", "priority": "medium", "status": first},
        {"content": "Write NOTES.md", "priority": "medium", "status": second}
    ]})
}

/// The updates `session/load` replays for the turn done in `ws` (message ids blanked): the prompt,
/// then each tool call once, in its final state, with its diff.
pub fn fix_turn_replay(ws: &Path) -> Value {
    let (lib, notes) = (ws.join("src/lib.rs"), ws.join("NOTES.md"));
    let before = std::fs::read_to_string(fixtures_dir().join("workspaces/calc/src/lib.rs")).unwrap();
    json!([
        chunk("user_message_chunk", PROMPT),
        chunk("agent_thought_chunk", "The bug is in src/lib.rs: add() subtracts."),
        chunk("agent_message_chunk", "I'll fix `add` and note it."),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_edit",
            "title": "Edit src/lib.rs",
            "kind": "edit",
            "status": "completed",
            "content": [{"type": "diff", "path": lib, "oldText": before, "newText": before.replace("a - b", "a + b")}],
            "locations": [{"path": lib, "line": 3}],
            "rawInput": {"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"},
            "_meta": {"toolName": "edit"}
        },
        plan("in_progress", "pending"),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_write",
            "title": "Create NOTES.md",
            "kind": "edit",
            "status": "completed",
            "content": [{"type": "diff", "path": notes, "newText": "add() now adds.\n"}],
            "locations": [{"path": notes, "line": 1}],
            "rawInput": {"path": "NOTES.md", "content": "add() now adds.\n"},
            "_meta": {"toolName": "write"}
        },
        plan("completed", "completed"),
        chunk("agent_message_chunk", "Fixed `add` and wrote NOTES.md."),
    ])
}

/// The `messages` of the Anthropic request for the prompt `next` after the turn: the whole
/// history, thinking signed, every tool call answered, cache breakpoints on the last two user
/// messages.
pub fn fix_turn_history(next: &str) -> Value {
    let cached = json!({"type": "ephemeral"});
    let plan_input = |first: &str, second: &str| json!({"plan": [{"step": "Fix add()", "status": first}, {"step": "Write NOTES.md", "status": second}]});
    let edited = "Edited src/lib.rs (1 replacement):\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,6 +1,6 @@\n \
                  //! Test fixture: a one-function crate whose `add` subtracts, for the agent's tools to fix.\n \
                  pub fn add(a: i32, b: i32) -> i32 {\n-    a - b\n+    a + b\n }\n \n #[cfg(test)]\n";
    json!([
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The bug is in src/lib.rs: add() subtracts.", "signature": "c2lnbmVkLXRob3VnaHQ="},
            {"type": "text", "text": "I'll fix `add` and note it."},
            {"type": "tool_use", "id": "call_plan1", "name": "update_plan", "input": plan_input("in_progress", "pending")},
            {"type": "tool_use", "id": "call_edit", "name": "edit", "input": {"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_plan1", "content": "Plan updated (0 of 2 steps completed)."},
            {"type": "tool_result", "tool_use_id": "call_edit", "content": edited}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_write", "name": "write", "input": {"path": "NOTES.md", "content": "add() now adds.\n"}},
            {"type": "tool_use", "id": "call_plan2", "name": "update_plan", "input": plan_input("completed", "completed")}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_write", "content": "Created NOTES.md (1 lines)."},
            {"type": "tool_result", "tool_use_id": "call_plan2", "content": "Plan updated (2 of 2 steps completed).", "cache_control": cached}
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed `add` and wrote NOTES.md."}]},
        {"role": "user", "content": [{"type": "text", "text": next, "cache_control": cached}]}
    ])
}
