//! Approval questions across the gateways of a bus. A run asks the approvers connected anywhere:
//! its question goes out on the bus as its other events do, to the connections that may answer;
//! `exec.approval.resolve` and `exec.approval.get` for a question asked elsewhere go to the
//! gateway that asked it (`forward.rs`). Whether anyone may answer is asked of the bus: a
//! gateway listens on `<prefix>.approvers` only while an approver is connected to it, so a run
//! with no approver anywhere hears "no responders" at once, and is told so as before.

use std::sync::{Arc, Weak};
use std::time::Duration;

use acp_protocol::gateway::events::{ApprovalRequested, ApprovalResolved, name};
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
/// How long a question of another gateway is remembered, at most (ms).
const LONGEST: i64 = 24 * 3600 * 1000;

impl Bus {
    /// An approval event from gateway `from` (the frame as sent, less its closing brace): a
    /// question is remembered until it is resolved or expires. Whether to show it: not a
    /// question heard already (the first one heard is the one shown and answered), nor one that
    /// could not be remembered, nor anything that is not an approval event.
    pub(super) fn heard_approval(&self, from: &str, head: &str) -> bool {
        #[derive(Deserialize)]
        struct Frame {
            event: String,
            payload: serde_json::Value,
        }
        let Ok(frame) = serde_json::from_str::<Frame>(&format!("{head}}}")) else { return false };
        let from = super::token(from);
        let mut asked = lock(&self.asked);
        let now = now_ms();
        asked.retain(|_, a| a.event.expires_at_ms > now);
        match frame.event.as_str() {
            name::APPROVAL_REQUESTED => {
                let Ok(mut event) = serde_json::from_value::<ApprovalRequested>(frame.payload) else { return false };
                if event.id.is_empty() || asked.contains_key(&event.id) || event.expires_at_ms <= now {
                    return false;
                }
                // However long its gateway says it waits, it is not remembered past a day.
                event.expires_at_ms = event.expires_at_ms.min(now.saturating_add(LONGEST));
                if asked.len() >= ASKED {
                    let soonest = asked.iter().min_by_key(|(_, a)| a.event.expires_at_ms).map(|(id, _)| id.clone());
                    asked.remove(&soonest.unwrap_or_default());
                }
                asked.insert(event.id.clone(), Asked { from, event });
                true
            }
            name::APPROVAL_RESOLVED => {
                let id = frame.payload.get("id").and_then(|v| v.as_str()).unwrap_or_default();
                if asked.get(id).is_some_and(|a| a.from == from) {
                    asked.remove(id);
                }
                true
            }
            _ => false,
        }
    }

    /// Forgets the questions of gateway `asker`, which is gone from the bus, and tells the
    /// approvers here they were withdrawn.
    pub(super) fn forget_asker(&self, gw: &Gateway, asker: &str) {
        let gone: Vec<String> = {
            let mut asked = lock(&self.asked);
            let ids = asked.iter().filter(|(_, a)| a.from == asker).map(|(id, _)| id.clone()).collect();
            asked.retain(|_, a| a.from != asker);
            ids
        };
        for id in gone {
            let withdrawn = ApprovalResolved {
                id,
                decision: "deny".into(),
                reason: Some("the gateway that asked it has stopped".into()),
                ts: now_ms(),
                ..ApprovalResolved::default()
            };
            gw.hub.to_approvers(None, name::APPROVAL_RESOLVED, &withdrawn);
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

    /// Whether someone who may answer approval questions is connected to another gateway, and a
    /// question of `size` bytes can reach them (not past the bus's `max_payload`).
    pub async fn approvers_elsewhere(&self, size: usize) -> bool {
        if self.nats.connection_state() != async_nats::connection::State::Connected {
            return false;
        }
        if size.saturating_add(512) > self.nats.max_payload() {
            tracing::info!(
                bytes = size,
                "an approval question too large for the bus; approvers elsewhere are not asked"
            );
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
