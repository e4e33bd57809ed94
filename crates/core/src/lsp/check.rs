//! Diagnostics after an edit: the file is opened at the server before it changes (so its problems
//! then are known), the new text is sent, and the problems published for the new version that
//! were not there before are what the model is told — errors and warnings, matched by severity,
//! code and message wherever the edit moved them. Everything is bounded by `[lsp] wait_ms` (three
//! times that for a server still starting).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use lsp_types::Diagnostic;
use tokio_util::sync::CancellationToken;

use super::pool::Servers;
use super::server::Server;
use super::text;
use crate::tools::check::Checker;

/// Problems listed per file at most.
const MAX_LISTED: usize = 20;

impl Checker for Servers {
    fn warm(&self, path: &Path) {
        if let Some(server) = self.for_file(path) {
            server.ensure();
        }
    }

    fn before(&self, path: &Path, content: &str) {
        if let Some(server) = self.for_file(path) {
            server.sync(path, content);
        }
    }

    fn after<'a>(
        &'a self,
        written: &'a [(PathBuf, Option<String>)],
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let wait = self.config().lsp.wait;
            let checks = written.iter().map(|(path, content)| async move {
                match content {
                    // A deleted file: the server that has it forgets it (none is started for it).
                    None => {
                        self.held().iter().for_each(|s| s.close(path));
                        None
                    }
                    Some(content) => new_problems(&self.for_file(path)?, path, content, wait, cancel).await,
                }
            });
            let found: Vec<(PathBuf, String)> =
                futures_util::future::join_all(checks).await.into_iter().flatten().collect();
            if found.is_empty() {
                return None;
            }
            let roots = self.roots();
            let mut out = String::from("The language server reports new problems:");
            for (path, lines) in found {
                let shown = roots
                    .iter()
                    .find_map(|r| path.strip_prefix(r).ok())
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| path.display().to_string());
                out.push('\n');
                out.push_str(&lines.replace("\u{0}", &shown));
            }
            Some(out)
        })
    }
}

/// The problems of `path` after it became `content` that it did not have before, as lines (the
/// file's name left as NUL for the caller to fill in).
async fn new_problems(
    server: &Arc<Server>,
    path: &Path,
    content: &str,
    wait: std::time::Duration,
    cancel: &CancellationToken,
) -> Option<(PathBuf, String)> {
    // A server still starting (the session's first file of its language) gets up to three waits
    // to be ready, and its diagnostics one wait after that; a running one, one wait.
    let begun = tokio::time::Instant::now();
    if server.state() != super::server::State::Ready {
        server.ready(wait * 3, cancel).await;
    }
    let deadline = (tokio::time::Instant::now() + wait).clamp(begun + wait, begun + wait * 3);
    // What was wrong before: published for the version the server holds now.
    let before = match server.version(path) {
        Some(version) if server.content(path).as_deref() != Some(content) => {
            Some(server.wait_diagnostics(path, version, deadline, cancel).await)
        }
        Some(_) => None,
        None => Some(Some(Arc::new(Vec::new()))),
    };
    let version = server.sync(path, content);
    let after = server.wait_diagnostics(path, version, deadline, cancel).await?;
    let arrived = server.published_at(path);
    let fresh = match &before {
        Some(Some(before)) => fresh(before, &after),
        // The server had the new text already (a write of what was there): nothing changed.
        None => Vec::new(),
        // What was there before is not known: everything is shown, and said to be.
        Some(None) => after.iter().filter(|d| text::serious(d)).collect(),
    };
    let told = |what: &str| {
        if let Some(at) = arrived {
            tracing::debug!(target: "lsp", "{what} {} µs after the diagnostics came", at.elapsed().as_micros());
        }
    };
    let mut fresh = fresh;
    fresh.sort_by_key(|d| (d.range.start.line, d.range.start.character));
    if fresh.is_empty() {
        told("nothing new, known");
        return None;
    }
    let mut lines: Vec<String> =
        fresh.iter().take(MAX_LISTED).map(|d| text::diagnostic("\u{0}", d, Some(content))).collect();
    if fresh.len() > MAX_LISTED {
        lines.push(format!("… and {} more (`lsp` with action `diagnostics` lists them)", fresh.len() - MAX_LISTED));
    }
    if matches!(before, Some(None)) {
        lines.push("(some of these may have been there before the edit)".into());
    }
    told("new problems told");
    Some((path.to_owned(), lines.join("\n")))
}

/// The errors and warnings of `after` that `before` did not have (as many of each as it had
/// more).
pub fn fresh<'a>(before: &[Diagnostic], after: &'a [Diagnostic]) -> Vec<&'a Diagnostic> {
    let mut known: HashMap<_, usize> = HashMap::new();
    for d in before.iter().filter(|d| text::serious(d)) {
        *known.entry(text::identity(d)).or_default() += 1;
    }
    after
        .iter()
        .filter(|d| text::serious(d))
        .filter(|d| match known.get_mut(&text::identity(d)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{DiagnosticSeverity, Position, Range};

    fn d(line: u32, severity: DiagnosticSeverity, message: &str) -> Diagnostic {
        Diagnostic {
            range: Range { start: Position { line, character: 0 }, end: Position { line, character: 1 } },
            severity: Some(severity),
            message: message.into(),
            ..Diagnostic::default()
        }
    }

    #[test]
    fn only_new_errors_and_warnings_count_wherever_they_moved() {
        use DiagnosticSeverity as S;
        let before = [d(0, S::ERROR, "old"), d(3, S::WARNING, "twice")];
        let after = [
            d(5, S::ERROR, "old"),
            d(6, S::WARNING, "twice"),
            d(7, S::WARNING, "twice"),
            d(8, S::HINT, "unused"),
            d(9, S::ERROR, "new"),
        ];
        let fresh: Vec<(u32, &str)> =
            fresh(&before, &after).iter().map(|d| (d.range.start.line, &*d.message)).collect();
        assert_eq!(fresh, [(7, "twice"), (9, "new")]);
        assert!(super::fresh(&after, &before).is_empty());
    }
}
