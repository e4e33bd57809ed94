//! Paths from the model: resolved against the session's cwd, with Windows separators and `.`/`..`
//! normalised; and the workspace test, which follows symlinks so a link pointing out of the
//! workspace counts as outside.

use std::path::{Component, Path, PathBuf};

/// Resolves `raw` against `cwd`: backslashes become slashes, relative paths join the cwd, and `.`
/// and `..` are removed lexically (never above the root).
pub fn resolve(cwd: &Path, raw: &str) -> PathBuf {
    let raw = raw.trim();
    let unixy = raw.replace('\\', "/");
    let unixy = strip_file_uri(&unixy);
    let path = Path::new(unixy);
    let joined = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    normalize(&joined)
}

fn strip_file_uri(s: &str) -> &str {
    s.strip_prefix("file://").unwrap_or(s)
}

/// Removes `.` and resolves `..` without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The path as the user reads it: relative to `cwd` when inside it.
pub fn display(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// The real location of `path`: symlinks resolved for the part that exists; the rest appended.
pub fn real(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canon) = existing.canonicalize() {
            let mut out = canon;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return normalize(&out);
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return normalize(path),
        }
    }
}

/// Whether `path` (after following symlinks) lies inside one of `roots`.
pub fn is_inside(path: &Path, roots: &[PathBuf]) -> bool {
    let real_path = real(path);
    roots.iter().any(|root| real_path.starts_with(real(root)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_and_normalises() {
        let cwd = Path::new("/work/proj");
        let cases = [
            ("src/lib.rs", "/work/proj/src/lib.rs"),
            ("./src/../src/lib.rs", "/work/proj/src/lib.rs"),
            ("src\\main.rs", "/work/proj/src/main.rs"),
            ("..\\other\\x.txt", "/work/other/x.txt"),
            ("/etc/passwd", "/etc/passwd"),
            ("../../../../..", "/"),
            ("file:///work/proj/a.rs", "/work/proj/a.rs"),
            ("  spaced.txt ", "/work/proj/spaced.txt"),
        ];
        for (raw, want) in cases {
            assert_eq!(resolve(cwd, raw), PathBuf::from(want), "{raw}");
        }
    }

    #[test]
    fn display_is_relative_inside_the_cwd() {
        let cwd = Path::new("/work/proj");
        assert_eq!(display(cwd, Path::new("/work/proj/src/a.rs")), "src/a.rs");
        assert_eq!(display(cwd, Path::new("/work/proj")), ".");
        assert_eq!(display(cwd, Path::new("/etc/hosts")), "/etc/hosts");
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_outside() {
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("escape")).unwrap();
        let roots = vec![ws.path().to_path_buf()];
        assert!(is_inside(&ws.path().join("src/new_file.rs"), &roots));
        assert!(is_inside(&ws.path().join("not/yet/created.rs"), &roots));
        assert!(!is_inside(&ws.path().join("escape/secret.txt"), &roots));
        assert!(!is_inside(&resolve(ws.path(), "../x"), &roots));
        assert!(!is_inside(Path::new("/etc/passwd"), &roots));
    }
}
