//! A tool call as surfaces show it: what it shows (`ToolContent`), its status, its whole state,
//! the progress it reports while it runs, and the plan `update_plan` keeps.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde_json::Value;

use super::kind::{Location, ToolKind};

/// What a tool call shows the user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolContent {
    Text(String),
    /// A change to a file; `old_text` is `None` only for a file that does not exist yet.
    Diff {
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the editor created and shows.
    Terminal(String),
    /// An image (base64 data); the model is shown it too.
    Image {
        mime_type: String,
        data: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// The full state of one tool call, as surfaces show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallState {
    pub id: String,
    pub name: String,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolStatus,
    pub locations: Vec<Location>,
    pub raw_input: Value,
    pub content: Vec<ToolContent>,
    pub raw_output: Option<Value>,
    /// A command whose output streams as it runs (`ToolOutput` events).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streams_output: bool,
}

/// Progress a running call reports (streamed to the user as it happens).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// New output of a command, in order; never repeated.
    Output(String),
    /// Content to show now (replaces what the call showed).
    Content(Vec<ToolContent>),
    /// The agent's plan (complete; replaces the previous one).
    Plan(Vec<PlanEntry>),
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanEntry {
    pub content: String,
    pub priority: PlanPriority,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}
