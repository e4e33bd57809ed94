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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::event::new_message_id;
use super::event::{EventKind, SessionId, TurnOutcome};
use super::shared::Shared;
use crate::history::Journal;
use crate::history::input::UserBlock;
use crate::history::record::Record;
use crate::store::backend::SessionStore;
use crate::store::transcript::{IndexUpdate, Live, Transcript};
use crate::store::{SessionRow, now_ms};

use super::settings::SessionSettings;

pub(crate) struct SessionLog {
    id: SessionId,
    /// `None`: the store could not be used.
    transcript: Option<Arc<Transcript>>,
    shared: Arc<Shared>,
    /// The index row of a new session, not stored yet (held while it is stored, so no update of
    /// the index overtakes it).
    unindexed: tokio::sync::Mutex<Option<SessionRow>>,
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
        Self { id, transcript, shared, unindexed: tokio::sync::Mutex::new(None), indexing: AtomicBool::new(false) }
    }

    /// The log of a new session whose index `row` is stored later: in the background once the
    /// model shows something ([`shown`](Self::shown)), or by [`indexed`](Self::indexed) if that
    /// comes first.
    pub(crate) fn unindexed(id: SessionId, transcript: Arc<Transcript>, shared: Arc<Shared>, row: SessionRow) -> Self {
        Self {
            id,
            transcript: Some(transcript),
            shared,
            unindexed: tokio::sync::Mutex::new(Some(row)),
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
                log.store_row(&*store).await;
            }
        });
    }

    /// Whether the session's index row waits to be stored (or is being stored).
    fn row_waits(&self) -> bool {
        self.unindexed.try_lock().map_or(true, |row| row.is_some())
    }

    /// Stores the session's index row if it waits still; returns once it is stored (or cannot
    /// be: the store would not open).
    pub(crate) async fn indexed(&self) {
        if !self.row_waits() {
            return;
        }
        match self.shared.store().await {
            Ok(store) => self.store_row(&*store).await,
            Err(e) => {
                if self.unindexed.lock().await.take().is_some() {
                    tracing::warn!(session = %self.id, error = %e, "the session store would not open; the session is not listed");
                }
            }
        }
    }

    /// Stores the waiting index row, if any (holding it meanwhile, so no update of the index
    /// overtakes it).
    async fn store_row(&self, store: &dyn SessionStore) {
        let mut unindexed = self.unindexed.lock().await;
        let Some(row) = unindexed.take() else { return };
        if let Err(e) = store.index_new(row).await {
            tracing::warn!(session = %self.id, error = %e, "could not list the session in the index");
        }
    }

    /// Whether anything is saved (false: the session lives in memory only).
    pub(crate) fn is_saved(&self) -> bool {
        self.transcript.is_some()
    }

    /// Where the transcript is kept, if the session is saved.
    pub(crate) fn location(&self) -> Option<String> {
        self.transcript.as_deref().map(Transcript::location)
    }

    /// Applies `update` to the index, if the session is saved and the store is open: in order
    /// with the transcript where the store keeps them so, else at once. A failure is logged (the
    /// transcript, which holds the truth, is unaffected).
    fn index(&self, what: &str, update: IndexUpdate) {
        let Some(t) = &self.transcript else { return };
        if t.index(&update) {
            return;
        }
        // The actor awaits `indexed` before anything that updates the row.
        let Some(store) = self.shared.store_if_open() else { return };
        if let Err(e) = store.update(&self.id, &update) {
            tracing::warn!(session = %self.id, error = %e, "could not {what}");
        }
    }

    /// Returns once everything saved so far is stored (a database's writer may lag a little).
    pub(crate) async fn synced(&self) {
        if let Some(t) = &self.transcript {
            t.synced().await;
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
        let title = title.map(str::to_owned);
        let update = IndexUpdate::TurnEnded { input: usage.input, output: usage.output, context, title, prompted };
        self.index("update the session index", update);
    }

    /// The session's settings changed.
    pub(crate) fn settings(&self, s: &SessionSettings) {
        self.record(&Record::Settings { model: s.model.to_string(), mode: s.mode, reasoning: s.reasoning });
        let update = IndexUpdate::Settings {
            model: s.model.to_string(),
            mode: s.mode.id().to_owned(),
            reasoning: s.reasoning.map(|r| r.as_str().to_owned()),
        };
        self.index("update the session index", update);
    }

    pub(crate) fn title(&self, title: &str) {
        self.index("save the session title", IndexUpdate::Title(title.to_owned()));
    }

    /// The model answered for the first time: the session is listed from now on.
    pub(crate) fn prompted(&self) {
        self.index("update the session index", IndexUpdate::Prompted);
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
