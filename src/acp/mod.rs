//! The only module that knows ACP: the dispatch table (`agent`), runtime events → `session/update`
//! (`updates`), prompt content (`prompt`), modes and config options (`options`) and `_meta` readers
//! (`meta`). `serve` runs one connection from first message to exit.

pub mod agent;
pub mod client_bridge;
pub mod meta;
pub mod options;
pub mod prompt;
pub mod updates;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use agent::Agent;

use crate::config::Config;
use crate::rpc::Rpc;
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
pub async fn serve(rpc: Rpc, config: Config, shutdown: impl Future<Output = ()>) -> Ended {
    let Rpc { conn, mut incoming } = rpc;
    let caps = Arc::new(client_bridge::ClientCaps::default());
    let prompts = Arc::new(agent::Prompts::default());
    let sessions = Arc::new(agent::Sessions::default());
    let sink = Arc::new(updates::AcpSink::new(conn.clone(), prompts.clone(), caps.clone(), sessions.clone()));
    let host = Arc::new(client_bridge::AcpHost::new(conn.clone(), caps.clone()));
    let runtime = Runtime::new(config, sink.clone(), host);
    sink.set_config_source(runtime.config_source());
    let agent = Agent::new(conn, runtime, sessions, prompts, caps);
    tokio::pin!(shutdown);

    let mut ended = loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(message) => {
                    agent.dispatch(message);
                    // A handler with asynchronous work (loading a session) finishes before the next
                    // message is handled, so requests take effect in the order they arrived.
                    if let Some(work) = agent.take_pending() {
                        tokio::select! {
                            _ = work => {}
                            () = &mut shutdown => break Ended::Signal,
                        }
                    }
                }
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
    let limit = if ended == Ended::Signal { Duration::from_millis(100) } else { Duration::from_secs(2) };
    agent.close_all_sessions(limit).await;
    ended
}
