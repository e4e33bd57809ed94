//! The exec sandbox: what a command may touch, and how it is held to it.
//!
//! A sandboxed command does not start directly: the agent starts a small launcher (`acp-sandbox`,
//! installed beside `acp`, else `acp __sandbox`; see [`launch`]) that confines its own process and
//! then runs the command. The agent itself is never confined. On Linux the launcher uses
//! - **Landlock** (required): writes only under the writable roots (the workspace roots, the temp
//!   dir, the command's scratch dir and `[sandbox] writable`); reads anywhere except the hidden
//!   paths (`$ACP_HOME` and `[sandbox] deny_read`); no signals to processes outside the sandbox;
//!   with the network off, no TCP `connect`/`bind` (ABI ≥ 4);
//! - **user + PID namespaces** (when the kernel allows them): the command is the first process of
//!   its own PID namespace, so everything it starts — `setsid` daemons included — dies with it;
//!   with the network off also a **network namespace** of its own (only its own loopback), which
//!   stops UDP and DNS too. Without namespaces the launcher is a child subreaper and kills what the
//!   command left behind when it ends.
//!
//! Where Landlock is missing (or `[sandbox] enabled = false`) nothing runs confined: every
//! command asks first instead (`Confinement::NoSandbox` in the tools).

pub mod child;
pub mod env;
pub mod launch;
pub mod pids;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::config::Config;

/// The first argument that turns `acp` into the launcher.
pub const LAUNCHER_ARG: &str = "__sandbox";

/// What one command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Directories (and files) it may change.
    pub writable: Vec<PathBuf>,
    /// Paths it may not read (nor write).
    pub hidden: Vec<PathBuf>,
    pub network: bool,
    /// Whether to isolate the command in namespaces of its own when the kernel allows it.
    pub namespaces: bool,
    /// Where the command may reach Unix sockets (the workspace's own); the host's elsewhere are
    /// hidden from it.
    pub sockets_in: Vec<PathBuf>,
    /// Variables the command does not inherit besides those whose names say they are credentials
    /// or lead to sockets (see [`env`]): the credentials acp knows of by name (providers' keys,
    /// MCP servers' tokens).
    pub unset: Vec<String>,
    /// Variables it inherits whatever their names say (`[sandbox] env_allow`).
    pub keep: Vec<String>,
    /// Processes it may run at once.
    pub max_procs: u32,
}

impl Policy {
    /// The policy for a session with these workspace roots.
    pub fn new(config: &Config, roots: &[PathBuf], network: bool) -> Self {
        let expand = |raw: &str| crate::config::expand_home(std::path::Path::new(raw));
        let mut writable: Vec<PathBuf> = roots.to_vec();
        writable.push(std::env::temp_dir());
        writable.extend(config.sandbox.writable.iter().filter_map(|p| expand(&p.to_string_lossy())));
        let mut hidden = vec![config.home.clone()];
        hidden.extend(config.sandbox.deny_read.iter().filter_map(|p| expand(p)));
        Self {
            writable,
            hidden,
            network,
            namespaces: config.sandbox.namespaces,
            sockets_in: roots.to_vec(),
            unset: credentials(config),
            keep: config.sandbox.env_allow.clone(),
            max_procs: config.sandbox.max_processes.unwrap_or(pids::DEFAULT_MAX),
        }
    }

    /// The launcher's arguments, up to and including the `--` before the command; `cgroup`: the
    /// command's own ([`pids::Cgroup`]), if one was made.
    pub fn launcher_args(&self, launcher: &Launcher, cgroup: Option<&std::path::Path>) -> Vec<OsString> {
        let mut args = Vec::new();
        if launcher.is_agent {
            args.push(OsString::from(LAUNCHER_ARG));
        }
        if self.network {
            args.push("--network".into());
        }
        if !self.namespaces {
            args.push("--no-namespaces".into());
        }
        for path in &self.writable {
            args.push("--write".into());
            args.push(path.clone().into_os_string());
        }
        for path in &self.hidden {
            args.push("--hide".into());
            args.push(path.clone().into_os_string());
        }
        for path in &self.sockets_in {
            args.push("--sockets-in".into());
            args.push(path.clone().into_os_string());
        }
        for name in &self.unset {
            args.push("--unset".into());
            args.push(name.into());
        }
        for name in &self.keep {
            args.push("--keep".into());
            args.push(name.into());
        }
        args.push("--max-procs".into());
        args.push(self.max_procs.to_string().into());
        if let Some(dir) = cgroup {
            args.push("--cgroup".into());
            args.push(dir.as_os_str().to_owned());
        }
        args.push("--".into());
        args
    }

    /// What the model is told when a sandboxed command fails.
    pub fn explain(&self) -> String {
        let shown =
            |paths: &[PathBuf]| paths.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ");
        format!(
            "The command ran in the sandbox: it may write only under {}; it may not read {}; {}. \
             An error such as \"Permission denied\", \"Read-only file system\" or \"Network is unreachable\" \
             may come from that. If the command truly needs more, call `exec` again with `\"sandbox\": false` \
             — the user is asked first.",
            shown(&self.writable),
            shown(&self.hidden),
            if self.network { "it may use the network" } else { "it has no network access" },
        )
    }
}

/// The variables holding credentials acp knows of, whatever their names: the providers' keys, the
/// gateway's and the channels' (see also [`env::OWN_CREDENTIALS`]; an MCP server's token variable
/// is withheld by its name).
pub fn credentials(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = config.providers.iter().filter_map(|p| p.api_key_env.clone()).collect();
    names.extend(env::OWN_CREDENTIALS.iter().map(|s| (*s).to_owned()));
    names.sort();
    names.dedup();
    names
}

/// The environment a command started unconfined gets (one the user let out of the sandbox):
/// the agent's, without credentials or ways to sockets outside, as a sandboxed one.
pub fn unconfined_env(config: &Config) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let unset = credentials(config);
    let keep = &config.sandbox.env_allow;
    std::env::vars_os().filter(|(name, _)| name.to_str().is_some_and(|n| !env::withheld(n, &unset, keep))).collect()
}

/// What this machine offers, probed once (never at startup: the first command or `/status` pays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version the kernel offers, or why there is none.
    pub landlock: Result<u8, String>,
    /// Whether unprivileged user namespaces look available (PID and network isolation).
    pub namespaces: bool,
}

pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let support = Support { landlock: launch::landlock_abi(), namespaces: namespaces_enabled() };
        match &support.landlock {
            Ok(abi) => tracing::debug!(abi, namespaces = support.namespaces, "exec sandbox available"),
            Err(why) => tracing::warn!(
                "exec sandbox unavailable ({why}): every command asks before it runs, and runs unconfined if allowed"
            ),
        }
        support
    })
}

fn namespaces_enabled() -> bool {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|v| v != "0")
        && read("/proc/sys/user/max_user_namespaces").is_none_or(|v| v != "0")
}

/// The program that starts sandboxed commands.
#[derive(Debug)]
pub struct Launcher {
    pub program: PathBuf,
    /// `acp` itself (`acp __sandbox …`) rather than `acp-sandbox`.
    pub is_agent: bool,
}

/// `acp-sandbox` beside the running `acp`, else `acp` itself. `None` when the running program is
/// not `acp` (a test harness embedding the library): then commands cannot be confined.
fn launcher() -> Option<&'static Launcher> {
    static LAUNCHER: OnceLock<Option<Launcher>> = OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            let exe = std::env::current_exe().ok()?;
            if exe.file_stem().is_none_or(|s| s != "acp") {
                return None;
            }
            let small = exe.with_file_name("acp-sandbox");
            Some(if small.is_file() {
                Launcher { program: small, is_agent: false }
            } else {
                Launcher { program: exe, is_agent: true }
            })
        })
        .as_ref()
}

/// Whether commands can run confined here (and how to start them), or why not.
pub fn available(config: &Config) -> Result<&'static Launcher, String> {
    if !config.sandbox.enabled {
        return Err("the sandbox is turned off (`[sandbox] enabled = false` in config.toml)".into());
    }
    if let Err(why) = &support().landlock {
        return Err(why.clone());
    }
    launcher().ok_or_else(|| "the launcher (the `acp` program itself) was not found".to_owned())
}

/// One line for `/status`.
pub fn status(config: &Config, network: bool) -> String {
    match available(config) {
        Ok(_) => {
            let s = support();
            let abi = s.landlock.as_ref().map_or(0, |a| *a);
            let isolation = match (config.sandbox.namespaces, s.namespaces) {
                (true, true) => "own PID, mount and network namespaces; the host's Unix sockets hidden",
                (false, _) => {
                    "namespaces turned off in config.toml: UDP is not blocked, no new Unix sockets, and a `setsid` daemon can outlive a killed command"
                }
                (true, false) => {
                    "no user namespaces here: UDP is not blocked, no new Unix sockets, and a `setsid` daemon can outlive a killed command"
                }
            };
            let max = config.sandbox.max_processes.unwrap_or(pids::DEFAULT_MAX);
            format!(
                "on (Landlock ABI {abi}; {isolation}; at most {max} processes, by {}) · network for commands: {}",
                pids::Cgroup::how(),
                if network { "on" } else { "off" }
            )
        }
        Err(why) => format!("**off** — {why}; every command asks first"),
    }
}
