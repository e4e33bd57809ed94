//! `agents_list`: the agents a session may start subagents of (`sessions_spawn` with `agentId`),
//! offered only where there is another one it may use.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::me::Me;
use crate::tools::{Access, Action, Prepared, Tool, ToolContext, ToolKind, ToolOutput};

pub(super) struct AgentsList(pub(super) Arc<Me>);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AgentsListArgs {}

/// Whether the session of `me` may start a subagent of another agent (the tool is offered then).
pub(super) fn offered(me: &Me) -> bool {
    let config = me.shared.config_for(&me.session);
    let mine = me.agent();
    config.agents.iter().any(|a| a.id != mine && config.may_spawn(mine, &a.id))
}

impl Tool for AgentsList {
    const NAME: &'static str = "agents_list";
    type Args = AgentsListArgs;

    fn description(&self) -> String {
        "List the agents you may start a subagent of (sessions_spawn's agentId): id, name, model, workspace.".into()
    }

    async fn prepare(&self, _args: AgentsListArgs, _ctx: &ToolContext) -> Result<Prepared, String> {
        Ok(Prepared {
            title: "List agents".into(),
            kind: ToolKind::Read,
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access::default(),
            action: Box::new(ListAgents(self.0.clone())),
        })
    }
}

struct ListAgents(Arc<Me>);

impl Action for ListAgents {
    async fn run(self, _ctx: &ToolContext) -> ToolOutput {
        let config = self.0.shared.config_for(&self.0.session);
        let mine = self.0.agent();
        let rows: Vec<serde_json::Value> = config
            .agents
            .iter()
            .filter(|a| config.may_spawn(mine, &a.id))
            .map(|a| {
                let model = config.for_agent(&a.id).and_then(|c| c.default_model_ref().ok()).map(|m| m.to_string());
                json!({
                    "id": a.id,
                    "name": a.display_name(),
                    "model": model,
                    "workspace": a.workspace.as_ref().map(|w| w.display().to_string()),
                    "self": a.id == mine,
                })
            })
            .collect();
        ToolOutput::ok(serde_json::to_string_pretty(&rows).unwrap_or_default(), Vec::new())
    }
}
