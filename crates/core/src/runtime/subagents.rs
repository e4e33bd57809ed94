//! Subagents and the session tools. `sessions_spawn` starts a child session
//! (`agent:main:subagent:<uuid>`, stored with its parent) on a task in the background and returns
//! at once; the child inherits the parent's workspace, mode and sandbox (never more), has no
//! session tools itself, runs in a lane of `[subagents] max_concurrent` (8) with a time limit, and
//! is cancelled with the parent turn that spawned it. The parent's client sees the child as a
//! tool call of its own whose content follows the child's progress and ends with its result;
//! the child's permission questions reach the parent's client, labelled with the child. When the
//! child ends, its result is announced to the parent: steered into the running turn, or run as a
//! new turn if the parent is idle. `sessions_send` talks to another open session (and waits for
//! its answer, unless told not to; a wait that would come back to its sender is refused);
//! `sessions_list` and `sessions_history` read the store. Agent-to-agent text that starts with
//! `~openlang` is parsed first: a malformed message goes back to the sending model as `~err` with
//! the position, and is not delivered.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::event::{Emitter, TurnOutcome};
use super::handle::SessionHandle;
use super::op::Op;
use super::settings::{LiveState, SessionSettings};
use super::shared::{Outlet, Runtime, Shared};
use crate::history::input::UserBlock;
use crate::history::replay::Shown;
use crate::settings::ReasoningEffort;
use crate::sync::lock;

mod agents;
mod host;
mod link;
mod me;
mod read;

use crate::tools::host::AnyHost;
use crate::tools::{Access, Action, Prepared, Registry, Tool, ToolCallState, ToolContent, ToolContext, ToolKind};
use crate::tools::{ToolOutput, ToolStatus};
use host::ChildHost;
use link::{ChildSink, Ended, Link, shown};
use me::Me;
use read::{History, List};

/// Subagents running at once, unless configured.
pub(crate) const LANE: usize = 8;
/// A subagent's run is stopped after this long, unless configured or asked.
const TIMEOUT: Duration = Duration::from_secs(600);
/// Subagents one turn may start, unless configured.
const CHILDREN_PER_TURN: usize = 16;
/// Model requests the subagents of one turn may make together, unless configured.
const REQUESTS_PER_TURN: u32 = 500;
/// How deep `sessions_send` waits may chain.
const MAX_WAIT_CHAIN: usize = 5;

/// Generates the session tools' argument schemas, if they are not yet (ahead of a first turn).
pub(crate) fn prewarm() {
    use crate::tools::args::schema_for;
    let _ = (schema_for::<SpawnArgs>(), schema_for::<SendArgs>());
    let _ = (schema_for::<read::ListArgs>(), schema_for::<read::HistoryArgs>());
}

/// Adds the session tools for a (top-level) session's turn.
pub(crate) fn add_tools(
    registry: &mut Registry,
    shared: &Arc<Shared>,
    events: &Emitter,
    settings: &SessionSettings,
    live: &Arc<LiveState>,
    mode_cap: Option<crate::settings::Mode>,
) {
    let config = shared.config_for(&events.session);
    let me = Me {
        shared: shared.clone(),
        session: events.session.clone(),
        events: events.clone(),
        settings: settings.clone(),
        live: live.clone(),
        mode_cap,
        spawned: std::sync::atomic::AtomicUsize::new(0),
        requests: Arc::new(std::sync::atomic::AtomicU32::new(
            config.subagents.max_requests_per_turn.unwrap_or(REQUESTS_PER_TURN),
        )),
    };
    let me = Arc::new(me);
    let policy = crate::tools::policy::ToolPolicy::new(&config.tools.allow, &config.tools.deny);
    let offer_agents = agents::offered(&me);
    let mut tools: Vec<Arc<dyn crate::tools::AnyTool>> =
        vec![Arc::new(Spawn(me.clone())), Arc::new(Send(me.clone())), Arc::new(List(me.clone()))];
    if offer_agents {
        tools.push(Arc::new(agents::AgentsList(me.clone())));
    }
    tools.push(Arc::new(History(me)));
    for tool in tools {
        if policy.allows(tool.name()) {
            registry.add(tool);
        }
    }
}

impl Runtime {
    /// Cancels the work of subagent `key` if its parent is a session `ours` says is the caller's
    /// (a client cancels only the children it was shown); whether it did.
    pub fn cancel_subagent(&self, key: &str, ours: impl FnOnce(&str) -> bool) -> bool {
        let found = lock(&self.shared.parents).get(key).cloned();
        match found {
            Some((parent, stop)) if ours(&parent) => {
                // Also while it waits for a place in the lane: it never starts then.
                stop.cancel();
                true
            }
            _ => false,
        }
    }
}

fn openlang_on(shared: &Shared) -> bool {
    shared.config().subagents.protocol.as_deref() != Some("plain")
}

/// Parses agent-to-agent text that says it is OpenLang; the `~err` reply if it does not parse.
fn check(text: &str) -> Result<(), String> {
    if crate::openlang::is_openlang(text)
        && let Err(e) = crate::openlang::parse(text)
    {
        return Err(format!(
            "the message was not delivered: it does not parse as OpenLang. Fix it and send it again.\n{}",
            e.to_openlang()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- sessions_spawn

struct Spawn(Arc<Me>);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpawnArgs {
    /// What the subagent is to do: complete and self-contained (it does not see this conversation)
    task: String,
    /// A short name for it, shown to the user
    label: Option<String>,
    /// A model for it, as provider/model; default: this session's
    model: Option<String>,
    /// How much it reasons: off, minimal, low, medium, high or xhigh
    thinking: Option<String>,
    /// Seconds before it is stopped
    #[schemars(range(min = 1))]
    timeout: Option<u64>,
    /// Another agent to run it (agents_list names those allowed); default: this one
    #[serde(rename = "agentId")]
    agent_id: Option<String>,
}

impl Tool for Spawn {
    const NAME: &'static str = "sessions_spawn";
    type Args = SpawnArgs;

    fn description(&self) -> String {
        let protocol = if openlang_on(&self.0.shared) {
            " Write the task in OpenLang (read the openlang skill first); the result comes back in OpenLang too."
        } else {
            ""
        };
        format!(
            "Start a subagent: a child session that works on `task` in the background, in this workspace, with \
             this session's permissions, and cannot spawn others. Returns at once with its session key; its \
             result is announced to you when it ends (you may go on meanwhile). Use it for independent pieces \
             of work that can run while you do something else.{protocol}"
        )
    }

    async fn prepare(&self, args: SpawnArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        if args.task.trim().is_empty() {
            return Err("`task` is empty".into());
        }
        check(&args.task)?;
        let mine = self.0.agent().to_owned();
        let agent = match args.agent_id.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            None => mine.clone(),
            Some(id) => {
                let id = id.to_lowercase();
                let config = self.0.shared.config_for(&self.0.session);
                if !config.has_agent(&id) {
                    return Err(format!("no agent `{id}` here (agents_list names those you may use)"));
                }
                if !config.may_spawn(&mine, &id) {
                    return Err(format!(
                        "agent `{mine}` may not start subagents of agent `{id}` (the user allows that with \
                         `subagents = {{ allow_agents = [\"{id}\"] }}` in agent `{mine}`'s [[agents]] entry)"
                    ));
                }
                id
            }
        };
        // Its model and timeout are the target agent's unless given.
        let config = self.0.shared.config_for(&format!("agent:{agent}:subagent"));
        let model = match &args.model {
            Some(m) => Some(config.resolve_model(m).map_err(|e| e.to_string())?.0),
            None => None,
        };
        let reasoning = match args.thinking.as_deref() {
            None => None,
            Some("off" | "default" | "none") => Some(None),
            Some(level) => Some(Some(
                ReasoningEffort::parse(level)
                    .ok_or_else(|| format!("`thinking` `{level}`: use off, {}", ReasoningEffort::CHOICES))?,
            )),
        };
        let label = args.label.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()).unwrap_or_else(|| {
            crate::history::input::title_of(&[UserBlock::text(args.task.clone())]).unwrap_or_default()
        });
        let timeout = args
            .timeout
            .map(Duration::from_secs)
            .or(config.subagents.timeout_secs.map(Duration::from_secs))
            .unwrap_or(TIMEOUT);
        let title = if agent == mine {
            format!("Start subagent: {label}")
        } else {
            format!("Start subagent of {agent}: {label}")
        };
        Ok(Prepared {
            title,
            kind: ToolKind::Other,
            locations: Vec::new(),
            preview: vec![ToolContent::Text(shown(&args.task))],
            access: Access::default(),
            action: Box::new(SpawnAction {
                me: self.0.clone(),
                task: args.task,
                label,
                model,
                reasoning,
                timeout,
                host: ctx.host.clone(),
                agent: (agent != mine).then_some(agent),
            }),
        })
    }
}

struct SpawnAction {
    me: Arc<Me>,
    task: String,
    label: String,
    model: Option<crate::config::ModelRef>,
    reasoning: Option<Option<crate::settings::ReasoningEffort>>,
    timeout: Duration,
    host: Arc<dyn AnyHost>,
    /// Another agent's subagent: its workspace, model and settings.
    agent: Option<String>,
}

impl Action for SpawnAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let me = &self.me;
        let most = me.shared.config_for(&me.session).subagents.max_children_per_turn.unwrap_or(CHILDREN_PER_TURN);
        if me.spawned.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= most {
            return ToolOutput::error(format!(
                "this turn has started {most} subagents, the most one turn may (`[subagents] max_children_per_turn`); \
                 wait for their results, or do the rest yourself"
            ));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let agent = self.agent.as_deref().unwrap_or(me.agent());
        let key = format!("agent:{agent}:subagent:{id}");
        let mut settings = me.settings.clone();
        settings.mode = me.live.mode().at_most(me.mode_cap);
        if self.agent.is_some() {
            // Another agent's: in its workspace, with its model, and never in a freer mode than
            // either this session's or that agent's own.
            let theirs = me.shared.config_for(&key);
            if let Some(workspace) = theirs.agent_scope.as_ref().and_then(|a| a.workspace.clone()) {
                settings.cwd = workspace;
                settings.additional_dirs.clear();
            }
            if let Ok(model) = theirs.default_model_ref() {
                settings.model = model;
            }
            settings.mode = settings.mode.at_most(Some(theirs.default_mode));
        }
        if let Some(model) = self.model {
            settings.model = model;
        }
        if let Some(reasoning) = self.reasoning {
            settings.reasoning = reasoning;
        }
        let link = Arc::new(Link {
            parent: me.session.clone(),
            key: key.clone(),
            label: self.label.clone(),
            cwd: settings.cwd.clone(),
            shows: me.events.sink.shows_subagents(),
            sink: me.events.sink.clone(),
            turn: me.events.turn,
            log: me.events.log.as_ref().map(Arc::downgrade),
            stop: CancellationToken::new(),
            options: super::op::TurnOptions {
                lane: None,
                mode_cap: me.mode_cap,
                request_budget: Some(me.requests.clone()),
                from_agent: true,
            },
            call: Mutex::new(ToolCallState {
                id: format!("subagent-{id}"),
                name: "subagent".into(),
                title: format!("Subagent {}", self.label),
                kind: ToolKind::Other,
                status: ToolStatus::InProgress,
                locations: Vec::new(),
                raw_input: json!({"sessionKey": key, "task": self.task}),
                content: Vec::new(),
                raw_output: None,
                streams_output: false,
            }),
            progress: Mutex::default(),
        });
        let outlet = Outlet {
            sink: Arc::new(ChildSink(link.clone())),
            host: Arc::new(ChildHost { inner: self.host, link: link.clone() }),
            child: true,
        };
        let runtime = Runtime { shared: me.shared.clone() };
        let handle = match runtime.create(Arc::from(key.as_str()), settings, Some(me.session.to_string()), outlet).await
        {
            Ok(handle) => handle,
            Err(e) => return ToolOutput::error(format!("the subagent could not start: {e:?}")),
        };
        lock(&me.shared.parents).insert(key.clone(), (me.session.to_string(), link.stop.clone()));
        link.show_start(&self.task);
        tokio::spawn(run_child(me.shared.clone(), handle, link, self.task, self.timeout, ctx.cancel.clone()));
        let answer = json!({"status": "accepted", "sessionKey": key, "label": self.label});
        ToolOutput::ok(
            answer.to_string(),
            vec![ToolContent::Text(format!("Started subagent `{}` ({key}).", self.label))],
        )
    }
}

async fn run_child(
    shared: Arc<Shared>,
    child: SessionHandle,
    link: Arc<Link>,
    task: String,
    timeout: Duration,
    parent_turn: CancellationToken,
) {
    let started = Instant::now();
    // A child ends with its parent: the turn that started it, or the session itself closing.
    let parent_session = shared.session(&link.parent);
    let stop = parent_turn.child_token();
    if let Some(parent) = parent_session {
        let stop = stop.clone();
        tokio::spawn(async move {
            parent.closed().await;
            stop.cancel();
        });
    }
    let parent_turn = stop;
    let by_user = link.stop.clone();
    let permit = tokio::select! {
        permit = shared.lane.acquire() => permit.ok(),
        () = parent_turn.cancelled() => None,
        () = by_user.cancelled() => None,
    };
    let ended = match permit {
        None if by_user.is_cancelled() => Ended::ByUser,
        None => Ended::Cancelled,
        Some(_permit) => {
            let turn = shared.next_turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let intro = if openlang_on(&shared) && crate::openlang::is_openlang(&task) {
                "[A task from another agent session. Work on it; your final answer goes back to that agent. Answer in OpenLang (the openlang skill says how).]"
            } else {
                "[A task from another agent session. Work on it; your final answer goes back to that agent.]"
            };
            let input = vec![UserBlock::text(format!("{intro}\n\n{task}"))];
            let outcome = child.prompt_with(turn, input, link.options.clone());
            tokio::pin!(outcome);
            tokio::select! {
                o = &mut outcome => Ended::Done(o),
                () = tokio::time::sleep(timeout) => {
                    child.send(Op::CancelTurn(turn));
                    let _ = outcome.await;
                    Ended::TimedOut
                }
                () = parent_turn.cancelled() => {
                    child.send(Op::CancelTurn(turn));
                    let _ = outcome.await;
                    Ended::Cancelled
                }
                () = by_user.cancelled() => {
                    child.send(Op::CancelTurn(turn));
                    let _ = outcome.await;
                    Ended::ByUser
                }
            }
        }
    };
    let result = std::mem::take(&mut lock(&link.progress).text).trim().to_owned();
    let tools = lock(&link.progress).tool_calls;
    let secs = started.elapsed().as_secs_f64();
    let (status, how) = match &ended {
        Ended::Done(Some(TurnOutcome::Stopped { reason: super::event::StopReason::EndTurn, .. })) => {
            (ToolStatus::Completed, "finished".to_owned())
        }
        Ended::ByUser | Ended::Done(Some(TurnOutcome::Stopped { reason: super::event::StopReason::Cancelled, .. })) => {
            (ToolStatus::Failed, "was cancelled by the user".to_owned())
        }
        Ended::Done(Some(TurnOutcome::Stopped { reason, .. })) => {
            (ToolStatus::Failed, format!("stopped before it finished ({reason:?})"))
        }
        Ended::Done(Some(TurnOutcome::Failed { error, .. })) => {
            (ToolStatus::Failed, format!("failed: {}", error.message))
        }
        Ended::Done(None) => (ToolStatus::Failed, "stopped unexpectedly".to_owned()),
        Ended::TimedOut => (ToolStatus::Failed, format!("was stopped after {} s (its time limit)", timeout.as_secs())),
        Ended::Cancelled => (ToolStatus::Failed, "was cancelled with the turn (or session) that started it".to_owned()),
    };
    let summary = format!(
        "Subagent `{}` {how} ({secs:.1} s, {tools} tool call{}).",
        link.label,
        if tools == 1 { "" } else { "s" }
    );
    link.finish(&ended, status, &summary, &result);
    child.send(Op::Shutdown);
    if matches!(ended, Ended::Cancelled) {
        return; // the user stopped the parent: nothing to announce
    }
    // The announcement: into the parent's running turn, else a turn of its own.
    let Some(parent) = shared.session(&link.parent) else {
        tracing::info!(parent = %link.parent, "a subagent ended after its parent closed");
        return;
    };
    let text = format!(
        "[Subagent announcement — not from the user. {summary} Session: {}.]\n{}",
        link.key,
        if result.is_empty() { "(It gave no answer.)".to_owned() } else { result }
    );
    if !parent.steer(text.clone()).await && !link.sink.wake(&link.parent, &text) {
        let turn = shared.next_turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // As restricted as the turn that started the child.
        let options =
            super::op::TurnOptions { mode_cap: link.options.mode_cap, from_agent: true, ..Default::default() };
        tokio::spawn(parent.prompt_with(turn, vec![UserBlock::text(text)], options));
    }
}

// ---------------------------------------------------------------- sessions_send

struct Send(Arc<Me>);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendArgs {
    /// The session to write to (a subagent's key, or another open session's)
    #[serde(rename = "sessionKey")]
    session_key: String,
    message: String,
    /// Wait for its answer (default true); false returns at once
    wait: Option<bool>,
    /// Seconds to wait for the answer (default 300)
    #[schemars(range(min = 1))]
    timeout: Option<u64>,
}

impl Tool for Send {
    const NAME: &'static str = "sessions_send";
    type Args = SendArgs;

    fn description(&self) -> String {
        "Send a message to another open session (e.g. a subagent you started) and, unless `wait` is false, \
         get its answer back."
            .into()
    }

    async fn prepare(&self, args: SendArgs, _ctx: &ToolContext) -> Result<Prepared, String> {
        let target = args.session_key.trim().to_owned();
        if target == *self.0.session {
            return Err("that is this session".into());
        }
        check(&args.message)?;
        if !self.0.may_see(&target) {
            return Err(format!("session `{target}` is another agent's"));
        }
        if self.0.shared.session(&target).is_none() {
            return Err(format!("no session `{target}` is open (sessions_list shows the sessions)"));
        }
        Ok(Prepared {
            title: format!("Message session {target}"),
            kind: ToolKind::Other,
            locations: Vec::new(),
            preview: vec![ToolContent::Text(shown(&args.message))],
            access: self.0.access(&target, "a message to the conversation"),
            action: Box::new(SendAction {
                me: self.0.clone(),
                target,
                message: args.message,
                wait: args.wait.unwrap_or(true),
                timeout: Duration::from_secs(args.timeout.unwrap_or(300)),
            }),
        })
    }
}

struct SendAction {
    me: Arc<Me>,
    target: String,
    message: String,
    wait: bool,
    timeout: Duration,
}

impl Action for SendAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let me = &self.me;
        let Some(target) = me.shared.session(&self.target) else {
            return ToolOutput::error(format!("session `{}` closed", self.target));
        };
        let sender = me.session.to_string();
        if self.wait {
            let mut waits = lock(&me.shared.waits);
            // Follow whom the target waits on, along every wait: a chain back to us would never end.
            if waits_on(&waits, &self.target, &sender) {
                return ToolOutput::error(format!(
                    "`{}` is waiting on this session already; answer it instead of waiting on it",
                    self.target
                ));
            }
            if waits.len() >= MAX_WAIT_CHAIN * 4 {
                return ToolOutput::error("too many sessions are waiting on each other; try again later");
            }
            waits.push((sender.clone(), self.target.clone()));
        }
        let turn = me.shared.next_turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let text = format!("[A message from agent session {sender}; your answer goes back to it.]\n\n{}", self.message);
        // A turn that runs restricted passes its restriction on to the turn it starts.
        let options = super::op::TurnOptions { mode_cap: me.mode_cap, from_agent: true, ..Default::default() };
        let outcome = target.prompt_with(turn, vec![UserBlock::text(text)], options);
        if !self.wait {
            tokio::spawn(outcome);
            return ToolOutput::ok(json!({"status": "accepted"}).to_string(), Vec::new());
        }
        let waited = tokio::select! {
            o = outcome => Some(o),
            () = tokio::time::sleep(self.timeout) => None,
            () = ctx.cancel.cancelled() => None,
        };
        {
            let mut waits = lock(&me.shared.waits);
            if let Some(at) = waits.iter().position(|(from, to)| *from == sender && *to == self.target) {
                waits.remove(at);
            }
        }
        match waited {
            None => {
                target.send(Op::CancelTurn(turn));
                ToolOutput::error(format!("no answer from `{}` in time; its turn was stopped", self.target))
            }
            Some(Some(TurnOutcome::Stopped { reason, .. })) if reason != super::event::StopReason::EndTurn => {
                ToolOutput::error(format!("`{}` did not answer: its turn ended {reason:?}", self.target))
            }
            Some(Some(TurnOutcome::Stopped { .. })) => {
                let runtime = Runtime { shared: me.shared.clone() };
                let answer = last_answer(&runtime, &self.target).await.unwrap_or_default();
                ToolOutput::ok(answer.clone(), vec![ToolContent::Text(shown(&answer))])
            }
            Some(Some(TurnOutcome::Failed { error, .. })) => {
                ToolOutput::error(format!("`{}` failed: {}", self.target, error.message))
            }
            Some(None) => ToolOutput::error(format!("`{}` closed", self.target)),
        }
    }
}

/// Whether `from` waits, directly or through others (at most [`MAX_WAIT_CHAIN`] deep), on `on`.
fn waits_on(waits: &[(String, String)], from: &str, on: &str) -> bool {
    let mut at = vec![from.to_owned()];
    for _ in 0..=MAX_WAIT_CHAIN {
        if at.iter().any(|s| s == on) {
            return true;
        }
        at = waits.iter().filter(|(f, _)| at.contains(f)).map(|(_, t)| t.clone()).collect();
        if at.is_empty() {
            return false;
        }
    }
    false
}

/// A session's last answer (its text after the last user message), from its transcript.
async fn last_answer(runtime: &Runtime, key: &str) -> Option<String> {
    let shown = runtime.history(key).await.ok().flatten()?;
    let mut answer = String::new();
    for item in shown {
        match item {
            Shown::User { .. } => answer.clear(),
            Shown::Text { text, .. } => answer.push_str(&text),
            Shown::Tool(_) => answer.clear(),
            _ => {}
        }
    }
    Some(answer.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::waits_on;

    #[test]
    fn a_wait_back_to_its_sender_is_found_along_every_wait() {
        let w =
            |list: &[(&str, &str)]| list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect::<Vec<_>>();
        // One reply of `a` waits on both `b` and `c`; `c` waiting on `a` is a loop, found
        // through the second of a's waits as well as the first.
        let waits = w(&[("a", "b"), ("a", "c")]);
        assert!(waits_on(&waits, "a", "a"));
        assert!(waits_on(&waits, "a", "c"), "so c may not wait on a");
        assert!(!waits_on(&waits, "c", "a"), "c waits on nobody");
        let chain = w(&[("a", "b"), ("b", "c"), ("c", "d")]);
        assert!(waits_on(&chain, "a", "d"));
        assert!(!waits_on(&chain, "d", "a"));
    }
}
