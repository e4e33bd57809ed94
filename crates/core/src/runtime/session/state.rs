//! A session's state: what its turns and commands read and change (the actor that owns it is
//! `session.rs`).

use std::sync::Arc;

use crate::history::conversation::Conversation;
use crate::history::input::UserBlock;
use crate::providers::{Message, Usage};
use crate::runtime::compaction::Accounting;
use crate::runtime::event::{Emitter, EventKind, Recorder, SessionId, TurnId, new_message_id};
use crate::runtime::mcp::McpSet;
use crate::runtime::persist::SessionLog;
use crate::runtime::settings::{LiveState, SessionSettings};
use crate::runtime::shared::{Outlet, Shared};
use crate::runtime::turn::SystemAhead;

/// What a session's index row still lacks.
#[derive(Default)]
pub(super) struct Unsaved {
    pub(in crate::runtime) title: Option<String>,
    pub(super) prompted: bool,
}

/// A session's state: what its turns and commands read and change.
pub(in crate::runtime) struct Session {
    pub(in crate::runtime) id: SessionId,
    pub(in crate::runtime) settings: SessionSettings,
    pub(in crate::runtime) live: Arc<LiveState>,
    pub(in crate::runtime) shared: Arc<Shared>,
    pub(in crate::runtime) conversation: Conversation,
    pub(in crate::runtime) accounting: Accounting,
    /// Its MCP servers.
    pub(in crate::runtime) mcp: Arc<McpSet>,
    /// Its language servers (started as files of their languages are used).
    pub(in crate::runtime) lsp: Arc<crate::lsp::Servers>,
    /// Where everything the session saves goes.
    pub(in crate::runtime) log: Arc<SessionLog>,
    /// Whether the model ever answered in this session (then it is listed).
    pub(super) prompted: bool,
    pub(in crate::runtime) title: Option<String>,
    /// What the index does not hold yet, written with the end of the running turn (one write
    /// instead of three on the way to the model and back).
    pub(super) unsaved: Unsaved,
    /// Summed over the session's turns.
    pub(in crate::runtime) usage: Usage,
    pub(in crate::runtime) context_tokens: Option<u64>,
    /// The session's turns so far (model turns and the commands that change it), the number the
    /// transcript gives each.
    pub(in crate::runtime) turns: u64,
    /// Where its events go; what its tools reach.
    pub(in crate::runtime) outlet: Outlet,
    /// Its first turn's system prompt, built ahead (`acp run`'s session).
    pub(super) system_ahead: Option<SystemAhead>,
    /// Its share of the memory index's watcher (a session that reads the memory).
    pub(super) _memory_watch: Option<crate::memory::Watching>,
    /// What its `SessionStart` hooks say, being worked out (until a model turn took it).
    pub(in crate::runtime) started: Option<crate::runtime::hooks::StartSaid>,
    /// What the user is told with the next model turn (a workspace's hooks waiting to be allowed).
    pub(super) notices: Vec<String>,
    /// Whether its `SessionEnd` hooks run when it closes (opened by a surface, not a subagent's).
    pub(in crate::runtime) ends: bool,
}

impl Session {
    /// An emitter for `turn`; `recorded`: what it shows is saved for a reloaded session.
    pub(in crate::runtime) fn emitter(&self, turn: TurnId, recorded: bool) -> Emitter {
        Emitter {
            sink: self.outlet.sink.clone(),
            session: self.id.clone(),
            turn,
            log: recorded.then(|| self.log.clone() as Arc<dyn Recorder>),
        }
    }

    /// Starts the session's next turn with `input`; returns its number.
    pub(in crate::runtime) fn begin_turn(&mut self, input: &[UserBlock]) -> u64 {
        self.conversation.begin_turn();
        self.turns = self.turns.saturating_add(1);
        self.log.prompt(self.turns, input);
        self.turns
    }

    /// The model answered for the first time: the session is listed from now on (one whose turns
    /// all failed before any answer — no key, a provider down — is not).
    pub(super) fn mark_prompted(&mut self) {
        if !self.prompted {
            self.prompted = true;
            self.log.prompted();
        }
    }

    /// [`Self::mark_prompted`] by a turn: saved with the turn's end.
    pub(super) fn mark_prompted_by_turn(&mut self) {
        if !self.prompted {
            self.prompted = true;
            self.unsaved.prompted = true;
        }
    }

    /// A message posted from outside a turn: shown as the assistant's, and in the model's context
    /// as a note of what the user was shown (the model did not write it, and a conversation may
    /// not start with an assistant message on every API).
    pub(super) fn inject(&mut self, text: &str) -> String {
        let id = new_message_id().to_string();
        self.log.posted(&id, text);
        self.conversation.push(Message::User(vec![crate::providers::UserPart::Text(format!(
            "[Posted to this conversation from outside it, and shown to the user as your message:]\n\n{text}"
        ))]));
        self.mark_prompted();
        id
    }

    pub(super) fn set_title(&mut self, turn: TurnId, title: String) {
        self.log.title(&title);
        self.unsaved.title = None;
        self.title = Some(title.clone());
        self.emitter(turn, false).emit(EventKind::Title(title));
    }

    /// The title a turn's prompt gives a session that has none: shown now, saved with the turn's
    /// end (an unlisted session until then; reopened before that, it is worked out again).
    pub(super) fn set_title_by_turn(&mut self, turn: TurnId, title: String) {
        self.unsaved.title = Some(title.clone());
        self.title = Some(title.clone());
        self.emitter(turn, false).emit(EventKind::Title(title));
    }

    /// The context window of the session's model, if it is known.
    pub(in crate::runtime) fn context_window(&self) -> Option<u64> {
        let config = self.shared.config_for(&self.id);
        let (model, provider) = config.resolve_model(&self.settings.model.to_string()).ok()?;
        Some(provider.model(&model.model).context_window)
    }
}
