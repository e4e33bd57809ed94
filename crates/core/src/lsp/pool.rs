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

/// The project root of `file` (inside workspace root `root`) for `spec`: the outermost
/// directory from `root` down to the file holding one of its markers (a Cargo workspace, not one
/// of its members; a monorepo's top `package.json`), else `root` itself. Never above the
/// workspace: what a server's project is, it may write.
pub fn project_root(spec: &LspServer, file: &Path, root: &Path) -> PathBuf {
    let mut found = None;
    let mut dir = file.parent();
    while let Some(d) = dir.filter(|d| d.starts_with(root)) {
        if spec.root_markers.iter().any(|m| d.join(m).exists()) {
            found = Some(d);
        }
        dir = d.parent();
    }
    found.unwrap_or(root).to_owned()
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
    /// The roots as they really are (symlinks followed), for placing files.
    real_roots: Vec<PathBuf>,
    /// What the sandbox hides ($ACP_HOME, `[sandbox] deny_read`): never given to a server.
    hidden: Vec<PathBuf>,
    held: Mutex<Vec<Arc<Server>>>,
}

fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

impl Servers {
    pub fn new(pool: Arc<Pool>, config: Arc<Config>, roots: Vec<PathBuf>) -> Self {
        let real_roots = roots.iter().map(|r| real(r)).collect();
        let hidden = crate::sandbox::Policy::new(&config, &[], false).hidden.iter().map(|h| real(h)).collect();
        Self { pool, config, roots, real_roots, hidden, held: Mutex::default() }
    }

    /// Whether what the sandbox hides holds `path`.
    pub fn hides(&self, path: &Path) -> bool {
        let path = real(path);
        self.hidden.iter().any(|h| path.starts_with(h))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The configured servers whose programs are here.
    pub fn found(&self) -> impl Iterator<Item = (&LspServer, PathBuf)> {
        self.found_where(|_| true)
    }

    /// The same, of the servers `wanted` picks: their programs are looked for on `PATH` only
    /// then (a turn's first request and every read go through here).
    fn found_where(&self, wanted: impl Fn(&LspServer) -> bool) -> impl Iterator<Item = (&LspServer, PathBuf)> {
        let on = self.config.lsp.enabled;
        self.config
            .lsp
            .servers
            .iter()
            .filter(move |s| on && wanted(s))
            .filter_map(|s| find_program(&s.command).map(|p| (s, p)))
    }

    /// The server for `file` (shared with other sessions; started when first used), if one
    /// serves its language here.
    /// Only files of the workspace are served (the model's edits elsewhere ask first, and start
    /// nothing that runs code there), never what the sandbox hides.
    pub fn for_file(&self, file: &Path) -> Option<Arc<Server>> {
        let (spec, program) = self.found_where(|s| s.serves(file)).next()?;
        let real_file = match file.parent() {
            Some(dir) => real(dir).join(file.file_name()?),
            None => return None,
        };
        let workspace =
            self.real_roots.iter().filter(|r| real_file.starts_with(r)).max_by_key(|r| r.as_os_str().len())?;
        if self.hidden.iter().any(|h| real_file.starts_with(h)) {
            return None;
        }
        let root = project_root(spec, &real_file, workspace);
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
            for root in &self.real_roots {
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
            || self
                .found_where(|spec| {
                    !spec.builtin || self.roots.iter().any(|r| spec.root_markers.iter().any(|m| r.join(m).exists()))
                })
                .next()
                .is_some()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(home: &Path) -> Arc<Config> {
        std::fs::write(
            home.join("config.toml"),
            "[lsp]\nunsandboxed = true\n[lsp.fake]\ncommand = \"sleep\"\nextensions = [\"fk\"]\nroot_markers = [\"fk.toml\"]\n",
        )
        .unwrap();
        let home = home.to_owned();
        Arc::new(Config::load_with(&move |name| (name == "ACP_HOME").then(|| home.display().to_string())))
    }

    #[test]
    fn a_project_is_the_outermost_marked_directory_within_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("ws");
        std::fs::create_dir_all(top.join("crates/a/src")).unwrap();
        // Above the workspace: never a project (what a server's project is, it may write).
        std::fs::write(dir.path().join("fk.toml"), "").unwrap();
        let spec = &config(dir.path()).lsp.servers[0];
        let file = top.join("crates/a/src/x.fk");
        assert_eq!(project_root(spec, &file, &top), top);
        std::fs::write(top.join("crates/a/fk.toml"), "").unwrap();
        assert_eq!(project_root(spec, &file, &top), top.join("crates/a"));
        std::fs::write(top.join("fk.toml"), "").unwrap();
        assert_eq!(project_root(spec, &file, &top), top, "a workspace, not one of its members");
    }

    #[test]
    fn only_the_workspaces_files_get_a_server_and_never_the_agents_own() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let config = config(&home);
        let servers = Servers::new(Arc::default(), config, vec![ws.clone(), home.clone()]);
        assert!(servers.for_file(&ws.join("sub/a.fk")).is_some());
        assert!(servers.for_file(&ws.join("a.txt")).is_none(), "no server for it");
        assert!(servers.for_file(&dir.path().join("elsewhere.fk")).is_none(), "outside the workspace");
        assert!(servers.for_file(&home.join("x.fk")).is_none(), "$ACP_HOME, even as a workspace root");
        assert_eq!(servers.held().len(), 1);
    }
}
