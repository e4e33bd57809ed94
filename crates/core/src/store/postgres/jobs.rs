//! The gateway's idempotency keys and cron jobs in PostgreSQL, as `store/keys.rs` and
//! `store/cron.rs` keep them in SQLite.

use tokio_postgres::types::ToSql;

use super::{Inner, count, pg_err};
use crate::store::backend::{CronEnd, CronRuns};
use crate::store::cron::{ORPHAN_RUNS_KEPT_MS, RUNS_KEPT, Unfinished};
use crate::store::keys::{KEY_KEPT_MS, KEYS_KEPT, KeyRecord};
use crate::store::{StoreError, now_ms};

/// Runs one statement; how many rows it changed.
pub(super) async fn exec(inner: &Inner, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
    inner.client().await?.execute(sql, params).await.map_err(pg_err)
}

fn key_record(r: &tokio_postgres::Row) -> KeyRecord {
    KeyRecord { session: r.get(0), ended_at: r.get(1), outcome: r.get(2) }
}

pub(super) async fn claim_key(inner: &Inner, key: &str, session: &str) -> Result<Option<KeyRecord>, StoreError> {
    let client = inner.client().await?;
    let now = now_ms();
    // A key older than it is kept is claimed afresh.
    let claimed = client
        .execute(
            "INSERT INTO acp_request_keys (key, session, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET session = $2, created_at = $3, ended_at = NULL, outcome = NULL
             WHERE acp_request_keys.created_at < $4",
            &[&key, &session, &now, &(now - KEY_KEPT_MS)],
        )
        .await
        .map_err(pg_err)?;
    if claimed == 1 {
        if fastrand::u8(..) == 0 {
            client
                .execute("DELETE FROM acp_request_keys WHERE created_at < $1", &[&(now - KEY_KEPT_MS)])
                .await
                .map_err(pg_err)?;
            client
                .execute(
                    "DELETE FROM acp_request_keys WHERE key IN
                     (SELECT key FROM acp_request_keys ORDER BY created_at DESC OFFSET $1)",
                    &[&KEYS_KEPT],
                )
                .await
                .map_err(pg_err)?;
        }
        return Ok(None);
    }
    let row = client
        .query_opt("SELECT session, ended_at, outcome FROM acp_request_keys WHERE key = $1", &[&key])
        .await
        .map_err(pg_err)?;
    Ok(row.as_ref().map(key_record))
}

pub(super) async fn key(inner: &Inner, key: &str) -> Result<Option<KeyRecord>, StoreError> {
    let row = inner
        .client()
        .await?
        .query_opt(
            "SELECT session, ended_at, outcome FROM acp_request_keys WHERE key = $1 AND created_at >= $2",
            &[&key, &(now_ms() - KEY_KEPT_MS)],
        )
        .await
        .map_err(pg_err)?;
    Ok(row.as_ref().map(key_record))
}

pub(super) async fn cron_jobs(inner: &Inner) -> Result<Vec<String>, StoreError> {
    let rows = inner
        .client()
        .await?
        .query("SELECT job FROM acp_cron_jobs ORDER BY created_at, id", &[])
        .await
        .map_err(pg_err)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

pub(super) async fn cron_job(inner: &Inner, id: &str) -> Result<Option<String>, StoreError> {
    let row =
        inner.client().await?.query_opt("SELECT job FROM acp_cron_jobs WHERE id = $1", &[&id]).await.map_err(pg_err)?;
    Ok(row.map(|r| r.get(0)))
}

pub(super) async fn cron_remove(inner: &Inner, id: &str) -> Result<bool, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    let removed = tx.execute("DELETE FROM acp_cron_jobs WHERE id = $1", &[&id]).await.map_err(pg_err)?;
    tx.execute("DELETE FROM acp_cron_runs WHERE job_id = $1", &[&id]).await.map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    Ok(removed == 1)
}

/// Claims a run of job `id` (a scheduled one by its `slot`: once, whichever gateway comes first).
pub(super) async fn cron_claim(
    inner: &Inner,
    id: &str,
    slot: Option<i64>,
    run_id: &str,
    at: i64,
    job: &str,
) -> Result<bool, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    let claimed = tx
        .execute(
            "INSERT INTO acp_cron_runs (job_id, slot, run_id, started_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (job_id, slot) DO NOTHING",
            &[&id, &slot, &run_id, &at],
        )
        .await
        .map_err(pg_err)?;
    if claimed == 0 {
        return Ok(false);
    }
    tx.execute("UPDATE acp_cron_jobs SET job = $2 WHERE id = $1", &[&id, &job]).await.map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    Ok(true)
}

/// Keeps the last [`RUNS_KEPT`] ended runs of job `id`.
async fn prune(tx: &deadpool_postgres::Transaction<'_>, id: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM acp_cron_runs WHERE job_id = $1 AND ended_at IS NOT NULL AND seq <=
           (SELECT seq FROM acp_cron_runs WHERE job_id = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
        &[&id, &RUNS_KEPT],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

pub(super) async fn cron_finish(inner: &Inner, r: &CronEnd) -> Result<(), StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute(
        "UPDATE acp_cron_runs SET ended_at = $3, status = $4, entry = $5 WHERE job_id = $1 AND run_id = $2",
        &[&r.id, &r.run_id, &r.ended_at, &r.status, &r.entry],
    )
    .await
    .map_err(pg_err)?;
    match &r.job {
        Some(job) => {
            tx.execute("UPDATE acp_cron_jobs SET job = $2 WHERE id = $1", &[&r.id, job]).await.map_err(pg_err)?;
            prune(&tx, &r.id).await?;
        }
        None => {
            tx.execute("DELETE FROM acp_cron_jobs WHERE id = $1", &[&r.id]).await.map_err(pg_err)?;
            tx.execute(
                "DELETE FROM acp_cron_runs WHERE ended_at < $1 AND job_id NOT IN (SELECT id FROM acp_cron_jobs)",
                &[&(r.ended_at - ORPHAN_RUNS_KEPT_MS)],
            )
            .await
            .map_err(pg_err)?;
        }
    }
    tx.commit().await.map_err(pg_err)
}

pub(super) async fn cron_log(
    inner: &Inner,
    id: &str,
    run_id: &str,
    at: i64,
    entry: &str,
    job: &str,
) -> Result<(), StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute(
        "INSERT INTO acp_cron_runs (job_id, slot, run_id, started_at, ended_at, status, entry)
         VALUES ($1, NULL, $2, $3, $3, 'skipped', $4)",
        &[&id, &run_id, &at, &entry],
    )
    .await
    .map_err(pg_err)?;
    tx.execute("UPDATE acp_cron_jobs SET job = $2 WHERE id = $1", &[&id, &job]).await.map_err(pg_err)?;
    prune(&tx, id).await?;
    tx.commit().await.map_err(pg_err)
}

pub(super) async fn cron_unfinished(inner: &Inner) -> Result<Vec<Unfinished>, StoreError> {
    let rows = inner
        .client()
        .await?
        .query("SELECT job_id, run_id, started_at FROM acp_cron_runs WHERE ended_at IS NULL ORDER BY seq", &[])
        .await
        .map_err(pg_err)?;
    Ok(rows.iter().map(|r| Unfinished { job_id: r.get(0), run_id: r.get(1), started_at: r.get(2) }).collect())
}

pub(super) async fn cron_runs(inner: &Inner, q: &CronRuns) -> Result<(Vec<String>, u64), StoreError> {
    let client = inner.client().await?;
    let filter = "ended_at IS NOT NULL AND ($1::text IS NULL OR job_id = $1) AND ($2::text IS NULL OR status = $2)";
    let total: i64 = client
        .query_one(&format!("SELECT count(*) FROM acp_cron_runs WHERE {filter}"), &[&q.id, &q.status])
        .await
        .map_err(pg_err)?
        .get(0);
    let order = if q.oldest_first { "ASC" } else { "DESC" };
    let rows = client
        .query(
            &format!("SELECT entry FROM acp_cron_runs WHERE {filter} ORDER BY ended_at {order}, seq {order} LIMIT $3 OFFSET $4"),
            &[&q.id, &q.status, &count(q.limit), &count(q.offset)],
        )
        .await
        .map_err(pg_err)?;
    let entries = rows.iter().filter_map(|r| r.get::<_, Option<String>>(0)).collect();
    Ok((entries, u64::try_from(total).unwrap_or(0)))
}
