//! `acp hooks list|test EVENT|allow`: the hooks config.toml (and this workspace) configures, a
//! sample event fed to the ones that match it, with what each answered — to try a hook before a
//! session relies on it —, and allowing this workspace's `.acp/hooks.toml` as it is.

use std::process::ExitCode;

use serde_json::json;

use crate::config::Config;
use crate::config::hooks::HookEvent;
use crate::hooks::workspace::Workspace;
use crate::hooks::{self, HookResult};

#[derive(clap::Subcommand, Debug)]
pub enum HooksCommand {
    /// The hooks configured in config.toml, and this workspace's (`.acp/hooks.toml`).
    List,
    /// Allows this workspace's `.acp/hooks.toml` as it is now (read it first: its commands run
    /// in your sessions here, inside the sandbox). A changed file must be allowed again.
    Allow,
    /// Feeds a sample EVENT (PreToolUse, UserPromptSubmit, Stop, …) to the hooks that match it,
    /// in this directory, and prints what each answered.
    Test {
        /// The event, as config.toml names it.
        event: String,
        /// What the sample names, for the hooks' matchers: the tool (PreToolUse, PostToolUse;
        /// default exec), the source (SessionStart: startup, load, resume, clear; default
        /// startup), the reason (SessionEnd: close, clear), the trigger (PreCompact: manual,
        /// auto), the channel (MessageReceived, MessageSent: default telegram).
        #[arg(long)]
        tool: Option<String>,
    },
}

pub fn hooks(command: HooksCommand) -> ExitCode {
    let config = Config::load();
    let said = match command {
        HooksCommand::List => match &config.load_error {
            Some(e) => Err(format!("the configuration file is broken: {e}")),
            None => std::env::current_dir().map(|cwd| list(&config, &cwd)).map_err(|e| e.to_string()),
        },
        HooksCommand::Allow => std::env::current_dir()
            .map_err(|e| e.to_string())
            .and_then(|cwd| hooks::workspace::allow(&config.home, &cwd)),
        HooksCommand::Test { event, tool } => test(&config, &event, tool.as_deref()),
    };
    super::pairing::finish(said)
}

fn list(config: &Config, cwd: &std::path::Path) -> String {
    let mut lines: Vec<String> = config.hooks.iter().map(hooks::describe).collect();
    if lines.is_empty() {
        lines.push("No hooks in config.toml ([[hooks]] adds one).".into());
    }
    match hooks::workspace::load(&config.home, cwd) {
        Workspace::None => {}
        Workspace::Allowed(found) => {
            lines.push(format!("This workspace ({}, allowed; run in the sandbox):", hooks::workspace::FILE));
            lines.extend(found.iter().map(|h| format!("  {}", hooks::describe(h))));
        }
        other => lines.extend(other.notice()),
    }
    lines.join("\n")
}

fn test(config: &Config, event: &str, tool: Option<&str>) -> Result<String, String> {
    if let Some(e) = &config.load_error {
        return Err(e.clone());
    }
    let names = HookEvent::ALL.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ");
    let event = HookEvent::parse(event).ok_or_else(|| format!("no event `{event}` (events: {names})"))?;
    let tool = tool.unwrap_or(event.sample_subject());
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let mut input = json!({
        "hook_event_name": event.name(),
        "session_id": "hooks-test",
        "cwd": cwd,
    });
    let sample = match event {
        HookEvent::PreToolUse => json!({"tool_name": tool, "tool_input": {"command": "rm -rf build"}}),
        HookEvent::PostToolUse => json!({
            "tool_name": tool,
            "tool_input": {"path": "src/main.rs"},
            "tool_response": {"output": "Wrote src/main.rs", "is_error": false},
        }),
        HookEvent::UserPromptSubmit => json!({"prompt": "A sample prompt."}),
        HookEvent::Stop => json!({"stop_hook_active": false, "last_assistant_message": "Done."}),
        HookEvent::SessionStart => json!({"source": tool}),
        HookEvent::SessionEnd => json!({"reason": "close"}),
        HookEvent::PreCompact => json!({"trigger": tool, "custom_instructions": ""}),
        HookEvent::MessageReceived | HookEvent::MessageSent => {
            json!({"channel": tool, "chat_id": "12345", "text": "A sample message."})
        }
        HookEvent::GatewayStart => json!({}),
    };
    if let (Some(input), serde_json::Value::Object(sample)) = (input.as_object_mut(), sample) {
        input.extend(sample);
    }
    let workspace = hooks::workspace::load(&config.home, &cwd);
    let matched = hooks::matching(config.hooks.iter().chain(workspace.hooks()), event, Some(tool));
    if matched.is_empty() {
        return Ok(format!("No hook matches {} ({tool}).", event.name()));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let ran = runtime.block_on(hooks::run(config, &matched, &input, &cwd));
    Ok(ran
        .iter()
        .map(|r| {
            let how = match &r.result {
                HookResult::Done(said) => {
                    let mut how = "done".to_owned();
                    if let Some(d) = &said.decision {
                        how.push_str(&format!(", decision {d}"));
                    }
                    if let Some(reason) = &said.reason {
                        how.push_str(&format!(", reason: {reason}"));
                    }
                    if let Some(context) = &said.context {
                        how.push_str(&format!(", context: {context}"));
                    }
                    let json = said.json.as_ref();
                    let specific = json.and_then(|j| j.get("hookSpecificOutput"));
                    if let Some(input) =
                        specific.and_then(|s| s.get("updatedInput")).or(json.and_then(|j| j.get("updatedInput")))
                    {
                        how.push_str(&format!(", updatedInput: {input}"));
                    }
                    how
                }
                HookResult::Blocked(reason) => format!("blocks: {reason}"),
                HookResult::Failed(e) => format!("failed (blocks nothing): {e}"),
            };
            format!("{}: {how}", r.command)
        })
        .collect::<Vec<_>>()
        .join("\n"))
}
