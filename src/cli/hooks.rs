//! `acp hooks list|test EVENT`: the hooks config.toml configures, and a sample event fed to the
//! ones that match it, with what each answered — to try a hook before a session relies on it.

use std::process::ExitCode;

use serde_json::json;

use crate::config::Config;
use crate::config::hooks::HookEvent;
use crate::hooks::{self, HookResult};

#[derive(clap::Subcommand, Debug)]
pub enum HooksCommand {
    /// The hooks configured in config.toml, by event.
    List,
    /// Feeds a sample EVENT (PreToolUse, UserPromptSubmit, Stop, …) to the hooks that match it,
    /// in this directory, and prints what each answered.
    Test {
        /// The event, as config.toml names it.
        event: String,
        /// The tool (or command, or channel) the sample names, for the hooks' matchers.
        #[arg(long, default_value = "exec")]
        tool: String,
    },
}

pub fn hooks(command: HooksCommand) -> ExitCode {
    let config = Config::load();
    let said = match command {
        HooksCommand::List => Ok(list(&config)),
        HooksCommand::Test { event, tool } => test(&config, &event, &tool),
    };
    super::pairing::finish(said)
}

fn list(config: &Config) -> String {
    if config.hooks.is_empty() {
        return "No hooks ([[hooks]] in config.toml adds one).".into();
    }
    config
        .hooks
        .iter()
        .map(|h| {
            let matcher = h.matcher.as_deref().map(|m| format!(" [{m}]")).unwrap_or_default();
            let timeout = h.timeout_sec.unwrap_or_else(|| hooks::DEFAULT_TIMEOUT.as_secs());
            let waiting = if h.event.wired() { "" } else { " — not run by sessions yet (acp hooks test runs it)" };
            format!("{}{matcher}: {} (timeout {timeout} s){waiting}", h.event.name(), h.command)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn test(config: &Config, event: &str, tool: &str) -> Result<String, String> {
    if let Some(e) = &config.load_error {
        return Err(e.clone());
    }
    let names = HookEvent::ALL.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ");
    let event = HookEvent::parse(event).ok_or_else(|| format!("no event `{event}` (events: {names})"))?;
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let input = json!({
        "hook_event_name": event.name(),
        "session_id": "hooks-test",
        "cwd": cwd,
        "tool_name": tool,
        "tool_input": {"command": "rm -rf build"},
        "prompt": "A sample prompt.",
    });
    let matched = hooks::matching(config, event, Some(tool));
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
