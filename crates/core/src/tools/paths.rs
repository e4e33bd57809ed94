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

/// The real location of `path`: every symlink on the way resolved — dangling ones included, so a
/// link to a file that does not exist yet counts where it points — and the missing rest appended.
pub fn real(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    // The components still to walk, last first; links push their target's components.
    let mut todo: Vec<std::ffi::OsString> =
        normalize(path).components().rev().map(|c| c.as_os_str().to_os_string()).collect();
    let mut hops = 0;
    let mut exists = true;
    while let Some(part) = todo.pop() {
        match part.to_str() {
            Some("/") => {
                out = PathBuf::from("/");
                continue;
            }
            Some(".") => continue,
            Some("..") => {
                out.pop();
                continue;
            }
            _ => {}
        }
        out.push(&part);
        if !exists {
            continue;
        }
        match std::fs::symlink_metadata(&out) {
            Ok(meta) if meta.file_type().is_symlink() && hops < MAX_LINKS => {
                hops += 1;
                let Ok(target) = std::fs::read_link(&out) else { continue };
                out.pop();
                todo.extend(target.components().rev().map(|c| c.as_os_str().to_os_string()));
            }
            Ok(_) => {}
            Err(_) => exists = false,
        }
    }
    out
}

/// Links followed before a path is taken as it stands (the kernel's own limit).
const MAX_LINKS: usize = 40;

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

    #[test]
    fn dangling_links_count_where_they_point() {
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let roots = vec![ws.path().to_path_buf()];
        std::os::unix::fs::symlink(outside.path().join("new.txt"), ws.path().join("dangle")).unwrap();
        std::os::unix::fs::symlink("../../x/y", ws.path().join("rel")).unwrap();
        std::os::unix::fs::symlink("inner", ws.path().join("ok")).unwrap();
        std::os::unix::fs::symlink("loop", ws.path().join("loop")).unwrap();
        assert_eq!(real(&ws.path().join("dangle")), real(outside.path()).join("new.txt"));
        assert!(!is_inside(&ws.path().join("dangle"), &roots));
        assert!(!is_inside(&ws.path().join("rel/z"), &roots));
        assert!(is_inside(&ws.path().join("ok/file"), &roots));
        assert!(is_inside(&ws.path().join("loop"), &roots), "a loop stays where it is");
    }
}
