//! Whole values to compare messages against (`assert_eq!(message, expected)`): JSON-RPC answers
//! and notifications, the `initialize` result, a session's modes and config options, the slash
//! commands, a finished turn; and `blank` for the fields that change every run.

#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};

/// What `blank` puts where a value changes every run.
pub const BLANK: &str = "…";

pub const ANTHROPIC_MODELS: [&str; 3] =
    ["anthropic/claude-sonnet-4-5", "anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5"];
/// The models on offer with a Gemini key.
pub const GEMINI_MODELS: [&str; 2] = ["gemini/gemini-2.5-pro", "gemini/gemini-2.5-flash"];
/// The models on offer with both an Anthropic and an OpenAI key.
pub fn all_models() -> Vec<&'static str> {
    ANTHROPIC_MODELS.iter().chain(&OPENAI_MODELS).copied().collect()
}

pub const OPENAI_MODELS: [&str; 6] = [
    "openai/gpt-5",
    "openai/gpt-5-mini",
    "openai/gpt-4.1",
    "openai-responses/gpt-5-codex",
    "openai-responses/gpt-5",
    "openai-responses/gpt-5-mini",
];

/// A successful answer.
pub fn result(id: impl Into<Value>, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "result": result})
}

/// An error answer without `data`.
pub fn error(id: impl Into<Value>, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "error": {"code": code, "message": message}})
}

/// An error answer with `data`.
pub fn error_with(id: impl Into<Value>, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "error": {"code": code, "message": message, "data": data}})
}

/// The error object for a session that is not open (nor stored).
pub fn not_found(session: &str) -> Value {
    json!({"code": -32002, "message": format!("session not found: {session}"), "data": {"sessionId": session}})
}

/// The error object for params that do not fit the method.
pub fn invalid_params(message: &str) -> Value {
    json!({"code": -32602, "message": format!("invalid params: {message}")})
}

/// A `session/update` notification.
pub fn update(session: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
}

/// A turn's answer: its stop reason and token counts.
pub fn ended(reason: &str, usage: Value) -> Value {
    json!({"stopReason": reason, "usage": usage})
}

/// The token counts of `n` replies scripted by `tests/support/script.rs` through `api`: 50 in and
/// 20 out each (and no reasoning, which the Responses API counts apart).
pub fn scripted_usage(api: &str, n: u64) -> Value {
    let mut usage = json!({"totalTokens": 70 * n, "inputTokens": 50 * n, "outputTokens": 20 * n});
    if api == "openai-responses" {
        usage["thoughtTokens"] = json!(0);
    }
    usage
}

/// The answer to a turn of `n` scripted replies through `api`.
pub fn replies(api: &str, n: u64) -> Value {
    ended("end_turn", scripted_usage(api, n))
}

/// An answer without its token counts, where they depend on how much of a reply was read before
/// a cancel (a race a test should not depend on).
pub fn without_usage(answer: &Value) -> Value {
    let mut answer = answer.clone();
    if let Some(result) = answer["result"].as_object_mut() {
        result.remove("usage");
    }
    answer
}

/// The token counts of a wire API's `text` fixture (the OpenAI APIs also count reasoning).
pub fn text_usage(api: &str) -> Value {
    let mut usage = json!({"totalTokens": 121, "inputTokens": 112, "outputTokens": 9, "cachedReadTokens": 100});
    // Anthropic and Gemini report no reasoning count for a reply without reasoning.
    if api != "anthropic" && api != "gemini" {
        usage["thoughtTokens"] = json!(0);
    }
    usage
}

/// The `initialize` result of an agent whose `$ACP_HOME` is `home`.
pub fn initialize_result(home: &Path) -> Value {
    let config = home.join("config.toml");
    json!({
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": true},
            "sessionCapabilities": {"additionalDirectories": {}, "close": {}, "delete": {}, "list": {}, "resume": {}},
            "auth": {}
        },
        "authMethods": [
            {
                "id": "anthropic-api-key",
                "name": "Anthropic API key",
                "description": "Set ANTHROPIC_API_KEY in the environment the editor starts acp with, then restart the agent."
            },
            {
                "id": "openai-api-key",
                "name": "OpenAI API key",
                "description": "Set OPENAI_API_KEY in the environment the editor starts acp with, then restart the agent."
            },
            {
                "id": "config-file",
                "name": "Provider in config.toml",
                "description": format!(
                    "Add a [providers.NAME] section (Ollama, vLLM, OpenRouter, …) to {}, then choose this to reload it.",
                    config.display()
                )
            }
        ],
        "agentInfo": {"name": "acp", "title": "acp", "version": env!("CARGO_PKG_VERSION")}
    })
}

fn mode_list() -> [(&'static str, &'static str, &'static str); 3] {
    [
        ("ask", "Ask", "Ask before every edit, command and fetch"),
        (
            "code",
            "Code",
            "Edit the workspace and run sandboxed commands without asking; ask before fetches and before leaving the sandbox",
        ),
        ("auto", "Auto", "As Code, and fetch without asking; still ask before leaving the sandbox"),
    ]
}

/// A session's `modes`, `current` chosen.
pub fn modes(current: &str) -> Value {
    let available: Vec<Value> = mode_list()
        .iter()
        .map(|(id, name, description)| json!({"id": id, "name": name, "description": description}))
        .collect();
    json!({"currentModeId": current, "availableModes": available})
}

/// A session's `configOptions`: the model (among `models`), the mode and the thinking level.
pub fn config_options(model: &str, models: &[&str], mode: &str, thought: &str) -> Value {
    let models: Vec<Value> = models.iter().map(|m| json!({"value": m, "name": m})).collect();
    let modes: Vec<Value> = mode_list()
        .iter()
        .map(|(id, name, description)| json!({"value": id, "name": name, "description": description}))
        .collect();
    json!([
        {
            "id": "model",
            "name": "Model",
            "description": "The model that answers, as provider/model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": models
        },
        {
            "id": "mode",
            "name": "Mode",
            "description": "How much the agent may do without asking",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": modes
        },
        {
            "id": "thought_level",
            "name": "Thinking",
            "description": "How much the model reasons before it answers (extended thinking, reasoning effort)",
            "category": "thought_level",
            "type": "select",
            "currentValue": thought,
            "options": [
                {"value": "default", "name": "Default", "description": "The provider's default (no extended thinking on Anthropic)"},
                {"value": "minimal", "name": "Minimal", "description": "OpenAI's least; elsewhere as low"},
                {"value": "low", "name": "Low"},
                {"value": "medium", "name": "Medium"},
                {"value": "high", "name": "High"},
                {"value": "xhigh", "name": "Extra high", "description": "OpenAI's most; elsewhere as high"}
            ]
        }
    ])
}

/// The answer to `session/new` (or `load`, `resume`): the id, the modes and the config options,
/// thinking at its default.
pub fn new_session(id: &str, model: &str, models: &[&str], mode: &str) -> Value {
    json!({"sessionId": id, "modes": modes(mode), "configOptions": config_options(model, models, mode, "default")})
}

/// The `available_commands_update` every session starts with.
pub fn commands_update() -> Value {
    json!({"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "help", "description": "List the slash commands"},
        {"name": "status", "description": "Model, mode, context-window fill, tokens and session id"},
        {"name": "context", "description": "What the context holds: instruction files, tool schemas, system prompt, history", "input": {"hint": "list | detail"}},
        {"name": "compact", "description": "Summarise the conversation so far to free the context window", "input": {"hint": "what the summary should keep (optional)"}},
        {"name": "model", "description": "Show or switch the model", "input": {"hint": "provider/model"}},
        {"name": "think", "description": "How much the model reasons before answering", "input": {"hint": "off | minimal | low | medium | high | xhigh"}},
        {"name": "new", "description": "Start over with an empty context (optionally with another model)", "input": {"hint": "provider/model (optional)"}},
        {"name": "reset", "description": "Clear the conversation's context"},
        {"name": "stop", "description": "Stop the running turn and everything queued"},
        {"name": "usage", "description": "Tokens used by this session"},
        {"name": "network", "description": "Let sandboxed commands use the network, or not (this session)", "input": {"hint": "on | off"}},
        {"name": "mcp", "description": "MCP servers: their state, tools, prompts, resources and last error", "input": {"hint": "restart NAME (optional)"}},
        {"name": "lsp", "description": "Language servers: their state, open files and problems"},
        {"name": "skills", "description": "Skills: those offered to the model, where each comes from, and why others are not"},
        {"name": "memory", "description": "Memory: the files indexed for memory_search, and whether this session reads them"},
        {"name": "hooks", "description": "Hooks: those configured, the workspace's, and how each last went", "input": {"hint": "allow (the workspace's hooks file, as it is now)"}}
    ]})
}

/// A text chunk of `kind` (`agent_message_chunk`, `agent_thought_chunk`, `user_message_chunk`),
/// its message id blanked.
pub fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}, "messageId": BLANK})
}

/// The title a session gets from its first prompt, its time blanked.
pub fn title(text: &str) -> Value {
    json!({"sessionUpdate": "session_info_update", "title": text, "updatedAt": BLANK})
}

/// How full the context window is.
pub fn usage_update(used: u64, size: u64) -> Value {
    json!({"sessionUpdate": "usage_update", "used": used, "size": size})
}

/// A turn's updates as a reader sees them: consecutive text chunks of one message joined into one
/// (how a reply is cut into chunks depends on how it arrived), message ids and times blanked.
pub fn turn(updates: &[Value]) -> Value {
    let mut out: Vec<Value> = Vec::new();
    for u in updates {
        if let Some(last) = out.last_mut()
            && u["sessionUpdate"].as_str().is_some_and(|k| k.ends_with("_chunk"))
            && last["sessionUpdate"] == u["sessionUpdate"]
            && last["messageId"] == u["messageId"]
            && last["content"]["type"] == "text"
            && u["content"]["type"] == "text"
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                u["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = json!(joined);
            continue;
        }
        out.push(u.clone());
    }
    blank(&json!(out), &["messageId", "updatedAt"])
}

/// The `edit` of `src/lib.rs` from `a - b` to `a + b` in the `calc` workspace at `ws`, as its
/// announcement (and a permission question) carries it: the diff of the whole file and where.
pub fn calc_lib_edit(ws: &Path, id: &str, old: &str, new: &str) -> Value {
    let path = ws.join("src/lib.rs");
    let before = std::fs::read_to_string(super::mock_model::fixtures_dir().join("workspaces/calc/src/lib.rs")).unwrap();
    json!({
        "toolCallId": id,
        "title": "Edit src/lib.rs",
        "kind": "edit",
        "content": [{"type": "diff", "path": path, "oldText": before, "newText": before.replace("a - b", "a + b")}],
        "locations": [{"path": path, "line": 3}],
        "rawInput": {"path": "src/lib.rs", "old_string": old, "new_string": new},
        "_meta": {"toolName": "edit"}
    })
}

/// A tool call's `content`: one text.
pub fn tool_text(text: &str) -> Value {
    json!([{"type": "content", "content": {"type": "text", "text": text}}])
}

/// `value` with whatever sits under any of `keys`, at any depth, replaced by [`BLANK`] (ids and
/// times that change every run; check what matters about them, such as being equal, apart).
pub fn blank(value: &Value, keys: &[&str]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if keys.contains(&k.as_str()) { json!(BLANK) } else { blank(v, keys) };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| blank(v, keys)).collect()),
        other => other.clone(),
    }
}
