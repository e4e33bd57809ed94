//! Approval questions across the gateways of a bus. A run asks the approvers connected anywhere:
//! its question goes out on the bus as its other events do, to the connections that may answer;
//! `exec.approval.resolve` and `exec.approval.get` for a question asked elsewhere go to the
//! gateway that asked it (`forward.rs`). Whether anyone may answer is asked of the bus: a
//! gateway listens on `<prefix>.approvers` only while an approver is connected to it, so a run
//! with no approver anywhere hears "no responders" at once, and is told so as before.

use std::sync::{Arc, Weak};
use std::time::Duration;

use acp_protocol::gateway::events::{ApprovalRequested, name};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Bus, PREFIX};
use crate::clock::now_ms;
use crate::gateway::Gateway;
use crate::sync::lock;

/// A question asked by another gateway, as heard here.
pub(super) struct Asked {
    /// The gateway that asked it (its name on the bus).
    pub from: String,
    pub event: ApprovalRequested,
}

/// Questions of other gateways remembered, at most (each lasts until answered or expired).
const ASKED: usize = 4096;

impl Bus {
    /// An approval event from gateway `from` (the frame as sent, less its closing brace): a
    /// question is remembered until it is resolved or expires.
    pub(super) fn heard_approval(&self, from: &str, head: &str) {
        #[derive(Deserialize)]
        struct Frame {
            event: String,
            payload: serde_json::Value,
        }
        let Ok(frame) = serde_json::from_str::<Frame>(&format!("{head}}}")) else { return };
        let mut asked = lock(&self.asked);
        let now = now_ms();
        asked.retain(|_, a| a.event.expires_at_ms > now);
        if frame.event == name::APPROVAL_REQUESTED {
            let Ok(event) = serde_json::from_value::<ApprovalRequested>(frame.payload) else { return };
            if asked.len() < ASKED {
                asked.insert(event.id.clone(), Asked { from: from.to_owned(), event });
            }
        } else if let Some(id) = frame.payload.get("id").and_then(|v| v.as_str()) {
            asked.remove(id);
        }
    }

    /// The questions other gateways' runs are waiting on, for an approver who just connected.
    pub fn waiting_elsewhere(&self) -> Vec<ApprovalRequested> {
        let now = now_ms();
        lock(&self.asked).values().filter(|a| a.event.expires_at_ms > now).map(|a| a.event.clone()).collect()
    }

    /// The gateway that asked question `id`, and its session, if another did.
    pub(super) fn asker_of(&self, id: &str) -> Option<(String, String)> {
        let asked = lock(&self.asked);
        let a = asked.get(id).filter(|a| a.event.expires_at_ms > now_ms())?;
        Some((a.from.clone(), a.event.request.session_key.clone()))
    }

    /// Forgets question `id` (its gateway is gone).
    pub(super) fn forget_question(&self, id: &str) {
        lock(&self.asked).remove(id);
    }

    /// Whether someone who may answer approval questions is connected to another gateway.
    pub async fn approvers_elsewhere(&self) -> bool {
        if self.nats.connection_state() != async_nats::connection::State::Connected {
            return false;
        }
        let asked = self.nats.request(format!("{PREFIX}.approvers"), "".into());
        matches!(tokio::time::timeout(Duration::from_secs(2), asked).await, Ok(Ok(_)))
    }

    /// Takes the other gateways' questions (`<prefix>.ap.>`), until `stop`.
    pub(super) async fn hear_questions(self: Arc<Self>, gw: Weak<Gateway>, stop: CancellationToken) {
        loop {
            let mut questions = match self.nats.subscribe(format!("{PREFIX}.ap.>")).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "could not take approval questions from the bus; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            loop {
                let message = tokio::select! {
                    () = stop.cancelled() => return,
                    m = questions.next() => match m { Some(m) => m, None => break },
                };
                let Some(gw) = gw.upgrade() else { return };
                self.deliver(&gw, message);
            }
        }
    }

    /// Listens on `<prefix>.approvers` while an approver is connected here, until `stop`.
    pub(super) async fn answer_for_approvers(
        self: Arc<Self>,
        approvers: watch::Receiver<usize>,
        stop: CancellationToken,
    ) {
        let subject = format!("{PREFIX}.approvers");
        self.take_while(subject, approvers, stop, |message| {
            let nats = self.nats.clone();
            async move {
                if let Some(reply) = message.reply {
                    let _ = nats.publish(reply, "here".into()).await;
                }
                true
            }
        })
        .await;
    }
}
