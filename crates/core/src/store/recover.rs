//! Sessions a stopped process left behind mid-turn: a prompt saved, its turn never ended (the
//! process was killed during it). They are listed — a saved prompt is the user's work — titled
//! by their first prompt, whatever surface made them.

use std::path::Path;

use rusqlite::params;

use super::transcript::{self, Transcript};
use super::{Store, StoreError, made_up};
use crate::history::record::Record;

impl Store {
    /// Lists the sessions a stopped process left unlisted mid-turn: sessions the model never
    /// answered in (so not listed yet) whose transcript ends in a user turn that never ended —
    /// their process was killed during their first run — and left-over transcripts of made-up
    /// ids in that state. A saved prompt is the user's work: it is listed after any crash. Those
    /// open in a process (still running) are left alone. Returns how many were listed.
    pub fn list_interrupted(&self) -> Result<usize, StoreError> {
        let unlisted: Vec<String> = self
            .db()
            .prepare("SELECT id FROM sessions WHERE prompted = 0")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut listed = 0;
        for id in unlisted {
            let path = self.transcript_path(&id);
            let Ok(lock) = Transcript::open(&path) else { continue };
            if let Some(title) = interrupted_turn(&path) {
                self.db().execute(
                    "UPDATE sessions SET prompted = 1, title = COALESCE(title, ?2) WHERE id = ?1",
                    params![&id, title],
                )?;
                tracing::info!(session = id, "listed a session whose process stopped during its first turn");
                listed += 1;
            }
            drop(lock);
        }
        let Ok(entries) = std::fs::read_dir(self.home.join("sessions")) else { return Ok(listed) };
        let indexed: std::collections::HashSet<String> =
            self.db().prepare("SELECT id FROM sessions")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            if !made_up(id) || indexed.contains(id) {
                continue;
            }
            let Ok(lock) = Transcript::open(&entry.path()) else { continue };
            if let Some(title) = interrupted_turn(&entry.path())
                && self.index_left_over(id)?.is_some()
            {
                self.db().execute(
                    "UPDATE sessions SET prompted = 1, title = COALESCE(title, ?2) WHERE id = ?1",
                    params![id, title],
                )?;
                listed += 1;
            }
            drop(lock);
        }
        Ok(listed)
    }
}

/// Whether the transcript at `path` ends inside a turn (a prompt saved, its end never written):
/// `Some` with the title its first prompt gives the session.
fn interrupted_turn(path: &Path) -> Option<Option<String>> {
    let records = transcript::open_records(path).ok()?;
    let (mut open, mut title) = (false, None);
    for record in records {
        match record {
            Record::User { blocks, .. } => {
                open = true;
                if title.is_none() {
                    title = Some(crate::history::input::title_of(&blocks));
                }
            }
            Record::End { .. } => open = false,
            _ => {}
        }
    }
    open.then(|| title.flatten())
}
