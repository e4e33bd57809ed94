//! A workspace's own hooks: `.acp/hooks.toml` (`[[hooks]]` as in config.toml). A cloned repository
//! must not run code on its own, so the file is honoured only once the user allowed it (`acp hooks
//! allow`, or `/hooks allow` in a session), and only as it was then: what is allowed is the file's
//! path and the SHA-256 of its bytes, kept in `$ACP_HOME/hooks-allowed` (where no tool writes). A
//! changed file waits to be allowed again. Its hooks run inside the exec sandbox.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::hooks::HookConfig;

/// Where a workspace keeps its hooks, under its root.
pub const FILE: &str = ".acp/hooks.toml";
/// Which workspace files the user allowed, under `$ACP_HOME`.
const ALLOWED: &str = "hooks-allowed";
/// The largest hooks file read (it is a few lines; a FIFO or a huge file is not read).
const MAX_BYTES: u64 = 1 << 20;

/// What a workspace's hooks file is to a session.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Workspace {
    /// There is none.
    #[default]
    None,
    /// Allowed as it is: its hooks.
    Allowed(Vec<HookConfig>),
    /// Never allowed, or changed since (`changed`): none of it runs.
    NotAllowed { path: PathBuf, changed: bool },
    /// It cannot be read as hooks.
    Invalid { path: PathBuf, error: String },
}

impl Workspace {
    pub fn hooks(&self) -> &[HookConfig] {
        match self {
            Self::Allowed(hooks) => hooks,
            _ => &[],
        }
    }

    /// What the user is told of it when a session opens, if anything.
    pub fn notice(&self) -> Option<String> {
        match self {
            Self::None | Self::Allowed(_) => None,
            Self::NotAllowed { path, changed } => Some(format!(
                "This workspace has hooks ({}){}; they do not run until you allow them: `/hooks allow` here, or \
                 `acp hooks allow` in the workspace, after reading the file.",
                path.display(),
                if *changed { " that changed since you allowed them" } else { "" }
            )),
            Self::Invalid { path, error } => {
                Some(format!("The workspace's hooks file {} is not used: {error}", path.display()))
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    hooks: Vec<HookConfig>,
}

/// The hooks file of the workspace at `cwd`, and whether the user allowed it as it is.
pub fn load(home: &Path, cwd: &Path) -> Workspace {
    let path = cwd.join(FILE);
    if !path.exists() {
        return Workspace::None;
    }
    let bytes = match crate::files::read_capped(&path, MAX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) => return Workspace::Invalid { path, error: e.to_string() },
    };
    let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let digest = digest(&bytes);
    let allowed = allowed(home);
    if !allowed.iter().any(|(d, p)| *d == digest && *p == real) {
        let changed = allowed.iter().any(|(_, p)| *p == real);
        return Workspace::NotAllowed { path, changed };
    }
    match parse(&bytes) {
        Ok(hooks) => Workspace::Allowed(hooks),
        Err(error) => Workspace::Invalid { path, error },
    }
}

fn parse(bytes: &[u8]) -> Result<Vec<HookConfig>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8".to_owned())?;
    let file: File = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    Ok(file.hooks.into_iter().map(|h| HookConfig { workspace: true, ..h }).collect())
}

/// Allows the hooks file of the workspace at `cwd` as it is now; says what was allowed.
pub fn allow(home: &Path, cwd: &Path) -> Result<String, String> {
    let path = cwd.join(FILE);
    let bytes =
        crate::files::read_capped(&path, MAX_BYTES).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let hooks = parse(&bytes).map_err(|e| format!("{} is not a hooks file: {e}", path.display()))?;
    let real = std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // One line per file in the list: a path with a line break in it could add a second.
    if real.to_string_lossy().contains(['\n', '\r']) {
        return Err(format!("{} has a line break in its path; it cannot be allowed", real.display()));
    }
    let mut list: Vec<(String, PathBuf)> = allowed(home).into_iter().filter(|(_, p)| *p != real).collect();
    list.push((digest(&bytes), real.clone()));
    let text: String = list.iter().map(|(d, p)| format!("{d} {}\n", p.display())).collect();
    std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    crate::files::write_atomic(&home.join(ALLOWED), text.as_bytes())
        .map_err(|e| format!("cannot record it in {}: {e}", home.join(ALLOWED).display()))?;
    let listed: Vec<String> = hooks.iter().map(|h| format!("  {}: {}", h.event.name(), h.command)).collect();
    Ok(format!(
        "Allowed {} as it is now ({} hook{}, run in the sandbox):\n{}",
        real.display(),
        hooks.len(),
        if hooks.len() == 1 { "" } else { "s" },
        listed.join("\n")
    ))
}

/// The files allowed: (digest, real path).
fn allowed(home: &Path) -> Vec<(String, PathBuf)> {
    let Ok(text) = std::fs::read_to_string(home.join(ALLOWED)) else { return Vec::new() };
    text.lines().filter_map(|l| l.split_once(' ')).map(|(d, p)| (d.to_owned(), PathBuf::from(p))).collect()
}

fn digest(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
