//! `[[hooks]]` in config.toml: the user's own programs run at the agent's lifecycle points
//! (docs/hooks.md). Events are named as Claude Code names its own, so users' hooks carry over.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    pub event: HookEvent,
    /// Which calls of the event it runs for: a tool name glob (`exec`, `mcp__*`), a command name
    /// or a channel; every one when unset.
    pub matcher: Option<String>,
    /// Run with the user's shell (`sh -c`), in the session's directory.
    pub command: String,
    /// Killed (its whole process group) after this long (default 60). `timeout`, as Claude Code
    /// names it, is read too.
    #[serde(alias = "timeout")]
    pub timeout_sec: Option<u64>,
    /// Claude Code's `type`: `command`, the one kind there is here.
    #[serde(rename = "type", default)]
    pub kind: Option<CommandKind>,
    /// From a workspace's `.acp/hooks.toml` (allowed by the user): run inside the exec sandbox.
    #[serde(skip)]
    pub workspace: bool,
}

/// The kinds of hook there are: a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandKind {
    Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum HookEvent {
    SessionStart,
    SessionEnd,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    PreCompact,
    MessageReceived,
    MessageSent,
    GatewayStart,
}

impl HookEvent {
    pub const ALL: &[HookEvent] = &[
        Self::SessionStart,
        Self::SessionEnd,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::Stop,
        Self::PreCompact,
        Self::MessageReceived,
        Self::MessageSent,
        Self::GatewayStart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::Stop => "Stop",
            Self::PreCompact => "PreCompact",
            Self::MessageReceived => "MessageReceived",
            Self::MessageSent => "MessageSent",
            Self::GatewayStart => "GatewayStart",
        }
    }

    /// Whether only a gateway runs this event's hooks.
    pub fn gateway_only(self) -> bool {
        matches!(self, Self::MessageReceived | Self::MessageSent | Self::GatewayStart)
    }

    /// What the sample of `acp hooks test` names for the matchers, unless told.
    pub fn sample_subject(self) -> &'static str {
        match self {
            Self::SessionStart => "startup",
            Self::SessionEnd => "close",
            Self::PreCompact => "manual",
            Self::MessageReceived | Self::MessageSent => "telegram",
            _ => "exec",
        }
    }

    /// The event named `name` (as in config.toml), if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.name().eq_ignore_ascii_case(name))
    }
}
