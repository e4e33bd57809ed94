//! The sessions a gateway keeps open: opened on demand (from the store, or new), used runs taken
//! in within their caps and run in the gateway's lane, idle ones closed (their memory given
//! back), and the session methods (`sessions.list|resolve|reset|delete`).

use std::time::Instant;

use acp_protocol::gateway::{ErrorShape, code};
use serde_json::{Map, Value, json};

use super::channels::policy::{Show, ShowReasoning, Verbose};
use super::{Gateway, canonical_key, limits};
use crate::clock::now_ms;
use crate::runtime::{CreateError, Op, SessionHandle, SessionSettings};
use crate::sync::lock;

impl Gateway {
    /// The open session `key`, if this gateway has it open (it counts as used now).
    pub(super) fn open_handle(&self, key: &str) -> Option<SessionHandle> {
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

    /// Closes the sessions with nothing to do: those idle past the idle time, and, while more
    /// than `keep` are open, the least recently used idle ones. Their memory goes back to the
    /// system. Returns how many were closed.
    pub(super) async fn close_idle(&self, keep: usize) -> usize {
        let closing: Vec<(String, SessionHandle)> = {
            let mut sessions = lock(&self.sessions);
            let mut idle: Vec<(String, Instant)> = sessions
                .iter()
                .filter(|(key, _)| !self.admission.busy(key) && self.hub.turn_of(key, None).is_empty())
                .map(|(key, (_, used))| (key.clone(), *used))
                .collect();
            idle.sort_by_key(|(_, used)| *used);
            let over = sessions.len().saturating_sub(keep);
            let limit = self.run_limits.idle;
            let chosen: Vec<String> = idle
                .iter()
                .enumerate()
                .filter(|(i, (_, used))| *i < over || used.elapsed() >= limit)
                .map(|(_, (key, _))| key.clone())
                .collect();
            let closing: Vec<(String, SessionHandle)> =
                chosen.into_iter().filter_map(|key| sessions.remove(&key).map(|(h, _)| (key, h))).collect();
            lock(&self.closing).extend(closing.iter().cloned());
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
            lock(&self.closing).remove(key);
        }
        self.health_changed();
        limits::return_memory();
        closing.len()
    }

    /// Opens session `key`: this gateway's, or the stored one, or a new one.
    pub(super) async fn open(&self, key: &str) -> Result<SessionHandle, String> {
        let _one_at_a_time = self.opening.lock().await;
        if let Some(handle) = self.open_handle(key) {
            return Ok(handle);
        }
        if !crate::runtime::valid_session_id(key) {
            return Err(format!("`{key}` is not a valid session key"));
        }
        // Closed as idle just now: its transcript is free once it has closed.
        let closing = lock(&self.closing).get(key).cloned();
        if let Some(handle) = closing {
            handle.closed().await;
        }
        // Room for it: the least recently used idle session goes, if need be.
        let most = self.run_limits.open_sessions;
        if lock(&self.sessions).len() >= most && self.close_idle(most - 1).await == 0 {
            return Err(format!(
                "{most} sessions are open and busy, the most this gateway keeps (`[gateway] max_open_sessions`); \
                 try again when one is idle"
            ));
        }
        let config = self.runtime.config();
        let model = config.default_model_ref().map_err(|e| format!("no model to run: {e}"))?;
        let settings = SessionSettings {
            cwd: self.workspace.clone(),
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
                    .load_session(key, self.workspace.clone(), Vec::new(), Vec::new())
                    .await
                    .map_err(|e| format!("could not open session {key}: {e}"))?
                    .handle
            }
            Err(e) => return Err(format!("could not open session {key}: {e}")),
        };
        lock(&self.sessions).insert(key.to_owned(), (handle.clone(), Instant::now()));
        self.health_changed();
        self.hub.to_subscribers("sessions.changed", &json!({"sessionKey": key, "reason": "created"}));
        Ok(handle)
    }

    pub(super) async fn sessions_list(&self, params: &Map<String, Value>) -> Result<Value, ErrorShape> {
        let limit = params.get("limit").and_then(Value::as_u64).unwrap_or(50).min(1000) as usize;
        let offset = params.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
        let search = params.get("search").and_then(Value::as_str).unwrap_or_default().to_lowercase();
        let page = self
            .runtime
            .list_sessions(None, None, 10_000)
            .await
            .map_err(|e| ErrorShape::new(code::UNAVAILABLE, format!("could not list sessions: {e}")))?;
        let all: Vec<Value> = page
            .sessions
            .into_iter()
            .filter(|s| {
                search.is_empty()
                    || s.id.to_lowercase().contains(&search)
                    || s.title.as_deref().is_some_and(|t| t.to_lowercase().contains(&search))
            })
            .map(|s| {
                let show = Show::of(&self.prefs.get(&s.id));
                json!({"key": s.id, "sessionId": s.id, "label": s.title, "displayName": s.title,
                    "derivedTitle": s.title, "updatedAt": s.updated_at, "createdAt": s.created_at,
                    "model": s.model, "mode": s.mode, "thinkingLevel": s.reasoning.as_deref().unwrap_or("off"),
                    "origin": s.origin, "cwd": s.cwd, "inputTokens": s.input_tokens,
                    "outputTokens": s.output_tokens, "contextTokens": s.context_tokens,
                    "verboseLevel": show.verbose.as_str(), "reasoningLevel": show.reasoning.as_str(),
                    "open": self.open_handle(&s.id).is_some()})
            })
            .collect();
        let total = all.len();
        let sessions: Vec<Value> = all.into_iter().skip(offset).take(limit).collect();
        let more = offset + sessions.len() < total;
        Ok(json!({"ts": now_ms(), "count": sessions.len(), "totalCount": total, "limitApplied": limit,
            "nextOffset": if more { json!(offset + sessions.len()) } else { Value::Null }, "hasMore": more,
            "sessions": sessions}))
    }

    pub(super) async fn resolve(&self, key: &str) -> Result<Value, ErrorShape> {
        let key = canonical_key(key);
        if self.open_handle(&key).is_some() {
            return Ok(json!({"ok": true, "key": key, "sessionId": key}));
        }
        let page = self
            .runtime
            .list_sessions(None, None, 10_000)
            .await
            .map_err(|e| ErrorShape::new(code::UNAVAILABLE, format!("could not list sessions: {e}")))?;
        match page.sessions.iter().find(|s| s.id == key) {
            Some(s) => Ok(json!({"ok": true, "key": s.id, "sessionId": s.id, "label": s.title})),
            None => Err(ErrorShape::new(code::NOT_FOUND, format!("no session `{key}`"))),
        }
    }

    /// The most recently used session whose label (title) is `label`.
    pub(super) async fn resolve_label(&self, label: &str) -> Result<Value, ErrorShape> {
        let page = self
            .runtime
            .list_sessions(None, None, 10_000)
            .await
            .map_err(|e| ErrorShape::new(code::UNAVAILABLE, format!("could not list sessions: {e}")))?;
        match page.sessions.iter().find(|s| s.title.as_deref() == Some(label)) {
            Some(s) => Ok(json!({"ok": true, "key": s.id, "sessionId": s.id, "label": label})),
            None => Err(ErrorShape::new(code::NOT_FOUND, format!("no session has the label `{label}`"))),
        }
    }

    pub(super) async fn reset(&self, key: &str) -> Result<Value, ErrorShape> {
        let key = canonical_key(key);
        let handle = self.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        let turn = self.runtime.next_turn_id();
        handle.prompt(turn, vec![crate::runtime::UserBlock::Text { text: "/reset".into() }]).await;
        self.hub.to_subscribers("sessions.changed", &json!({"sessionKey": key, "reason": "reset"}));
        Ok(json!({"ok": true, "key": key}))
    }

    pub(super) async fn delete(&self, key: &str) -> Result<Value, ErrorShape> {
        let key = canonical_key(key);
        let open = lock(&self.sessions).remove(&key);
        if let Some((handle, _)) = open {
            self.health_changed();
            handle.send(Op::Shutdown);
            handle.closed().await;
        }
        self.runtime.delete_session(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
        self.hub.to_subscribers("sessions.changed", &json!({"sessionKey": key, "reason": "deleted"}));
        Ok(json!({"ok": true, "key": key, "deleted": true}))
    }
}

/// Changes a session's model, reasoning (`thinking`) or mode, from its next run on.
pub(super) async fn patch(gw: &Gateway, params: &Map<String, Value>) -> Result<Value, ErrorShape> {
    let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_owned);
    let key = super::canonical_key(&text("key").unwrap_or_default());
    let config = gw.runtime.config();
    let mut ops = Vec::new();
    if let Some(model) = text("model") {
        let (model, _) = config
            .resolve_model(&model)
            .map_err(|e| ErrorShape::invalid(format!("invalid sessions.patch params: at /model: {e}")))?;
        ops.push(Op::SetModel(model));
    }
    if let Some(level) = text("thinking") {
        ops.push(super::chat::reasoning("sessions.patch", &level).map_err(ErrorShape::invalid)?);
    }
    if let Some(mode) = text("mode").and_then(|m| crate::runtime::Mode::parse(&m)) {
        ops.push(Op::SetMode(mode));
    }
    if let Some(label) = text("label") {
        let label = label.trim().to_owned();
        if label.is_empty() || label.chars().count() > 100 {
            return Err(ErrorShape::invalid("invalid sessions.patch params: at /label: 1 to 100 characters"));
        }
        ops.push(Op::SetTitle(label));
    }
    // `sendPolicy`: "allow" | "deny" | null (inherit the configured policy).
    let send = match params.get("sendPolicy") {
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
    let level = |field: &str, parse: &dyn Fn(&str) -> bool, choices: &str| match params.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(s)) if parse(s) => Ok(Some(Some(s.to_lowercase()))),
        Some(_) => Err(format!("invalid sessions.patch params: at /{field}: {choices} or null")),
    };
    let verbose = level("verboseLevel", &|s| Verbose::parse(s).is_some(), "\"on\", \"full\", \"off\"")
        .map_err(ErrorShape::invalid)?;
    let shown = level("reasoningLevel", &|s| ShowReasoning::parse(s).is_some(), "\"on\", \"stream\", \"off\"")
        .map_err(ErrorShape::invalid)?;
    let handle = gw.open(&key).await.map_err(|e| ErrorShape::new(code::UNAVAILABLE, e))?;
    if send.is_some() || verbose.is_some() || shown.is_some() {
        gw.prefs.change(&key, |p| {
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
    gw.hub.to_subscribers("sessions.changed", &json!({"sessionKey": key, "reason": "patch"}));
    Ok(json!({"ok": true, "key": key}))
}
