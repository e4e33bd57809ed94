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

pub mod launch;

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
    /// Variables the command does not inherit: the providers' API keys (they are the agent's, like
    /// its config).
    pub unset: Vec<String>,
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
        let unset = config.providers.iter().filter_map(|p| p.api_key_env.clone()).collect();
        Self { writable, hidden, network, namespaces: config.sandbox.namespaces, unset }
    }

    /// The launcher's arguments, up to and including the `--` before the command.
    pub fn launcher_args(&self, launcher: &Launcher) -> Vec<OsString> {
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
        for name in &self.unset {
            args.push("--unset".into());
            args.push(name.into());
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
                (true, true) => "own PID and network namespaces",
                (false, _) => {
                    "namespaces turned off in config.toml: UDP is not blocked, and a `setsid` daemon can outlive a killed command"
                }
                (true, false) => {
                    "no user namespaces here: UDP is not blocked, and a `setsid` daemon can outlive a killed command"
                }
            };
            format!(
                "on (Landlock ABI {abi}; {isolation}) · network for commands: {}",
                if network { "on" } else { "off" }
            )
        }
        Err(why) => format!("**off** — {why}; every command asks first"),
    }
}
