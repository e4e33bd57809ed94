//! The launcher: `acp __sandbox [--network] [--no-namespaces] [--write PATH]… [--hide PATH]… [--unset NAME]… --
//! PROGRAM ARGS…`.
//!
//! Runs in a fresh single-threaded process (before any runtime starts), so it may change its own
//! namespaces and confine itself, then starts the command as its child and passes on its exit
//! status. It writes nothing to stdout (the command's output is the command's); its own failures
//! go to stderr, and the command is then not run (exit status 125).
//!
//! Order matters: namespaces first (user, PID, network — they need the process unconfined), then
//! Landlock on the launcher itself (inherited by the command across `exec`), then the command.
//! The launcher dies with the agent (parent-death signal) and the command dies with the launcher;
//! as the first process of its PID namespace, the command takes everything it started with it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The newest Landlock ABI the rules are written for; older kernels get what they support.
const TARGET_ABI: ABI = ABI::V6;

/// Exit status when the sandbox could not be set up and the command did not run.
pub const SETUP_FAILED: u8 = 125;

/// Device files every program expects to write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

#[derive(Debug, Default, PartialEq)]
struct Spec {
    network: bool,
    no_namespaces: bool,
    writable: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    unset: Vec<OsString>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Spec, String> {
    let mut spec = Spec::default();
    loop {
        let Some(arg) = args.next() else { return Err("no command given".into()) };
        match arg.to_str() {
            Some("--network") => spec.network = true,
            Some("--no-namespaces") => spec.no_namespaces = true,
            Some("--write") => spec.writable.push(args.next().ok_or("--write needs a path")?.into()),
            Some("--hide") => spec.hidden.push(args.next().ok_or("--hide needs a path")?.into()),
            Some("--unset") => spec.unset.push(args.next().ok_or("--unset needs a name")?),
            Some("--") => break,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    spec.program = args.next().ok_or("no command given")?;
    spec.args = args.collect();
    Ok(spec)
}

/// The launcher's `main`; `args` are those after [`LAUNCHER_ARG`](super::LAUNCHER_ARG).
#[allow(clippy::print_stderr)]
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("acp sandbox: {e}; the command was not run");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn run(args: impl Iterator<Item = OsString>) -> Result<ExitCode, String> {
    use rustix::process::{Signal, getppid, set_parent_process_death_signal};
    let spec = parse(args)?;
    // Die with the agent. (If it is already gone, do not start anything.)
    let parent = getppid();
    set_parent_process_death_signal(Some(Signal::KILL)).map_err(|e| format!("parent-death signal: {e}"))?;
    if getppid() != parent {
        return Err("the agent is gone".into());
    }
    let isolated = !spec.no_namespaces && enter_namespaces(spec.network).is_ok();
    if !isolated {
        // Orphans of the command come to the launcher, which ends them with the command.
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
    let scratch = scratch_dir()?;
    let mut writable = spec.writable.clone();
    writable.push(scratch.clone());
    let confined = confine(&writable, &spec.hidden, !spec.network && !isolated);
    let result = confined.and_then(|()| run_command(&spec, &scratch, isolated));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// A directory of the command's own under the temp dir; `TMPDIR` points there.
fn scratch_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    for _ in 0..8 {
        let dir = base.join(format!("acp-exec-{}-{:08x}", std::process::id(), fastrand::u32(..)));
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("could not create a scratch directory in {}: {e}", base.display())),
        }
    }
    Err(format!("could not create a scratch directory in {}", base.display()))
}

fn run_command(spec: &Spec, scratch: &Path, isolated: bool) -> Result<ExitCode, String> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    // The agent ends a command with SIGTERM to its process group, then SIGKILL. The launcher stays
    // for the first (so the command's status still comes back) and cannot ignore the second.
    let ignored = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        let _ = signal_hook::flag::register(signal, ignored.clone());
    }
    let mut command = std::process::Command::new(&spec.program);
    command.args(&spec.args).env("TMPDIR", scratch);
    for name in &spec.unset {
        command.env_remove(name);
    }
    // SAFETY: the launcher has one thread, so the forked child can run anything; it only makes one
    // system call (prctl).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            Ok(())
        });
    }
    let mut child =
        command.spawn().map_err(|e| format!("could not start {}: {e}", Path::new(&spec.program).display()))?;
    let status = child.wait().map_err(|e| format!("waiting for the command: {e}"))?;
    if !isolated {
        kill_descendants();
    }
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// Ends everything still running under the launcher (orphans reparented to it as subreaper).
fn kill_descendants() {
    loop {
        let children = children_of(std::process::id());
        if children.is_empty() {
            return;
        }
        for pid in children {
            if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        // Reap them; their own children then come to the launcher and are found next round.
        while rustix::process::wait(rustix::process::WaitOptions::empty()).is_ok_and(|s| s.is_some()) {}
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// New user and PID namespaces (and a network namespace with only a loopback, when the network
/// is off), with the caller's own user and group ids mapped so files keep their owners.
fn enter_namespaces(network: bool) -> Result<(), String> {
    use rustix::thread::UnshareFlags;
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let mut flags = UnshareFlags::NEWUSER | UnshareFlags::NEWPID;
    if !network {
        flags |= UnshareFlags::NEWNET;
    }
    // SAFETY: the flags do not include `FILES` (the only unsafe part: threads sharing a file
    // table), and the launcher has a single thread.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(|e| format!("unshare: {e}"))?;
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
    if !network {
        // Tests and local servers inside the sandbox may still talk to themselves.
        let _ = loopback_up();
    }
    Ok(())
}

/// `ip link set lo up` in the new network namespace.
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: plain system calls on a socket this function owns, with a zeroed `ifreq` whose
    // name is set within bounds.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if result == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if result == 0 { Ok(()) } else { Err(error) }
    }
}

/// The Landlock ABI the kernel offers, or why there is none.
#[allow(unsafe_code)]
pub fn landlock_abi() -> Result<u8, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attributes (null, size 0) and returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version > 0 {
        return Ok(u8::try_from(version).unwrap_or(u8::MAX));
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            Err("Landlock is built into this kernel but not enabled (boot with `lsm=…,landlock`)".into())
        }
        _ => Err("this kernel has no Landlock (Linux 5.13 or later is needed)".into()),
    }
}

/// Confines the launcher (and so the command): `writable` may be changed, everything else read,
/// `hidden` neither; with `block_tcp`, no TCP connect or bind.
fn confine(writable: &[PathBuf], hidden: &[PathBuf], block_tcp: bool) -> Result<(), String> {
    let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
    let read = AccessFs::from_read(TARGET_ABI);
    let write = AccessFs::from_write(TARGET_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(fail)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(fail)?;
    if block_tcp {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(fail)?;
    }
    let mut created = ruleset.create().map_err(fail)?;
    // The hidden paths as they really are (a link to `~/.ssh` is `~/.ssh`).
    let holes: Vec<PathBuf> = hidden.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let mut rules = Rules { ruleset: &mut created, holes: &holes };
    rules.cover(Path::new("/"), read, AccessFs::ReadDir.into(), 0);
    rules.add(Path::new("/dev"), read | AccessFs::IoctlDev);
    for root in writable {
        if let Ok(root) = root.canonicalize() {
            rules.cover(&root, read | write, BitFlags::EMPTY, 0);
        }
    }
    for device in DEVICES {
        rules.add(Path::new(device), AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev);
    }
    rules.add(Path::new("/dev/pts"), AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev | read);
    rules.add(Path::new("/dev/shm"), read | write);
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced on this system".into());
    }
    Ok(())
}

struct Rules<'a> {
    ruleset: &'a mut RulesetCreated,
    holes: &'a [PathBuf],
}

impl Rules<'_> {
    /// Grants `access` beneath `path`, except beneath the holes: a directory that contains one
    /// gets only `dir_access` itself, and each of its entries is covered in turn.
    fn cover(&mut self, path: &Path, access: BitFlags<AccessFs>, dir_access: BitFlags<AccessFs>, depth: usize) {
        self.cover_entry(path, None, access, dir_access, depth);
    }

    fn cover_entry(
        &mut self,
        path: &Path,
        is_dir: Option<bool>,
        access: BitFlags<AccessFs>,
        dir_access: BitFlags<AccessFs>,
        depth: usize,
    ) {
        if self.holes.iter().any(|h| path.starts_with(h)) {
            return;
        }
        if !self.holes.iter().any(|h| h.starts_with(path)) {
            self.add_known(path, access, is_dir);
            return;
        }
        if !dir_access.is_empty() {
            self.add_known(path, dir_access, Some(true));
        }
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for entry in entries.flatten() {
            let entry_path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_symlink() {
                // A rule on a link is a rule on its target: never one that holds a hole.
                let Ok(target) = entry_path.canonicalize() else { continue };
                if !self.holes.iter().any(|h| target.starts_with(h) || h.starts_with(&target)) {
                    self.add(&target, access);
                }
            } else if depth < 32 {
                self.cover_entry(&entry_path, Some(kind.is_dir()), access, dir_access, depth + 1);
            }
        }
    }

    fn add(&mut self, path: &Path, access: BitFlags<AccessFs>) {
        self.add_known(path, access, None);
    }

    /// Adds one rule; `is_dir` when already known (from the directory listing), else looked up.
    fn add_known(&mut self, path: &Path, access: BitFlags<AccessFs>, is_dir: Option<bool>) {
        let Ok(fd) = PathFd::new(path) else { return };
        let is_dir = is_dir.unwrap_or_else(|| std::fs::metadata(path).is_ok_and(|m| m.is_dir()));
        let access = if is_dir { access } else { access & AccessFs::from_file(TARGET_ABI) };
        if access.is_empty() {
            return;
        }
        if let Err(e) = (&mut *self.ruleset).add_rule(PathBeneath::new(fd, access)) {
            tracing::debug!(path = %path.display(), error = %e, "sandbox rule not added");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter().map(OsString::from).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn arguments() {
        let spec =
            parse(args(&["--write", "/w", "--hide", "/h", "--network", "--unset", "K", "--", "bash", "-c", "ls -- x"]))
                .unwrap();
        assert_eq!(spec.unset, vec![OsString::from("K")]);
        assert_eq!(spec.writable, vec![PathBuf::from("/w")]);
        assert_eq!(spec.hidden, vec![PathBuf::from("/h")]);
        assert!(spec.network);
        assert_eq!(spec.program, "bash");
        assert_eq!(spec.args, vec![OsString::from("-c"), OsString::from("ls -- x")]);
        assert!(parse(args(&["--write"])).is_err());
        assert!(parse(args(&["--",])).is_err());
        assert!(parse(args(&["--bogus", "--", "ls"])).is_err());
    }
}
