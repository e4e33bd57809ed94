//! Taking a session for this process: creating it (held from the start), or opening one that is
//! free, whose holder stopped (its lease lapsed), or that this process left held — and starting
//! its writer.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::rows::Rows;
use super::{Inner, count, pg_err, session_row, text};
use crate::history::record::Record;
use crate::store::transcript::Transcript;
use crate::store::{CreateError, Opened, SessionRow, StoreError, valid_id};

impl Inner {
    pub(super) async fn create(self: &Arc<Self>, s: &SessionRow, settings: &Record) -> Result<Transcript, CreateError> {
        if !valid_id(&s.id) {
            return Err(CreateError::Store(StoreError(format!("`{}` is not a valid session id", s.id.escape_debug()))));
        }
        let (epoch, done) = self.reserve(&s.id).await.map_err(CreateError::Busy)?;
        match self.insert(s, settings, epoch).await {
            Ok(()) => Ok(Transcript::rows(Box::new(Rows::start(self.clone(), s.id.clone(), epoch, 2, done)))),
            Err(e) => {
                self.unreserve(&s.id, epoch);
                Err(e)
            }
        }
    }

    async fn insert(&self, s: &SessionRow, settings: &Record, epoch: i64) -> Result<(), CreateError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        let dirs = serde_json::to_string(&s.additional_dirs).unwrap_or_else(|_| "[]".into());
        let inserted = tx
            .execute(
                "INSERT INTO acp_sessions (id, cwd, additional_dirs, title, created_at, updated_at, model, mode,
                     reasoning, input_tokens, output_tokens, context_tokens, parent_id, origin, prompted,
                     owner, epoch, lease_until)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                     now() + make_interval(secs => $18))
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &s.id,
                    &s.cwd.to_string_lossy().as_ref(),
                    &dirs,
                    &s.title,
                    &s.created_at,
                    &s.updated_at,
                    &s.model,
                    &s.mode,
                    &s.reasoning,
                    &count(s.input_tokens),
                    &count(s.output_tokens),
                    &count(s.context_tokens),
                    &s.parent_id,
                    &s.origin,
                    &s.prompted,
                    &self.owner,
                    &epoch,
                    &self.lease_secs(),
                ],
            )
            .await
            .map_err(pg_err)?;
        if inserted == 0 {
            return Err(CreateError::Exists);
        }
        let header = crate::store::header(s);
        let texts = [text(&header)?, text(settings)?];
        tx.execute(
            "INSERT INTO acp_records (session_id, seq, record) VALUES ($1, 0, $2), ($1, 1, $3)",
            &[&s.id, &texts[0], &texts[1]],
        )
        .await
        .map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)?;
        Ok(())
    }
}

impl Inner {
    /// Takes session `id` for this process: free, held by no live process (its lease lapsed), or
    /// left held by this one. `None`: no such session.
    pub(super) async fn open(
        self: &Arc<Self>,
        id: &str,
        cwd: &Path,
        dirs: &[PathBuf],
    ) -> Result<Option<Opened>, StoreError> {
        if !valid_id(id) {
            return Ok(None);
        }
        let (epoch, done) = self.reserve(id).await?;
        match self.take(id, cwd, dirs, epoch).await {
            Ok(Some((row, records, next))) => {
                let writer = Transcript::rows(Box::new(Rows::start(self.clone(), id.to_owned(), epoch, next, done)));
                let replay = crate::history::replay::replay(records);
                for record in &replay.repair {
                    writer.record(record);
                }
                Ok(Some(Opened { row, replay, writer }))
            }
            Ok(None) => {
                self.unreserve(id, epoch);
                Ok(None)
            }
            Err(e) => {
                self.unreserve(id, epoch);
                Err(e)
            }
        }
    }

    async fn take(
        &self,
        id: &str,
        cwd: &Path,
        dirs: &[PathBuf],
        epoch: i64,
    ) -> Result<Option<(SessionRow, Vec<Record>, i64)>, StoreError> {
        let client = self.client().await?;
        let taken = client
            .query_opt(
                "WITH before AS (SELECT owner FROM acp_sessions WHERE id = $1 FOR UPDATE)
                 UPDATE acp_sessions s SET owner = $2, epoch = $3, lease_until = now() + make_interval(secs => $4)
                 FROM before
                 WHERE s.id = $1 AND (s.owner IS NULL OR s.owner = $2 OR s.lease_until < now())
                 RETURNING s.*, before.owner AS previous",
                &[&id, &self.owner, &epoch, &self.lease_secs()],
            )
            .await
            .map_err(pg_err)?;
        let Some(taken) = taken else {
            let holder =
                client.query_opt("SELECT owner FROM acp_sessions WHERE id = $1", &[&id]).await.map_err(pg_err)?;
            return match holder {
                None => Ok(None),
                Some(h) => Err(StoreError(format!(
                    "the session is open on another gateway ({}); it moves here once that one closes it or stops",
                    h.get::<_, Option<String>>(0).unwrap_or_default()
                ))),
            };
        };
        let row = session_row(&taken);
        if let Some(previous) = taken.get::<_, Option<String>>("previous").filter(|p| *p != self.owner) {
            tracing::info!(session = %id, from = %previous, "took the session over from a gateway whose lease lapsed");
        }
        let (records, next) = self.records(&client, id).await?;
        if row.cwd != cwd || row.additional_dirs != dirs {
            let dirs = serde_json::to_string(dirs).unwrap_or_else(|_| "[]".into());
            if let Err(e) = client
                .execute(
                    "UPDATE acp_sessions SET cwd = $2, additional_dirs = $3 WHERE id = $1",
                    &[&id, &cwd.to_string_lossy().as_ref(), &dirs],
                )
                .await
            {
                tracing::warn!(session = %id, error = %pg_err(e), "could not record the session's new working directory");
            }
        }
        Ok(Some((row, records, next)))
    }
}
