//! The gateway's idempotency keys (`chat.send`, `agent`, `send`), kept in the store so that a
//! retry after a restart finds the run or delivery it asked for and starts nothing again: claimed
//! atomically, ended with how it went, forgotten when what it asked for failed, and kept a day.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now_ms};

/// How long an idempotency key is kept.
pub const KEY_KEPT_MS: i64 = 24 * 60 * 60 * 1000;
/// Idempotency keys kept, at most (the oldest go first).
pub const KEYS_KEPT: i64 = 100_000;

/// What the store knows of an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub session: String,
    /// When what it asked for ended (`None`: not recorded as ended — its process stopped first).
    pub ended_at: Option<i64>,
    /// How it ended, as its surface recorded it (JSON).
    pub outcome: Option<String>,
}

impl Store {
    /// Claims idempotency key `key` for a request on `session`: `None` if it is new (it is
    /// recorded now, atomically), else what was recorded of it. Keys older than a day go.
    pub fn claim_key(&self, key: &str, session: &str) -> Result<Option<KeyRecord>, StoreError> {
        let db = self.db();
        let now = now_ms();
        let inserted = db.execute(
            "INSERT OR IGNORE INTO request_keys (key, session, created_at) VALUES (?1, ?2, ?3)",
            params![key, session, now],
        )?;
        if inserted == 1 {
            // Now and then, the old ones go (by age, and past the most kept).
            if fastrand::u8(..) == 0 {
                db.execute("DELETE FROM request_keys WHERE created_at < ?1", [now - KEY_KEPT_MS])?;
                db.execute(
                    "DELETE FROM request_keys WHERE key IN (SELECT key FROM request_keys ORDER BY created_at DESC \
                     LIMIT -1 OFFSET ?1)",
                    [KEYS_KEPT],
                )?;
            }
            return Ok(None);
        }
        Ok(db
            .query_row(
                "SELECT session, ended_at, outcome FROM request_keys WHERE key = ?1 AND created_at >= ?2",
                params![key, now - KEY_KEPT_MS],
                |r| Ok(KeyRecord { session: r.get(0)?, ended_at: r.get(1)?, outcome: r.get(2)? }),
            )
            .optional()?)
    }

    /// What was recorded of idempotency key `key`, if it is kept.
    pub fn key(&self, key: &str) -> Result<Option<KeyRecord>, StoreError> {
        Ok(self
            .db()
            .query_row(
                "SELECT session, ended_at, outcome FROM request_keys WHERE key = ?1 AND created_at >= ?2",
                params![key, now_ms() - KEY_KEPT_MS],
                |r| Ok(KeyRecord { session: r.get(0)?, ended_at: r.get(1)?, outcome: r.get(2)? }),
            )
            .optional()?)
    }

    /// Forgets idempotency key `key` (what it asked for failed, and may be asked for again).
    pub fn forget_key(&self, key: &str) -> Result<(), StoreError> {
        self.db().execute("DELETE FROM request_keys WHERE key = ?1", [key])?;
        Ok(())
    }

    /// What idempotency key `key` asked for ended: how (JSON).
    pub fn end_key(&self, key: &str, outcome: &str) -> Result<(), StoreError> {
        self.db().execute(
            "UPDATE request_keys SET ended_at = ?2, outcome = ?3 WHERE key = ?1",
            params![key, now_ms(), outcome],
        )?;
        Ok(())
    }
}
