//! The gateway's cron jobs and their run log, kept in the store so that they outlast a restart:
//! a job is one row (its JSON, as the gateway shapes it), a run is one row claimed before it
//! starts. A scheduled run's row is keyed by (job, slot): the claim inserts it and saves the
//! job's next slot in one transaction, so however the process stops, a slot runs at most once —
//! a claim that committed is never made again, one that did not left the job due as before.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};

/// Runs kept per job in the run log (the oldest go first).
pub const RUNS_KEPT: i64 = 200;
/// How long the runs of a job that removed itself (an `at` job done) stay in the log.
pub const ORPHAN_RUNS_KEPT_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// A run the store holds as started but never finished (its process stopped during it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    pub job_id: String,
    pub run_id: String,
    pub started_at: i64,
}

impl Store {
    /// Every job, as stored (JSON), oldest first.
    pub fn cron_jobs(&self) -> Result<Vec<String>, StoreError> {
        let db = self.db();
        let mut query = db.prepare_cached("SELECT job FROM cron_jobs ORDER BY created_at, id")?;
        let jobs = query.query_map([], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
        Ok(jobs)
    }

    /// Stores new job `id`.
    pub fn cron_put(&self, id: &str, created_at: i64, job: &str) -> Result<(), StoreError> {
        self.db()
            .execute("INSERT INTO cron_jobs (id, created_at, job) VALUES (?1, ?2, ?3)", params![id, created_at, job])?;
        Ok(())
    }

    /// Replaces stored job `id`; `false` when it is not stored (it was removed).
    pub fn cron_replace(&self, id: &str, job: &str) -> Result<bool, StoreError> {
        Ok(self.db().execute("UPDATE cron_jobs SET job = ?2 WHERE id = ?1", params![id, job])? == 1)
    }

    /// Removes job `id` and its run log; whether it was there.
    pub fn cron_remove(&self, id: &str) -> Result<bool, StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let removed = tx.execute("DELETE FROM cron_jobs WHERE id = ?1", [id])?;
        tx.execute("DELETE FROM cron_runs WHERE job_id = ?1", [id])?;
        tx.commit()?;
        Ok(removed == 1)
    }

    /// Claims a run of job `id` — of its scheduled `slot`, or a run asked for (`None`) — and saves
    /// the job as it is once the run starts (its next slot, running), in one transaction. `false`:
    /// that slot was claimed before (it ran, or began to), and nothing changed.
    pub fn cron_claim(
        &self,
        id: &str,
        slot: Option<i64>,
        run_id: &str,
        at: i64,
        job: &str,
    ) -> Result<bool, StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let claimed = tx.execute(
            "INSERT OR IGNORE INTO cron_runs (job_id, slot, run_id, started_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, slot, run_id, at],
        )?;
        if claimed == 0 {
            return Ok(false);
        }
        tx.execute("UPDATE cron_jobs SET job = ?2 WHERE id = ?1", params![id, job])?;
        tx.commit()?;
        Ok(true)
    }

    /// Run `run_id` of job `id` ended: how (`entry`, JSON, and its `status`), and the job as it is
    /// now (`None`: it removed itself; its log stays), in one transaction. The oldest runs past
    /// [`RUNS_KEPT`] go.
    pub fn cron_finish(
        &self,
        id: &str,
        run_id: &str,
        ended_at: i64,
        status: &str,
        entry: &str,
        job: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.execute(
            "UPDATE cron_runs SET ended_at = ?3, status = ?4, entry = ?5 WHERE job_id = ?1 AND run_id = ?2",
            params![id, run_id, ended_at, status, entry],
        )?;
        match job {
            Some(job) => {
                tx.execute("UPDATE cron_jobs SET job = ?2 WHERE id = ?1", params![id, job])?;
                prune(&tx, id)?;
            }
            None => {
                // Done and gone (an `at` job): its runs stay in the log, those of jobs gone a
                // month ago go.
                tx.execute("DELETE FROM cron_jobs WHERE id = ?1", [id])?;
                tx.execute(
                    "DELETE FROM cron_runs WHERE ended_at < ?1 AND job_id NOT IN (SELECT id FROM cron_jobs)",
                    [ended_at - ORPHAN_RUNS_KEPT_MS],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Logs a run that did not happen (a slot skipped), and saves the job as it is now.
    pub fn cron_log(&self, id: &str, run_id: &str, at: i64, entry: &str, job: &str) -> Result<(), StoreError> {
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.execute(
            "INSERT INTO cron_runs (job_id, slot, run_id, started_at, ended_at, status, entry)
             VALUES (?1, NULL, ?2, ?3, ?3, 'skipped', ?4)",
            params![id, run_id, at, entry],
        )?;
        tx.execute("UPDATE cron_jobs SET job = ?2 WHERE id = ?1", params![id, job])?;
        prune(&tx, id)?;
        tx.commit()?;
        Ok(())
    }

    /// The runs begun and never finished (their process stopped during them).
    pub fn cron_unfinished(&self) -> Result<Vec<Unfinished>, StoreError> {
        let db = self.db();
        let mut query =
            db.prepare_cached("SELECT job_id, run_id, started_at FROM cron_runs WHERE ended_at IS NULL ORDER BY seq")?;
        let runs = query
            .query_map([], |r| Ok(Unfinished { job_id: r.get(0)?, run_id: r.get(1)?, started_at: r.get(2)? }))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(runs)
    }

    /// The run log (entries as JSON), of job `id` or of all, finished runs only, with `status` if
    /// given, newest first unless `oldest_first`; and how many there are in all.
    pub fn cron_runs(
        &self,
        id: Option<&str>,
        status: Option<&str>,
        oldest_first: bool,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<String>, u64), StoreError> {
        let db = self.db();
        let filter = "ended_at IS NOT NULL AND (?1 IS NULL OR job_id = ?1) AND (?2 IS NULL OR status = ?2)";
        let total: i64 =
            db.query_row(&format!("SELECT COUNT(*) FROM cron_runs WHERE {filter}"), params![id, status], |r| r.get(0))?;
        let order = if oldest_first { "ASC" } else { "DESC" };
        let mut query = db.prepare_cached(&format!(
            "SELECT entry FROM cron_runs WHERE {filter} ORDER BY ended_at {order}, seq {order} LIMIT ?3 OFFSET ?4"
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let entries = query
            .query_map(params![id, status, limit, offset], |r| r.get::<_, Option<String>>(0))?
            .filter_map(|e| e.transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((entries, u64::try_from(total).unwrap_or(0)))
    }

    /// The cron runs' sessions (ids starting `prefix`) last used before `before`, to be deleted,
    /// at most `limit`.
    pub fn cron_sessions_before(&self, prefix: &str, before: i64, limit: u64) -> Result<Vec<String>, StoreError> {
        let db = self.db();
        let mut query = db.prepare_cached(
            "SELECT id FROM sessions WHERE id >= ?1 AND id < ?1 || char(1114111) AND updated_at < ?2 LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids = query.query_map(params![prefix, before, limit], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    }

    /// Job `id` as stored, if it is.
    pub fn cron_job(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.db().query_row("SELECT job FROM cron_jobs WHERE id = ?1", [id], |r| r.get(0)).optional()?)
    }
}

/// The oldest runs of job `id` past [`RUNS_KEPT`] go.
fn prune(tx: &rusqlite::Transaction<'_>, id: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM cron_runs WHERE job_id = ?1 AND ended_at IS NOT NULL AND seq <=
           (SELECT seq FROM cron_runs WHERE job_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
        params![id, RUNS_KEPT],
    )?;
    Ok(())
}
