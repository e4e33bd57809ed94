//! The session whose turn uses the session tools, as they see it.

use std::sync::Arc;

use crate::runtime::event::{Emitter, SessionId};
use crate::runtime::settings::{LiveState, SessionSettings};
use crate::runtime::shared::Shared;
use crate::sync::lock;
use crate::tools::Access;

/// The session whose turn uses the tools.
pub(super) struct Me {
    pub(super) shared: Arc<Shared>,
    pub(super) session: SessionId,
    /// Its events (of this turn), to its client and its transcript.
    pub(super) events: Emitter,
    pub(super) settings: SessionSettings,
    pub(super) live: Arc<LiveState>,
    /// The most the turn's calls get ([`crate::runtime::op::TurnOptions`]); its children get no more.
    pub(super) mode_cap: Option<crate::settings::Mode>,
    /// Subagents this turn started.
    pub(super) spawned: std::sync::atomic::AtomicUsize,
    /// Model requests its subagents may still make, together.
    pub(super) requests: Arc<std::sync::atomic::AtomicU32>,
}

impl Me {
    /// This session's agent: the one its key names (`agent:<id>:…`), else `main`.
    pub(super) fn agent(&self) -> &str {
        crate::config::agents::agent_of(&self.session).unwrap_or(crate::config::agents::MAIN)
    }

    /// Whether this session may read or write to session `key`: a subagent it started, or a
    /// session of its own agent (a session of no agent, an editor's, sees every one).
    pub(super) fn may_see(&self, key: &str) -> bool {
        if self.is_child(key) {
            return true;
        }
        match crate::config::agents::agent_of(&self.session) {
            None => true,
            Some(mine) => crate::config::agents::agent_of(key) == Some(mine),
        }
    }

    /// Whether `key` is a subagent this session spawned (it may be read and written to freely).
    pub(super) fn is_child(&self, key: &str) -> bool {
        lock(&self.shared.parents).get(key).is_some_and(|(p, _)| *p == *self.session)
    }

    /// What reaching session `key` needs: nothing for one's own subagent, else a question (in
    /// ask and code modes) naming it.
    pub(super) fn access(&self, key: &str, what: &str) -> Access {
        if self.is_child(key) {
            Access::default()
        } else {
            Access { message: Some(format!("{what} of session {key}")), ..Access::default() }
        }
    }
}
