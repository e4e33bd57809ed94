//! [`SessionStore`] on PostgreSQL: each call on a pooled connection.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{COLUMNS, Inner, Postgres, apply, count, interrupted_turn, jobs, pg_err, session_row, text};
use crate::history::record::Record;
use crate::history::replay::Replay;
use crate::store::backend::{CronEnd, CronRuns, SessionStore, StoreFuture};
use crate::store::cron::Unfinished;
use crate::store::find::Found;
use crate::store::keys::KeyRecord;
use crate::store::transcript::{IndexUpdate, Transcript};
use crate::store::{CreateError, Cursor, Opened, SessionRow, StoreError, now_ms, valid_id};

impl Postgres {
    fn run<T: Send + 'static, F>(&self, f: impl FnOnce(Arc<Inner>) -> F + Send + 'static) -> StoreFuture<'_, T>
    where
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        Box::pin(f(self.inner.clone()))
    }
}

impl SessionStore for Postgres {
    fn describe(&self) -> String {
        self.inner.shown.clone()
    }

    fn location(&self, id: &str) -> String {
        format!("PostgreSQL ({}), session `{id}`", self.inner.shown)
    }

    fn create_session(&self, row: SessionRow, settings: Record) -> BoxFuture<'_, Result<Transcript, CreateError>> {
        Box::pin(async move { self.inner.create(&row, &settings).await })
    }

    fn index_new(&self, row: SessionRow) -> BoxFuture<'_, Result<(), CreateError>> {
        Box::pin(async move {
            Err(CreateError::Store(StoreError(format!(
                "session `{}`: sessions begun ahead of their index are kept in SQLite only",
                row.id
            ))))
        })
    }

    fn open_session(&self, id: String, cwd: PathBuf, dirs: Vec<PathBuf>) -> StoreFuture<'_, Option<Opened>> {
        Box::pin(async move { self.inner.open(&id, &cwd, &dirs).await })
    }

    fn update(&self, id: &str, update: &IndexUpdate) -> Result<(), StoreError> {
        let (inner, id, update) = (self.inner.clone(), id.to_owned(), update.clone());
        tokio::spawn(async move {
            let done = async {
                let mut client = inner.client().await?;
                let tx = client.transaction().await.map_err(pg_err)?;
                apply(&tx, &id, &update).await.map_err(pg_err)?;
                tx.commit().await.map_err(pg_err)
            };
            if let Err(e) = done.await {
                tracing::warn!(session = %id, error = %e, "could not update the session index");
            }
        });
        Ok(())
    }

    fn get(&self, id: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(&format!("SELECT {COLUMNS} FROM acp_sessions WHERE id = $1"), &[&id])
                .await
                .map_err(pg_err)?;
            Ok(row.as_ref().map(session_row))
        })
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
        after: Option<Cursor>,
        limit: usize,
    ) -> StoreFuture<'_, (Vec<SessionRow>, Option<Cursor>)> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
            let take = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
            let (at, id) = after.map_or((None, None), |c| (Some(c.updated_at), Some(c.id)));
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM acp_sessions
                         WHERE prompted AND ($1::text IS NULL OR cwd = $1)
                           AND ($2::bigint IS NULL OR (updated_at, id) < ($2, $3::text))
                         ORDER BY updated_at DESC, id DESC LIMIT $4"
                    ),
                    &[&cwd, &at, &id, &take],
                )
                .await
                .map_err(pg_err)?;
            let mut rows: Vec<SessionRow> = rows.iter().map(session_row).collect();
            let next = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|r| Cursor { updated_at: r.updated_at, id: r.id.clone() })
            } else {
                None
            };
            Ok((rows, next))
        })
    }

    fn find(&self, search: String, offset: u64, limit: u64) -> StoreFuture<'_, Found> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let search = search.to_lowercase();
            let matches =
                "prompted AND ($1 = '' OR strpos(lower(id), $1) > 0 OR strpos(lower(coalesce(title, '')), $1) > 0)";
            let total: i64 = client
                .query_one(&format!("SELECT count(*) FROM acp_sessions WHERE {matches}"), &[&search])
                .await
                .map_err(pg_err)?
                .get(0);
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM acp_sessions WHERE {matches}
                         ORDER BY updated_at DESC, id DESC LIMIT $2 OFFSET $3"
                    ),
                    &[&search, &count(limit), &count(offset)],
                )
                .await
                .map_err(pg_err)?;
            Ok(Found { rows: rows.iter().map(session_row).collect(), total: u64::try_from(total).unwrap_or(0) })
        })
    }

    fn prompted(&self, id: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(&format!("SELECT {COLUMNS} FROM acp_sessions WHERE prompted AND id = $1"), &[&id])
                .await
                .map_err(pg_err)?;
            Ok(row.as_ref().map(session_row))
        })
    }

    fn titled(&self, title: String) -> StoreFuture<'_, Option<SessionRow>> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {COLUMNS} FROM acp_sessions WHERE prompted AND title = $1
                         ORDER BY updated_at DESC, id DESC LIMIT 1"
                    ),
                    &[&title],
                )
                .await
                .map_err(pg_err)?;
            Ok(row.as_ref().map(session_row))
        })
    }

    fn read_session(&self, id: String) -> StoreFuture<'_, Option<(SessionRow, Replay)>> {
        self.run(move |inner| async move {
            if !valid_id(&id) {
                return Ok(None);
            }
            let client = inner.client().await?;
            let Some(row) = client
                .query_opt(&format!("SELECT {COLUMNS} FROM acp_sessions WHERE id = $1"), &[&id])
                .await
                .map_err(pg_err)?
            else {
                return Ok(None);
            };
            let (records, _) = inner.records(&client, &id).await?;
            Ok(Some((session_row(&row), crate::history::replay::replay(records))))
        })
    }

    fn delete_if_closed(&self, id: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move {
            let (epoch, _done) = inner.reserve(&id).await?;
            let deleted = async {
                let client = inner.client().await?;
                let n = client
                    .execute(
                        "DELETE FROM acp_sessions WHERE id = $1 AND (owner IS NULL OR owner = $2 OR lease_until < now())",
                        &[&id, &inner.owner],
                    )
                    .await
                    .map_err(pg_err)?;
                if n == 0 && client.query_opt("SELECT 1 FROM acp_sessions WHERE id = $1", &[&id]).await.map_err(pg_err)?.is_some() {
                    return Err(StoreError("the session is open on another gateway; close it there first".into()));
                }
                Ok(())
            };
            let result = deleted.await;
            inner.unreserve(&id, epoch);
            result
        })
    }

    fn archive(&self, id: String, to: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move {
            if !valid_id(&to) {
                return Err(StoreError(format!("`{}` is not a valid session id", to.escape_debug())));
            }
            let (epoch, _done) = inner.reserve(&id).await?;
            let moved = async {
                let mut client = inner.client().await?;
                let tx = client.transaction().await.map_err(pg_err)?;
                if tx.query_opt("SELECT 1 FROM acp_sessions WHERE id = $1", &[&to]).await.map_err(pg_err)?.is_some() {
                    return Err(StoreError(format!("a session `{to}` exists already")));
                }
                let n = tx
                    .execute(
                        "UPDATE acp_sessions SET id = $2, owner = NULL, lease_until = NULL
                         WHERE id = $1 AND (owner IS NULL OR owner = $3 OR lease_until < now())",
                        &[&id, &to, &inner.owner],
                    )
                    .await
                    .map_err(pg_err)?;
                if n == 0 {
                    return Err(StoreError(format!("no closed session `{id}` to move aside")));
                }
                // The transcript's first record names the session.
                if let Some(first) = tx
                    .query_opt("SELECT record FROM acp_records WHERE session_id = $1 AND seq = 0", &[&to])
                    .await
                    .map_err(pg_err)?
                    && let Ok(Record::Session { v, cwd, created_at, .. }) = serde_json::from_str(first.get(0))
                {
                    let header = text(&Record::Session { v, id: to.clone(), cwd, created_at })?;
                    tx.execute("UPDATE acp_records SET record = $2 WHERE session_id = $1 AND seq = 0", &[&to, &header])
                        .await
                        .map_err(pg_err)?;
                }
                tx.commit().await.map_err(pg_err)
            };
            let result = moved.await;
            inner.unreserve(&id, epoch);
            result
        })
    }

    fn sweep_unprompted(&self, before: i64) -> StoreFuture<'_, usize> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let free = "NOT prompted AND (owner IS NULL OR lease_until < now())";
            // A first turn its gateway stopped during is listed, not removed.
            let unlisted = client
                .query(&format!("SELECT id FROM acp_sessions WHERE {free} LIMIT 1000"), &[])
                .await
                .map_err(pg_err)?;
            let mut swept = 0;
            for row in unlisted {
                let id: String = row.get(0);
                let (records, _) = inner.records(&client, &id).await?;
                if let Some(title) = interrupted_turn(&records) {
                    client
                        .execute(
                            &format!("UPDATE acp_sessions SET prompted = TRUE, title = COALESCE(title, $2) WHERE id = $1 AND {free}"),
                            &[&id, &title],
                        )
                        .await
                        .map_err(pg_err)?;
                    swept += 1;
                }
            }
            let removed = client
                .execute(&format!("DELETE FROM acp_sessions WHERE {free} AND updated_at < $1"), &[&before])
                .await
                .map_err(pg_err)?;
            Ok(swept + usize::try_from(removed).unwrap_or(usize::MAX))
        })
    }

    fn claim_key(&self, key: String, session: String) -> StoreFuture<'_, Option<KeyRecord>> {
        self.run(move |inner| async move { jobs::claim_key(&inner, &key, &session).await })
    }

    fn key(&self, key: String) -> StoreFuture<'_, Option<KeyRecord>> {
        self.run(move |inner| async move { jobs::key(&inner, &key).await })
    }

    fn forget_key(&self, key: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move {
            jobs::exec(&inner, "DELETE FROM acp_request_keys WHERE key = $1", &[&key]).await.map(drop)
        })
    }

    fn end_key(&self, key: String, outcome: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move {
            jobs::exec(
                &inner,
                "UPDATE acp_request_keys SET ended_at = $2, outcome = $3 WHERE key = $1",
                &[&key, &now_ms(), &outcome],
            )
            .await
            .map(drop)
        })
    }

    fn cron_jobs(&self) -> StoreFuture<'_, Vec<String>> {
        self.run(move |inner| async move { jobs::cron_jobs(&inner).await })
    }

    fn cron_job(&self, id: String) -> StoreFuture<'_, Option<String>> {
        self.run(move |inner| async move { jobs::cron_job(&inner, &id).await })
    }

    fn cron_put(&self, id: String, created_at: i64, job: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move {
            jobs::exec(
                &inner,
                "INSERT INTO acp_cron_jobs (id, created_at, job) VALUES ($1, $2, $3)",
                &[&id, &created_at, &job],
            )
            .await
            .map(drop)
        })
    }

    fn cron_replace(&self, id: String, job: String) -> StoreFuture<'_, bool> {
        self.run(move |inner| async move {
            Ok(jobs::exec(&inner, "UPDATE acp_cron_jobs SET job = $2 WHERE id = $1", &[&id, &job]).await? == 1)
        })
    }

    fn cron_remove(&self, id: String) -> StoreFuture<'_, bool> {
        self.run(move |inner| async move { jobs::cron_remove(&inner, &id).await })
    }

    fn cron_claim(&self, id: String, slot: Option<i64>, run_id: String, at: i64, job: String) -> StoreFuture<'_, bool> {
        self.run(move |inner| async move { jobs::cron_claim(&inner, &id, slot, &run_id, at, &job).await })
    }

    fn cron_finish(&self, run: CronEnd) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move { jobs::cron_finish(&inner, &run).await })
    }

    fn cron_log(&self, id: String, run_id: String, at: i64, entry: String, job: String) -> StoreFuture<'_, ()> {
        self.run(move |inner| async move { jobs::cron_log(&inner, &id, &run_id, at, &entry, &job).await })
    }

    fn cron_unfinished(&self) -> StoreFuture<'_, Vec<Unfinished>> {
        self.run(move |inner| async move { jobs::cron_unfinished(&inner).await })
    }

    fn cron_runs(&self, query: CronRuns) -> StoreFuture<'_, (Vec<String>, u64)> {
        self.run(move |inner| async move { jobs::cron_runs(&inner, &query).await })
    }

    fn cron_sessions_before(&self, prefix: String, before: i64, limit: u64) -> StoreFuture<'_, Vec<String>> {
        self.run(move |inner| async move {
            let client = inner.client().await?;
            let rows = client
                .query(
                    "SELECT id FROM acp_sessions WHERE starts_with(id, $1) AND updated_at < $2 LIMIT $3",
                    &[&prefix, &before, &count(limit)],
                )
                .await
                .map_err(pg_err)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }
}
