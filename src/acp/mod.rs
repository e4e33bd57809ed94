//! The only module that knows ACP: the dispatch table (`agent`), runtime events → `session/update`
//! (`updates`), prompt content (`prompt`), modes and config options (`options`) and `_meta` readers
//! (`meta`). `serve` runs one connection from first message to exit.

pub mod agent;
pub mod meta;
pub mod options;
pub mod prompt;
pub mod updates;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

pub use agent::Agent;

use crate::rpc::Rpc;
use crate::runtime::{Event, Runtime};

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
pub async fn serve(
    rpc: Rpc,
    runtime: Runtime,
    events: mpsc::UnboundedReceiver<Event>,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    let Rpc { conn, mut incoming } = rpc;
    let agent = Arc::new(Agent::new(conn, runtime));
    let forwarder = tokio::spawn(updates::forward(agent.clone(), events));
    tokio::pin!(shutdown);

    let mut ended = loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(message) => agent.dispatch(message),
                None => break Ended::EndOfInput,
            },
            () = &mut shutdown => break Ended::Signal,
        }
    };
    if ended == Ended::EndOfInput {
        tracing::debug!("input closed; finishing the requests already received");
        tokio::select! {
            () = agent.wait_idle() => {}
            () = &mut shutdown => ended = Ended::Signal,
        }
    }
    if ended == Ended::Signal {
        agent.cancel_everything();
        // Cancelled turns answer within milliseconds; do not let a stuck one hold the exit.
        let _ = tokio::time::timeout(Duration::from_millis(250), agent.wait_idle()).await;
    }
    agent.close_all_sessions();
    forwarder.abort();
    ended
}
