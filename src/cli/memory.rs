//! `acp memory …`: the agent's memory from the command line — `status` (the files and what the
//! index holds), `index` (bring the index up to date now), `search QUERY` (what `memory_search`
//! would answer). Output on stdout (`--json`: one object per line); problems on stderr, exit 1.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::json;

use crate::config::Config;
use crate::memory::Memory;
use crate::memory::embed::Embedder;

#[derive(clap::Subcommand, Debug)]
pub enum MemoryCommand {
    /// The memory files and what the index holds (brought up to date first).
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Brings the index up to date with the memory files now.
    Index {
        #[arg(long)]
        json: bool,
    },
    /// Searches the memory as the agent's `memory_search` does.
    Search {
        query: String,
        /// Most results.
        #[arg(long, default_value_t = 6)]
        max: usize,
        #[arg(long)]
        json: bool,
    },
}

/// `acp memory …`.
pub fn memory(command: MemoryCommand) -> ExitCode {
    let config = Config::load();
    if let Some(e) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp: {e}");
        return ExitCode::FAILURE;
    }
    let memory = Memory::of(&config);
    let embedder = Embedder::of(&config);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&memory, embedder, command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "acp: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    memory: &Memory,
    embedder: Option<Result<Embedder, String>>,
    command: MemoryCommand,
) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    let mut line = |text: String| writeln!(out, "{text}").map_err(|e| e.to_string());
    match command {
        MemoryCommand::Status { json } => {
            let status = memory.status().map_err(|e| e.to_string())?;
            // Hybrid search: the model, and how much of the memory has vectors (or why none can).
            let embeddings = match &embedder {
                None => None,
                Some(Ok(e)) => {
                    let (with, all) = memory.vector_counts(&e.name).map_err(|e| e.to_string())?;
                    Some((
                        e.name.clone(),
                        format!("{with} of {all} pieces embedded"),
                        json!({"model": e.name, "embedded": with, "pieces": all}),
                    ))
                }
                Some(Err(why)) => Some((String::new(), format!("not usable: {why}"), json!({"error": why}))),
            };
            if json {
                line(
                    json!({"workspace": memory.workspace(), "index": memory.index_path(), "files": status.counts.files,
                           "chunks": status.counts.chunks,
                           "paths": status.files.iter().map(|(p, s)| json!({"path": p, "bytes": s})).collect::<Vec<_>>(),
                           "skipped": status.skipped.iter().map(|(p, why)| json!({"path": p, "why": why})).collect::<Vec<_>>(),
                           "embeddings": embeddings.as_ref().map(|(_, _, j)| j.clone())})
                    .to_string(),
                )?;
                return Ok(());
            }
            line(format!("workspace  {}", memory.workspace().display()))?;
            line(format!("index      {}", memory.index_path().display()))?;
            line(format!("indexed    {} files, {} pieces", status.counts.files, status.counts.chunks))?;
            match &embeddings {
                Some((model, said, _)) if !model.is_empty() => line(format!("embeddings {model}: {said}"))?,
                Some((_, said, _)) => line(format!("embeddings {said}"))?,
                None => line("embeddings none (search by words alone)".into())?,
            }
            for (path, bytes) in &status.files {
                line(format!("  {path}  ({bytes} bytes)"))?;
            }
            for (path, why) in &status.skipped {
                line(format!("  left out: {path} ({why})"))?;
            }
        }
        MemoryCommand::Index { json } => {
            let started = std::time::Instant::now();
            let synced = memory.sync().map_err(|e| e.to_string())?;
            let words = format!(
                "{} added, {} changed, {} removed, {} unchanged",
                synced.added, synced.changed, synced.removed, synced.unchanged
            );
            let embedded = match &embedder {
                None => None,
                Some(Ok(embedder)) => Some(
                    memory
                        .embed_all(embedder)
                        .await
                        .map_err(|e| format!("{words}; the pieces could not all be embedded: {e}"))?,
                ),
                Some(Err(why)) => return Err(format!("{words}; nothing embedded: {why}")),
            };
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if json {
                line(
                    json!({"added": synced.added, "changed": synced.changed, "removed": synced.removed,
                           "unchanged": synced.unchanged, "skipped": synced.skipped.len(), "embedded": embedded,
                           "ms": ms})
                    .to_string(),
                )?;
            } else {
                let embedded = embedded.map(|n| format!(", {n} pieces embedded")).unwrap_or_default();
                line(format!(
                    "{} added, {} changed, {} removed, {} unchanged{embedded} ({ms:.1} ms)",
                    synced.added, synced.changed, synced.removed, synced.unchanged
                ))?;
                for (path, why) in &synced.skipped {
                    line(format!("left out: {path} ({why})"))?;
                }
            }
        }
        MemoryCommand::Search { query, max, json } => {
            let found = memory.find(embedder, &query, max.max(1), 0.0).await.map_err(|e| e.to_string())?;
            if let Some(note) = &found.note {
                let _ = writeln!(std::io::stderr(), "acp: {note}");
            }
            let hits = found.hits;
            for hit in &hits {
                if json {
                    line(
                        json!({"path": hit.path, "startLine": hit.start_line, "endLine": hit.end_line,
                               "bestLine": hit.best_line, "score": hit.score, "snippet": hit.snippet})
                        .to_string(),
                    )?;
                } else {
                    line(format!("{}:{}-{}  score {:.2}", hit.path, hit.start_line, hit.end_line, hit.score))?;
                    for text in hit.snippet.lines() {
                        line(format!("    {text}"))?;
                    }
                }
            }
            if hits.is_empty() && !json {
                line("no matches".into())?;
            }
        }
    }
    Ok(())
}
