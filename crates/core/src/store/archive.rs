//! A session moved aside under another id (a chat's session reset: the key starts a new
//! transcript, the old one stays listed under its new id): its transcript renamed (its first
//! line saying the new id) and its index row with it, while its writer's lock is held, so no
//! process writes it meanwhile.

use std::io::{BufRead, BufReader, Write};

use rusqlite::params;

use super::{Store, StoreError, transcript, valid_id};
use crate::history::record::Record;

impl Store {
    /// Moves closed session `id` to id `to`; `id` is then free for a new session.
    pub fn archive(&self, id: &str, to: &str) -> Result<(), StoreError> {
        if !valid_id(to) {
            return Err(StoreError(format!("`{}` is not a valid session id", to.escape_debug())));
        }
        let (from, dest) = (self.transcript_path(id), self.transcript_path(to));
        let err = |path: &std::path::Path, e: std::io::Error| StoreError(format!("{}: {e}", path.display()));
        // Held until the move is done: a process writing it would have refused us.
        let _writer = transcript::Transcript::open(&from)?;
        if dest.exists() {
            return Err(StoreError(format!("a session `{to}` exists already")));
        }
        std::fs::rename(&from, &dest).map_err(|e| err(&from, e))?;
        if let Err(e) = self.db().execute("UPDATE sessions SET id = ?2 WHERE id = ?1", params![id, to]) {
            let _ = std::fs::rename(&dest, &from);
            return Err(e.into());
        }
        if let Err(e) = rename_header(&dest, to) {
            tracing::warn!(error = %e, session = to, "the moved transcript still names its old id on its first line");
        }
        Ok(())
    }
}

/// Rewrites the transcript at `path` so that its first line names session `id`.
fn rename_header(path: &std::path::Path, id: &str) -> Result<(), StoreError> {
    let err = |e: std::io::Error| StoreError(format!("{}: {e}", path.display()));
    let mut reader = BufReader::new(std::fs::File::open(path).map_err(err)?);
    let mut first = String::new();
    reader.read_line(&mut first).map_err(err)?;
    let Ok(Record::Session { v, cwd, created_at, .. }) = serde_json::from_str::<Record>(first.trim_end()) else {
        return Ok(());
    };
    let header = serde_json::to_string(&Record::Session { v, id: id.to_owned(), cwd, created_at })
        .map_err(|e| StoreError(e.to_string()))?;
    let tmp = path.with_extension("jsonl.moving");
    let mut out = std::fs::File::create(&tmp).map_err(err)?;
    out.write_all(header.as_bytes()).and_then(|()| out.write_all(b"\n")).map_err(err)?;
    std::io::copy(&mut reader, &mut out).map_err(err)?;
    out.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
