//! `update_plan`: the model keeps a visible plan (the editor's plan view, ACP `plan` updates). The
//! call itself is not shown as a tool call — the plan is what the user sees — and it is recorded in
//! the transcript, so a reloaded session shows the plan again.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

pub use super::call::{PlanEntry, PlanPriority, PlanStatus};
use super::{Access, Action, Prepared, Progress, Tool, ToolContext, ToolKind, ToolOutput};

const MAX_STEPS: usize = 50;

pub struct UpdatePlan;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanArgs {
    /// Every step, in order
    plan: Vec<PlanStep>,
    /// Why the plan changed (optional)
    #[schemars(with = "Option<String>")]
    #[allow(dead_code)]
    explanation: Option<IgnoredAny>,
}

// A step as models write it: `content` for `step` is taken too, and a status or priority that is
// not a string is left at its default (read in `parse`).
#[derive(Debug, Deserialize, JsonSchema)]
struct PlanStep {
    /// What the step does, in a few words
    #[schemars(required, with = "Option<String>")]
    step: Option<Value>,
    #[schemars(skip)]
    content: Option<Value>,
    #[schemars(required, with = "Option<PlanStatus>")]
    status: Option<Value>,
    #[schemars(with = "Option<PlanPriority>")]
    priority: Option<Value>,
}

impl Tool for UpdatePlan {
    const NAME: &'static str = "update_plan";
    type Args = PlanArgs;

    fn description(&self) -> String {
        "Show the user your plan for a task of several steps, and keep it current: send the complete list each time \
         (it replaces the previous one), marking steps `in_progress` as you start them (one at a time) and \
         `completed` when done. Skip it for simple tasks."
            .into()
    }

    fn hidden(&self) -> bool {
        true
    }

    async fn prepare(&self, args: PlanArgs, _ctx: &ToolContext) -> Result<Prepared, String> {
        let entries = parse(args)?;
        Ok(Prepared {
            title: "Update the plan".into(),
            kind: ToolKind::Think,
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access::default(),
            action: Box::new(PlanAction(entries)),
        })
    }
}

fn parse(args: PlanArgs) -> Result<Vec<PlanEntry>, String> {
    if args.plan.len() > MAX_STEPS {
        return Err(format!("a plan has at most {MAX_STEPS} steps; group smaller ones"));
    }
    args.plan
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let content = s
                .step
                .as_ref()
                .or(s.content.as_ref())
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("`plan[{i}].step` must be a non-empty string"))?;
            let status = match s.status.as_ref().and_then(Value::as_str) {
                Some("pending") | None => PlanStatus::Pending,
                Some("in_progress") => PlanStatus::InProgress,
                Some("completed") => PlanStatus::Completed,
                Some(other) => {
                    return Err(format!("`plan[{i}].status`: `{other}` is not one of pending, in_progress, completed"));
                }
            };
            let priority = match s.priority.as_ref().and_then(Value::as_str) {
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
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let done = self.0.iter().filter(|e| e.status == PlanStatus::Completed).count();
        let total = self.0.len();
        (ctx.progress)(Progress::Plan(self.0));
        ToolOutput::ok(format!("Plan updated ({done} of {total} steps completed)."), Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(args: &Value) -> Result<Vec<PlanEntry>, String> {
        super::parse(crate::tools::args::decode(args)?)
    }

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

    #[test]
    fn loose_plans_are_read_as_before() {
        let entries = parse(&json!({
            "plan": [{"step": "a", "content": "b", "status": 3, "priority": 1}],
            "explanation": ["not", "a", "string"]
        }))
        .unwrap();
        assert_eq!(
            entries,
            [PlanEntry { content: "a".into(), priority: PlanPriority::Medium, status: PlanStatus::Pending }]
        );
    }
}
