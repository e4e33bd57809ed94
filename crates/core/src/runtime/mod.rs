//! The in-process agent runtime: one actor per session, ops in, events out. It knows nothing of
//! JSON-RPC, ACP or WebSockets; every surface drives it through [`Runtime`] and [`SessionHandle`],
//! receives its [`Event`]s through an [`EventSink`], and lends it a [`Host`] (files as the user
//! sees them, approvals, terminals).

pub mod commands;
pub mod compaction;
pub mod context;
pub mod directives;
pub mod event;
pub mod failover;
mod handle;
mod head_start;
mod hooks;
mod mcp;
pub mod op;
mod persist;
mod reply;
pub mod session;
mod settings;
mod shared;
mod start;
mod stored;
mod subagents;
mod tool_calls;
pub mod turn;

pub use crate::tools::plan::{PlanEntry, PlanPriority, PlanStatus};
pub use event::{CompactionEvent, CompactionPhase, Failover, SettingsChange, SubagentChange, SubagentEvent};
pub use event::{Event, EventKind, EventSink, SessionId, StopReason, TurnError, TurnOutcome};
pub use handle::{SessionCommand, SessionHandle};
pub use head_start::{HeadStart, StoreOpening};
pub use op::{Lane, Mode, Op, TurnId, TurnOptions};
pub use settings::SessionSettings;
pub use shared::Runtime;
pub use stored::{CreateError, ListError, LoadError, LoadedSession, SessionPage, SessionSummary};
// What surfaces show of a session and its turns.
pub use crate::history::input::{UserBlock, plain_text};
pub use crate::history::replay::Shown;
pub use crate::providers::Usage;
pub use crate::settings::ReasoningEffort;
/// The session store behind its trait (the gateway keeps its cron jobs and idempotency keys there).
pub mod store {
    pub use crate::store::backend::{CronEnd, CronRuns, SessionStore, StoreFuture};
    pub use crate::store::postgres::Postgres;
}
pub use crate::tools::host;
pub use crate::tools::kind::describe_foreign;
pub use crate::tools::media;
pub use crate::tools::{Location, ToolCallState, ToolContent, ToolKind, ToolStatus};

/// The longest session id, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = crate::store::MAX_ID_BYTES;

/// Whether `id` can name a session: 1 to [`MAX_SESSION_ID_BYTES`] bytes of printable text.
pub fn valid_session_id(id: &str) -> bool {
    crate::store::valid_id(id)
}
