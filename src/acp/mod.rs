//! The only module that knows ACP: the dispatch table (`agent`), runtime events → `session/update`
//! (`updates`), prompt content (`prompt`), modes and config options (`options`) and `_meta` readers
//! (`meta`). `serve` runs one connection from first message to exit.

pub mod agent;
pub mod bridge;
mod dispatch;
pub mod editor_host;
mod mcp;
pub mod meta;
pub mod options;
pub mod prompt;
mod sessions;
mod state;
pub mod updates;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use agent::Agent;
use dispatch::Work;
pub use state::new_session_id;
use tokio_util::task::TaskTracker;

use crate::config::{Config, ConfigCell};
use crate::rpc::Rpc;
pub use crate::runtime::HeadStart;
use crate::runtime::Runtime;

/// How the connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Input closed; everything received was answered.
    EndOfInput,
    /// A shutdown signal arrived; running turns were cancelled.
    Signal,
}

/// Serves one ACP connection until its input ends (then finishes what it was asked) or `shutdown`
/// resolves (then cancels running turns and answers them `cancelled`, within a bounded time).
/// `origin` names the surface in the session index (`acp` for editors, `run` for `acp run`).
pub async fn serve(rpc: Rpc, config: Config, origin: &str, shutdown: impl Future<Output = ()>) -> Ended {
    serve_with(rpc, config, origin, None, shutdown).await
}

/// [`serve`] for a client that opens a session straight away (`acp run`): the runtime begins what
/// `head` says, and builds the model's HTTP client in the background from the start rather than
/// from `session/new` on.
pub async fn serve_eager(
    rpc: Rpc,
    config: Config,
    origin: &str,
    head: HeadStart,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    serve_with(rpc, config, origin, Some(head), shutdown).await
}

async fn serve_with(
    rpc: Rpc,
    config: Config,
    origin: &str,
    head: Option<HeadStart>,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    let Rpc { conn, incoming } = rpc;
    let config = ConfigCell::new(config);
    let state = Arc::new(state::State::new(conn, config.clone()));
    let sink = Arc::new(updates::AcpSink::new(state.clone()));
    let host = Arc::new(editor_host::AcpHost::new(state.clone()));
    let mut runtime = Runtime::new(config, sink, host).with_origin(origin);
    if let Some(head) = head {
        runtime = runtime.with_head_start(head);
        runtime.prewarm();
    }
    let agent = Agent::new(state, runtime);
    serve_loop(incoming, &agent, shutdown).await
}

/// What the serve loop drives: the in-process agent, or the bridge to a gateway.
pub(crate) trait Surface {
    fn dispatch(&self, incoming: crate::rpc::Incoming) -> Work;
    /// Cancels every running and queued prompt (a shutdown signal).
    fn cancel_everything(&self);
    /// Closes every session, waiting at most `limit`.
    fn close_all(&self, limit: Duration) -> impl Future<Output = ()>;
}

impl Surface for Agent {
    fn dispatch(&self, incoming: crate::rpc::Incoming) -> Work {
        Agent::dispatch(self, incoming)
    }

    fn cancel_everything(&self) {
        Agent::cancel_everything(self);
    }

    fn close_all(&self, limit: Duration) -> impl Future<Output = ()> {
        self.close_all_sessions(limit)
    }
}

/// Dispatches messages in input order until input ends (then finishes what was asked) or
/// `shutdown` resolves (then cancels and answers within a bounded time).
pub(crate) async fn serve_loop(
    mut incoming: crate::rpc::IncomingRx,
    surface: &impl Surface,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    // Every answer still owed; the connection ends only once they are given.
    let work = TaskTracker::new();
    tokio::pin!(shutdown);

    let mut ended = loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(message) => match surface.dispatch(message) {
                    Work::Done => {}
                    Work::Alongside(future) => {
                        work.spawn(future);
                    }
                    // Takes effect before the next message is handled, so a `session/prompt`
                    // piped right after a `session/load` finds its session.
                    Work::InOrder(future) => {
                        let done = work.spawn(future);
                        tokio::select! {
                            _ = done => {}
                            () = &mut shutdown => break Ended::Signal,
                        }
                    }
                },
                None => break Ended::EndOfInput,
            },
            () = &mut shutdown => break Ended::Signal,
        }
    };
    work.close();
    if ended == Ended::EndOfInput {
        tracing::debug!("input closed; finishing the requests already received");
        tokio::select! {
            () = work.wait() => {}
            () = &mut shutdown => ended = Ended::Signal,
        }
    }
    if ended == Ended::Signal {
        surface.cancel_everything();
        // Cancelled turns answer within milliseconds; do not let a stuck one hold the exit.
        let _ = tokio::time::timeout(Duration::from_millis(250), work.wait()).await;
    }
    let limit = if ended == Ended::Signal { Duration::from_millis(100) } else { Duration::from_secs(2) };
    surface.close_all(limit).await;
    ended
}
