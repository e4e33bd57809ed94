//! Finding prompted sessions by what a client knows of them: a search over id and title, paged
//! by offset (the gateway's `sessions.list`), an id, or a title (`sessions.resolve`). Each is one
//! query; nothing is listed whole to be filtered in memory.

use rusqlite::{OptionalExtension, params};

use super::{SessionRow, Store, StoreError, row};

/// The part of a search that matched.
pub struct Found {
    pub rows: Vec<SessionRow>,
    /// How many match in all.
    pub total: u64,
}

/// Matches every prompted session whose id or title holds `?1` (lower-cased), or all when `?1`
/// is empty.
const MATCHES: &str = "prompted AND (?1 = '' OR instr(lower(id), ?1) > 0 OR instr(lower(coalesce(title, '')), ?1) > 0)";

impl Store {
    /// Prompted sessions whose id or title holds `search` (any case), most recently updated
    /// first: `limit` of them after the first `offset`, and how many match in all.
    pub fn find(&self, search: &str, offset: u64, limit: u64) -> Result<Found, StoreError> {
        self.recover_once();
        let search = search.to_lowercase();
        let db = self.db();
        let total: i64 = db
            .prepare_cached(&format!("SELECT count(*) FROM sessions WHERE {MATCHES}"))?
            .query_row(params![search], |r| r.get(0))?;
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows = db
            .prepare_cached(&format!(
                "SELECT * FROM sessions WHERE {MATCHES} ORDER BY updated_at DESC, id DESC LIMIT ?2 OFFSET ?3"
            ))?
            .query_map(params![search, clamp(limit), clamp(offset)], row)?
            .collect::<Result<_, _>>()?;
        Ok(Found { rows, total: u64::try_from(total).unwrap_or(0) })
    }

    /// Prompted session `id`.
    pub fn prompted(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let db = self.db();
        Ok(db
            .prepare_cached("SELECT * FROM sessions WHERE prompted AND id = ?1")?
            .query_row(params![id], row)
            .optional()?)
    }

    /// The most recently updated prompted session titled `title`.
    pub fn titled(&self, title: &str) -> Result<Option<SessionRow>, StoreError> {
        let db = self.db();
        Ok(db
            .prepare_cached(
                "SELECT * FROM sessions WHERE prompted AND title = ?1 ORDER BY updated_at DESC, id DESC LIMIT 1",
            )?
            .query_row(params![title], row)
            .optional()?)
    }
}
