//! The system prompt, assembled at the start of every turn from fixed sections: who the agent is,
//! tools, safety, the workspace, project instructions (`AGENTS.md` — or `CLAUDE.md` — from the
//! repository root down to the cwd), the agent-workspace files under `$ACP_HOME/workspace`, the date
//! and time zone, and a runtime line. Each file is cut to `bootstrap_max_chars` (head and tail kept,
//! with a marker naming the file to read in full). Only the date (not the time) goes in, so the
//! prompt stays byte-identical through a day and providers' prompt caches keep working.

use std::path::{Path, PathBuf};

use crate::config::ModelRef;

/// The agent-workspace files, in the order they are injected. `MEMORY.md` is optional: it is not
/// reported missing.
pub const WORKSPACE_FILES: &[&str] = &["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md"];
pub const OPTIONAL_WORKSPACE_FILES: &[&str] = &["MEMORY.md"];

/// What the prompt is built from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub cwd: &'a Path,
    pub additional_dirs: &'a [PathBuf],
    pub model: &'a ModelRef,
    /// `$ACP_HOME`.
    pub home: &'a Path,
    pub max_file_chars: usize,
    /// Which skills to list (`None`: none, as for a child session).
    pub skills: Option<&'a crate::config::SkillsConfig>,
    /// What of the memory files the session reads.
    pub memory: MemoryUse,
    /// The directory of the agent's own files ([`crate::config::Config::agent_dir`]); `None`:
    /// `$ACP_HOME/workspace`.
    pub agent_workspace: Option<&'a Path>,
    /// Who the agent is (`[[agents]] identity`): said first, in place of acp's own line.
    pub identity: Option<String>,
}

impl Inputs<'_> {
    /// The directory of the agent-workspace files.
    fn agent_dir(&self) -> PathBuf {
        self.agent_workspace.map_or_else(|| self.home.join("workspace"), Path::to_path_buf)
    }
}

/// What of the agent's memory files a session reads (docs/memory.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryUse {
    /// `MEMORY.md`, today's and yesterday's logs, and how to write and search them: an editor's
    /// session, or the gateway's private ones.
    Private,
    /// None of them: a group chat (the owner's notes are not for everyone in it), a subagent, or
    /// memory turned off.
    None,
}

/// Where an injected file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Project,
    AgentWorkspace,
}

/// One file the prompt names, for `/context`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    pub path: PathBuf,
    pub source: Source,
    /// Characters in the file (after trailing whitespace), `None` if it is missing.
    pub chars: Option<usize>,
    /// Characters of the file that went into the prompt (head and tail when truncated).
    pub injected: usize,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPrompt {
    pub text: String,
    pub files: Vec<FileReport>,
}

pub fn build(inputs: &Inputs<'_>) -> SystemPrompt {
    let mut text = String::with_capacity(8 * 1024);
    let mut files = Vec::new();
    // Who the agent is: acp in an editor, or the agent `[[agents]]` names.
    match &inputs.identity {
        Some(identity) => text.push_str(&format!("{identity}\n")),
        None => text.push_str("You are acp, an AI coding assistant working with the user inside their editor.\n"),
    }
    text.push_str(
        "Answer in Markdown. Be direct and concise; show code in fenced blocks with a language tag.\n\n\
         # Tools\n\
         Use the tools to look before you change: `grep`, `glob`, `ls` and `read` to find and read code, \
         `edit` for changes to part of a file (exact text, unique), `write` for new files, `apply_patch` for \
         changes across several files, `exec` to build and run tests. Relative paths are relative to the \
         workspace. Several independent reads can be requested at once. When a tool fails, read its message: \
         it says what to do. If the user rejects an action, do not retry it; ask what they want instead. \
         For work of several steps, keep a plan with `update_plan` and update it as steps are done.\n\n\
         # Safety\n\
         Stay inside the workspace unless the user asks otherwise. Do not run destructive commands \
         (deleting data, force-pushing, rewriting history) unless the user asked for exactly that.\n\n",
    );

    text.push_str("# Workspace\n");
    text.push_str(&format!("Working directory: {}\n", inputs.cwd.display()));
    for dir in inputs.additional_dirs {
        text.push_str(&format!("Also part of the workspace: {}\n", dir.display()));
    }
    text.push('\n');

    let project: Vec<(PathBuf, String)> = project_instructions(inputs.cwd)
        .into_iter()
        .filter_map(|path| {
            let content = read_trimmed(&path)?;
            (!content.is_empty()).then_some((path, content))
        })
        .collect();
    if !project.is_empty() {
        text.push_str(
            "# Project instructions\n\
             These instruction files apply to this workspace. Follow them; a file in a deeper directory takes \
             precedence over one above it.\n\n",
        );
        for (path, content) in project {
            let (injected, truncated) = truncate_file(&content, &file_name(&path), inputs.max_file_chars);
            text.push_str(&format!("## {}\n\n{}\n\n", path.display(), injected));
            files.push(FileReport {
                chars: Some(content.chars().count()),
                injected: kept_chars(&content, inputs.max_file_chars),
                truncated,
                path,
                source: Source::Project,
            });
        }
    }

    workspace_files(inputs, &mut text, &mut files);
    let now = jiff::Timestamp::now().to_zoned(local_zone().clone());
    if inputs.memory == MemoryUse::Private {
        memory_section(inputs, &now, &mut text, &mut files);
    }

    if let Some(config) = inputs.skills
        && let Some(section) = crate::skills::Catalog::load(inputs.home, inputs.cwd, config).prompt_section()
    {
        text.push_str(&section);
    }

    let zone = now.time_zone().iana_name().unwrap_or("local");
    text.push_str(&format!(
        "Date: {} ({}). Time zone: {zone} (UTC{}).\n",
        now.strftime("%Y-%m-%d"),
        now.strftime("%A"),
        now.strftime("%:z"),
    ));
    text.push_str(&format!(
        "Runtime: host={} os={} arch={} model={}",
        hostname(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        inputs.model,
    ));
    SystemPrompt { text, files }
}

/// The local time zone, read once: `TZ` (a name, `:name`, a file, or a POSIX rule), else the
/// `/etc/localtime` link, named after its target — never by listing the whole zoneinfo
/// database, which the generic lookup does on the first use (a few milliseconds on the first
/// prompt of every process).
pub(crate) fn local_zone() -> &'static jiff::tz::TimeZone {
    static ZONE: std::sync::OnceLock<jiff::tz::TimeZone> = std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        zone_from(std::env::var("TZ").ok().as_deref(), Path::new("/etc/localtime"), Path::new("/usr/share/zoneinfo"))
            .unwrap_or_else(jiff::tz::TimeZone::system)
    })
}

/// The zone `tz` (the `TZ` variable) names, else the one `localtime` links to in `zoneinfo`.
fn zone_from(tz: Option<&str>, localtime: &Path, zoneinfo: &Path) -> Option<jiff::tz::TimeZone> {
    let named = |name: &str, file: &Path| {
        let data = std::fs::read(file).ok()?;
        jiff::tz::TimeZone::tzif(name, &data).ok()
    };
    match tz.map(str::trim).filter(|t| !t.is_empty()) {
        Some(tz) => {
            let tz = tz.strip_prefix(':').unwrap_or(tz);
            if tz.starts_with('/') {
                let file = Path::new(tz);
                let name = file.strip_prefix(zoneinfo).ok().and_then(Path::to_str).unwrap_or(tz);
                return named(name, file);
            }
            let plain = tz.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
            if plain && let Some(zone) = named(tz, &zoneinfo.join(tz)) {
                return Some(zone);
            }
            jiff::tz::TimeZone::posix(tz).ok()
        }
        None => {
            let target = std::fs::read_link(localtime).ok()?;
            let target = if target.is_relative() { localtime.parent()?.join(target) } else { target };
            let text = target.to_str()?;
            let name = &text[text.find("zoneinfo/")? + "zoneinfo/".len()..];
            named(name, localtime)
        }
    }
}

/// The agent-workspace section: each file under `$ACP_HOME/workspace`, empty ones skipped,
/// missing ones noted.
fn workspace_files(inputs: &Inputs<'_>, text: &mut String, files: &mut Vec<FileReport>) {
    let dir = inputs.agent_dir();
    if !dir.is_dir() {
        text.push_str(&format!("# Agent workspace\nNo agent workspace files ({} does not exist).\n\n", dir.display()));
        return;
    }
    let mut body = String::new();
    let mut soul = false;
    let private = inputs.memory == MemoryUse::Private;
    let optional = OPTIONAL_WORKSPACE_FILES.iter().filter(|_| private);
    let names = WORKSPACE_FILES.iter().map(|n| (n, true)).chain(optional.map(|n| (n, false)));
    for (name, required) in names {
        let path = dir.join(name);
        match read_trimmed(&path) {
            None => {
                if required {
                    body.push_str(&format!("## {name}\n\n[MISSING] Expected at: {}\n\n", path.display()));
                    files.push(FileReport {
                        path,
                        source: Source::AgentWorkspace,
                        chars: None,
                        injected: 0,
                        truncated: false,
                    });
                }
            }
            Some(content) if content.is_empty() => {}
            Some(content) => {
                soul |= *name == "SOUL.md";
                inject_workspace_file(inputs, path, name, &content, &mut body, files);
            }
        }
    }
    text.push_str("# Agent workspace\nThe following agent workspace files have been loaded.\n");
    if soul {
        text.push_str(
            "If SOUL.md is present, embody its persona and tone. Avoid stiff, generic replies; follow its guidance \
             unless higher-priority instructions override it.\n",
        );
    }
    text.push('\n');
    text.push_str(&body);
}

/// Where to write what is worth remembering, and today's and yesterday's daily logs (the
/// seed's "read at session start"), each within the per-file limit.
fn memory_section(inputs: &Inputs<'_>, now: &jiff::Zoned, text: &mut String, files: &mut Vec<FileReport>) {
    let dir = inputs.agent_dir();
    let today = now.strftime("%Y-%m-%d").to_string();
    text.push_str(&format!(
        "# Memory\nYou remember only what is written in {dir}: MEMORY.md holds durable facts, decisions and \
         preferences (keep it curated); memory/{today}.md is today's log (append running notes). When something \
         should outlast this session, or the user says to remember it, write it there with write/edit. Search \
         older notes with memory_search.\n",
        dir = dir.display()
    ));
    let yesterday = now.yesterday().map(|d| d.strftime("%Y-%m-%d").to_string()).ok();
    for date in [Some(today), yesterday].into_iter().flatten() {
        let path = dir.join(crate::memory::daily_log(&date));
        let Some(content) = read_trimmed(&path).filter(|c| !c.is_empty()) else { continue };
        text.push('\n');
        inject_workspace_file(inputs, path, &crate::memory::daily_log(&date), &content, text, files);
    }
}

/// The message of the silent turn before a compaction (the memory flush, docs/memory.md): what to
/// save where, and to answer `NO_REPLY`.
pub(crate) fn flush_prompt(dir: &Path) -> String {
    let today = jiff::Timestamp::now().to_zoned(local_zone().clone()).strftime("%Y-%m-%d").to_string();
    format!(
        "[Memory flush: the user sees neither this message nor your reply.] This conversation is about to be \
         compacted: its older part will be replaced by a summary. Save what should outlast that and is not saved \
         yet (facts, decisions, preferences, where the work stands): durable facts in {dir}/MEMORY.md, running \
         notes in {dir}/memory/{today}.md (add to what is there). Only write and edit of those files run in this \
         turn. Then reply NO_REPLY; if nothing needs saving, reply NO_REPLY at once.",
        dir = dir.display()
    )
}

/// An agent-workspace file as `## <path>` and its content (head and tail past the per-file limit),
/// and its line in `/context`'s report.
fn inject_workspace_file(
    inputs: &Inputs<'_>,
    path: PathBuf,
    name: &str,
    content: &str,
    text: &mut String,
    files: &mut Vec<FileReport>,
) {
    let (injected, truncated) = truncate_file(content, name, inputs.max_file_chars);
    text.push_str(&format!("## {}\n\n{}\n\n", path.display(), injected));
    files.push(FileReport {
        chars: Some(content.chars().count()),
        injected: kept_chars(content, inputs.max_file_chars),
        truncated,
        path,
        source: Source::AgentWorkspace,
    });
}

/// `AGENTS.md` (else `CLAUDE.md`) of each directory from the repository root down to `cwd`; without
/// a repository, only `cwd`'s.
pub fn project_instructions(cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<&Path> = Vec::new();
    let mut found_root = false;
    for dir in cwd.ancestors() {
        dirs.push(dir);
        if dir.join(".git").exists() {
            found_root = true;
            break;
        }
    }
    if !found_root {
        dirs.truncate(1);
    }
    dirs.reverse();
    dirs.into_iter()
        .filter_map(|dir| ["AGENTS.md", "CLAUDE.md"].iter().map(|name| dir.join(name)).find(|p| p.is_file()))
        .collect()
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The file's text without trailing whitespace; `None` if it cannot be read.
fn read_trimmed(path: &Path) -> Option<String> {
    // Instruction files are cut to a few thousand characters anyway; a larger one (or a FIFO, or
    // a link to something endless) is not read.
    let bytes = crate::files::read_capped(path, 4 << 20).ok()?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text.truncate(text.trim_end().len());
    Some(text)
}

/// Characters of `content` that [`truncate_file`] keeps.
fn kept_chars(content: &str, max: usize) -> usize {
    let total = content.chars().count();
    if total <= max { total } else { max * 7 / 10 + max * 2 / 10 }
}

/// Keeps a file to `max` characters: 70% from the head and 20% from the tail, with a marker between
/// them that says what was cut and which file to read for the rest.
pub fn truncate_file(content: &str, name: &str, max: usize) -> (String, bool) {
    let total = content.chars().count();
    if total <= max {
        return (content.to_owned(), false);
    }
    let head = max * 7 / 10;
    let tail = max * 2 / 10;
    tracing::warn!("workspace bootstrap file {name} is {total} chars (limit {max}); truncating in injected context");
    let head_end = content.char_indices().nth(head).map_or(content.len(), |(i, _)| i);
    let tail_start = content.char_indices().nth(total - tail).map_or(content.len(), |(i, _)| i);
    let out = format!(
        "{}\n\n[...truncated, read {name} for full content...]\n…(truncated {name}: kept {head}+{tail} chars of {total})…\n\n{}",
        &content[..head_end],
        &content[tail_start..],
    );
    (out, true)
}

fn hostname() -> String {
    rustix::system::uname().nodename().to_string_lossy().into_owned()
}

#[cfg(test)]
mod zone_tests {
    use super::*;

    #[test]
    fn the_zone_is_named_from_tz_or_the_localtime_link() {
        let dir = tempfile::tempdir().unwrap();
        let zoneinfo = dir.path().join("zoneinfo");
        std::fs::create_dir_all(zoneinfo.join("Europe")).unwrap();
        std::fs::copy("/usr/share/zoneinfo/Europe/Paris", zoneinfo.join("Europe/Paris")).unwrap();
        let localtime = dir.path().join("localtime");
        std::os::unix::fs::symlink("zoneinfo/Europe/Paris", &localtime).unwrap();
        let name = |tz: Option<&str>| zone_from(tz, &localtime, &zoneinfo).map(|z| z.iana_name().map(str::to_owned));
        assert_eq!(name(None), Some(Some("Europe/Paris".into())), "a relative link");
        assert_eq!(name(Some("Europe/Paris")), Some(Some("Europe/Paris".into())));
        assert_eq!(name(Some(":Europe/Paris")), Some(Some("Europe/Paris".into())));
        let file = zoneinfo.join("Europe/Paris");
        assert_eq!(name(Some(file.to_str().unwrap())), Some(Some("Europe/Paris".into())), "a file");
        // A POSIX rule has an offset and no name; a name that escapes the database is no file.
        let posix = zone_from(Some("EST5EDT,M3.2.0,M11.1.0"), &localtime, &zoneinfo).unwrap();
        assert_eq!(posix.iana_name(), None);
        assert!(zone_from(Some("../localtime"), &localtime, &zoneinfo).is_none());
        // Neither: the caller falls back to the generic lookup.
        assert!(zone_from(None, &dir.path().join("none"), &zoneinfo).is_none());
        let paris = zone_from(None, &localtime, &zoneinfo).unwrap();
        let summer = jiff::Timestamp::from_second(1_750_000_000).unwrap().to_zoned(paris);
        assert_eq!(summer.strftime("%:z").to_string(), "+02:00");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Self {
            let d = std::env::temp_dir().join(format!("acp-ctx-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&d).unwrap();
            Self(d)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn model() -> ModelRef {
        ModelRef { provider: "anthropic".into(), model: "claude-x".into() }
    }

    #[test]
    fn truncation_keeps_head_and_tail_with_the_marker() {
        let content: String = (0..1000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let (out, cut) = truncate_file(&content, "TOOLS.md", 200);
        assert!(cut);
        assert!(out.starts_with(&content[..140]));
        assert!(out.ends_with(&content[1000 - 40..]));
        assert!(out.contains(
            "\n\n[...truncated, read TOOLS.md for full content...]\n…(truncated TOOLS.md: kept 140+40 chars of 1000)…\n\n"
        ));
        assert_eq!(truncate_file("short", "X.md", 200), ("short".into(), false));
        // Characters, not bytes.
        let wide = "é".repeat(300);
        let (out, _) = truncate_file(&wide, "W.md", 100);
        assert!(out.starts_with(&"é".repeat(70)));
    }

    #[test]
    fn instructions_come_from_the_repository_root_down_to_the_cwd() {
        let d = Dir::new();
        let repo = d.0.join("repo");
        let sub = repo.join("crates/core");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(d.0.join("AGENTS.md"), "outside the repo").unwrap();
        std::fs::write(repo.join("AGENTS.md"), "root rules").unwrap();
        std::fs::write(repo.join("crates/CLAUDE.md"), "crates rules").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "core rules").unwrap();
        std::fs::write(sub.join("CLAUDE.md"), "shadowed by AGENTS.md").unwrap();
        assert_eq!(
            project_instructions(&sub),
            vec![repo.join("AGENTS.md"), repo.join("crates/CLAUDE.md"), sub.join("AGENTS.md")]
        );
        let home = d.0.join("home");
        let p = build(&Inputs {
            cwd: &sub,
            additional_dirs: &[],
            model: &model(),
            home: &home,
            max_file_chars: 20_000,
            skills: None,
            memory: MemoryUse::Private,
            agent_workspace: None,
            identity: None,
        });
        let root = p.text.find("root rules").unwrap();
        let core = p.text.find("core rules").unwrap();
        assert!(root < core);
        assert!(!p.text.contains("outside the repo") && !p.text.contains("shadowed"));
        assert_eq!(p.files.len(), 3);
    }

    #[test]
    fn workspace_files_injected_skipped_or_noted_missing() {
        let d = Dir::new();
        let ws = d.0.join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("SOUL.md"), "Be terse.\n\n").unwrap();
        std::fs::write(ws.join("USER.md"), "   \n").unwrap();
        std::fs::write(ws.join("MEMORY.md"), "likes tabs").unwrap();
        std::fs::write(ws.join("TOOLS.md"), "t".repeat(500)).unwrap();
        let cwd = d.0.join("proj");
        std::fs::create_dir_all(&cwd).unwrap();
        let p = build(&Inputs {
            cwd: &cwd,
            additional_dirs: &[],
            model: &model(),
            home: &d.0,
            max_file_chars: 100,
            skills: None,
            memory: MemoryUse::Private,
            agent_workspace: None,
            identity: None,
        });
        assert!(p.text.contains("Be terse."));
        assert!(p.text.contains("embody its persona"));
        assert!(p.text.contains(&format!("[MISSING] Expected at: {}", ws.join("AGENTS.md").display())));
        assert!(!p.text.contains(&format!("Expected at: {}", ws.join("USER.md").display())), "empty is skipped");
        assert!(!p.text.contains(&format!("Expected at: {}", ws.join("MEMORY.md").display())));
        assert!(p.text.contains("likes tabs"));
        assert!(p.text.contains("[...truncated, read TOOLS.md for full content...]"));
        let tools = p.files.iter().find(|f| f.path.ends_with("TOOLS.md")).unwrap();
        assert_eq!((tools.chars, tools.truncated), (Some(500), true));
    }

    #[test]
    fn private_sessions_read_memory_and_todays_and_yesterdays_logs_and_others_none_of_it() {
        let d = Dir::new();
        let ws = d.0.join("workspace");
        std::fs::create_dir_all(ws.join("memory")).unwrap();
        std::fs::write(ws.join("MEMORY.md"), "The owner's bank is Acme.").unwrap();
        let now = jiff::Timestamp::now().to_zoned(local_zone().clone());
        let day = |z: &jiff::Zoned| z.strftime("%Y-%m-%d").to_string();
        let (today, yesterday) = (day(&now), day(&now.yesterday().unwrap()));
        let before = day(&now.yesterday().unwrap().yesterday().unwrap());
        std::fs::write(ws.join(format!("memory/{today}.md")), "Today: fixed the build.").unwrap();
        std::fs::write(ws.join(format!("memory/{yesterday}.md")), "Yesterday: met Bob.").unwrap();
        std::fs::write(ws.join(format!("memory/{before}.md")), "Earlier: nothing of note.").unwrap();
        let cwd = d.0.join("proj");
        std::fs::create_dir_all(&cwd).unwrap();
        let prompt = |memory| {
            build(&Inputs {
                cwd: &cwd,
                additional_dirs: &[],
                model: &model(),
                home: &d.0,
                max_file_chars: 1000,
                skills: None,
                memory,
                agent_workspace: None,
                identity: None,
            })
        };
        let private = prompt(MemoryUse::Private);
        for expected in ["The owner's bank is Acme.", "Today: fixed the build.", "Yesterday: met Bob.", "memory_search"]
        {
            assert!(private.text.contains(expected), "{expected}");
        }
        assert!(private.text.contains(&format!("memory/{today}.md is today's log")));
        assert!(!private.text.contains("Earlier: nothing of note."), "only today and yesterday");
        assert!(private.files.iter().any(|f| f.path.ends_with(format!("memory/{yesterday}.md"))));
        let shared = prompt(MemoryUse::None);
        for absent in ["Acme", "fixed the build", "met Bob", "memory_search", "# Memory"] {
            assert!(!shared.text.contains(absent), "{absent}");
        }
        assert!(!shared.files.iter().any(|f| f.path.starts_with(ws.join("memory")) || f.path.ends_with("MEMORY.md")));
    }

    #[test]
    fn prompt_names_the_workspace_date_zone_and_runtime() {
        let d = Dir::new();
        let extra = vec![PathBuf::from("/work/lib")];
        let p = build(&Inputs {
            cwd: Path::new("/work/proj"),
            additional_dirs: &extra,
            model: &model(),
            home: &d.0,
            max_file_chars: 20_000,
            skills: Some(&crate::config::SkillsConfig::default()),
            memory: MemoryUse::Private,
            agent_workspace: None,
            identity: None,
        });
        assert!(p.text.contains("Working directory: /work/proj"));
        assert!(p.text.contains("Also part of the workspace: /work/lib"));
        assert!(p.text.contains("model=anthropic/claude-x"));
        assert!(p.text.contains("host="));
        assert!(p.text.contains("Time zone: "));
        let today = jiff::Zoned::now().strftime("%Y-%m-%d").to_string();
        assert!(p.text.contains(&format!("Date: {today}")));
        assert!(p.text.contains("`apply_patch`") && p.text.contains("# Safety") && p.text.contains("`update_plan`"));
        assert!(p.text.contains("<available_skills>\n<skill><name>openlang</name>"), "the bundled skill is listed");
    }
}
