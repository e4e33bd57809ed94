//! The gateway's own hook points (docs/hooks.md): `GatewayStart` once it listens, then the agent
//! workspace's `BOOT.md` as a run of its own (the checklist of a restart: the run tells people
//! what it must through the `message` tool; its reply goes nowhere); `MessageReceived` for a
//! channel message on its way to the agent (a hook may drop it, or add context), and
//! `MessageSent` for each message a channel sent. Hooks run in the agent workspace, like the
//! sessions they serve.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::Gateway;
use crate::config::hooks::{HookConfig, HookEvent};
use crate::hooks::{self, Verdict};
use crate::runtime::UserBlock;

/// The restart checklist, in the agent workspace.
pub const BOOT_FILE: &str = "BOOT.md";
/// The most of `BOOT.md` sent (characters).
const BOOT_MAX: usize = 64 << 10;

/// What the `BOOT.md` run is told before the checklist.
const BOOT_INSTRUCTION: &str = "The gateway has just started. Go through the BOOT.md checklist below. Your reply is \
     not sent to anyone: to tell someone something, use the `message` tool. When you are done, reply NO_REPLY.";

impl Gateway {
    /// Runs the hooks of a gateway `event` (`subject`: the channel, for the matchers) on
    /// `fields` in the agent workspace; what they decide (`None`: no hook matches).
    pub(super) fn gateway_hooks(
        &self,
        event: HookEvent,
        subject: Option<&str>,
        fields: Value,
    ) -> BoxFuture<'static, Option<Verdict>> {
        let config = self.runtime.config();
        let matched: Vec<HookConfig> = hooks::matching(&config.hooks, event, subject).into_iter().cloned().collect();
        if matched.is_empty() {
            return Box::pin(std::future::ready(None));
        }
        let cwd = self.open.workspace().to_path_buf();
        Box::pin(async move {
            let mut input = json!({"hook_event_name": event.name(), "cwd": cwd});
            if let (Value::Object(input), Value::Object(fields)) = (&mut input, fields) {
                input.extend(fields);
            }
            let hooks: Vec<&HookConfig> = matched.iter().collect();
            let ran = hooks::run(&config, &hooks, &input, &cwd).await;
            Some(hooks::verdict(&ran))
        })
    }

    /// Once the gateway listens: the `GatewayStart` hooks, then `BOOT.md` if the agent workspace
    /// has one with anything in it.
    pub(super) async fn started(self: Arc<Self>) {
        if let Some(verdict) = self.gateway_hooks(HookEvent::GatewayStart, None, json!({})).await {
            tracing::info!(?verdict, "GatewayStart hooks ran");
        }
        let path = self.runtime.config().home.join("workspace").join(BOOT_FILE);
        let checklist = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text.trim().chars().take(BOOT_MAX).collect::<String>(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "BOOT.md could not be read; not run");
                return;
            }
        };
        if checklist.is_empty() {
            return;
        }
        match self.boot(&checklist).await {
            Ok(reply) => tracing::info!(reply = %reply.chars().take(200).collect::<String>(), "BOOT.md ran"),
            Err(e) => tracing::warn!(error = %e, "BOOT.md run failed"),
        }
    }

    /// `BOOT.md` as a turn of a fresh session of the default agent (`agent:<id>:boot:<id>`, closed after), within the
    /// cron time limit; the reply.
    async fn boot(&self, checklist: &str) -> Result<String, String> {
        let key = format!("agent:{}:boot:{}", self.default_agent(), uuid::Uuid::new_v4());
        let text = format!("{BOOT_INSTRUCTION}\n\n{BOOT_FILE}:\n{checklist}");
        let ticket = self.open.admit(&key, text.len()).map_err(|e| e.message.clone())?;
        let handle = self.open(&key).await?;
        let run_id = uuid::Uuid::new_v4().to_string();
        let blocks = vec![UserBlock::Text { text }];
        let (turn, mut ended, outcome) = self.runs.begin(&handle, &key, &run_id, blocks, self.open.run_options(), None);
        let limit = Duration::from_millis(self.runtime.config().cron.timeout);
        let in_time = super::cron::run::within(&handle, turn, outcome, limit).await;
        drop(ticket);
        let end = if in_time { ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone()) } else { None };
        if tokio::time::timeout(Duration::from_secs(5), self.close_session(&key)).await.is_err() {
            tracing::warn!(session = %key, "the BOOT.md run's session did not close");
        }
        match end {
            _ if !in_time => Err(format!("it ran past {} s and was stopped", limit.as_secs())),
            Some(super::hub::RunEnd::Final { text, .. }) => Ok(text),
            Some(super::hub::RunEnd::Aborted { .. }) => Err("it was stopped".into()),
            Some(super::hub::RunEnd::Error { message }) => Err(message),
            None => Err("it ended without a result".into()),
        }
    }
}
