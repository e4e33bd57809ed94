//! `[memory]` in config.toml: the agent's memory files and their search (docs/memory.md).

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Whether the memory files are read into private sessions and the memory tools offered
    /// (default true).
    pub enabled: bool,
    /// More Markdown files, or directories of them, searched besides `MEMORY.md` and `memory/`
    /// (relative ones from the agent workspace).
    pub extra_paths: Vec<PathBuf>,
    /// `provider/model` of an OpenAI-compatible `/v1/embeddings` endpoint: search is then hybrid
    /// (BM25 and vectors); without it, BM25 alone.
    pub embeddings: Option<String>,
    /// Whether a session nearing compaction first gets a silent turn to save what should outlast
    /// it to the memory files (default true).
    pub flush: bool,
    /// How many tokens before the compaction threshold that turn comes (default 4,000; at most a
    /// quarter of the threshold, so a small window does not flush almost at once).
    pub flush_margin: u64,
    /// Whether `/new` and `/reset` in a session that reads the memory first save the ending
    /// conversation's last messages to `memory/` (default true).
    pub save_on_new: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            extra_paths: Vec::new(),
            embeddings: None,
            flush: true,
            flush_margin: 4_000,
            save_on_new: true,
        }
    }
}
