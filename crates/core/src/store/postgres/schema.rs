//! The PostgreSQL store's tables, versioned like the SQLite ones: `acp_schema` says how many of
//! [`MIGRATIONS`] have run, and gateways starting at once take turns under an advisory lock.

use super::{Inner, pg_err};
use crate::store::StoreError;

/// Migrations, in order. Every table is named `acp_…`, so the store can share a database.
const MIGRATIONS: &[&str] = &[
    // Sessions: the index row as SQLite keeps it, and who holds it: `owner` (a gateway process),
    // `epoch` (which of its openings), until `lease_until`. Ids sort bytewise (`C`), as in SQLite.
    "CREATE TABLE acp_sessions (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        cwd TEXT NOT NULL,
        additional_dirs TEXT NOT NULL DEFAULT '[]',
        title TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        model TEXT NOT NULL,
        mode TEXT NOT NULL,
        reasoning TEXT,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        context_tokens BIGINT NOT NULL DEFAULT 0,
        parent_id TEXT,
        origin TEXT NOT NULL DEFAULT 'acp',
        prompted BOOLEAN NOT NULL DEFAULT FALSE,
        owner TEXT,
        epoch BIGINT NOT NULL DEFAULT 0,
        lease_until TIMESTAMPTZ
    );
    CREATE INDEX acp_sessions_by_update ON acp_sessions (updated_at DESC, id DESC) WHERE prompted;
    CREATE INDEX acp_sessions_by_cwd ON acp_sessions (cwd, updated_at DESC, id DESC) WHERE prompted;
    CREATE INDEX acp_sessions_by_owner ON acp_sessions (owner) WHERE owner IS NOT NULL;
    -- A transcript: one row per record, in order.
    CREATE TABLE acp_records (
        session_id TEXT COLLATE \"C\" NOT NULL REFERENCES acp_sessions (id) ON DELETE CASCADE ON UPDATE CASCADE,
        seq BIGINT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE acp_request_keys (
        key TEXT PRIMARY KEY,
        session TEXT NOT NULL DEFAULT '',
        created_at BIGINT NOT NULL,
        ended_at BIGINT,
        outcome TEXT
    );
    CREATE INDEX acp_request_keys_by_age ON acp_request_keys (created_at);
    CREATE TABLE acp_cron_jobs (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        job TEXT NOT NULL
    );
    CREATE TABLE acp_cron_runs (
        seq BIGSERIAL PRIMARY KEY,
        job_id TEXT NOT NULL,
        slot BIGINT,
        run_id TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        ended_at BIGINT,
        status TEXT,
        entry TEXT,
        UNIQUE (job_id, slot)
    );
    CREATE INDEX acp_cron_runs_by_job ON acp_cron_runs (job_id, seq);
    CREATE INDEX acp_cron_runs_by_end ON acp_cron_runs (ended_at);
    -- What one gateway of several does (a channel's poller): held by lease, as sessions are.
    CREATE TABLE acp_leases (
        name TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        lease_until TIMESTAMPTZ NOT NULL
    );",
];

/// An arbitrary key for `pg_advisory_xact_lock`: acp's migrations.
const MIGRATION_LOCK: i64 = 0x0061_6370_5f6d_6967;

/// Brings the schema up to date, once, whichever gateway gets there first.
pub(super) async fn migrate(inner: &Inner) -> Result<(), StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    // The lock first: two gateways creating the table at once would collide in the catalog.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(pg_err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS acp_schema (version INTEGER NOT NULL)").await.map_err(pg_err)?;
    let version: i32 = match tx.query_opt("SELECT version FROM acp_schema", &[]).await.map_err(pg_err)? {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO acp_schema (version) VALUES (0)", &[]).await.map_err(pg_err)?;
            0
        }
    };
    let known = MIGRATIONS.len() as i32;
    if version > known {
        return Err(StoreError(format!(
            "the PostgreSQL store is from a newer acp (schema {version}, this one knows {known}); upgrade acp"
        )));
    }
    for sql in MIGRATIONS.iter().skip(usize::try_from(version).unwrap_or(0)) {
        tx.batch_execute(sql).await.map_err(pg_err)?;
    }
    if version < known {
        tx.execute("UPDATE acp_schema SET version = $1", &[&known]).await.map_err(pg_err)?;
    }
    tx.commit().await.map_err(pg_err)
}
