//! How many processes a sandboxed command may run at once: a cgroup of its own with `pids.max`
//! where the agent may make one beneath its own (root, or a delegated cgroup v2 subtree with the
//! `pids` controller), else `RLIMIT_NPROC` inside the command's user namespace (counted for that
//! namespace alone; the launcher sets it). The agent makes the cgroup before the command starts
//! and removes it once the command has ended.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Processes (threads count) a command may run at once, unless configured.
pub const DEFAULT_MAX: u32 = 1024;

/// The cgroup directory new commands' cgroups go under, if this process may make them.
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(find_base).as_deref()
}

fn find_base() -> Option<PathBuf> {
    let base = find_usable()?;
    // Cgroups left by an agent that was killed before it could remove them (empty by now).
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let stale = name.to_str().and_then(|n| n.strip_prefix("acp-exec-")).and_then(|n| n.split('-').next());
            if let Some(pid) = stale.and_then(|p| p.parse::<u32>().ok())
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    Some(base)
}

fn find_usable() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v1: a `pids` hierarchy of its own.
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "pids") {
            let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
            if usable(&dir) {
                return Some(dir);
            }
        }
    }
    // cgroup v2: the `pids` controller enabled for this cgroup's children (a delegated subtree).
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let dir = Path::new(root).join(path.trim_start_matches('/'));
        let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        if enabled.split_whitespace().any(|c| c == "pids") && usable(&dir) {
            return Some(dir);
        }
    }
    None
}

/// Whether a cgroup with a limit can be made under `dir` (and removed).
fn usable(dir: &Path) -> bool {
    let probe = dir.join(format!("acp-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&probe).is_ok();
    let limited = made && std::fs::write(probe.join("pids.max"), "1").is_ok();
    if made {
        let _ = std::fs::remove_dir(&probe);
    }
    limited
}

/// A command's own cgroup, removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct Cgroup {
    pub dir: PathBuf,
}

impl Cgroup {
    /// A new cgroup allowing `max` processes, if this machine lets the agent make one.
    pub fn new(max: u32) -> Option<Self> {
        let base = base()?;
        for _ in 0..8 {
            let dir = base.join(format!("acp-exec-{}-{:08x}", std::process::id(), fastrand::u32(..)));
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    if std::fs::write(dir.join("pids.max"), max.to_string()).is_err() {
                        let _ = std::fs::remove_dir(&dir);
                        return None;
                    }
                    return Some(Self { dir });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// How the process limit is kept on this machine, for `/status`.
    pub fn how() -> &'static str {
        if base().is_some() { "a pids cgroup" } else { "RLIMIT_NPROC in its user namespace" }
    }
}

impl Drop for Cgroup {
    /// Removes the cgroup: at once if it is empty, else from a thread that retries while the
    /// command's last processes are reaped (they were killed with their PID namespace).
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        let dir = std::mem::take(&mut self.dir);
        std::thread::spawn(move || {
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_millis(25));
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    return;
                }
            }
            tracing::debug!(dir = %dir.display(), "a command's cgroup could not be removed");
        });
    }
}
