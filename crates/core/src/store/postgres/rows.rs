//! A session's transcript as rows: records are numbered as they are appended and written by the
//! session's writer task, which batches what queued while it committed (one transaction per
//! batch), keeps index updates in order with them, and writes only while this process holds
//! the session's lease (its `owner` and `epoch`): a gateway that lost it never writes over the
//! one that took over. The primary key `(session_id, seq)` keeps a batch retried after a lost
//! connection from being stored twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::{Inner, Outcome, apply, pg_err, transient};
use crate::history::record::Record;
use crate::store::StoreError;
use crate::store::transcript::{self, IndexUpdate};

enum Op {
    Append(Vec<(i64, String)>),
    Index(IndexUpdate),
    Synced(oneshot::Sender<()>),
}

/// The rows a session's transcript appends to ([`crate::store::transcript::Transcript::rows`]).
pub struct Rows {
    ops: mpsc::UnboundedSender<Op>,
    next: i64,
    /// Another gateway took the session over: nothing more is written.
    lost: Arc<AtomicBool>,
    inner: Arc<Inner>,
    id: String,
    epoch: i64,
}

/// The most records one transaction writes.
const BATCH: usize = 1000;

/// How long the end of a turn waits for its records to be committed before the turn ends anyway
/// (they are written when the database answers again).
pub(super) const SYNC_WAIT: Duration = Duration::from_secs(10);

impl Rows {
    /// Starts the writer of session `id`, held under `epoch`, whose next record is number `next`.
    pub(super) fn start(inner: Arc<Inner>, id: String, epoch: i64, next: i64, done: watch::Sender<()>) -> Self {
        let (ops, rx) = mpsc::unbounded_channel();
        let lost = Arc::new(AtomicBool::new(false));
        tokio::spawn(write_loop(inner.clone(), id.clone(), epoch, rx, lost.clone(), done));
        Self { ops, next, lost, inner, id, epoch }
    }
}

impl transcript::Rows for Rows {
    fn location(&self) -> String {
        format!("PostgreSQL ({}), session `{}`", self.inner.shown, self.id)
    }

    fn append(&mut self, records: &[&Record]) -> std::io::Result<()> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("another gateway took the session over"));
        }
        let mut rows = Vec::with_capacity(records.len());
        for record in records {
            rows.push((self.next, serde_json::to_string(record)?));
            self.next += 1;
        }
        self.ops.send(Op::Append(rows)).map_err(|_| std::io::Error::other("the session's writer stopped"))
    }

    fn index(&mut self, update: &IndexUpdate) {
        let _ = self.ops.send(Op::Index(update.clone()));
    }

    /// Completes once everything queued so far is committed (or cannot be: the session was lost).
    fn synced(&mut self) -> futures_util::future::BoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let sent = self.ops.send(Op::Synced(tx)).is_ok();
        Box::pin(async move {
            if sent {
                let _ = tokio::time::timeout(SYNC_WAIT, rx).await;
            }
        })
    }
}

impl Drop for Rows {
    fn drop(&mut self) {
        // The writer finishes what is queued, then lets the lease go; until then, opening the
        // session again here waits for it.
        self.inner.closing(&self.id, self.epoch);
    }
}

async fn write_loop(
    inner: Arc<Inner>,
    id: String,
    epoch: i64,
    mut ops: mpsc::UnboundedReceiver<Op>,
    lost: Arc<AtomicBool>,
    done: watch::Sender<()>,
) {
    let mut batch = Vec::new();
    while let Some(op) = ops.recv().await {
        batch.push(op);
        while batch.len() < BATCH
            && let Ok(op) = ops.try_recv()
        {
            batch.push(op);
        }
        let (mut records, mut updates, mut syncs) = (Vec::new(), Vec::new(), Vec::new());
        for op in batch.drain(..) {
            match op {
                Op::Append(rows) => records.extend(rows),
                Op::Index(update) => updates.push(update),
                Op::Synced(tx) => syncs.push(tx),
            }
        }
        let nothing = records.is_empty() && updates.is_empty();
        if !nothing && !lost.load(Ordering::Relaxed) {
            let mut pause = Duration::from_millis(50);
            let mut told = false;
            loop {
                match write(&inner, &id, epoch, &records, &updates).await {
                    Ok(Outcome::Done) => break,
                    Ok(Outcome::Lost) => {
                        tracing::error!(
                            session = %id,
                            records = records.len(),
                            "another gateway took the session over (this one's lease lapsed); what this one had left to save of it is dropped"
                        );
                        lost.store(true, Ordering::Relaxed);
                        break;
                    }
                    Err(Failed { error, again: false }) => {
                        tracing::error!(session = %id, error = %error, records = records.len(), "the PostgreSQL store refused what the session had to save; it is dropped");
                        break;
                    }
                    Err(Failed { error: e, again: true }) => {
                        if !told {
                            tracing::warn!(session = %id, error = %e, "could not save to the PostgreSQL store; trying again");
                            told = true;
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(5));
                    }
                }
            }
            if told && !lost.load(Ordering::Relaxed) {
                tracing::info!(session = %id, "saved to the PostgreSQL store again");
            }
        }
        for tx in syncs {
            let _ = tx.send(());
        }
    }
    if !lost.load(Ordering::Relaxed) {
        inner.release(&id, epoch).await;
    }
    inner.closed(&id, epoch);
    drop(done);
}

/// A write that failed, and whether trying it again may help.
struct Failed {
    error: StoreError,
    again: bool,
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Self { again: transient(&e), error: pg_err(e) }
    }
}

impl From<StoreError> for Failed {
    /// No connection to be had: the server may come back.
    fn from(error: StoreError) -> Self {
        Self { error, again: true }
    }
}

/// One batch, in one transaction, if this process still holds the session under `epoch`.
async fn write(
    inner: &Inner,
    id: &str,
    epoch: i64,
    records: &[(i64, String)],
    updates: &[IndexUpdate],
) -> Result<Outcome, Failed> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await?;
    let held = tx
        .execute(
            "UPDATE acp_sessions SET lease_until = now() + make_interval(secs => $3)
             WHERE id = $1 AND owner = $2 AND epoch = $4",
            &[&id, &inner.owner, &inner.lease_secs(), &epoch],
        )
        .await?;
    if held == 0 {
        return Ok(Outcome::Lost);
    }
    if !records.is_empty() {
        let seqs: Vec<i64> = records.iter().map(|r| r.0).collect();
        let texts: Vec<&str> = records.iter().map(|r| r.1.as_str()).collect();
        tx.execute(
            "INSERT INTO acp_records (session_id, seq, record)
             SELECT $1, s, r FROM unnest($2::bigint[], $3::text[]) AS t (s, r)
             ON CONFLICT (session_id, seq) DO NOTHING",
            &[&id, &seqs, &texts],
        )
        .await?;
    }
    for update in updates {
        apply(&tx, id, update).await?;
    }
    tx.commit().await?;
    Ok(Outcome::Done)
}
