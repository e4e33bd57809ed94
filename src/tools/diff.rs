//! Diffs of file changes: a unified diff for the model, and diff content for the editor — the whole
//! file when it is small, one entry per hunk (with context) when it is large.

use std::path::Path;
use std::time::Duration;

use similar::TextDiff;

use super::ToolContent;

/// Above this many bytes (old + new), the editor gets hunks instead of whole files.
const WHOLE_FILE_LIMIT: usize = 256 * 1024;
const CONTEXT: usize = 3;

fn text_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, str> {
    similar::TextDiffConfig::default().timeout(Duration::from_secs(2)).diff_lines(old, new)
}

/// A unified diff (`--- a/path`, `+++ b/path`, `@@` hunks).
pub fn unified(display_path: &str, old: &str, new: &str) -> String {
    let diff = text_diff(old, new);
    diff.unified_diff()
        .context_radius(CONTEXT)
        .header(&format!("a/{display_path}"), &format!("b/{display_path}"))
        .to_string()
}

/// What the editor shows for a change of `path` from `old` (`None`: a new file) to `new`.
pub fn contents(path: &Path, old: Option<&str>, new: &str) -> Vec<ToolContent> {
    let Some(old) = old else {
        return vec![ToolContent::Diff { path: path.to_path_buf(), old_text: None, new_text: new.to_owned() }];
    };
    if old.len() + new.len() <= WHOLE_FILE_LIMIT {
        return vec![ToolContent::Diff {
            path: path.to_path_buf(),
            old_text: Some(old.to_owned()),
            new_text: new.to_owned(),
        }];
    }
    let diff = text_diff(old, new);
    diff.grouped_ops(CONTEXT)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let old_text: String = old_range.filter_map(|i| diff.old_slice(i)).collect();
            let new_text: String = new_range.filter_map(|i| diff.new_slice(i)).collect();
            Some(ToolContent::Diff { path: path.to_path_buf(), old_text: Some(old_text), new_text })
        })
        .collect()
}

/// The first changed line (1-based) in `new`, for the editor to follow.
pub fn first_changed_line(old: &str, new: &str) -> Option<u32> {
    let diff = text_diff(old, new);
    diff.ops()
        .iter()
        .find(|op| op.tag() != similar::DiffTag::Equal)
        .and_then(|op| u32::try_from(op.new_range().start + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn unified_diff_for_the_model() {
        let d = unified("src/a.rs", "a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d, "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
    }

    #[test]
    fn small_files_whole_new_files_without_old_text() {
        let p = PathBuf::from("/w/a.txt");
        assert_eq!(
            contents(&p, None, "x\n"),
            vec![ToolContent::Diff { path: p.clone(), old_text: None, new_text: "x\n".into() }]
        );
        assert_eq!(
            contents(&p, Some("a\n"), "b\n"),
            vec![ToolContent::Diff { path: p, old_text: Some("a\n".into()), new_text: "b\n".into() }]
        );
    }

    #[test]
    fn large_files_get_one_entry_per_hunk() {
        let old: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 100\n", "line one hundred\n").replace("line 30000\n", "");
        let parts = contents(Path::new("/w/big"), Some(&old), &new);
        assert_eq!(parts.len(), 2);
        match &parts[0] {
            ToolContent::Diff { old_text: Some(o), new_text, .. } => {
                assert_eq!(o, "line 97\nline 98\nline 99\nline 100\nline 101\nline 102\nline 103\n");
                assert!(new_text.contains("line one hundred\n"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(first_changed_line(&old, &new), Some(101));
    }
}
