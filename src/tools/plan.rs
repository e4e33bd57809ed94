//! `update_plan`: the model keeps a visible plan (the editor's plan view, ACP `plan` updates). The
//! call itself is not shown as a tool call — the plan is what the user sees — and it is recorded in
//! the transcript, so a reloaded session shows the plan again.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{Access, Action, Prepared, Progress, ToolContext, ToolHandler, ToolKind, ToolOutput};
use crate::tools::ToolSpec;

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanEntry {
    pub content: String,
    pub priority: PlanPriority,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

const MAX_STEPS: usize = 50;

pub struct UpdatePlan;

impl ToolHandler for UpdatePlan {
    fn name(&self) -> &'static str {
        "update_plan"
    }

    fn hidden(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Show the user your plan for a task of several steps, and keep it current: send the \
                          complete list each time (it replaces the previous one), marking steps `in_progress` as you \
                          start them (one at a time) and `completed` when done. Skip it for simple tasks."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": "array",
                        "description": "Every step, in order",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "description": "What the step does, in a few words"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                                "priority": {"type": "string", "enum": ["high", "medium", "low"]}
                            },
                            "required": ["step", "status"]
                        }
                    },
                    "explanation": {"type": "string", "description": "Why the plan changed (optional)"}
                },
                "required": ["plan"]
            }),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let entries = parse(args)?;
            Ok(Prepared {
                title: "Update the plan".into(),
                kind: ToolKind::Think,
                locations: Vec::new(),
                preview: Vec::new(),
                access: Access::default(),
                action: Box::new(PlanAction(entries)),
            })
        })
    }
}

fn parse(args: &Value) -> Result<Vec<PlanEntry>, String> {
    let Some(Value::Array(steps)) = args.get("plan") else {
        return Err("`plan` must be an array of {step, status} objects".into());
    };
    if steps.len() > MAX_STEPS {
        return Err(format!("a plan has at most {MAX_STEPS} steps; group smaller ones"));
    }
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let content = s
                .get("step")
                .or_else(|| s.get("content"))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("`plan[{i}].step` must be a non-empty string"))?;
            let status = match s.get("status").and_then(Value::as_str) {
                Some("pending") | None => PlanStatus::Pending,
                Some("in_progress") => PlanStatus::InProgress,
                Some("completed") => PlanStatus::Completed,
                Some(other) => {
                    return Err(format!("`plan[{i}].status`: `{other}` is not one of pending, in_progress, completed"));
                }
            };
            let priority = match s.get("priority").and_then(Value::as_str) {
                Some("high") => PlanPriority::High,
                Some("low") => PlanPriority::Low,
                Some("medium") | None => PlanPriority::Medium,
                Some(other) => return Err(format!("`plan[{i}].priority`: `{other}` is not one of high, medium, low")),
            };
            Ok(PlanEntry { content: content.to_owned(), priority, status })
        })
        .collect()
}

struct PlanAction(Vec<PlanEntry>);

impl Action for PlanAction {
    fn run<'a>(self: Box<Self>, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let done = self.0.iter().filter(|e| e.status == PlanStatus::Completed).count();
            let total = self.0.len();
            (ctx.progress)(Progress::Plan(self.0));
            ToolOutput::ok(format!("Plan updated ({done} of {total} steps completed)."), Vec::new())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_statuses_and_priorities() {
        let entries = parse(&json!({"plan": [
            {"step": "Read the code", "status": "completed"},
            {"step": "Fix the bug", "status": "in_progress", "priority": "high"},
            {"content": "Run the tests"}
        ]}))
        .unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[1],
            PlanEntry { content: "Fix the bug".into(), priority: PlanPriority::High, status: PlanStatus::InProgress }
        );
        assert_eq!(entries[2].status, PlanStatus::Pending);
    }

    #[test]
    fn bad_plans_name_the_field() {
        assert!(parse(&json!({})).unwrap_err().contains("`plan`"));
        assert!(parse(&json!({"plan": [{"step": ""}]})).unwrap_err().contains("plan[0].step"));
        assert!(parse(&json!({"plan": [{"step": "a", "status": "done"}]})).unwrap_err().contains("plan[0].status"));
    }
}
