//! Diffs of file changes, computed once per change: content for the editor (the whole file when it
//! is small, one entry per hunk with context when it is large), the first changed line for the
//! editor to follow, and a unified diff for the model.

use std::path::Path;
use std::time::Duration;

use similar::TextDiff;

use super::ToolContent;

/// Above this many bytes (old + new), the editor gets hunks instead of whole files.
const WHOLE_FILE_LIMIT: usize = 256 * 1024;
const CONTEXT: usize = 3;

/// Everything shown about one file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What the editor shows.
    pub contents: Vec<ToolContent>,
    /// The first changed line (1-based) in the new text.
    pub first_line: Option<u32>,
    /// A unified diff (`--- a/path`, `+++ b/path`, `@@` hunks) for the model.
    pub unified: String,
}

/// Describes the change of `path` (shown as `display`) from `old` (`None`: a new file) to `new`.
pub fn change(path: &Path, display: &str, old: Option<&str>, new: &str) -> Change {
    let diff: TextDiff<'_, '_, str> =
        similar::TextDiffConfig::default().timeout(Duration::from_secs(2)).diff_lines(old.unwrap_or(""), new);
    let unified = diff
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&format!("a/{display}"), &format!("b/{display}"))
        .to_string();
    let first_line = diff
        .ops()
        .iter()
        .find(|op| op.tag() != similar::DiffTag::Equal)
        .and_then(|op| u32::try_from(op.new_range().start + 1).ok());
    let contents = match old {
        None => vec![ToolContent::Diff { path: path.to_path_buf(), old_text: None, new_text: new.to_owned() }],
        Some(old) if old.len() + new.len() <= WHOLE_FILE_LIMIT => {
            vec![ToolContent::Diff {
                path: path.to_path_buf(),
                old_text: Some(old.to_owned()),
                new_text: new.to_owned(),
            }]
        }
        Some(_) => diff
            .grouped_ops(CONTEXT)
            .iter()
            .filter_map(|group| {
                let (first, last) = (group.first()?, group.last()?);
                let old_range = first.old_range().start..last.old_range().end;
                let new_range = first.new_range().start..last.new_range().end;
                let old_text: String = old_range.filter_map(|i| diff.old_slice(i)).collect();
                let new_text: String = new_range.filter_map(|i| diff.new_slice(i)).collect();
                Some(ToolContent::Diff { path: path.to_path_buf(), old_text: Some(old_text), new_text })
            })
            .collect(),
    };
    Change { contents, first_line, unified }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn unified_diff_for_the_model() {
        let c = change(Path::new("/w/src/a.rs"), "src/a.rs", Some("a\nb\nc\n"), "a\nB\nc\n");
        assert_eq!(c.unified, "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        assert_eq!(c.first_line, Some(2));
    }

    #[test]
    fn small_files_whole_new_files_without_old_text() {
        let p = PathBuf::from("/w/a.txt");
        assert_eq!(
            change(&p, "a.txt", None, "x\n").contents,
            vec![ToolContent::Diff { path: p.clone(), old_text: None, new_text: "x\n".into() }]
        );
        assert_eq!(
            change(&p, "a.txt", Some("a\n"), "b\n").contents,
            vec![ToolContent::Diff { path: p, old_text: Some("a\n".into()), new_text: "b\n".into() }]
        );
    }

    #[test]
    fn large_files_get_one_entry_per_hunk() {
        let old: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 100\n", "line one hundred\n").replace("line 30000\n", "");
        let c = change(Path::new("/w/big"), "big", Some(&old), &new);
        assert_eq!(c.contents.len(), 2);
        match &c.contents[0] {
            ToolContent::Diff { old_text: Some(o), new_text, .. } => {
                assert_eq!(o, "line 97\nline 98\nline 99\nline 100\nline 101\nline 102\nline 103\n");
                assert!(new_text.contains("line one hundred\n"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.first_line, Some(101));
        assert!(c.unified.contains("-line 30000\n"));
    }
}
