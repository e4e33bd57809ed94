//! A run's life on the gateway, in one place: its start (hub numbering, the user's message to
//! subscribers, the prompt), its idempotency key (a retry while it runs is `in_flight`, after it
//! ended `ok`; remembered 10 minutes and at most 10,000), how it ends (watched by `agent`,
//! `agent.wait` and channels) and when. The hub numbers and sends its events meanwhile.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_protocol::gateway::events::{ChatMessage, SessionMessage, name};
use tokio::sync::mpsc;

use super::hub::{EndWatch, Heard, Hub};
use crate::clock::now_ms;
use crate::runtime::{Runtime, SessionHandle, TurnId, TurnOptions, TurnOutcome, UserBlock};
use crate::sync::lock;

/// How long a finished run's idempotency key is remembered, and how many are.
const DEDUPE_TTL: Duration = Duration::from_secs(10 * 60);
const DEDUPE_MAX: usize = 10_000;

pub struct Runs {
    runtime: Runtime,
    hub: Arc<Hub>,
    /// By idempotency key: in flight (watched until they end) or finished.
    records: Mutex<HashMap<String, Record>>,
}

#[derive(Default)]
struct Record {
    end: Option<EndWatch>,
    /// When it finished: for expiry, and `endedAt`.
    finished: Option<(Instant, i64)>,
}

impl Runs {
    pub fn new(runtime: Runtime, hub: Arc<Hub>) -> Self {
        Self { runtime, hub, records: Mutex::default() }
    }

    /// A run begins on open session `key`: the hub numbers its events (and sends its text,
    /// reasoning and tool calls to `listener`), subscribers see the user's message, the prompt
    /// goes in. Every run starts here (`chat.send`, `agent`, channels, announcements); returns
    /// its turn, how it ends, and the prompt's outcome.
    pub fn begin(
        &self,
        handle: &SessionHandle,
        key: &str,
        run_id: &str,
        blocks: Vec<UserBlock>,
        options: TurnOptions,
        listener: Option<mpsc::UnboundedSender<Heard>>,
    ) -> (TurnId, EndWatch, impl Future<Output = Option<TurnOutcome>> + Send + 'static) {
        let turn = self.runtime.next_turn_id();
        let ended = self.hub.start_run_to(turn, run_id, key, listener);
        let message = ChatMessage::user(crate::runtime::plain_text(&blocks), Some(now_ms()));
        let said = SessionMessage { session_key: key.to_owned(), run_id: Some(run_id.to_owned()), message };
        self.hub.to_subscribers(key, name::SESSION_MESSAGE, &said);
        (turn, ended, handle.prompt_with(turn, blocks, options))
    }

    /// Whether run `id` was seen: `in_flight` or `ok`; a new one is recorded as in flight.
    pub fn seen(&self, id: &str) -> Option<&'static str> {
        let mut runs = lock(&self.records);
        runs.retain(|_, r| r.finished.is_none_or(|(at, _)| at.elapsed() < DEDUPE_TTL));
        match runs.get(id) {
            Some(Record { finished: None, .. }) => Some("in_flight"),
            Some(_) => Some("ok"),
            None => {
                if runs.len() >= DEDUPE_MAX
                    && let Some(oldest) = runs
                        .iter()
                        .filter_map(|(k, r)| r.finished.map(|(at, _)| (k.clone(), at)))
                        .min_by_key(|(_, at)| *at)
                {
                    runs.remove(&oldest.0);
                }
                runs.insert(id.to_owned(), Record::default());
                None
            }
        }
    }

    /// Forgets a run that never started.
    pub fn forget(&self, id: &str) {
        lock(&self.records).remove(id);
    }

    /// Run `id` started; this is how it ends.
    pub fn attach(&self, id: &str, end: EndWatch) {
        if let Some(record) = lock(&self.records).get_mut(id) {
            record.end = Some(end);
        }
    }

    /// Run `id` finished now.
    pub fn finish(&self, id: &str) {
        if let Some(record) = lock(&self.records).get_mut(id) {
            record.finished = Some((Instant::now(), now_ms()));
        }
    }

    /// How run `id` ends (or ended), and when it did; `None` for a run never seen.
    pub fn watch(&self, id: &str) -> Option<(Option<EndWatch>, Option<i64>)> {
        lock(&self.records).get(id).map(|r| (r.end.clone(), r.finished.map(|(_, at)| at)))
    }
}
