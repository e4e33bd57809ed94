//! A subagent's host: the parent's, with files and terminals as the parent's session; questions
//! asked as the child's own to a client that shows subagents (the child marked as waiting
//! meanwhile), else as the parent's, labelled with the child.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::runtime::event::SubagentChange;

use crate::tools::host::{
    AnyHost, ChatFile, ChatTarget, ElicitAnswer, ElicitRequest, ExitStatus, FsError, Host, LineRange, PermissionAnswer,
    PermissionRequest, TerminalOutput, TerminalSpec,
};

/// The parent's host, for a child: files and terminals as the parent's session; questions to the
/// parent's client, labelled with the child.
pub(super) struct ChildHost {
    pub(super) inner: Arc<dyn AnyHost>,
    pub(super) link: Arc<super::link::Link>,
}

impl ChildHost {
    fn parent(&self) -> &str {
        &self.link.parent
    }

    /// Asks the user for the child: `ask(session)` as the child if the client shows it.
    async fn ask<T>(&self, child: &str, ask: impl AsyncFnOnce(&str) -> T) -> T {
        if !self.link.shows {
            return ask(self.parent()).await;
        }
        self.link.subagent(SubagentChange::Waiting);
        let answer = ask(child).await;
        self.link.subagent(SubagentChange::Running);
        answer
    }
}

impl Host for ChildHost {
    async fn read_text_file(
        &self,
        _session: &str,
        path: &std::path::Path,
        range: Option<LineRange>,
        cancel: &CancellationToken,
    ) -> Result<String, FsError> {
        self.inner.read_text_file(self.parent(), path, range, cancel).await
    }

    async fn write_text_file(
        &self,
        _session: &str,
        path: &std::path::Path,
        content: &str,
        cancel: &CancellationToken,
    ) -> Result<(), FsError> {
        self.inner.write_text_file(self.parent(), path, content, cancel).await
    }

    async fn request_permission(
        &self,
        session: &str,
        request: &PermissionRequest,
        cancel: &CancellationToken,
    ) -> PermissionAnswer {
        let mut request = request.clone();
        if !self.link.shows {
            request.call.title = format!("[subagent {}] {}", self.link.label, request.call.title);
        }
        self.ask(session, async |on| self.inner.request_permission(on, &request, cancel).await).await
    }

    async fn elicit(
        &self,
        session: &str,
        call_id: &str,
        request: &ElicitRequest,
        cancel: &CancellationToken,
    ) -> ElicitAnswer {
        self.ask(session, async |on| self.inner.elicit(on, call_id, request, cancel).await).await
    }

    fn can_message(&self) -> bool {
        self.inner.can_message()
    }

    fn own_chat(&self, _session: &str) -> Option<ChatTarget> {
        self.inner.own_chat(self.parent())
    }

    async fn send_message(
        &self,
        _session: &str,
        target: &ChatTarget,
        text: &str,
        file: Option<&ChatFile>,
    ) -> Result<(), String> {
        self.inner.send_message(self.parent(), target, text, file).await
    }

    fn can_schedule(&self) -> bool {
        self.inner.can_schedule()
    }

    async fn cron(&self, _session: &str, method: &str, params: serde_json::Value) -> Result<serde_json::Value, String> {
        self.inner.cron(self.parent(), method, params).await
    }

    fn has_terminals(&self) -> bool {
        self.inner.has_terminals()
    }

    async fn create_terminal(
        &self,
        _session: &str,
        spec: &TerminalSpec,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        self.inner.create_terminal(self.parent(), spec, cancel).await
    }

    async fn wait_for_terminal_exit(
        &self,
        _session: &str,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<ExitStatus, String> {
        self.inner.wait_for_terminal_exit(self.parent(), id, cancel).await
    }

    async fn terminal_output(&self, _session: &str, id: &str) -> Result<TerminalOutput, String> {
        self.inner.terminal_output(self.parent(), id).await
    }

    async fn kill_terminal(&self, _session: &str, id: &str) -> Result<(), String> {
        self.inner.kill_terminal(self.parent(), id).await
    }

    async fn release_terminal(&self, _session: &str, id: &str) -> Result<(), String> {
        self.inner.release_terminal(self.parent(), id).await
    }
}
