//! The launcher: `acp __sandbox [--network] [--no-namespaces] [--write PATH]… [--hide PATH]…
//! [--sockets-in PATH]… [--unset NAME]… [--keep NAME]… [--max-procs N] [--cgroup DIR] -- PROGRAM
//! ARGS…`.
//!
//! Runs in a fresh single-threaded process (before any runtime starts), so it may change its own
//! namespaces and mounts, then starts the command as its child and passes on its exit status. It
//! writes nothing to stdout (the command's output is the command's); its own failures go to
//! stderr, and the command is then not run (exit status 125).
//!
//! Order matters: the command's cgroup first (joined as the agent's user), the host's Unix
//! sockets listed (in the host's network namespace), then namespaces (user, PID, mount, network —
//! they need the process unconfined), then mounts that hide the host's sockets, then the command:
//! in its child, as the first process of the new PID namespace, a fresh `/proc` is mounted,
//! Landlock is applied (built beforehand in the launcher; inherited by everything the command
//! starts), and, where neither a mount namespace nor Landlock can keep it from the host's Unix
//! sockets, a seccomp filter refuses new `AF_UNIX` sockets. The launcher dies with the agent
//! (parent-death signal) and the command dies with the launcher; as the first process of its PID
//! namespace, the command takes everything it started with it.

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The newest Landlock ABI the rules are written for; older kernels get what they support.
const TARGET_ABI: ABI = ABI::V9;

/// Exit status when the sandbox could not be set up and the command did not run.
pub const SETUP_FAILED: u8 = 125;

/// Device files every program expects to write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// Host sockets hidden at most (one bind mount each).
const MAX_HIDDEN_SOCKETS: usize = 4096;

#[derive(Debug, Default, PartialEq)]
struct Spec {
    network: bool,
    no_namespaces: bool,
    writable: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    /// Where the command may reach Unix sockets (the workspace's own): elsewhere the host's are
    /// hidden.
    sockets_in: Vec<PathBuf>,
    /// Variables withheld besides those whose names say they are credentials or sockets.
    unset: Vec<String>,
    /// Variables passed on whatever their names say (`[sandbox] env_allow`, the call's own).
    keep: Vec<String>,
    max_procs: Option<u64>,
    cgroup: Option<PathBuf>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Spec, String> {
    let mut spec = Spec::default();
    let text = |arg: Option<OsString>, what: &str| -> Result<String, String> {
        arg.ok_or_else(|| format!("{what} needs a value"))?
            .into_string()
            .map_err(|a| format!("{what}: {a:?} is not text"))
    };
    loop {
        let Some(arg) = args.next() else { return Err("no command given".into()) };
        match arg.to_str() {
            Some("--network") => spec.network = true,
            Some("--no-namespaces") => spec.no_namespaces = true,
            Some("--write") => spec.writable.push(args.next().ok_or("--write needs a path")?.into()),
            Some("--hide") => spec.hidden.push(args.next().ok_or("--hide needs a path")?.into()),
            Some("--sockets-in") => spec.sockets_in.push(args.next().ok_or("--sockets-in needs a path")?.into()),
            Some("--unset") => spec.unset.push(text(args.next(), "--unset")?),
            Some("--keep") => spec.keep.push(text(args.next(), "--keep")?),
            Some("--max-procs") => {
                let n = text(args.next(), "--max-procs")?;
                spec.max_procs = Some(n.parse().map_err(|_| format!("--max-procs: `{n}` is not a number"))?);
            }
            Some("--cgroup") => spec.cgroup = Some(args.next().ok_or("--cgroup needs a directory")?.into()),
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
    // Its cgroup holds the process limit; joined while the launcher is still the agent's user.
    let in_cgroup = spec.cgroup.as_ref().is_some_and(|dir| std::fs::write(dir.join("cgroup.procs"), "0").is_ok());
    // The host's sockets as this network namespace lists them (a new one lists none).
    let host_sockets = if spec.no_namespaces { Vec::new() } else { host_sockets() };
    let isolated = !spec.no_namespaces && enter_namespaces(spec.network).is_ok();
    // Hidden by the mount namespace where there is one (and where Landlock does not, below ABI
    // 9, restrict them itself); else no new Unix socket at all (seccomp).
    let hidden = isolated && hide_host_sockets(&host_sockets, &spec).is_ok();
    if !isolated {
        // Orphans of the command come to the launcher, which ends them with the command.
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
    if !in_cgroup
        && isolated
        && let Some(max) = spec.max_procs
    {
        // Counted for this user namespace alone, so other processes of the user do not count.
        // (Not for root, whom the kernel exempts: there the cgroup holds the limit.)
        let limit = rustix::process::Rlimit { current: Some(max), maximum: Some(max) };
        let _ = rustix::process::setrlimit(rustix::process::Resource::Nproc, limit);
    }
    let scratch = scratch_dir()?;
    let mut writable = spec.writable.clone();
    writable.push(scratch.clone());
    let unix_by_landlock = landlock_abi().is_ok_and(|abi| abi >= 9);
    let result = (if hidden || unix_by_landlock { Ok(None) } else { no_unix_sockets().map(Some) })
        .and_then(|seccomp| run_command(&spec, &scratch, &writable, isolated, seccomp));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// The pathname Unix sockets bound in this network namespace, as `/proc/net/unix` lists them
/// (the last column; abstract ones, `@…`, are left to Landlock's scope and the network
/// namespace).
fn host_sockets() -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else { return Vec::new() };
    let mut paths: Vec<PathBuf> = table.lines().skip(1).filter_map(socket_path).map(PathBuf::from).collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The path of one line of `/proc/net/unix` (`Num RefCount Protocol Flags Type St Inode Path`),
/// if it has one: what follows the seventh field.
fn socket_path(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for _ in 0..7 {
        let end = rest.find(' ')?;
        rest = rest[end..].trim_start_matches(' ');
    }
    rest.starts_with('/').then_some(rest)
}

/// In the command's mount namespace: every host socket outside `--sockets-in` covered by an empty
/// device (a connect is refused), and empty file systems over the per-user runtime directories
/// (`/run/user`, `$XDG_RUNTIME_DIR`), where sockets made after the command starts would appear.
fn hide_host_sockets(sockets: &[PathBuf], spec: &Spec) -> Result<(), String> {
    // Nothing mounted here propagates back to the host.
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    let own: Vec<PathBuf> = spec.sockets_in.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let writable: Vec<PathBuf> = spec.writable.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let mut runtime = vec![PathBuf::from("/run/user")];
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && !dir.starts_with("/run/user")
    {
        runtime.push(dir);
    }
    for dir in runtime {
        // Not where the command works or writes.
        let needed = |p: &PathBuf| p.starts_with(&dir) || dir.starts_with(p);
        if dir.is_dir() && !own.iter().any(needed) && !writable.iter().any(|w| w.starts_with(&dir)) {
            mount(Some("tmpfs"), &dir, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=755,size=64k"))?;
        }
    }
    use std::os::unix::fs::FileTypeExt as _;
    for socket in sockets.iter().take(MAX_HIDDEN_SOCKETS) {
        if own.iter().any(|o| socket.starts_with(o)) {
            continue;
        }
        // Only what is still a socket (a removed one's path may be a file of someone else's).
        if std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket()) {
            // A socket that cannot be covered (in a directory the user cannot reach, say) is one
            // the command cannot reach either.
            let _ = mount(Some("/dev/null"), socket, None, libc::MS_BIND, None);
        }
    }
    Ok(())
}

/// `mount(2)`.
#[allow(unsafe_code)]
fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = |s: &str| CString::new(s).map_err(|_| format!("{s:?} holds a NUL"));
    let target_c = CString::new(target.as_os_str().as_bytes()).map_err(|_| "a path holds a NUL".to_owned())?;
    let source = source.map(c).transpose()?;
    let fstype = fstype.map(c).transpose()?;
    let data = data.map(c).transpose()?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null where
    // mount(2) takes null.
    let done =
        unsafe { libc::mount(ptr(&source), target_c.as_ptr(), ptr(&fstype), flags, ptr(&data).cast::<libc::c_void>()) };
    if done == 0 { Ok(()) } else { Err(format!("mount {}: {}", target.display(), std::io::Error::last_os_error())) }
}

/// A seccomp filter refusing new `AF_UNIX` sockets (`EACCES`); `socketpair` (already connected,
/// to itself) still works.
fn no_unix_sockets() -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
    #[cfg(target_arch = "x86_64")]
    let arch = seccompiler::TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = seccompiler::TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    let arch = seccompiler::TargetArch::riscv64;
    let fail = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let unix =
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64).map_err(fail)?;
    let rules = [(libc::SYS_socket, vec![SeccompRule::new(vec![unix]).map_err(fail)?])].into_iter().collect();
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EACCES as u32), arch)
        .map_err(fail)?;
    filter.try_into().map_err(|e: seccompiler::BackendError| format!("seccomp: {e}"))
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

fn run_command(
    spec: &Spec,
    scratch: &Path,
    writable: &[PathBuf],
    isolated: bool,
    seccomp: Option<seccompiler::BpfProgram>,
) -> Result<ExitCode, String> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    // The agent ends a command with SIGTERM to its process group, then SIGKILL. The launcher stays
    // for the first (so the command's status still comes back) and cannot ignore the second.
    let ignored = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        let _ = signal_hook::flag::register(signal, ignored.clone());
    }
    let mut command = std::process::Command::new(&spec.program);
    command.args(&spec.args).env("TMPDIR", scratch);
    // No credential, and no way to a service outside through a socket.
    let own_vars: Vec<OsString> = std::env::vars_os().map(|(name, _)| name).collect();
    for name in super::env::names_withheld(own_vars.iter().map(OsString::as_os_str), &spec.unset, &spec.keep) {
        command.env_remove(name);
    }
    let block_tcp = !spec.network && !isolated;
    let (writable, confined) = (writable.to_vec(), Confined::from(spec));
    // SAFETY: the launcher has one thread, so the forked child may allocate; it mounts its
    // `/proc`, confines itself (the rules made after that mount, so they cover it) and execs.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if isolated {
                // The first process of the new PID namespace: a `/proc` of that namespace (other
                // processes' command lines and the host's are not shown). Where the kernel refuses
                // one (a /proc with masked paths, as in some containers), the host's stays.
                let _ = mount(
                    Some("proc"),
                    Path::new("/proc"),
                    Some("proc"),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                );
            }
            let status = confinement(&writable, &confined, block_tcp)
                .map_err(std::io::Error::other)?
                .restrict_self()
                .map_err(|e| std::io::Error::other(format!("Landlock: {e}")))?;
            if status.ruleset == RulesetStatus::NotEnforced {
                return Err(std::io::Error::other("Landlock is not enforced on this system"));
            }
            if let Some(filter) = &seccomp {
                seccompiler::apply_filter(filter).map_err(|e| std::io::Error::other(format!("seccomp: {e}")))?;
            }
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

/// New user, PID and mount namespaces (and a network namespace with only a loopback, when the
/// network is off), with the caller's own user and group ids mapped so files keep their owners.
fn enter_namespaces(network: bool) -> Result<(), String> {
    use rustix::thread::UnshareFlags;
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let mut flags = UnshareFlags::NEWUSER | UnshareFlags::NEWPID | UnshareFlags::NEWNS;
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

/// The command's Landlock ruleset (applied in its child): `writable` may be changed, everything
/// else read, `hidden` neither; Unix sockets reached by path only under `--sockets-in` (ABI ≥ 9);
/// no signals to, and no abstract sockets of, processes outside; with `block_tcp`, no TCP connect
/// or bind.
/// What the command's ruleset is made of, besides what it may write.
struct Confined {
    hidden: Vec<PathBuf>,
    sockets_in: Vec<PathBuf>,
}

impl From<&Spec> for Confined {
    fn from(spec: &Spec) -> Self {
        Self { hidden: spec.hidden.clone(), sockets_in: spec.sockets_in.clone() }
    }
}

fn confinement(writable: &[PathBuf], spec: &Confined, block_tcp: bool) -> Result<RulesetCreated, String> {
    let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
    let read = AccessFs::from_read(TARGET_ABI);
    // Writing a directory does not let a command reach the sockets in it (the temp dir's are the
    // host's: tmux, ssh-agent, X11).
    let write = AccessFs::from_write(TARGET_ABI) & !AccessFs::ResolveUnix;
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
    let holes: Vec<PathBuf> = spec.hidden.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let mut rules = Rules { ruleset: &mut created, holes: &holes };
    rules.cover(Path::new("/"), read, AccessFs::ReadDir.into(), 0);
    rules.add(Path::new("/dev"), read | AccessFs::IoctlDev);
    for root in writable {
        if let Ok(root) = root.canonicalize() {
            rules.cover(&root, read | write, BitFlags::EMPTY, 0);
        }
    }
    for root in &spec.sockets_in {
        if let Ok(root) = root.canonicalize() {
            rules.cover(&root, read | write | AccessFs::ResolveUnix, BitFlags::EMPTY, 0);
        }
    }
    for device in DEVICES {
        rules.add(Path::new(device), AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev);
    }
    rules.add(Path::new("/dev/pts"), AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev | read);
    rules.add(Path::new("/dev/shm"), read | write);
    Ok(created)
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
        let spec = parse(args(&[
            "--write",
            "/w",
            "--hide",
            "/h",
            "--network",
            "--unset",
            "K",
            "--keep",
            "NPM_TOKEN",
            "--sockets-in",
            "/w",
            "--max-procs",
            "64",
            "--cgroup",
            "/sys/fs/cgroup/pids/x",
            "--",
            "bash",
            "-c",
            "ls -- x",
        ]))
        .unwrap();
        assert_eq!(spec.unset, vec!["K".to_owned()]);
        assert_eq!(spec.keep, vec!["NPM_TOKEN".to_owned()]);
        assert_eq!(spec.sockets_in, vec![PathBuf::from("/w")]);
        assert_eq!(spec.max_procs, Some(64));
        assert_eq!(spec.cgroup, Some(PathBuf::from("/sys/fs/cgroup/pids/x")));
        assert!(parse(args(&["--max-procs", "many", "--", "ls"])).is_err());
        assert_eq!(spec.writable, vec![PathBuf::from("/w")]);
        assert_eq!(spec.hidden, vec![PathBuf::from("/h")]);
        assert!(spec.network);
        assert_eq!(spec.program, "bash");
        assert_eq!(spec.args, vec![OsString::from("-c"), OsString::from("ls -- x")]);
        assert!(parse(args(&["--write"])).is_err());
        assert!(parse(args(&["--",])).is_err());
        assert!(parse(args(&["--bogus", "--", "ls"])).is_err());
    }

    #[test]
    fn socket_paths_as_proc_net_unix_lists_them() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 12345 /tmp/tmux-0/default\n\
            0000000000000000: 00000002 00000000 00010000 0001 01    77 /run/user/1000/a socket with spaces\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23456 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 34567\n";
        let paths: Vec<&str> = table.lines().skip(1).filter_map(socket_path).collect();
        assert_eq!(paths, ["/tmp/tmux-0/default", "/run/user/1000/a socket with spaces"]);
    }
}
