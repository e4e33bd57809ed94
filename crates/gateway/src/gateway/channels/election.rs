//! One gateway of several on a shared store polls a channel (Telegram refuses two pollers of
//! one bot: each `getUpdates` ends the other's with 409). The gateways stand for a lease named
//! after the bot in the store (`acp_leases`); the one holding it polls, renewing it every third
//! of the lease, and the others wait. One that takes it over from a dead one waits a further
//! third of the lease first, so that the sessions the dead one held have lapsed too and its
//! chats' next messages open here. An update is taken once across all of them: its id is
//! claimed in the store before it is handed in (one the dead gateway took but Telegram never
//! heard confirmed comes again, and is skipped).

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::runtime::store::{Postgres, SessionStore};

pub struct Election {
    store: Postgres,
    leading: watch::Receiver<bool>,
}

impl Election {
    /// Stands for lease `name` until `stop` (then lets it go, if held).
    pub fn start(store: Postgres, name: String, stop: CancellationToken) -> Self {
        let (tx, leading) = watch::channel(false);
        tokio::spawn(stand(store.clone(), name, tx, stop));
        Self { store, leading }
    }

    /// Whether this gateway polls now.
    pub fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Waits until this gateway polls.
    pub async fn lead(&self) {
        let mut leading = self.leading.clone();
        let _ = leading.wait_for(|l| *l).await.map(drop);
    }

    /// Waits until this gateway no longer polls.
    pub async fn lost(&self) {
        let mut leading = self.leading.clone();
        let _ = leading.wait_for(|l| !*l).await.map(drop);
    }

    /// Whether update `key` is taken here first (claimed now); false when a gateway took it
    /// already. A store that cannot say is taken as a yes: the update is not lost.
    pub async fn first(&self, key: &str) -> bool {
        match self.store.claim_key(key.to_owned(), String::new()).await {
            Ok(None) => true,
            Ok(Some(_)) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not record an update as taken; taking it");
                true
            }
        }
    }
}

async fn stand(store: Postgres, name: String, leading: watch::Sender<bool>, stop: CancellationToken) {
    let every = store.lease() / 3;
    loop {
        match store.hold(&name).await {
            Ok(Some(from)) if !*leading.borrow() => {
                if let Some(from) = from {
                    tracing::info!(lease = %name, %from, "taking over from a gateway whose lease lapsed");
                    // The sessions it held lapse within a renewal of it.
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(every + Duration::from_millis(100)) => {}
                    }
                }
                tracing::info!(lease = %name, "this gateway polls now");
                leading.send_replace(true);
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                if leading.send_replace(false) {
                    tracing::warn!(lease = %name, "another gateway took over polling");
                }
            }
            Err(e) => {
                // Unsure whether it still holds it: it stops, rather than poll beside another.
                if leading.send_replace(false) {
                    tracing::warn!(lease = %name, error = %e, "stopped polling: the store does not answer");
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    leading.send_replace(false);
    if let Err(e) = store.let_go(&name).await {
        tracing::debug!(error = %e, "could not let a poller's lease go");
    }
}
