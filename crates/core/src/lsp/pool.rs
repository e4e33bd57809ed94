//! Which server serves a file, and sharing them: the [`Pool`] keeps one server per (server,
//! project root) for every session that needs it, and a session's [`Servers`] holds the ones it
//! used, so a server stops when the last session that used it ends.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::server::{Launch, Server, State};
use crate::config::Config;
use crate::config::lsp::LspServer;
use crate::sync::lock;

type Key = (LspServer, PathBuf);

/// The servers of every session of this process.
#[derive(Default)]
pub struct Pool {
    servers: Mutex<HashMap<Key, Weak<Server>>>,
}

impl Pool {
    /// The server `spec` for project `root`, shared when it runs already (not started here).
    fn acquire(&self, spec: &LspServer, root: &Path, launch: impl FnOnce() -> Result<Launch, String>) -> Arc<Server> {
        let mut servers = lock(&self.servers);
        servers.retain(|_, s| s.strong_count() > 0);
        let key = (spec.clone(), root.to_owned());
        if let Some(server) = servers.get(&key).and_then(Weak::upgrade) {
            return server;
        }
        let server = Server::new(spec.clone(), root.to_owned(), launch());
        servers.insert(key, Arc::downgrade(&server));
        server
    }

    /// Every server that runs (or waits to), for reports.
    pub fn all(&self) -> Vec<Arc<Server>> {
        lock(&self.servers).values().filter_map(Weak::upgrade).collect()
    }
}

/// The program `command` names: itself when it is a path, else the first on `PATH`.
pub fn find_program(command: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Mutex<HashMap<String, Option<PathBuf>>>> = OnceLock::new();
    let cache = FOUND.get_or_init(Mutex::default);
    if let Some(found) = lock(cache).get(command) {
        return found.clone();
    }
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if command.contains('/') {
        let p = crate::config::expand_home(Path::new(command));
        p.filter(|p| executable(p))
    } else {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(command)).find(|p| executable(p)))
    };
    lock(cache).insert(command.to_owned(), found.clone());
    found
}

/// The project root of `file` for `spec`: the nearest directory up with one of its markers,
/// else the workspace root holding the file, else the file's directory.
pub fn project_root(spec: &LspServer, file: &Path, roots: &[PathBuf]) -> PathBuf {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if spec.root_markers.iter().any(|m| d.join(m).exists()) {
            return d.to_owned();
        }
        dir = d.parent();
    }
    roots
        .iter()
        .find(|r| file.starts_with(r))
        .cloned()
        .or_else(|| file.parent().map(Path::to_owned))
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// How `spec` starts for `root`: in the sandbox (no network unless it says so, writing only its
/// project, the temp dir and its caches), with no credential of the agent's; unconfined only
/// where there is no sandbox and the user allowed that.
pub fn launch(config: &Config, spec: &LspServer, program: &Path, root: &Path) -> Result<Launch, String> {
    let mut argv: Vec<OsString> = Vec::new();
    let mut env: Vec<(OsString, OsString)> = match crate::sandbox::available(config) {
        Ok(launcher) => {
            let mut policy = crate::sandbox::Policy::new(config, &[root.to_owned()], spec.network);
            policy.writable.extend(spec.writable.iter().cloned());
            policy.keep.extend(spec.env.iter().map(|(k, _)| k.clone()));
            argv.push(launcher.program.clone().into_os_string());
            argv.extend(policy.launcher_args(launcher, None));
            std::env::vars_os().collect()
        }
        Err(why) if config.lsp.unsandboxed => {
            tracing::debug!(target: "lsp", "running {} unconfined: {why}", spec.name);
            crate::sandbox::unconfined_env(config)
        }
        Err(why) => {
            return Err(format!(
                "language servers run in the sandbox, and {why}; `[lsp] unsandboxed = true` runs them without it"
            ));
        }
    };
    env.extend(spec.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
    argv.push(program.as_os_str().to_owned());
    argv.extend(spec.args.iter().map(OsString::from));
    Ok(Launch { argv, env })
}

/// The language servers one session uses.
pub struct Servers {
    pool: Arc<Pool>,
    config: Arc<Config>,
    roots: Vec<PathBuf>,
    held: Mutex<Vec<Arc<Server>>>,
}

impl Servers {
    pub fn new(pool: Arc<Pool>, config: Arc<Config>, roots: Vec<PathBuf>) -> Self {
        Self { pool, config, roots, held: Mutex::default() }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The configured servers whose programs are here.
    pub fn found(&self) -> impl Iterator<Item = (&LspServer, PathBuf)> {
        let on = self.config.lsp.enabled;
        self.config.lsp.servers.iter().filter(move |_| on).filter_map(|s| find_program(&s.command).map(|p| (s, p)))
    }

    /// The server for `file` (shared with other sessions; started when first used), if one
    /// serves its language here.
    pub fn for_file(&self, file: &Path) -> Option<Arc<Server>> {
        let (spec, program) = self.found().find(|(s, _)| s.serves(file))?;
        let root = project_root(spec, file, &self.roots);
        let server = self.pool.acquire(spec, &root, || launch(&self.config, spec, &program, &root));
        let mut held = lock(&self.held);
        if !held.iter().any(|s| Arc::ptr_eq(s, &server)) {
            held.push(server.clone());
        }
        Some(server)
    }

    /// The servers this session started (or shares).
    pub fn held(&self) -> Vec<Arc<Server>> {
        lock(&self.held).clone()
    }

    /// The servers for the workspace's own projects (by the markers in its roots), started.
    pub fn for_workspace(&self) -> Vec<Arc<Server>> {
        let mut servers = self.held();
        for (spec, program) in self.found() {
            for root in &self.roots {
                if spec.root_markers.iter().any(|m| root.join(m).exists()) {
                    let server = self.pool.acquire(spec, root, || launch(&self.config, spec, &program, root));
                    let mut held = lock(&self.held);
                    if !held.iter().any(|s| Arc::ptr_eq(s, &server)) {
                        held.push(server.clone());
                        servers.push(server);
                    }
                }
            }
        }
        servers
    }

    /// Whether a language server is configured or found for the workspace (then the `lsp` tool
    /// is offered).
    pub fn available(&self) -> bool {
        !lock(&self.held).is_empty()
            || self.found().any(|(spec, _)| {
                !spec.builtin || self.roots.iter().any(|r| spec.root_markers.iter().any(|m| r.join(m).exists()))
            })
    }

    /// What `/lsp` shows.
    pub fn report(&self) -> String {
        if !self.config.lsp.enabled {
            return "Language servers are off (`[lsp] enabled = false`).".into();
        }
        let held = self.held();
        let mut lines = Vec::new();
        for server in &held {
            let state = match server.state() {
                State::Idle => "not started".to_owned(),
                State::Starting => "starting".to_owned(),
                State::Ready => "ready".to_owned(),
                State::Failed { error, retry_at: Some(at) } => {
                    format!(
                        "failed ({error}); starting again in {} s",
                        at.saturating_duration_since(std::time::Instant::now()).as_secs()
                    )
                }
                State::Failed { error, retry_at: None } => format!("failed ({error})"),
            };
            let (errors, warnings) =
                server.all_diagnostics().iter().flat_map(|(_, d)| d.iter()).fold((0, 0), |(e, w), d| {
                    match super::text::severity(d) {
                        "error" => (e + 1, w),
                        "warning" => (e, w + 1),
                        _ => (e, w),
                    }
                });
            let restarts = match server.restarts() {
                0 => String::new(),
                n => format!(", restarted {n}×"),
            };
            lines.push(format!(
                "- `{}` for {}: {state}; {} open {}, {errors} errors, {warnings} warnings{restarts}",
                server.spec.name,
                server.root.display(),
                server.open_documents(),
                if server.open_documents() == 1 { "file" } else { "files" }
            ));
        }
        for (spec, program) in self.found() {
            if !held.iter().any(|s| s.spec == *spec) {
                lines.push(format!(
                    "- `{}` ({}): not started; it starts with the first .{} file",
                    spec.name,
                    program.display(),
                    spec.extensions.join(", .")
                ));
            }
        }
        let missing: Vec<String> = self
            .config
            .lsp
            .servers
            .iter()
            .filter(|s| find_program(&s.command).is_none())
            .map(|s| format!("`{}`", s.command))
            .collect();
        let mut text = if lines.is_empty() {
            "No language server here.".to_owned()
        } else {
            format!("Language servers:\n{}", lines.join("\n"))
        };
        if !missing.is_empty() {
            text.push_str(&format!("\n\nNot found on PATH: {}.", missing.join(", ")));
        }
        text
    }
}
