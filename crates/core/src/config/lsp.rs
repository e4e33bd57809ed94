//! `[lsp]`: the language servers the agent starts for the files it edits — built-in ones for the
//! common languages (used when their program is on `PATH`), each overridable or switched off by
//! `[lsp.NAME]`, and servers of the user's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How long an edit waits for its file's diagnostics, unless `[lsp] wait_ms` says otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(3000);

#[derive(Debug, Clone, PartialEq)]
pub struct LspConfig {
    pub enabled: bool,
    /// The most an edit waits for its diagnostics (the server's start included).
    pub wait: Duration,
    /// Run servers unconfined where the sandbox is not available (else they do not start there).
    pub unsandboxed: bool,
    /// Built-in servers (as configured) and the user's, in the order they are tried.
    pub servers: Vec<LspServer>,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self { enabled: true, wait: DEFAULT_WAIT, unsandboxed: false, servers: builtin() }
    }
}

/// One language server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LspServer {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// File extensions it serves, without the dot.
    pub extensions: Vec<String>,
    /// Files or directories whose presence marks a project's root (the nearest one up wins).
    pub root_markers: Vec<String>,
    /// `initializationOptions`, as JSON text.
    pub initialization_options: Option<String>,
    /// What `workspace/configuration` answers, as JSON text (an object of sections).
    pub settings: Option<String>,
    pub env: Vec<(String, String)>,
    /// Paths it may write besides its project (caches).
    pub writable: Vec<PathBuf>,
    /// Whether it may use the network.
    pub network: bool,
    /// Shipped with acp (used only when its program is found).
    pub builtin: bool,
}

impl LspServer {
    pub fn serves(&self, path: &Path) -> bool {
        path.extension().and_then(|e| e.to_str()).is_some_and(|e| self.extensions.iter().any(|x| x == e))
    }
}

/// The LSP language id of a file.
pub fn language_id(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "rs" => "rust",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        _ => "plaintext",
    }
}

fn server(name: &str, command: &str, args: &[&str], extensions: &[&str], markers: &[&str]) -> LspServer {
    let owned = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect();
    LspServer {
        name: name.into(),
        command: command.into(),
        args: owned(args),
        extensions: owned(extensions),
        root_markers: owned(markers),
        initialization_options: None,
        settings: None,
        env: Vec::new(),
        writable: Vec::new(),
        network: false,
        builtin: true,
    }
}

/// The built-in servers, most wanted first for each language.
pub fn builtin() -> Vec<LspServer> {
    let py = ["py", "pyi"];
    let py_markers = ["pyproject.toml", "pyrightconfig.json", "setup.py", "setup.cfg", "requirements.txt"];
    // Nothing of the user's is writable by default (a cache there would let workspace code run
    // by a server reach past the sandbox: `~/.cargo/config.toml`, the Go build cache); gopls
    // keeps its build cache in the temp dir.
    let mut gopls = server("gopls", "gopls", &[], &["go"], &["go.work", "go.mod"]);
    gopls.env = vec![("GOCACHE".into(), std::env::temp_dir().join("acp-gopls-cache").display().to_string())];
    vec![
        server("rust-analyzer", "rust-analyzer", &[], &["rs"], &["Cargo.toml"]),
        server("pyright", "pyright-langserver", &["--stdio"], &py, &py_markers),
        server("basedpyright", "basedpyright-langserver", &["--stdio"], &py, &py_markers),
        server(
            "typescript",
            "typescript-language-server",
            &["--stdio"],
            &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"],
            &["tsconfig.json", "jsconfig.json", "package.json"],
        ),
        gopls,
        server(
            "clangd",
            "clangd",
            &[],
            &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
            &["compile_commands.json", "compile_flags.txt", ".clangd"],
        ),
    ]
}

/// `[lsp]` as written.
#[derive(Debug, Default, Deserialize)]
pub(super) struct FileLsp {
    enabled: Option<bool>,
    wait_ms: Option<u64>,
    unsandboxed: Option<bool>,
    /// The `[lsp.NAME]` tables (anything else here is a mistake, said by name).
    #[serde(flatten)]
    servers: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLspServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    extensions: Option<Vec<String>>,
    root_markers: Option<Vec<String>>,
    initialization_options: Option<toml::Value>,
    settings: Option<toml::Value>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    writable: Option<Vec<String>>,
    network: Option<bool>,
    #[serde(default)]
    disabled: bool,
}

/// The most an edit may be made to wait.
const MAX_WAIT_MS: u64 = 60_000;

impl FileLsp {
    /// The configuration, or what is wrong with the section.
    pub(super) fn resolve(self) -> Result<LspConfig, String> {
        let mut config = LspConfig { enabled: self.enabled.unwrap_or(true), ..LspConfig::default() };
        if let Some(ms) = self.wait_ms {
            if ms > MAX_WAIT_MS {
                return Err(format!("[lsp] wait_ms = {ms}: at most {MAX_WAIT_MS}"));
            }
            config.wait = Duration::from_millis(ms);
        }
        config.unsandboxed = self.unsandboxed.unwrap_or(false);
        for (name, value) in self.servers {
            let at = format!("[lsp.{name}]");
            if !value.is_table() {
                return Err(format!(
                    "[lsp] {name}: unknown key (expected `enabled`, `wait_ms`, `unsandboxed` or a [lsp.NAME] table)"
                ));
            }
            let section: FileLspServer =
                value.try_into().map_err(|e: toml::de::Error| format!("{at}: {}", e.message()))?;
            let existing = config.servers.iter().position(|s| s.name == name);
            if section.disabled {
                if let Some(i) = existing {
                    config.servers.remove(i);
                }
                continue;
            }
            let mut server = match existing {
                Some(i) => config.servers.remove(i),
                None => {
                    let command = section.command.clone().ok_or_else(|| format!("{at}: `command` is required"))?;
                    let mut s = self::server(&name, &command, &[], &[], &[]);
                    s.builtin = false;
                    s
                }
            };
            if let Some(command) = section.command {
                if command.trim().is_empty() {
                    return Err(format!("{at}: `command` is empty"));
                }
                server.command = command;
            }
            if let Some(args) = section.args {
                server.args = args;
            }
            if let Some(ext) = section.extensions {
                server.extensions = ext.into_iter().map(|e| e.trim_start_matches('.').to_owned()).collect();
            }
            if server.extensions.is_empty() {
                return Err(format!("{at}: `extensions` is required (the files it serves, e.g. [\"py\"])"));
            }
            if let Some(markers) = section.root_markers {
                server.root_markers = markers;
            }
            let json = |v: toml::Value, key: &str| {
                serde_json::to_string(&v).map_err(|e| format!("{at}: `{key}` cannot be sent as JSON: {e}"))
            };
            if let Some(v) = section.initialization_options {
                server.initialization_options = Some(json(v, "initialization_options")?);
            }
            if let Some(v) = section.settings {
                if !v.is_table() {
                    return Err(format!("{at}: `settings` is a table of sections"));
                }
                server.settings = Some(json(v, "settings")?);
            }
            server.env.extend(section.env);
            if let Some(paths) = section.writable {
                server.writable = paths.iter().filter_map(|p| super::expand_home(Path::new(p))).collect();
            }
            if let Some(network) = section.network {
                server.network = network;
            }
            // The user's own servers come first: they are what the user asked for.
            let at = if server.builtin { config.servers.len() } else { 0 };
            config.servers.insert(at.min(config.servers.len()), server);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LspConfig, String> {
        #[derive(Deserialize)]
        struct Top {
            lsp: FileLsp,
        }
        toml::from_str::<Top>(text).map_err(|e| e.to_string())?.lsp.resolve()
    }

    #[test]
    fn builtins_are_there_and_overridable() {
        let config = parse("[lsp]\n").unwrap();
        assert_eq!(config.wait, DEFAULT_WAIT);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["rust-analyzer", "pyright", "basedpyright", "typescript", "gopls", "clangd"]);
        let config = parse(
            "[lsp]\nwait_ms = 500\n[lsp.pyright]\ncommand = \"/opt/pyright-langserver\"\n\
             settings = { python = { analysis = { typeCheckingMode = \"strict\" } } }\n\
             [lsp.gopls]\ndisabled = true\n",
        )
        .unwrap();
        assert_eq!(config.wait, Duration::from_millis(500));
        let pyright = config.servers.iter().find(|s| s.name == "pyright").unwrap();
        assert_eq!(pyright.command, "/opt/pyright-langserver");
        assert_eq!(pyright.args, ["--stdio"]);
        assert_eq!(pyright.settings.as_deref(), Some(r#"{"python":{"analysis":{"typeCheckingMode":"strict"}}}"#));
        assert!(config.servers.iter().all(|s| s.name != "gopls"));
    }

    #[test]
    fn own_servers_come_first_and_need_a_command_and_extensions() {
        let config =
            parse("[lsp.zls]\ncommand = \"zls\"\nextensions = [\".zig\"]\nroot_markers = [\"build.zig\"]\n").unwrap();
        assert_eq!(config.servers[0].name, "zls");
        assert!(config.servers[0].serves(Path::new("/w/main.zig")));
        assert!(!config.servers[0].builtin);
        assert!(parse("[lsp.zls]\nextensions = [\"zig\"]\n").unwrap_err().contains("`command` is required"));
        assert!(parse("[lsp.zls]\ncommand = \"zls\"\n").unwrap_err().contains("`extensions` is required"));
        assert!(parse("[lsp.zls]\ncommand = \"zls\"\nextension = [\"zig\"]\n").unwrap_err().contains("extension"));
        assert!(parse("[lsp]\nwait_ms = 999999\n").unwrap_err().contains("at most"));
        assert!(parse("[lsp]\nwiat_ms = 100\n").unwrap_err().contains("[lsp] wiat_ms: unknown key"));
    }
}
