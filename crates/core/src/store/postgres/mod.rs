//! The store gateways on several hosts share (docs/scaling.md): PostgreSQL, through a pool of
//! connections. Sessions are rows of `acp_sessions`, their transcripts rows of `acp_records`
//! keyed `(session_id, seq)`, and the gateway's idempotency keys and cron jobs tables of their
//! own, as in SQLite.
//!
//! A session is written by one gateway at a time, the one holding its lease: taken when the
//! session is created or opened (free, or lapsed: its gateway died), renewed for every session a
//! process holds by one statement every [`RENEW_EVERY`], and let go when the session closes. A
//! session whose gateway died is taken over by the next that opens it, once the lease lapsed;
//! the turn it left open is closed as interrupted, as a reopened file transcript's is.

mod jobs;
mod open;
mod rows;
mod schema;
mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::watch;

use super::transcript::IndexUpdate;
use super::{SessionRow, StoreError, now_ms};
use crate::history::record::Record;
use crate::sync::lock;

/// How long a lease lasts unless renewed.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a process renews the leases it holds.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

/// How long opening a session waits for this process's last writer of it to finish.
const CLOSING_WAIT: Duration = Duration::from_secs(30);

/// Connections a gateway holds at most.
const POOL_SIZE: usize = 16;

/// A PostgreSQL store; clones share the pool.
#[derive(Clone)]
pub struct Postgres {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres").field("at", &self.inner.shown).field("owner", &self.inner.owner).finish()
    }
}

pub(crate) struct Inner {
    pool: Pool,
    /// The URL without its password.
    shown: String,
    /// This process, as the holder of leases: `host/pid/random`.
    owner: String,
    lease: Duration,
    /// Sessions this process holds: the epoch they are held under, whether their transcript
    /// closed (its writer finishing), and what completes when it has.
    held: Mutex<HashMap<String, Held>>,
    epochs: AtomicI64,
}

struct Held {
    epoch: i64,
    closing: bool,
    done: watch::Receiver<()>,
}

/// How a write under a lease went.
pub(crate) enum Outcome {
    Done,
    /// Another process holds the session now.
    Lost,
}

/// A PostgreSQL error as the store reports it: the server's message when it sent one.
pub(crate) fn pg_err(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError(format!("PostgreSQL: {}", db.message())),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            StoreError(format!("PostgreSQL: {text}"))
        }
    }
}

/// Whether `e` may pass if tried again: the connection, the server's state or a conflict, not
/// the statement itself.
pub(crate) fn transient(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_none_or(|db| {
        let code = db.code().code();
        // Connection exceptions, transaction rollbacks (serialization, deadlock), insufficient
        // resources, operator intervention (a shutdown), system errors.
        ["08", "40", "53", "57", "58"].iter().any(|class| code.starts_with(class))
    })
}

impl Postgres {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`), creating
    /// or upgrading acp's tables, and starts renewing the leases this process takes.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, LEASE).await
    }

    /// [`connect`](Self::connect) with leases of `lease` (renewed every third of it).
    pub async fn connect_with(url: &str, lease: Duration) -> Result<Self, StoreError> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError(format!("`{}` is not a PostgreSQL URL: {e}", shown(url))))?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(StoreError(format!(
                "{}: TLS to PostgreSQL is not supported; connect over a private network or a tunnel (sslmode=disable)",
                shown(url)
            )));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.keepalives(true).keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("acp");
        }
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| StoreError(format!("PostgreSQL: {e}")))?;
        let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
        let owner = format!("{host}/{}/{:08x}", std::process::id(), fastrand::u32(..));
        let inner = Arc::new(Inner {
            pool,
            shown: shown(url),
            owner,
            lease,
            held: Mutex::default(),
            epochs: AtomicI64::new(1),
        });
        schema::migrate(&inner).await?;
        tokio::spawn(renew(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// This process, as the holder of leases.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Who holds session `id` now, if another live process does: its owner name and how long
    /// its lease has still to run.
    pub async fn holder(&self, id: &str) -> Result<Option<(String, Duration)>, StoreError> {
        let client = self.inner.client().await?;
        let row = client
            .query_opt(
                "SELECT owner, extract(epoch FROM lease_until - now())::float8 FROM acp_sessions
                 WHERE id = $1 AND owner IS NOT NULL AND owner <> $2 AND lease_until > now()",
                &[&id, &self.inner.owner],
            )
            .await
            .map_err(pg_err)?;
        Ok(row.map(|r| (r.get(0), Duration::from_secs_f64(r.get::<_, f64>(1).clamp(0.0, 3600.0)))))
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.inner.lease
    }

    /// Takes (or keeps) lease `name` for this process — the one gateway of several that does
    /// what `name` says (polls a channel's updates), for [`Self::lease`] unless taken again.
    /// `None`: another live process holds it; `Some(from)`: this one holds it now, taken over
    /// from process `from` if another held it last.
    pub async fn hold(&self, name: &str) -> Result<Option<Option<String>>, StoreError> {
        let client = self.inner.client().await?;
        let taken = client
            .query_opt(
                "WITH before AS (SELECT owner FROM acp_leases WHERE name = $1)
                 INSERT INTO acp_leases (name, owner, lease_until) VALUES ($1, $2, now() + make_interval(secs => $3))
                 ON CONFLICT (name) DO UPDATE SET owner = $2, lease_until = now() + make_interval(secs => $3)
                 WHERE acp_leases.owner = $2 OR acp_leases.lease_until < now()
                 RETURNING (SELECT owner FROM before)",
                &[&name, &self.inner.owner, &self.inner.lease_secs()],
            )
            .await
            .map_err(pg_err)?;
        Ok(taken.map(|row| row.get::<_, Option<String>>(0).filter(|from| *from != self.inner.owner)))
    }

    /// Lets lease `name` go, if this process holds it.
    pub async fn let_go(&self, name: &str) -> Result<(), StoreError> {
        let client = self.inner.client().await?;
        client
            .execute("DELETE FROM acp_leases WHERE name = $1 AND owner = $2", &[&name, &self.inner.owner])
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    /// Waits until every session this process held is saved and let go (at most `wait`).
    pub async fn close(&self, wait: Duration) {
        let pending: Vec<watch::Receiver<()>> = lock(&self.inner.held).values().map(|h| h.done.clone()).collect();
        let all = async {
            for mut done in pending {
                while done.changed().await.is_ok() {}
            }
        };
        let _ = tokio::time::timeout(wait, all).await;
    }
}

/// `url` without its password.
fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) if !user.contains('/') => {
                let user = user.split_once(':').map_or(user, |(u, _)| u);
                format!("{scheme}://{user}@{host}")
            }
            _ => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Renews every lease this process holds, every third of the lease, while the store lives.
async fn renew(inner: Weak<Inner>) {
    let every = inner.upgrade().map_or(RENEW_EVERY, |i| i.lease / 3);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        match inner.renew().await {
            Ok(()) if failing => {
                tracing::info!("renewing leases in the PostgreSQL store works again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if !failing => {
                tracing::warn!(error = %e, "could not renew this gateway's leases in the PostgreSQL store");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

impl Inner {
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => pg_err(e),
            e => StoreError(format!("PostgreSQL ({}): {e}", self.shown)),
        })
    }

    pub(crate) fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    async fn renew(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        let secs = self.lease_secs();
        // The sessions this process holds now, and the first epoch it has not given out yet.
        let (ids, epochs, next): (Vec<String>, Vec<i64>, i64) = {
            let held = lock(&self.held);
            let next = self.epochs.load(Ordering::Relaxed);
            let (ids, epochs) = held.iter().map(|(id, h)| (id.clone(), h.epoch)).unzip();
            (ids, epochs, next)
        };
        client
            .execute(
                "UPDATE acp_sessions s SET lease_until = now() + make_interval(secs => $2)
                 FROM unnest($3::text[], $4::bigint[]) AS h (id, epoch)
                 WHERE s.owner = $1 AND s.id = h.id AND s.epoch = h.epoch",
                &[&self.owner, &secs, &ids, &epochs],
            )
            .await
            .map_err(pg_err)?;
        // One left held by this process whose release failed (the database was away when it
        // closed): let it go now, rather than keep it from the other gateways while this lives.
        client
            .execute(
                "UPDATE acp_sessions SET owner = NULL, lease_until = NULL
                 WHERE owner = $1 AND epoch < $2 AND NOT (id = ANY($3))",
                &[&self.owner, &next, &ids],
            )
            .await
            .map_err(pg_err)?;
        client
            .execute(
                "UPDATE acp_leases SET lease_until = now() + make_interval(secs => $2) WHERE owner = $1",
                &[&self.owner, &secs],
            )
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    /// Reserves session `id` in this process for a new epoch (waiting for a closing writer of it
    /// to finish); `Err`: a session of this process has it open.
    async fn reserve(&self, id: &str) -> Result<(i64, watch::Sender<()>), StoreError> {
        loop {
            let mut wait = {
                let mut held = lock(&self.held);
                match held.get(id) {
                    Some(h) if h.closing => h.done.clone(),
                    Some(_) => {
                        return Err(StoreError(format!(
                            "the session `{}` is open in this gateway already",
                            id.escape_debug()
                        )));
                    }
                    None => {
                        let epoch = self.epochs.fetch_add(1, Ordering::Relaxed);
                        let (tx, rx) = watch::channel(());
                        held.insert(id.to_owned(), Held { epoch, closing: false, done: rx });
                        return Ok((epoch, tx));
                    }
                }
            };
            // A writer that cannot reach the database holds the session that long at most here.
            let closed = async { while wait.changed().await.is_ok() {} };
            if tokio::time::timeout(CLOSING_WAIT, closed).await.is_err() {
                return Err(StoreError(format!(
                    "the session `{}` is still being saved here (the store does not answer); try again",
                    id.escape_debug()
                )));
            }
        }
    }

    /// A reservation that came to nothing.
    fn unreserve(&self, id: &str, epoch: i64) {
        let mut held = lock(&self.held);
        if held.get(id).is_some_and(|h| h.epoch == epoch) {
            held.remove(id);
        }
    }

    /// Session `id`'s transcript closed: its writer is finishing.
    pub(crate) fn closing(&self, id: &str, epoch: i64) {
        if let Some(h) = lock(&self.held).get_mut(id).filter(|h| h.epoch == epoch) {
            h.closing = true;
        }
    }

    /// Session `id`'s writer finished.
    pub(crate) fn closed(&self, id: &str, epoch: i64) {
        self.unreserve(id, epoch);
    }

    /// Lets session `id`'s lease go, if this process holds it under `epoch` still.
    pub(crate) async fn release(&self, id: &str, epoch: i64) {
        let released = async {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE acp_sessions SET owner = NULL, lease_until = NULL WHERE id = $1 AND owner = $2 AND epoch = $3",
                    &[&id, &self.owner, &epoch],
                )
                .await
                .map_err(pg_err)
        };
        if let Err(e) = released.await {
            tracing::warn!(session = %id, error = %e, "could not let the session's lease go; it lapses on its own");
        }
    }

    /// The transcript of session `id`, in order; unreadable records are logged and skipped.
    async fn records(&self, client: &deadpool_postgres::Object, id: &str) -> Result<(Vec<Record>, i64), StoreError> {
        let rows = client
            .query("SELECT seq, record FROM acp_records WHERE session_id = $1 ORDER BY seq", &[&id])
            .await
            .map_err(pg_err)?;
        let next = rows.last().map_or(0, |r| r.get::<_, i64>(0) + 1);
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let text: &str = row.get(1);
            match serde_json::from_str::<Record>(text) {
                Ok(record) => records.push(record),
                Err(e) => {
                    tracing::warn!(session = %id, seq = row.get::<_, i64>(0), error = %e, "skipping an unreadable record")
                }
            }
        }
        Ok((records, next))
    }
}

/// A count as PostgreSQL stores it (saturating at `i64::MAX`).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn text(record: &Record) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError(e.to_string()))
}

/// An `acp_sessions` row.
fn session_row(r: &tokio_postgres::Row) -> SessionRow {
    let dirs: String = r.get("additional_dirs");
    SessionRow {
        id: r.get("id"),
        cwd: PathBuf::from(r.get::<_, String>("cwd")),
        additional_dirs: serde_json::from_str(&dirs).unwrap_or_default(),
        title: r.get("title"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        model: r.get("model"),
        mode: r.get("mode"),
        reasoning: r.get("reasoning"),
        input_tokens: r.get::<_, i64>("input_tokens").max(0) as u64,
        output_tokens: r.get::<_, i64>("output_tokens").max(0) as u64,
        context_tokens: r.get::<_, i64>("context_tokens").max(0) as u64,
        parent_id: r.get("parent_id"),
        origin: r.get("origin"),
        prompted: r.get("prompted"),
    }
}

/// The columns of a [`SessionRow`].
const COLUMNS: &str = "id, cwd, additional_dirs, title, created_at, updated_at, model, mode, reasoning, \
     input_tokens, output_tokens, context_tokens, parent_id, origin, prompted";

/// Applies `update` to session `id`'s row, inside `tx`.
pub(crate) async fn apply(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    update: &IndexUpdate,
) -> Result<(), tokio_postgres::Error> {
    let now = now_ms();
    let done = match update {
        IndexUpdate::TurnEnded { input, output, context, title, prompted } => {
            tx.execute(
                "UPDATE acp_sessions SET updated_at = $2,
                     input_tokens = LEAST(input_tokens::numeric + $3::bigint, 9223372036854775807)::bigint,
                     output_tokens = LEAST(output_tokens::numeric + $4::bigint, 9223372036854775807)::bigint,
                     context_tokens = COALESCE($5, context_tokens), title = COALESCE(title, $6),
                     prompted = prompted OR $7
                 WHERE id = $1",
                &[&id, &now, &count(*input), &count(*output), &context.map(count), title, prompted],
            )
            .await
        }
        IndexUpdate::Settings { model, mode, reasoning } => {
            tx.execute(
                "UPDATE acp_sessions SET model = $2, mode = $3, reasoning = $4, updated_at = $5 WHERE id = $1",
                &[&id, model, mode, reasoning, &now],
            )
            .await
        }
        IndexUpdate::Title(title) => {
            tx.execute("UPDATE acp_sessions SET title = $2 WHERE id = $1", &[&id, title]).await
        }
        IndexUpdate::Prompted => {
            tx.execute("UPDATE acp_sessions SET prompted = TRUE, updated_at = $2 WHERE id = $1", &[&id, &now]).await
        }
    };
    done.map(drop)
}

/// A turn left open (a `user` record without its `end`), and the title its first prompt gives.
fn interrupted_turn(records: &[Record]) -> Option<Option<String>> {
    let (mut open, mut title) = (false, None);
    for record in records {
        match record {
            Record::User { blocks, .. } => {
                open = true;
                if title.is_none() {
                    title = Some(crate::history::input::title_of(blocks));
                }
            }
            Record::End { .. } => open = false,
            _ => {}
        }
    }
    open.then(|| title.flatten())
}
