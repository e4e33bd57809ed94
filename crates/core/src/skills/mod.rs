//! Skills: folders with a `SKILL.md` (YAML front matter `name`, `description`, optional
//! `metadata`; then instructions) that the model reads when a task calls for one. They come from
//! the workspace (`.acp/skills/`, also `.agents/skills/` and `.claude/skills/`), the user
//! (`$ACP_HOME/skills/`) and the binary itself (bundled, written out under
//! `$ACP_HOME/skills/.bundled/<version>/` so the model can read them like any other); on a name
//! clash the workspace wins, then the user, then the bundled. A skill may say what it needs —
//! binaries on `PATH`, environment variables, an OS — in `metadata.acp.requires` /
//! `metadata.acp.os` (or under `metadata.openclaw`, as skills written for OpenClaw do); one whose
//! needs are not met is left out, and `/skills` says why. The system prompt lists only names,
//! descriptions and paths (`<available_skills>`), never the instructions themselves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;

use crate::config::SkillsConfig;

/// Skills compiled into the binary: (folder name, SKILL.md).
const BUNDLED: &[(&str, &str)] = &[("openlang", include_str!("bundled/openlang/SKILL.md"))];

/// Workspace folders searched, in order (the first holding a name wins among them).
pub const WORKSPACE_DIRS: &[&str] = &[".acp/skills", ".agents/skills", ".claude/skills"];

/// The most front matter read.
const MAX_FRONT_MATTER: usize = 16 << 10;

/// The longest name and description the convention allows.
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Workspace,
    User,
    Bundled,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::User => "user",
            Self::Bundled => "bundled",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its `SKILL.md`.
    pub path: PathBuf,
    pub source: Source,
    pub metadata: Value,
}

/// Whether a skill found is offered to the model, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Active,
    /// A skill of the same name from a place that wins is used instead.
    Shadowed(PathBuf),
    /// `[skills] disabled` names it.
    Disabled,
    /// Something it needs is missing.
    Gated(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub skill: Skill,
    pub status: Status,
}

/// A `SKILL.md` that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub path: PathBuf,
    pub reason: String,
}

/// Every skill found for a workspace, in precedence order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub found: Vec<Found>,
    pub broken: Vec<Broken>,
}

#[derive(Debug, Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
}

impl Catalog {
    /// Finds the skills for a session in `cwd`, with `$ACP_HOME` at `home`.
    pub fn load(home: &Path, cwd: &Path, config: &SkillsConfig) -> Self {
        let mut places: Vec<(Source, Vec<PathBuf>)> =
            WORKSPACE_DIRS.iter().map(|d| (Source::Workspace, skill_files(&cwd.join(d)))).collect();
        places.push((Source::User, skill_files(&home.join("skills"))));
        if config.bundled.unwrap_or(true) {
            places.push((Source::Bundled, bundled_files(home)));
        }
        let mut catalog = Catalog::default();
        let mut winners: HashMap<String, PathBuf> = HashMap::new();
        for (source, files) in places {
            for path in files {
                let skill = match read(&path, source) {
                    Ok(skill) => skill,
                    Err(reason) => {
                        catalog.broken.push(Broken { path, reason });
                        continue;
                    }
                };
                let status = if let Some(winner) = winners.get(&skill.name) {
                    Status::Shadowed(winner.clone())
                } else if config.disabled.contains(&skill.name) {
                    Status::Disabled
                } else if let Some(missing) = unmet(&skill.metadata) {
                    Status::Gated(missing)
                } else {
                    Status::Active
                };
                winners.entry(skill.name.clone()).or_insert_with(|| skill.path.clone());
                catalog.found.push(Found { skill, status });
            }
        }
        catalog
    }

    pub fn active(&self) -> impl Iterator<Item = &Skill> {
        self.found.iter().filter(|f| f.status == Status::Active).map(|f| &f.skill)
    }

    /// The system prompt's skills section; `None` when no skill is offered.
    pub fn prompt_section(&self) -> Option<String> {
        let mut active = self.active().peekable();
        active.peek()?;
        let mut text = String::from(
            "# Skills\n\
             Skills hold instructions for particular kinds of work. When a task matches a skill's description, \
             read its SKILL.md (with `read`, at the location given) before you start, and follow it; files it \
             mentions are relative to its folder. Do not read skills that do not apply.\n\
             <available_skills>\n",
        );
        for skill in active {
            text.push_str(&format!(
                "<skill><name>{}</name><description>{}</description><location>{}</location></skill>\n",
                xml(&skill.name),
                xml(&skill.description),
                xml(&skill.path.display().to_string())
            ));
        }
        text.push_str("</available_skills>\n\n");
        Some(text)
    }

    /// `/skills`: what is offered, and what is not and why.
    pub fn report(&self) -> String {
        let active: Vec<&Skill> = self.active().collect();
        let mut text = if active.is_empty() {
            "No skills are offered.".to_owned()
        } else {
            format!("Skills offered to the model ({}):", active.len())
        };
        for s in &active {
            text.push_str(&format!(
                "\n- {} ({}): {}\n  {}",
                s.name,
                s.source.name(),
                short(&s.description),
                s.path.display()
            ));
        }
        let others: Vec<&Found> = self.found.iter().filter(|f| f.status != Status::Active).collect();
        if !others.is_empty() || !self.broken.is_empty() {
            text.push_str("\n\nNot offered:");
        }
        for f in others {
            let why = match &f.status {
                Status::Shadowed(by) => format!("a skill of the same name wins: {}", by.display()),
                Status::Disabled => "disabled in config.toml ([skills] disabled)".to_owned(),
                Status::Gated(missing) => missing.clone(),
                Status::Active => continue,
            };
            text.push_str(&format!(
                "\n- {} ({}): {why}\n  {}",
                f.skill.name,
                f.skill.source.name(),
                f.skill.path.display()
            ));
        }
        for b in &self.broken {
            text.push_str(&format!("\n- {}: {}", b.path.display(), b.reason));
        }
        text.push_str(&format!(
            "\n\nSkills are read from {} in the workspace, $ACP_HOME/skills/ and the ones built in; the workspace's win, then yours.",
            WORKSPACE_DIRS.join(", ")
        ));
        text
    }
}

fn short(s: &str) -> String {
    if s.chars().count() <= 100 {
        return s.to_owned();
    }
    s.chars().take(99).collect::<String>() + "…"
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `dir/*/SKILL.md`, sorted, skipping hidden folders.
fn skill_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path().join("SKILL.md"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Parsed skills by path, kept while the file's size and time are unchanged (the catalog is
/// read for every turn).
type Cache = HashMap<PathBuf, (u64, Option<SystemTime>, Result<Skill, String>)>;

fn read(path: &Path, source: Source) -> Result<Skill, String> {
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    // A bundled skill's copy on disk is its text in the binary (see `bundled_files`).
    let bundled = BUNDLED
        .iter()
        .find(|(name, _)| source == Source::Bundled && path.ends_with(Path::new(name).join("SKILL.md")))
        .map(|(_, text)| *text);
    let stamp = match bundled {
        Some(text) => (text.len() as u64, None),
        None => {
            let meta = std::fs::metadata(path).map_err(|e| format!("unreadable: {e}"))?;
            (meta.len(), meta.modified().ok())
        }
    };
    if let Some((len, time, parsed)) = crate::sync::lock(&CACHE).get_or_insert_default().get(path)
        && (*len, *time) == stamp
    {
        return parsed.clone();
    }
    let parsed = match bundled {
        Some(text) => parse(text, path, source),
        None if stamp.0 > 1 << 20 => Err("larger than 1 MiB".to_owned()),
        None => read_limited(path, stamp.0).and_then(|text| parse(&text, path, source)),
    };
    crate::sync::lock(&CACHE).get_or_insert_default().insert(path.to_owned(), (stamp.0, stamp.1, parsed.clone()));
    parsed
}

/// At most 1 MiB of a file of about `len` bytes (its size as reported may understate it).
fn read_limited(path: &Path, len: u64) -> Result<String, String> {
    use std::io::Read as _;
    let mut text = String::with_capacity(len.min(1 << 20) as usize + 1);
    std::fs::File::open(path)
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
        .map_err(|e| format!("unreadable: {e}"))?;
    Ok(text)
}

/// A `SKILL.md`'s front matter.
pub fn parse(text: &str, path: &Path, source: Source) -> Result<Skill, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("no front matter: the file must start with a `---` line")?;
    let end = rest
        .match_indices("\n---")
        .map(|(i, _)| i)
        .find(|&i| rest[i + 4..].starts_with(['\n', '\r']) || rest.len() == i + 4)
        .ok_or("the front matter has no closing `---` line")?;
    let yaml = &rest[..end];
    // YAML parsing can be slow on hostile input: real front matter is a few lines.
    if yaml.len() > MAX_FRONT_MATTER {
        return Err(format!("the front matter is longer than {} KiB", MAX_FRONT_MATTER / 1024));
    }
    let front: FrontMatter = serde_norway::from_str(yaml).map_err(|e| format!("front matter: {e}"))?;
    let folder = path.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = front.name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).unwrap_or(folder);
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid {
        return Err(format!("name `{name}`: 1–{MAX_NAME} of a-z, 0-9 and -, not starting or ending with -"));
    }
    let description = front.description.map(|d| d.split_whitespace().collect::<Vec<_>>().join(" ")).unwrap_or_default();
    if description.is_empty() {
        return Err("no description (the model chooses skills by it)".into());
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!("the description is longer than {MAX_DESCRIPTION} characters"));
    }
    Ok(Skill { name, description, path: path.to_owned(), source, metadata: front.metadata.unwrap_or(Value::Null) })
}

/// What a skill needs and does not have, if anything.
fn unmet(metadata: &Value) -> Option<String> {
    let ours = ["acp", "openclaw"].iter().map(|k| &metadata[*k]).find(|v| v.is_object()).unwrap_or(metadata);
    let list = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default()
    };
    let requires = &ours["requires"];
    let missing_bins: Vec<String> = list(&requires["bins"]).into_iter().filter(|b| !on_path(b)).collect();
    if !missing_bins.is_empty() {
        return Some(format!(
            "needs {} on PATH",
            missing_bins.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let any = list(&requires["anyBins"]);
    if !any.is_empty() && !any.iter().any(|b| on_path(b)) {
        return Some(format!(
            "needs one of {} on PATH",
            any.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let missing_env: Vec<String> =
        list(&requires["env"]).into_iter().filter(|v| std::env::var_os(v).is_none_or(|x| x.is_empty())).collect();
    if !missing_env.is_empty() {
        return Some(format!("needs the environment variable {}", missing_env.join(", ")));
    }
    let os = list(&ours["os"]);
    let here = std::env::consts::OS;
    let matches = |o: &str| o == here || (here == "macos" && o == "darwin") || (here == "windows" && o == "win32");
    if !os.is_empty() && !os.iter().any(|o| matches(o)) {
        return Some(format!("only for {} (this is {here})", os.join(", ")));
    }
    None
}

fn on_path(bin: &str) -> bool {
    if bin.contains('/') {
        return is_executable(Path::new(bin));
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(bin))))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where the bundled skills are written out for this version of acp (once; a later run finds
/// them there).
pub fn bundled_dir(home: &Path) -> PathBuf {
    home.join("skills").join(".bundled").join(env!("CARGO_PKG_VERSION"))
}

/// The bundled skills' `SKILL.md` files, written out under [`bundled_dir`] if they are not there
/// yet (the model reads them like any other); one that cannot be written is not offered.
fn bundled_files(home: &Path) -> Vec<PathBuf> {
    let dir = bundled_dir(home);
    let mut files = Vec::new();
    for (name, text) in BUNDLED {
        let path = dir.join(name).join("SKILL.md");
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == text.len() as u64) {
            files.push(path);
            continue;
        }
        let written = std::fs::create_dir_all(dir.join(name)).and_then(|()| {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path))
        });
        match written {
            Ok(()) => files.push(path),
            Err(e) => tracing::warn!(error = %e, path = %path.display(), "could not write a bundled skill"),
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests;
