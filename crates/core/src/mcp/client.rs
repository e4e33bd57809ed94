//! What the agent answers an MCP server that asks it something, and what it does with the server's
//! notifications: the workspace roots, form elicitation (passed to whoever has a call running on
//! the server), no sampling, progress of running calls, and list changes.
// rmcp marks the sampling, roots and logging types deprecated (MCP 2026-07-28 drops them); the
// servers here speak 2025-11-25, where they are current.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, ErrorCode, FormElicitationCapability, Implementation,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion, Root,
    RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

use super::hooks::Hooks;
use crate::tools::host::{ElicitAnswer, ElicitRequest};

/// The client side of one connection.
pub(crate) struct Handler {
    pub(crate) name: String,
    pub(crate) hooks: Arc<Hooks>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        caps.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        caps.roots = Some(RootsCapabilities::default());
        // No sampling: servers do not ask for it, and a request anyway is refused below.
        ClientConfig::new(caps, Implementation::new("acp", env!("CARGO_PKG_VERSION")))
            // rmcp's default (2026-07-28) has no `initialize`; ask for the newest version that has it.
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let Some(asker) = self.hooks.asker() else {
            tracing::info!(server = %self.name, "an elicitation came with no call running on the server; declined");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
        let request = ElicitRequest { server: self.name.clone(), message, schema };
        Ok(match asker.ask(request).await {
            ElicitAnswer::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(serde_json::Value::Object(content))
            }
            ElicitAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    async fn list_roots(&self, _cx: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(self.hooks.roots.iter().map(Root::new).collect()))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        // -1 is what MCP gives for "the user rejected sampling".
        Err(ErrorData::new(ErrorCode(-1), "this client does not offer sampling", None))
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.hooks.lists_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.hooks.lists_changed.notify_one();
    }

    async fn on_resource_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.hooks.lists_changed.notify_one();
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.hooks.progress(params);
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _cx: NotificationContext<RoleClient>) {
        tracing::debug!(target: "mcp", server = %self.name, level = ?params.level, logger = ?params.logger, data = %params.data);
    }
}
