//! Everything a session saves goes through its [`SessionLog`]: the transcript (each prompt, what
//! was shown, every message of the context, settings changes, each turn's end) and the session's
//! row in the index (title, settings, token counters, listed once prompted). The actor, its running
//! turn (through the `Emitter`) and the conversation (as its `Journal`) all write here, so what is
//! saved, and in which order, is decided in one file.
//!
//! A session without a usable store has a log that saves nothing; it lives in memory only.
//!
//! A new session of `acp run` begins without the store: its transcript at once, its index row
//! once the model is answering (the process then mostly waits on the network), opening the store
//! then ([`SessionLog::unindexed`]). The session stores that row before it answers or changes
//! anything ([`SessionLog::indexed`]): only its first model turn goes ahead.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::event::new_message_id;
use super::event::{EventKind, SessionId, TurnOutcome};
use super::shared::Shared;
use crate::history::Journal;
use crate::history::input::UserBlock;
use crate::history::record::Record;
use crate::store::transcript::{Live, Transcript};
use crate::store::{SessionRow, Store, now_ms};
use crate::sync::lock;

use super::settings::SessionSettings;

pub(crate) struct SessionLog {
    id: SessionId,
    /// `None`: the store could not be used.
    transcript: Option<Arc<Transcript>>,
    shared: Arc<Shared>,
    /// The index row of a new session, not stored yet (held while it is stored, so no update of
    /// the index overtakes it).
    unindexed: Mutex<Option<SessionRow>>,
    /// Whether storing that row has been started.
    indexing: AtomicBool,
}

impl std::fmt::Debug for SessionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLog").field("id", &self.id).field("transcript", &self.transcript).finish()
    }
}

impl Journal for SessionLog {
    fn record(&self, record: &Record) {
        if let Some(t) = &self.transcript {
            t.record(record);
        }
    }
}

impl SessionLog {
    pub(crate) fn new(id: SessionId, transcript: Option<Arc<Transcript>>, shared: Arc<Shared>) -> Self {
        Self { id, transcript, shared, unindexed: Mutex::new(None), indexing: AtomicBool::new(false) }
    }

    /// The log of a new session whose index `row` is stored later: in the background once the
    /// model shows something ([`shown`](Self::shown)), or by [`indexed`](Self::indexed) if that
    /// comes first.
    pub(crate) fn unindexed(id: SessionId, transcript: Arc<Transcript>, shared: Arc<Shared>, row: SessionRow) -> Self {
        Self {
            id,
            transcript: Some(transcript),
            shared,
            unindexed: Mutex::new(Some(row)),
            indexing: AtomicBool::new(false),
        }
    }

    /// Stores the waiting index row in the background (opening the store, and on the blocking
    /// pool), once.
    fn index_soon(self: &Arc<Self>) {
        if self.indexing.swap(true, Ordering::Relaxed) || !self.row_waits() {
            return;
        }
        let log = self.clone();
        tokio::spawn(async move {
            if let Ok(store) = log.shared.store().await {
                drop(tokio::task::spawn_blocking(move || log.store_row(&store)));
            }
        });
    }

    /// Whether the session's index row waits to be stored.
    fn row_waits(&self) -> bool {
        lock(&self.unindexed).is_some()
    }

    /// Stores the session's index row if it waits still; returns once it is stored (or cannot
    /// be: the store would not open).
    pub(crate) async fn indexed(&self) {
        if !self.row_waits() {
            return;
        }
        match self.shared.store().await {
            Ok(store) => self.store_row(&store),
            Err(e) => {
                if lock(&self.unindexed).take().is_some() {
                    tracing::warn!(session = %self.id, error = %e, "the session store would not open; the session is not listed");
                }
            }
        }
    }

    /// Stores the waiting index row, if any.
    fn store_row(&self, store: &Store) {
        let mut unindexed = lock(&self.unindexed);
        let Some(row) = unindexed.take() else { return };
        if let Err(e) = store.index_new(&row) {
            tracing::warn!(session = %self.id, error = %e, "could not list the session in the index");
        }
    }

    /// Whether anything is saved (false: the session lives in memory only).
    pub(crate) fn is_saved(&self) -> bool {
        self.transcript.is_some()
    }

    /// Where the transcript is, if the session is saved.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.transcript.as_deref().map(Transcript::path)
    }

    /// Runs `update` on the index, if the session is saved and the store is open; a failure is
    /// logged (the transcript, which holds the truth, is unaffected).
    fn index(
        &self,
        what: &str,
        update: impl FnOnce(&crate::store::Store, &str) -> Result<(), crate::store::StoreError>,
    ) {
        if self.transcript.is_none() {
            return;
        }
        let Some(store) = self.shared.store_if_open() else { return };
        self.store_row(&store);
        if let Err(e) = update(&store, &self.id) {
            tracing::warn!(session = %self.id, error = %e, "could not {what}");
        }
    }

    /// A prompt (or a command that is recorded) starts turn `seq`.
    pub(crate) fn prompt(&self, seq: u64, input: &[UserBlock]) {
        if !self.is_saved() {
            return;
        }
        self.record(&Record::User {
            turn: seq,
            id: new_message_id().to_string(),
            blocks: input.to_vec(),
            at: now_ms(),
        });
    }

    /// Something the running turn shows that a reloaded session must show too (streamed text is
    /// merged in memory and written at the next due flush, and always before any other record).
    pub(crate) fn shown(self: &Arc<Self>, kind: &EventKind) {
        let Some(t) = &self.transcript else { return };
        self.index_soon();
        let live = match kind {
            EventKind::TextDelta { message_id, text } => Live::Text { thought: false, message_id, text },
            EventKind::ThoughtDelta { message_id, text } => Live::Text { thought: true, message_id, text },
            EventKind::ToolCall(state) => Live::ToolCall(state),
            EventKind::ToolCallUpdate(state) => Live::ToolCallUpdate(state),
            EventKind::Plan(entries) => Live::Plan(entries),
            _ => return,
        };
        t.record_live(live);
    }

    /// Text posted from outside a turn (`chat.inject`), shown as the assistant's.
    pub(crate) fn posted(&self, id: &str, text: &str) {
        self.record(&Record::Text { id: id.to_owned(), text: text.to_owned() });
    }

    /// Writes merged text out if it has waited long enough.
    pub(crate) fn flush_due(&self) {
        if let Some(t) = &self.transcript {
            t.flush_due();
        }
    }

    /// Writes merged text out now.
    pub(crate) fn flush(&self) {
        if let Some(t) = &self.transcript {
            t.flush();
        }
    }

    /// Turn `seq` ended: its end in the transcript and, in the index, the token counters, the
    /// `title` the turn gave the session and whether it was `prompted` (answered for the first
    /// time) — before the surface hears of it, so a client that got its answer finds the whole
    /// turn on disk.
    pub(crate) fn turn_ended(
        &self,
        seq: u64,
        outcome: &TurnOutcome,
        context: Option<u64>,
        model: Option<String>,
        title: Option<&str>,
        prompted: bool,
    ) {
        let (stop, error, usage) = match outcome {
            TurnOutcome::Stopped { reason, usage } => (Some(*reason), None, *usage),
            TurnOutcome::Failed { error, usage } => (None, Some(error.message.clone()), *usage),
        };
        self.record(&Record::End { turn: seq, stop, error, usage, context, model, interrupted: false, at: now_ms() });
        // Inline: one small write (WAL, no fsync), in order with the others.
        self.index("update the session index", |store, id| {
            store.finish_turn(id, usage.input, usage.output, context, title, prompted)
        });
    }

    /// The session's settings changed.
    pub(crate) fn settings(&self, s: &SessionSettings) {
        self.record(&Record::Settings { model: s.model.to_string(), mode: s.mode, reasoning: s.reasoning });
        let reasoning = s.reasoning.map(|r| r.as_str());
        self.index("update the session index", |store, id| {
            store.update_settings(id, &s.model.to_string(), s.mode.id(), reasoning)
        });
    }

    pub(crate) fn title(&self, title: &str) {
        self.index("save the session title", |store, id| store.set_title(id, title));
    }

    /// The model answered for the first time: the session is listed from now on.
    pub(crate) fn prompted(&self) {
        self.index("update the session index", |store, id| store.mark_prompted(id));
    }
}

/// A turn's emitter records through the session's log.
impl super::event::Recorder for SessionLog {
    fn shown(self: Arc<Self>, kind: &EventKind) {
        SessionLog::shown(&self, kind);
    }

    fn flush_due(&self) {
        SessionLog::flush_due(self);
    }
}
