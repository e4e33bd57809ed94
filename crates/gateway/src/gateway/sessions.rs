//! The sessions a gateway keeps open: opened on demand (from the store, or new), used runs taken
//! in within their caps and run in the gateway's lane, idle ones closed (their memory given
//! back), and the session methods (`sessions.list|resolve|reset|delete`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use acp_protocol::gateway::methods::{
    Resolved, RunCounts, SessionDone, SessionPage, SessionRow, SessionsListParams, SessionsPatchParams,
};
use acp_protocol::gateway::{ErrorShape, code};
use serde_json::Value;

use super::channels::policy::{Show, ShowReasoning, Verbose};
use super::{Gateway, limits};
use crate::clock::now_ms;
use crate::runtime::{CreateError, Op, SessionHandle, SessionSettings};
use crate::sync::lock;

/// The sessions a gateway has open, and what runs on them may hold.
pub(super) struct Open {
    /// Open sessions, and when each was last used.
    sessions: Mutex<HashMap<String, (SessionHandle, Instant)>>,
    /// Sessions being closed as idle (reopening one waits for it to be closed).
    closing: Mutex<HashMap<String, SessionHandle>>,
    /// One session opened at a time.
    opening: tokio::sync::Mutex<()>,
    /// Runs not yet ended, per session: capped.
    admission: Arc<limits::Admission>,
    /// Runs going at once.
    lane: Arc<crate::runtime::Lane>,
    limits: limits::RunLimits,
    /// The directory sessions work in.
    workspace: PathBuf,
    /// Sessions a control client (the web chat, the bridge, a CLI) has run in since the gateway
    /// started: a chat's session reset leaves them alone.
    driven: Mutex<std::collections::HashSet<String>>,
}

impl Open {
    pub(super) fn new(options: &super::Options) -> Self {
        Self {
            sessions: Mutex::default(),
            closing: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            admission: limits::Admission::new(options.runs),
            lane: Arc::new(crate::runtime::Lane::new(options.runs.concurrent)),
            limits: options.runs,
            workspace: options.workspace.clone(),
            driven: Mutex::default(),
        }
    }

    /// A control client runs something in session `key`.
    pub(super) fn driven_by_client(&self, key: &str) {
        let mut driven = lock(&self.driven);
        if !driven.contains(key) {
            driven.insert(key.to_owned());
        }
    }

    /// Whether a control client has run something in session `key` since the gateway started.
    pub(super) fn client_driven(&self, key: &str) -> bool {
        lock(&self.driven).contains(key)
    }

    /// The open session `key`, if open (it counts as used now).
    pub(super) fn handle(&self, key: &str) -> Option<SessionHandle> {
        let mut sessions = lock(&self.sessions);
        let (handle, used) = sessions.get_mut(key)?;
        *used = Instant::now();
        Some(handle.clone())
    }

    /// Takes a run on session `key` in (its message `bytes` long), or says why not: the caps on
    /// what waits per session and in all.
    pub(super) fn admit(&self, key: &str, bytes: usize) -> Result<limits::Ticket, Box<ErrorShape>> {
        self.admission.admit(key, bytes).map_err(|e| {
            let mut error = ErrorShape::new(code::UNAVAILABLE, e);
            error.retryable = Some(true);
            Box::new(error)
        })
    }

    /// How a run of this gateway's is run: in its lane.
    pub(super) fn run_options(&self) -> crate::runtime::TurnOptions {
        crate::runtime::TurnOptions { lane: Some(self.lane.clone()), ..Default::default() }
    }

    /// Whether session `key` has runs going or waiting.
    pub(super) fn busy(&self, key: &str) -> bool {
        self.admission.busy(key)
    }

    /// The keys of the open sessions.
    pub(super) fn keys(&self) -> Vec<String> {
        lock(&self.sessions).keys().cloned().collect()
    }

    pub(super) fn count(&self) -> usize {
        lock(&self.sessions).len()
    }

    pub(super) fn run_counts(&self) -> RunCounts {
        RunCounts {
            running: self.lane.running() as u64,
            waiting: self.lane.waiting() as u64,
            max_concurrent: self.limits.concurrent as u64,
        }
    }

    /// The most sessions kept open.
    pub(super) fn most(&self) -> usize {
        self.limits.open_sessions
    }

    pub(super) fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// Every open session, no longer open.
    pub(super) fn take_all(&self) -> Vec<SessionHandle> {
        lock(&self.sessions).drain().map(|(_, (h, _))| h).collect()
    }
}

impl Gateway {
    /// Closes the sessions with nothing to do: those idle past the idle time, and, while more
    /// than `keep` are open, the least recently used idle ones. Their memory goes back to the
    /// system. Returns how many were closed.
    pub(super) async fn close_idle(&self, keep: usize) -> usize {
        let closing: Vec<(String, SessionHandle)> = {
            let mut sessions = lock(&self.open.sessions);
            let mut idle: Vec<(String, Instant)> = sessions
                .iter()
                .filter(|(key, _)| !self.open.admission.busy(key) && self.hub.turn_of(key, None).is_empty())
                .map(|(key, (_, used))| (key.clone(), *used))
                .collect();
            idle.sort_by_key(|(_, used)| *used);
            let over = sessions.len().saturating_sub(keep);
            let limit = self.open.limits.idle;
            let chosen: Vec<String> = idle
                .iter()
                .enumerate()
                .filter(|(i, (_, used))| *i < over || used.elapsed() >= limit)
                .map(|(_, (key, _))| key.clone())
                .collect();
            let closing: Vec<(String, SessionHandle)> =
                chosen.into_iter().filter_map(|key| sessions.remove(&key).map(|(h, _)| (key, h))).collect();
            lock(&self.open.closing).extend(closing.iter().cloned());
            closing
        };
        if closing.is_empty() {
            return 0;
        }
        for (key, handle) in &closing {
            tracing::debug!(session = %key, "closing an idle session");
            handle.send(Op::Shutdown);
        }
        for (key, handle) in &closing {
            handle.closed().await;
            lock(&self.open.closing).remove(key);
        }
        self.presence.health_changed();
        limits::return_memory();
        closing.len()
    }

    /// Opens session `key`: this gateway's, or the stored one, or a new one.
    pub(super) async fn open(&self, key: &str) -> Result<SessionHandle, String> {
        let _one_at_a_time = self.open.opening.lock().await;
        if let Some(handle) = self.open.handle(key) {
            return Ok(handle);
        }
        if !crate::runtime::valid_session_id(key) {
            return Err(format!("`{key}` is not a valid session key"));
        }
        if key.starts_with("agent:") && crate::config::agents::agent_of(key).is_none() {
            return Err(format!("`{key}` is not a valid session key: an agent's is agent:<id>:<name>"));
        }
        // Closed as idle just now: its transcript is free once it has closed.
        let closing = lock(&self.open.closing).get(key).cloned();
        if let Some(handle) = closing {
            handle.closed().await;
        }
        // Room for it: the least recently used idle session goes, if need be.
        let most = self.open.most();
        if self.open.count() >= most && self.close_idle(most - 1).await == 0 {
            return Err(format!(
                "{most} sessions are open and busy, the most this gateway keeps (`[gateway] max_open_sessions`); \
                 try again when one is idle"
            ));
        }
        let base = self.runtime.config();
        if let Some(agent) = crate::config::agents::agent_of(key)
            && !base.has_agent(agent)
        {
            return Err(format!("no agent `{agent}` on this gateway (its agents: {})", base.agent_ids().join(", ")));
        }
        let config = self.runtime.config_for(key);
        let cwd = self.workspace_of(&config);
        let model = config.default_model_ref().map_err(|e| format!("no model to run: {e}"))?;
        let settings = SessionSettings {
            cwd: cwd.clone(),
            additional_dirs: Vec::new(),
            model,
            mode: config.default_mode,
            reasoning: config.reasoning,
            mcp_servers: Vec::new(),
        };
        let handle = match self.runtime.create_session(std::sync::Arc::from(key), settings).await {
            Ok(handle) => handle,
            Err(CreateError::Exists) => {
                self.runtime
                    .load_session(key, cwd, Vec::new(), Vec::new(), "resume")
                    .await
                    .map_err(|e| format!("could not open session {key}: {e}"))?
                    .handle
            }
            Err(e) => return Err(format!("could not open session {key}: {e}")),
        };
        lock(&self.open.sessions).insert(key.to_owned(), (handle.clone(), Instant::now()));
        self.presence.health_changed();
        self.hub.changed(key, "created", None);
        Ok(handle)
    }

    /// Where the sessions of the agent `config` is for work: its own workspace, else the
    /// gateway's.
    pub(super) fn workspace_of(&self, config: &crate::config::Config) -> PathBuf {
        config.agent_scope.as_ref().and_then(|a| a.workspace.clone()).unwrap_or_else(|| self.open.workspace.clone())
    }

    pub(super) async fn sessions_list(&self, p: &SessionsListParams) -> Result<SessionPage, ErrorShape> {
        let limit = p.limit.unwrap_or(50).min(1000);
        let offset = p.offset.unwrap_or(0);
        let search = p.search.as_deref().unwrap_or_default().trim();
        let found = self
            .runtime
            .find_sessions(search, offset, limit)
            .await
            .map_err(|e| ErrorShape::new(code::UNAVAILABLE, format!("could not list sessions: {e}")))?;
        let agent = p.agent_id.as_deref().map(str::trim).filter(|a| !a.is_empty()).map(str::to_lowercase);
        let agent = agent.as_deref();
        // Paged by the rows looked at (an agent's are fewer): the next page starts after them.
        let scanned = found.sessions.len() as u64;
        let sessions: Vec<SessionRow> = found
            .sessions
            .into_iter()
            .filter(|s| agent.is_none_or(|a| crate::config::agents::agent_of(&s.id) == Some(a)))
            .map(|s| {
                let show = Show::of(&self.channels.prefs.get(&s.id));
                SessionRow {
                    session_id: Some(s.id.clone()),
                    label: s.title.clone(),
                    display_name: s.title.clone(),
                    derived_title: s.title,
                    updated_at: Some(s.updated_at),
                    created_at: Some(s.created_at),
                    model: Some(s.model),
                    mode: Some(s.mode),
                    thinking_level: Some(s.reasoning.unwrap_or_else(|| "off".into())),
                    origin: s.origin.into(),
                    kind: Value::Null,
                    cwd: Some(s.cwd.display().to_string()),
                    input_tokens: Some(s.input_tokens),
                    output_tokens: Some(s.output_tokens),
                    context_tokens: Some(s.context_tokens),
                    verbose_level: Some(show.verbose.as_str().into()),
                    reasoning_level: Some(show.reasoning.as_str().into()),
                    open: Some(self.open.handle(&s.id).is_some()),
                    key: s.id,
                }
            })
            .collect();
        let count = sessions.len() as u64;
        let more = offset + scanned < found.total;
        Ok(SessionPage {
            ts: now_ms(),
            count,
            total_count: found.total,
            limit_applied: limit,
            next_offset: more.then_some(offset + scanned),
            has_more: more,
            sessions,
        })
    }

    pub(super) async fn resolve(&self, key: &str) -> Result<Resolved, ErrorShape> {
        let key = self.key(key);
        let resolved = |key: String, label: Option<String>| Resolved { ok: true, session_id: key.clone(), key, label };
        if self.open.handle(&key).is_some() {
            return Ok(resolved(key, None));
        }
        let found = self.runtime.session_summary(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        match found {
            Some(s) => Ok(resolved(s.id, s.title)),
            None => Err(ErrorShape::new(code::NOT_FOUND, format!("no session `{key}`"))),
        }
    }

    /// The most recently used session whose label (title) is `label`.
    pub(super) async fn resolve_label(&self, label: &str) -> Result<Resolved, ErrorShape> {
        let found = self.runtime.session_titled(label).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        match found {
            Some(s) => Ok(Resolved { ok: true, key: s.id.clone(), session_id: s.id, label: Some(label.to_owned()) }),
            None => Err(ErrorShape::new(code::NOT_FOUND, format!("no session has the label `{label}`"))),
        }
    }

    pub(super) async fn reset(&self, key: &str) -> Result<SessionDone, ErrorShape> {
        let key = self.key(key);
        let handle = self.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        let turn = self.runtime.next_turn_id();
        handle.prompt(turn, vec![crate::runtime::UserBlock::Text { text: "/reset".into() }]).await;
        self.hub.changed(&key, "reset", None);
        Ok(SessionDone { ok: true, key, deleted: None })
    }

    /// Closes open session `key` (kept in the store), once its runs are done.
    pub(super) async fn close_session(&self, key: &str) {
        let open = lock(&self.open.sessions).remove(key);
        if let Some((handle, _)) = open {
            handle.send(Op::Shutdown);
            handle.closed().await;
            self.presence.health_changed();
        }
    }

    pub(super) async fn delete(&self, key: &str) -> Result<SessionDone, ErrorShape> {
        let key = self.key(key);
        let open = lock(&self.open.sessions).remove(&key);
        if let Some((handle, _)) = open {
            self.presence.health_changed();
            handle.send(Op::Shutdown);
            handle.closed().await;
        }
        self.runtime.delete_session(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        self.hub.changed(&key, "deleted", None);
        Ok(SessionDone { ok: true, key, deleted: Some(true) })
    }
}

/// Changes a session's model, reasoning (`thinking`) or mode, from its next run on.
pub(super) async fn patch(gw: &Gateway, p: SessionsPatchParams) -> Result<SessionDone, ErrorShape> {
    let key = gw.key(&p.key);
    let config = gw.runtime.config();
    let mut ops = Vec::new();
    if let Some(model) = p.model {
        let (model, _) = config
            .resolve_model(&model)
            .map_err(|e| ErrorShape::invalid(format!("invalid sessions.patch params: at /model: {e}")))?;
        ops.push(Op::SetModel(model));
    }
    if let Some(level) = p.thinking {
        ops.push(super::chat::reasoning("sessions.patch", &level).map_err(ErrorShape::invalid)?);
    }
    if let Some(mode) = p.mode.and_then(|m| crate::runtime::Mode::parse(&m)) {
        ops.push(Op::SetMode(mode));
    }
    if let Some(label) = p.label {
        let label = label.trim().to_owned();
        if label.is_empty() || label.chars().count() > 100 {
            return Err(ErrorShape::invalid("invalid sessions.patch params: at /label: 1 to 100 characters"));
        }
        ops.push(Op::SetTitle(label));
    }
    // `sendPolicy`: "allow" | "deny" | null (inherit the configured policy).
    let send = match &p.send_policy {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::String(s)) if s == "allow" => Some(Some(true)),
        Some(Value::String(s)) if s == "deny" => Some(Some(false)),
        Some(_) => {
            return Err(ErrorShape::invalid(
                "invalid sessions.patch params: at /sendPolicy: \"allow\", \"deny\" or null",
            ));
        }
    };
    // What a chat is shown of the session's runs: a level, or null for the default (off).
    let level = |field: &str, given: &Option<Value>, parse: &dyn Fn(&str) -> bool, choices: &str| match given {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(s)) if parse(s) => Ok(Some(Some(s.to_lowercase()))),
        Some(_) => Err(format!("invalid sessions.patch params: at /{field}: {choices} or null")),
    };
    let verbose =
        level("verboseLevel", &p.verbose_level, &|s| Verbose::parse(s).is_some(), "\"on\", \"full\", \"off\"")
            .map_err(ErrorShape::invalid)?;
    let shown = level(
        "reasoningLevel",
        &p.reasoning_level,
        &|s| ShowReasoning::parse(s).is_some(),
        "\"on\", \"stream\", \"off\"",
    )
    .map_err(ErrorShape::invalid)?;
    let handle = gw.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
    if send.is_some() || verbose.is_some() || shown.is_some() {
        gw.channels.prefs.change(&key, |p| {
            if let Some(send) = send {
                p.send = send;
            }
            if let Some(v) = verbose {
                p.verbose = v.as_deref().and_then(Verbose::parse);
            }
            if let Some(r) = shown {
                p.reasoning = r.as_deref().and_then(ShowReasoning::parse);
            }
        });
    }
    for op in ops {
        handle.send(op);
    }
    handle.settled().await;
    gw.hub.changed(&key, "patch", None);
    Ok(SessionDone { ok: true, key, deleted: None })
}
