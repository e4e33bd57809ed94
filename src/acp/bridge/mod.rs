//! `acp serve --gateway URL`: ACP on stdio for the editor, the gateway protocol (v4) to a gateway —
//! `acp gateway` or OpenClaw's — where the sessions live. The same rpc core and serve loop as
//! `acp serve` (every bad-input property, answers after stdin EOF); the session id the editor
//! sees is the gateway session key, the same in `session/new`, `session/list` and
//! `session/load`. A prompt is one `chat.send` whose run id is the idempotency key; its
//! `chat`/`agent` events (only its own, by run id) become `session/update`s (`events.rs`); the
//! handlers are in `handlers.rs`.

mod events;
mod handlers;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_protocol::acp::schema::StopReason;
use acp_protocol::gateway::events::{ApprovalResolved, name};
use acp_protocol::gateway::methods::{AgentWait, AgentWaitParams, ClientInfo};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Ended, Surface, dispatch::Work};
use crate::remote::identity::Identity;
use crate::remote::{GatewayClient, Notice};
use crate::rpc::{Connection, Incoming, Rpc};
use crate::sync::lock;

/// How long a request waits for the gateway connection before it fails.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long prompts wait for a lost gateway to come back before they fail.
const GRACE: Duration = Duration::from_secs(10);

/// The bridge's flags.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    pub url: String,
    pub token: Option<String>,
    pub password: Option<String>,
    /// `--session KEY`: the gateway session new ACP sessions use.
    pub session: Option<String>,
    /// `--session-label LABEL`: resolved through `sessions.resolve`.
    pub session_label: Option<String>,
    pub require_existing: bool,
    pub reset_session: bool,
    pub prefix_cwd: bool,
}

/// An ACP session of this connection: which gateway session it is. Sessions are kept by gateway
/// key, so `x` and `agent:<default>:x` name the same one.
struct Session {
    key: String,
    /// The id the editor uses for it (updates carry this one).
    acp_id: String,
    cwd: PathBuf,
    prefix_cwd: bool,
    /// One prompt at a time; later ones wait their turn.
    turns: Arc<tokio::sync::Mutex<()>>,
    /// Fires on `session/cancel` (running and waiting prompts end `cancelled`); replaced after.
    cancel: CancellationToken,
    /// Its model, mode and thinking on the gateway, and the models it offers.
    settings: handlers::Settings,
}

/// How a prompt's run on the gateway ended, as the prompt answers it.
#[derive(Debug)]
enum PromptEnd {
    Stopped(StopReason),
    Failed(String),
}

/// A prompt's run on the gateway, as its events arrive.
struct Run {
    session_id: String,
    key: String,
    cwd: PathBuf,
    /// The reply text and thoughts already sent to the editor.
    sent: String,
    thought: String,
    tools: HashSet<String>,
    /// Whether the gateway took it (`chat.send` answered).
    started: bool,
    end: Option<oneshot::Sender<PromptEnd>>,
}

pub(crate) struct Bridge {
    conn: Connection,
    gateway: GatewayClient,
    options: BridgeOptions,
    sessions: Mutex<HashMap<String, Session>>,
    runs: Mutex<HashMap<String, Run>>,
    /// Approval questions asked of the editor, by gateway question id (withdrawn when answered
    /// elsewhere).
    questions: Mutex<HashMap<String, CancellationToken>>,
    /// The gateway's default agent (`hello-ok`): a key without `agent:<id>:` is its.
    default_agent: Mutex<Option<String>>,
}

/// Serves one editor through the gateway until input ends or `shutdown` resolves.
pub async fn serve(
    rpc: Rpc,
    home: PathBuf,
    options: BridgeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<Ended, String> {
    let identity = Identity::load_or_create(&home)?;
    let (notices_tx, notices) = mpsc::unbounded_channel();
    let client = ClientInfo {
        id: "cli".into(),
        display_name: Some("ACP".into()),
        version: env!("CARGO_PKG_VERSION").into(),
        platform: std::env::consts::OS.into(),
        device_family: Some("Linux".into()),
        mode: "cli".into(),
        instance_id: None,
    };
    let remote = crate::remote::Options {
        url: options.url.clone(),
        token: options.token.clone(),
        password: options.password.clone(),
        home,
        scopes: vec!["operator.admin".into()],
        client,
        caps: vec!["tool-events".into(), "exec-approvals".into()],
    };
    let gateway = GatewayClient::start(remote, identity, notices_tx);
    let Rpc { conn, incoming } = rpc;
    let bridge = Arc::new(Bridge {
        conn,
        gateway: gateway.clone(),
        options,
        sessions: Mutex::default(),
        runs: Mutex::default(),
        questions: Mutex::default(),
        default_agent: Mutex::new(None),
    });
    let watcher = tokio::spawn(bridge.clone().watch(notices));
    let ended = super::serve_loop(incoming, &BridgeSurface(bridge), shutdown).await;
    gateway.stop();
    watcher.abort();
    Ok(ended)
}

struct BridgeSurface(Arc<Bridge>);

impl Surface for BridgeSurface {
    fn dispatch(&self, incoming: Incoming) -> Work {
        handlers::dispatch(&self.0, incoming)
    }

    fn cancel_everything(&self) {
        let keys: Vec<String> = lock(&self.0.sessions).keys().cloned().collect();
        for id in keys {
            self.0.cancel_session(&id);
        }
    }

    async fn close_all(&self, _limit: Duration) {
        lock(&self.0.sessions).clear();
    }
}

impl Bridge {
    /// Key `key` as the gateway has it: `x` is the default agent's, `agent:<default>:x` (so
    /// both spellings are one session).
    fn key(&self, key: &str) -> String {
        let key = key.trim();
        if key.starts_with("agent:") {
            return key.to_owned();
        }
        let agent = lock(&self.default_agent).clone().unwrap_or_else(|| "main".into());
        format!("agent:{agent}:{key}")
    }

    /// Waits (up to 2 s: a gateway not up yet is taken to be one agent's, `main`) for the
    /// gateway to say which agent is its default.
    async fn knows_default_agent(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while lock(&self.default_agent).is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `session/cancel`: the running prompt and every waiting one end `cancelled`.
    fn cancel_session(&self, id: &str) {
        if let Some(session) = lock(&self.sessions).get_mut(&self.key(id)) {
            std::mem::replace(&mut session.cancel, CancellationToken::new()).cancel();
        }
    }

    /// Ends run `run_id` (if it is still waiting).
    fn end_run(&self, run_id: &str, end: PromptEnd) {
        if let Some(sender) = lock(&self.runs).get_mut(run_id).and_then(|r| r.end.take()) {
            let _ = sender.send(end);
        }
    }

    /// What the gateway connection says, until it stops.
    async fn watch(self: Arc<Self>, mut notices: mpsc::UnboundedReceiver<Notice>) {
        while let Some(notice) = notices.recv().await {
            match notice {
                Notice::Event { event, payload } => {
                    fn read<T: serde::de::DeserializeOwned + Default>(payload: Value) -> T {
                        serde_json::from_value(payload).unwrap_or_default()
                    }
                    match event.as_str() {
                        name::CHAT => self.on_chat(&read(payload)),
                        name::AGENT => self.on_agent(&read(payload)),
                        name::APPROVAL_REQUESTED => self.clone().on_question(read(payload)),
                        name::APPROVAL_RESOLVED => {
                            let resolved: ApprovalResolved = read(payload);
                            if let Some(asked) = lock(&self.questions).remove(&resolved.id) {
                                asked.cancel();
                            }
                        }
                        _ => {}
                    }
                }
                Notice::Down(why) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        // Prompts are waiting: try every second rather than backing off.
                        let deadline = tokio::time::Instant::now() + GRACE;
                        while tokio::time::Instant::now() < deadline && !this.gateway.is_up() {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            this.gateway.retry_now();
                        }
                        if !this.gateway.is_up() {
                            this.fail_started_runs(&format!(
                                "lost the gateway at {} ({why}) and it did not come back within {} s; this \
                                 prompt's outcome is unknown",
                                this.gateway.url(),
                                GRACE.as_secs()
                            ));
                        }
                    });
                }
                Notice::Up(hello) => {
                    let defaults = serde_json::from_value::<acp_protocol::gateway::methods::Snapshot>(hello.snapshot)
                        .map(|s| s.session_defaults.default_agent_id)
                        .unwrap_or_default();
                    let defaults = if defaults.is_empty() { "main".to_owned() } else { defaults };
                    *lock(&self.default_agent) = Some(defaults);
                    self.clone().reconcile();
                }
                Notice::Refused(why) => self.fail_started_runs(&why),
            }
        }
    }

    fn fail_started_runs(&self, why: &str) {
        let ids: Vec<String> = lock(&self.runs).iter().filter(|(_, r)| r.started).map(|(id, _)| id.clone()).collect();
        for id in ids {
            self.end_run(&id, PromptEnd::Failed(why.to_owned()));
        }
    }

    /// Back after a drop: asks how each run that was going has fared (`agent.wait`); one that
    /// ended meanwhile is finished with its final text, one the gateway no longer knows fails.
    fn reconcile(self: Arc<Self>) {
        let ids: Vec<String> = lock(&self.runs).iter().filter(|(_, r)| r.started).map(|(id, _)| id.clone()).collect();
        for id in ids {
            let this = self.clone();
            tokio::spawn(async move {
                let asked = AgentWaitParams { run_id: id.clone(), timeout_ms: Some(0) };
                let asked = this.gateway.call::<AgentWait>(&asked, CONNECT_WAIT).await;
                match asked {
                    Ok(wait) => match wait.status.as_str() {
                        "ok" => {
                            let text = wait.terminal_reply.map(|r| r.text).unwrap_or_default();
                            this.flush_text(&id, &text);
                            this.end_run(&id, PromptEnd::Stopped(StopReason::EndTurn));
                        }
                        "aborted" => this.end_run(&id, PromptEnd::Stopped(StopReason::Cancelled)),
                        "error" => {
                            let error = wait.error.as_deref().unwrap_or("the run failed on the gateway");
                            this.end_run(&id, PromptEnd::Failed(error.to_owned()));
                        }
                        // Still running: its events carry on.
                        _ => {}
                    },
                    Err(e) => this.end_run(
                        &id,
                        PromptEnd::Failed(format!(
                            "the gateway no longer knows this prompt's run (it restarted?); its reply is lost ({e})"
                        )),
                    ),
                }
            });
        }
    }

    /// Sends the part of `text` (a run's whole reply so far) the editor has not seen.
    fn flush_text(&self, run_id: &str, text: &str) {
        let update = {
            let mut runs = lock(&self.runs);
            let Some(run) = runs.get_mut(run_id) else { return };
            events::new_suffix(&mut run.sent, text).map(|suffix| (run.session_id.clone(), suffix))
        };
        if let Some((session, suffix)) = update {
            self.send_text(&session, run_id, suffix, false);
        }
    }
}

/// Reads a number of milliseconds from `_meta` (`timeoutMs`).
fn millis(value: Option<f64>) -> Option<u64> {
    value.filter(|v| *v >= 0.0 && *v <= 1e12).map(|v| v.round() as u64)
}
