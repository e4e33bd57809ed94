//! A head start for a client that opens one session straight away (`acp run`, which builds it
//! in `cli/run.rs`): what the runtime begins before that client asks for anything. A runtime
//! given none opens its store when a surface first needs it, and nothing here is consulted.

use std::path::PathBuf;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::store::{Store, StoreError};
use crate::sync::lock;

/// See the module's header.
#[derive(Debug)]
pub enum HeadStart {
    /// A stored session continues: the store is being opened meanwhile.
    Store(StoreOpening),
    /// A new session, its id made up by the client (`acp_protocol`'s session ids; see
    /// [`crate::store::made_up`]): it is created without waiting for the store, which opens when
    /// first needed — as its model starts answering, at the latest (see `persist`) — rather than
    /// ahead.
    Fresh(String),
}

impl HeadStart {
    /// For a client that creates the session `fresh`, or, with `None`, continues one stored
    /// under `home`.
    pub fn begin(home: PathBuf, fresh: Option<String>) -> Self {
        match fresh {
            Some(id) => Self::Fresh(id),
            None => Self::Store(StoreOpening::start(home)),
        }
    }
}

/// The session store under a home, being opened on a thread of its own, so it is ready by the
/// time the client's session is created.
pub struct StoreOpening {
    /// None if the thread could not be started: the runtime opens the store itself.
    opened: Option<oneshot::Receiver<Result<Store, StoreError>>>,
}

impl StoreOpening {
    pub fn start(home: PathBuf) -> Self {
        let (tx, opened) = oneshot::channel();
        let spawned = std::thread::Builder::new().name("store-open".into()).spawn(move || {
            let _ = tx.send(Store::open(&home));
        });
        match spawned {
            Ok(_) => Self { opened: Some(opened) },
            Err(e) => {
                tracing::warn!(error = %e, "could not start opening the session store");
                Self { opened: None }
            }
        }
    }
}

impl std::fmt::Debug for StoreOpening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOpening").finish_non_exhaustive()
    }
}

/// What is left of a [`HeadStart`] while the runtime runs: each part is taken once.
#[derive(Default)]
pub(crate) struct Head {
    opening: Mutex<Option<StoreOpening>>,
    fresh: Mutex<Option<String>>,
    /// The store opens when first needed rather than ahead (and is swept once it opens).
    on_demand: bool,
    /// The process runs one prompt and exits (`acp run`): nothing long-lived is started for it.
    one_shot: bool,
}

impl Head {
    pub(crate) fn new(start: HeadStart) -> Self {
        match start {
            HeadStart::Store(opening) => Self { opening: Mutex::new(Some(opening)), one_shot: true, ..Self::default() },
            HeadStart::Fresh(id) => {
                Self { fresh: Mutex::new(Some(id)), on_demand: true, one_shot: true, ..Self::default() }
            }
        }
    }

    /// The store being opened already, if it is.
    pub(crate) fn take_opening(&self) -> Option<oneshot::Receiver<Result<Store, StoreError>>> {
        lock(&self.opening).take().and_then(|o| o.opened)
    }

    /// Whether `id` is the session made up for the client; true once.
    pub(crate) fn take_fresh(&self, id: &str) -> bool {
        let mut fresh = lock(&self.fresh);
        let taken = fresh.as_deref() == Some(id);
        if taken {
            *fresh = None;
        }
        taken
    }

    pub(crate) fn store_on_demand(&self) -> bool {
        self.on_demand
    }

    pub(crate) fn one_shot(&self) -> bool {
        self.one_shot
    }
}
