//! The user's hooks (`[[hooks]]`, docs/hooks.md): the programs configured for an event, run with
//! the user's shell in the session's directory, one JSON object on stdin, in parallel when several
//! match. The contract is Claude Code's: exit 0 with optional JSON on stdout (`decision`,
//! `reason`, `additionalContext`; plain text is context), exit 2 blocks with stderr as the
//! reason, anything else is the hook's own error (logged, never a block). A hook that runs past
//! its time is killed with its whole process group. What it prints is read up to a bound and the
//! rest thrown away, and it gets no credential from the environment. A workspace's own hooks
//! (`.acp/hooks.toml`, [`workspace`]) run only once the user allowed that file, and then inside the
//! exec sandbox.

pub mod workspace;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use globset::GlobBuilder;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::config::Config;
use crate::config::hooks::{HookConfig, HookEvent};

/// How long a hook may run unless its entry says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// What is kept of a hook's stdout and of its stderr.
pub const OUTPUT_KEPT: usize = 64 << 10;

/// How one hook went.
#[derive(Debug, Clone, PartialEq)]
pub enum HookResult {
    /// Exit 0: what it said, if anything.
    Done(Said),
    /// Exit 2: the call (or prompt, or turn end) is blocked, for this reason.
    Blocked(String),
    /// Any other ending: its own failure, which blocks nothing.
    Failed(String),
}

/// What a hook that succeeded said (exit 0, on stdout).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Said {
    /// `allow`, `deny`, `ask` (before a tool call), `block` (a prompt, a turn's end).
    pub decision: Option<String>,
    pub reason: Option<String>,
    /// Text for the model.
    pub context: Option<String>,
    /// The JSON it printed, whole (for event-specific fields such as rewritten arguments).
    pub json: Option<Value>,
}

/// One hook run: which, and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub command: String,
    pub result: HookResult,
    /// It failed, and had not failed the last time it ran: the user is told (once).
    pub newly_failed: bool,
    /// A workspace's hook: its `allow` and new arguments are not followed (the model can change
    /// what it runs), only its blocks, `ask` and context.
    pub workspace: bool,
}

impl Ran {
    /// What the user is told of a hook that newly failed.
    pub fn failure_notice(&self, event: HookEvent) -> Option<String> {
        match &self.result {
            HookResult::Failed(e) if self.newly_failed => Some(format!(
                "The {} hook `{}` failed: {e}. It blocks nothing; `/hooks` shows how each hook last went.",
                event.name(),
                self.command
            )),
            _ => None,
        }
    }
}

/// How a hook last went, for `/hooks`.
#[derive(Debug, Clone, PartialEq)]
pub struct Last {
    pub result: HookResult,
    /// When it ended (ms since the epoch).
    pub at_ms: i64,
    pub took: Duration,
}

/// A hook, as its last result is kept: its event, command, and whether it is a workspace's.
type HookId = (HookEvent, String, bool);

/// The last result of every hook run in this process.
fn lasts() -> &'static Mutex<HashMap<HookId, Last>> {
    static LAST: std::sync::OnceLock<Mutex<HashMap<HookId, Last>>> = std::sync::OnceLock::new();
    LAST.get_or_init(Mutex::default)
}

/// How `hook` last went in this process, if it ran.
pub fn last(hook: &HookConfig) -> Option<Last> {
    crate::sync::lock(lasts()).get(&(hook.event, hook.command.clone(), hook.workspace)).cloned()
}

/// Records how `hook` went; whether it newly failed.
fn record(hook: &HookConfig, result: &HookResult, took: Duration) -> bool {
    let last = Last { result: result.clone(), at_ms: crate::clock::now_ms(), took };
    let before = crate::sync::lock(lasts()).insert((hook.event, hook.command.clone(), hook.workspace), last);
    matches!(result, HookResult::Failed(_)) && !before.is_some_and(|b| matches!(b.result, HookResult::Failed(_)))
}

/// What the hooks that ran on one event decide together: a block wins (exit 2, or a `deny` or
/// `block` decision), then `ask`, then `allow`; a hook's own failure decides nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Block(String),
    Ask(Option<String>),
    Allow,
    /// No decision; the context they added, if any (joined).
    Go(Option<String>),
}

pub fn verdict(ran: &[Ran]) -> Verdict {
    let said = || ran.iter().filter_map(|r| if let HookResult::Done(s) = &r.result { Some(s) } else { None });
    if let Some(reason) = ran.iter().find_map(|r| match &r.result {
        HookResult::Blocked(reason) => Some(reason.clone()),
        HookResult::Done(s) if matches!(s.decision.as_deref(), Some("deny" | "block")) => {
            Some(s.reason.clone().unwrap_or_else(|| "a hook said no".into()))
        }
        _ => None,
    }) {
        return Verdict::Block(reason);
    }
    if let Some(s) = said().find(|s| s.decision.as_deref() == Some("ask")) {
        return Verdict::Ask(s.reason.clone());
    }
    let user_said = || {
        ran.iter()
            .filter(|r| !r.workspace)
            .filter_map(|r| if let HookResult::Done(s) = &r.result { Some(s) } else { None })
    };
    if user_said().any(|s| matches!(s.decision.as_deref(), Some("allow" | "approve"))) {
        return Verdict::Allow;
    }
    let context: Vec<&str> = said().filter_map(|s| s.context.as_deref()).collect();
    Verdict::Go((!context.is_empty()).then(|| context.join("\n\n")))
}

/// The hooks of `hooks` (config.toml's, then an allowed workspace file's) configured for `event`
/// that match `subject` (a tool's name, a command's, a channel's, a session start's source): an
/// entry without a matcher matches every one.
pub fn matching<'a>(
    hooks: impl IntoIterator<Item = &'a HookConfig>,
    event: HookEvent,
    subject: Option<&str>,
) -> Vec<&'a HookConfig> {
    hooks
        .into_iter()
        .filter(|h| h.event == event)
        .filter(|h| match (h.matcher.as_deref().map(str::trim).filter(|m| !m.is_empty() && *m != "*"), subject) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(pattern), Some(subject)) => matches(pattern, subject),
        })
        .collect()
}

/// `pattern` (a glob; `a|b` for either) covers `subject`.
/// A plain name is compared as it is; a glob is compiled once per process.
fn matches(pattern: &str, subject: &str) -> bool {
    pattern.split('|').map(str::trim).any(|one| {
        if !one.contains(['*', '?', '[', '{', '\\']) {
            return one == subject || claude_code_name(one) == Some(subject);
        }
        static GLOBS: std::sync::OnceLock<Mutex<HashMap<String, Option<globset::GlobMatcher>>>> =
            std::sync::OnceLock::new();
        let mut globs = crate::sync::lock(GLOBS.get_or_init(Mutex::default));
        let glob = globs.entry(one.to_owned()).or_insert_with(|| {
            GlobBuilder::new(one).literal_separator(false).build().ok().map(|g| g.compile_matcher())
        });
        glob.as_ref().is_some_and(|g| g.is_match(subject))
    })
}

/// Runs `hooks` on `input` in `cwd`, all at once; how each went, in their order. A workspace's
/// hook runs in the exec sandbox, `cwd` its one writable root besides the temp dir.
pub async fn run(config: &Config, hooks: &[&HookConfig], input: &Value, cwd: &Path) -> Vec<Ran> {
    let stdin = serde_json::to_vec(input).unwrap_or_default();
    let env = crate::sandbox::unconfined_env(config);
    let runs = hooks.iter().map(|hook| {
        let limit = hook.timeout_sec.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.clamp(1, 24 * 3600)));
        let (stdin, env) = (&stdin, &env);
        async move {
            let started = Instant::now();
            let result = match program(config, hook, cwd) {
                Ok(program) => run_one(program, stdin, env, cwd, limit).await,
                Err(why) => HookResult::Failed(why),
            };
            if let HookResult::Failed(e) = &result {
                tracing::warn!(command = %hook.command, error = %e, "a hook failed");
            }
            let newly_failed = record(hook, &result, started.elapsed());
            Ran { command: hook.command.clone(), result, newly_failed, workspace: hook.workspace }
        }
    });
    futures_util::future::join_all(runs).await
}

/// The program and arguments that run `hook`: the user's shell, through the sandbox's launcher
/// for a workspace's hook (which never runs unconfined).
fn program(config: &Config, hook: &HookConfig, cwd: &Path) -> Result<Vec<std::ffi::OsString>, String> {
    let mut argv = Vec::new();
    if hook.workspace {
        let launcher = crate::sandbox::available(config)
            .map_err(|why| format!("a workspace's hook runs only in the sandbox, and {why}"))?;
        let policy = crate::sandbox::Policy::new(config, &[PathBuf::from(cwd)], config.sandbox.network);
        argv.push(launcher.program.clone().into_os_string());
        argv.extend(policy.launcher_args(launcher, None));
    }
    argv.extend([shell(), "-c".into(), hook.command.clone().into()]);
    Ok(argv)
}

async fn run_one(
    argv: Vec<std::ffi::OsString>,
    stdin: &[u8],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    cwd: &Path,
    limit: Duration,
) -> HookResult {
    let mut child = match tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return HookResult::Failed(format!("could not start it: {e}")),
    };
    // Killed when the hook ends, runs past its time, or is no longer waited for (a cancelled
    // turn): what it started in the background goes with it.
    let group = Group(child.id().and_then(|id| i32::try_from(id).ok()).and_then(rustix::process::Pid::from_raw));
    let (mut input, out, err) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let feed = async {
        if let Some(pipe) = input.as_mut() {
            // A hook that does not read its input is fine.
            let _ = pipe.write_all(stdin).await;
        }
        drop(input);
    };
    let waiting = async {
        let ((), status) = tokio::join!(feed, child.wait());
        status
    };
    let reading = async { tokio::join!(bounded(out), bounded(err)) };
    tokio::pin!(waiting, reading);
    let deadline = tokio::time::Instant::now() + limit;
    let mut read = None;
    // Its output is read while it runs (it never blocks on a full pipe); it is done when it exits,
    // whatever it left holding its output.
    let status = loop {
        tokio::select! {
            output = &mut reading, if read.is_none() => read = Some(output),
            status = &mut waiting => break Some(status),
            () = tokio::time::sleep_until(deadline) => break None,
        }
    };
    group.kill();
    let Some(status) = status else {
        return HookResult::Failed(format!("it ran past its {} s and was stopped", limit.as_secs()));
    };
    let (out, err) = match read {
        Some(output) => output,
        // The group is gone, so its pipes close; one that escaped it (`setsid`) is not waited for.
        None => tokio::time::timeout(Duration::from_secs(1), &mut reading).await.unwrap_or_default(),
    };
    let err = String::from_utf8_lossy(&err).trim().to_owned();
    match status.map(|s| s.code()) {
        Ok(Some(0)) => HookResult::Done(said(&String::from_utf8_lossy(&out))),
        Ok(Some(2)) if err.is_empty() => HookResult::Blocked("a hook blocked it (it gave no reason)".into()),
        Ok(Some(2)) => HookResult::Blocked(err),
        Ok(Some(code)) => HookResult::Failed(format!(
            "exit {code}{}",
            if err.is_empty() { String::new() } else { format!(": {err}") }
        )),
        Ok(None) => HookResult::Failed("killed by a signal".into()),
        Err(e) => HookResult::Failed(e.to_string()),
    }
}

/// A hook's process group, killed when dropped.
struct Group(Option<rustix::process::Pid>);

impl Group {
    fn kill(&self) {
        if let Some(group) = self.0 {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a hook printed on success: JSON (its own fields and Claude Code's `hookSpecificOutput`),
/// else plain text as context.
fn said(out: &str) -> Said {
    let out = out.trim();
    if out.is_empty() {
        return Said::default();
    }
    let Ok(json @ Value::Object(_)) = serde_json::from_str::<Value>(out) else {
        return Said { context: Some(out.to_owned()), ..Said::default() };
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let specific = json.get("hookSpecificOutput").cloned().unwrap_or(Value::Null);
    Said {
        decision: text(&json, "decision").or_else(|| text(&specific, "permissionDecision")),
        reason: text(&json, "reason").or_else(|| text(&specific, "permissionDecisionReason")),
        context: text(&json, "additionalContext").or_else(|| text(&specific, "additionalContext")),
        json: Some(json),
    }
}

/// Reads `pipe` to its end, keeping [`OUTPUT_KEPT`] bytes (the rest is read and dropped, so the
/// hook never blocks on a full pipe).
async fn bounded(pipe: Option<impl AsyncRead + Unpin>) -> Vec<u8> {
    let Some(mut pipe) = pipe else { return Vec::new() };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = OUTPUT_KEPT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// One line for a hook in a listing (`/hooks`, `acp hooks list`): its event, matcher, command
/// and time limit, and how it last went in this process, if it ran.
pub fn describe(hook: &HookConfig) -> String {
    let matcher = hook.matcher.as_deref().map(|m| format!(" [{m}]")).unwrap_or_default();
    let timeout = hook.timeout_sec.unwrap_or_else(|| DEFAULT_TIMEOUT.as_secs());
    let mut line = format!("{}{matcher}: `{}` (timeout {timeout} s)", hook.event.name(), hook.command);
    if let Some(last) = last(hook) {
        let ago = (crate::clock::now_ms() - last.at_ms).max(0) / 1000;
        let how = match &last.result {
            HookResult::Done(said) => match (&said.decision, &said.context) {
                (Some(d), _) => format!("decided `{d}`"),
                (None, Some(_)) => "added context".to_owned(),
                (None, None) => "done".to_owned(),
            },
            HookResult::Blocked(reason) => format!("blocked: {}", first_line(reason)),
            HookResult::Failed(e) => format!("**failed**: {}", first_line(e)),
        };
        line.push_str(&format!(" — last ran {ago} s ago, {} ms: {how}", last.took.as_millis()));
    }
    line
}

/// The tool Claude Code calls `name`, as it is named here (a matcher written for it carries over).
fn claude_code_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "Bash" => "exec",
        "Read" => "read",
        "Write" => "write",
        "Edit" | "MultiEdit" => "edit",
        "Grep" => "grep",
        "Glob" => "glob",
        "LS" => "ls",
        "WebFetch" => "web_fetch",
        "TodoWrite" => "update_plan",
        "Task" => "sessions_spawn",
        _ => return None,
    })
}

/// The first line of `text`, at most 200 characters.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(200).collect()
}

/// The user's shell: `$SHELL`, else `sh`.
fn shell() -> std::ffi::OsString {
    std::env::var_os("SHELL").filter(|s| !s.is_empty()).unwrap_or_else(|| "sh".into())
}

#[cfg(test)]
mod tests;
