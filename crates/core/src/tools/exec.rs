//! `exec`: a shell command with a timeout, a working directory and extra environment. In an editor
//! terminal when the editor offers one (`terminal/create` → `wait_for_exit` → `output` →
//! `release`); otherwise as a local process group whose output is reported as it arrives, once,
//! and which is killed whole on timeout or cancel. Commands run inside the sandbox (see
//! [`crate::sandbox`]) unless the model asks to leave it and the user agrees.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{Int, Vars};
use super::host::{ExitStatus, TerminalSpec};
use super::{
    Access, Action, Confinement, ExecAccess, Prepared, Progress, Tool, ToolContent, ToolContext, ToolOutput, kind,
    truncate,
};

pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Output kept in memory; beyond it only the byte count grows.
const MAX_KEPT: usize = 64 * 1024 * 1024;
/// How much output the user sees in the final result (the full output streamed as it came).
const USER_TAIL: usize = 16 * 1024;

pub struct Exec;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecArgs {
    /// The command line
    command: String,
    /// Directory to run in (relative to the workspace root)
    cwd: Option<String>,
    /// Time limit in milliseconds
    #[schemars(range(min = 1))]
    timeout_ms: Option<Int>,
    /// Extra environment variables
    env: Option<Vars>,
    /// false to ask the user to run this command outside the sandbox (default true)
    sandbox: Option<bool>,
}

impl Tool for Exec {
    const NAME: &'static str = "exec";
    type Args = ExecArgs;

    fn description(&self) -> String {
        format!(
            "Run a shell command (bash -c) and return its combined stdout and stderr and its exit code. \
         Runs in the workspace root unless `cwd` is given. Times out after `timeout_ms` \
         (default {DEFAULT_TIMEOUT_MS}, at most {MAX_TIMEOUT_MS}). Do not start commands that wait for input \
         or never end (servers, watchers). Commands run in a sandbox: they may write only inside the \
         workspace and the temp dir, cannot read credentials, and have no network unless the user turned it on. \
         Set `sandbox` to false only when a command fails because of the sandbox; the user is then asked \
         whether it may run unconfined."
        )
    }

    async fn prepare(&self, args: ExecArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let command = args.command;
        if command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        let cwd = match args.cwd.as_deref() {
            Some(dir) => ctx.resolve(dir),
            None => ctx.cwd.clone(),
        };
        let timeout = args.timeout_ms.map_or(DEFAULT_TIMEOUT_MS, |t| t.0).clamp(1, MAX_TIMEOUT_MS);
        let env = args.env.map(|v| v.0).unwrap_or_default();
        let confinement = match args.sandbox {
            None | Some(true) => match crate::sandbox::available(&ctx.config) {
                Ok(_) => Confinement::Sandboxed,
                Err(_) => Confinement::NoSandbox,
            },
            Some(false) => Confinement::Escape,
        };
        let mut title = format!("Run {}", code_span(&shown_with_env(&command, &env)));
        if cwd != ctx.cwd {
            title.push_str(&format!(" in {}", ctx.display(&cwd)));
        }
        if confinement == Confinement::Escape {
            title.push_str(" outside the sandbox");
        }
        Ok(Prepared {
            title,
            kind: kind::kind_for_command(&command),
            locations: Vec::new(),
            preview: Vec::new(),
            access: Access {
                exec: Some(ExecAccess { command: command.clone(), cwd: cwd.clone(), env: env.clone(), confinement }),
                ..Access::default()
            },
            action: Box::new(ExecAction { command, cwd, env, timeout: Duration::from_millis(timeout), confinement }),
        })
    }
}

/// A command as a title shows it: whole, on one line, with nothing hidden — line breaks, tabs and
/// other control characters escaped, and a run of more than three spaces counted rather than
/// drawn (so no payload can sit far off to the right).
pub fn shown(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut chars = command.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                let mut run = 1;
                while chars.peek() == Some(&' ') {
                    chars.next();
                    run += 1;
                }
                if run > 3 {
                    out.push_str(&format!(" ⟨{run} spaces⟩ "));
                } else {
                    out.extend(std::iter::repeat_n(' ', run));
                }
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` as a Markdown code span, its own backticks kept: the fence is one backtick longer than
/// the longest run inside (and padded when the text starts or ends with one).
pub fn code_span(text: &str) -> String {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// The command with the variables the call sets in front, as a shell would read them.
fn shown_with_env(command: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    for (name, value) in env {
        let quoted = shlex::try_quote(value).map_or_else(|_| format!("{value:?}"), |q| q.into_owned());
        out.push_str(&shown(&format!("{name}={quoted}")));
        out.push(' ');
    }
    out.push_str(&shown(command));
    out
}

/// What starts a command.
struct Program {
    path: PathBuf,
    args: Vec<std::ffi::OsString>,
    /// The command's cgroup, held until it has ended.
    _cgroup: Option<crate::sandbox::pids::Cgroup>,
}

struct ExecAction {
    command: String,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
    confinement: Confinement,
}

/// How a command's run ended, besides its output.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

impl Action for ExecAction {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        if !self.cwd.is_dir() {
            return ToolOutput::error(format!("{} is not a directory", ctx.display(&self.cwd)));
        }
        if ctx.host.has_terminals() { self.in_terminal(ctx).await } else { self.locally(ctx).await }
    }
}

impl ExecAction {
    /// The program to start and its arguments: the shell, through the sandbox's launcher when the
    /// command is confined.
    /// The program to start and its arguments: the shell, through the sandbox's launcher when the
    /// command is confined (with the cgroup that holds its process limit, removed when dropped).
    fn program(&self, ctx: &ToolContext) -> Result<Program, String> {
        let shell_args = [std::ffi::OsString::from("-c"), self.command.clone().into()];
        if self.confinement != Confinement::Sandboxed {
            return Ok(Program { path: PathBuf::from(shell()), args: shell_args.into(), _cgroup: None });
        }
        let launcher = crate::sandbox::available(&ctx.config)?;
        let policy = self.policy(ctx);
        let cgroup = crate::sandbox::pids::Cgroup::new(policy.max_procs);
        let mut args = policy.launcher_args(launcher, cgroup.as_ref().map(|c| c.dir.as_path()));
        args.push(shell().into());
        args.extend(shell_args);
        Ok(Program { path: launcher.program.clone(), args, _cgroup: cgroup })
    }

    fn policy(&self, ctx: &ToolContext) -> crate::sandbox::Policy {
        let mut policy = crate::sandbox::Policy::new(&ctx.config, &ctx.roots, ctx.network);
        // What the call sets itself, it gets (the model wrote the values).
        policy.keep.extend(self.env.iter().map(|(name, _)| name.clone()));
        policy
    }

    async fn in_terminal(&self, ctx: &ToolContext) -> ToolOutput {
        let terminals = &ctx.host;
        let program = match self.program(ctx) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(format!("the sandbox is not available ({e}); the command was not run")),
        };
        let spec = TerminalSpec {
            command: program.path.display().to_string(),
            args: program.args.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            output_byte_limit: Some(1024 * 1024),
        };
        let id = match terminals.create_terminal(&ctx.session, &spec, &ctx.cancel).await {
            Ok(id) => id,
            Err(e) => return ToolOutput::error(format!("the editor could not start a terminal: {e}")),
        };
        // The terminal is shown while it runs (and stays visible after release).
        (ctx.progress)(Progress::Content(vec![ToolContent::Terminal(id.clone())]));
        let ending = tokio::select! {
            status = terminals.wait_for_terminal_exit(&ctx.session, &id, &ctx.cancel) => match status {
                Ok(status) => Ending::Exited(status),
                Err(_) if ctx.cancel.is_cancelled() => Ending::Cancelled,
                Err(e) => {
                    let _ = terminals.release_terminal(&ctx.session, &id).await;
                    return ToolOutput::error(format!("the editor terminal failed: {e}"));
                }
            },
            () = tokio::time::sleep(self.timeout) => Ending::TimedOut,
            () = ctx.cancel.cancelled() => Ending::Cancelled,
        };
        if !matches!(ending, Ending::Exited(_)) {
            let _ = terminals.kill_terminal(&ctx.session, &id).await;
        }
        let output = terminals.terminal_output(&ctx.session, &id).await.unwrap_or_default();
        let _ = terminals.release_terminal(&ctx.session, &id).await;
        let mut text = output.output;
        if output.truncated {
            text.insert_str(0, "[… the start of the output was cut by the terminal]\n");
        }
        self.result(ctx, &text, ending, vec![ToolContent::Terminal(id)], None).await
    }

    async fn locally(&self, ctx: &ToolContext) -> ToolOutput {
        let program = match self.program(ctx) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(format!("the sandbox is not available ({e}); the command was not run")),
        };
        let mut cmd = tokio::process::Command::new(&program.path);
        if self.confinement != Confinement::Sandboxed {
            // Out of the sandbox it still gets no credential, nor a way to a socket outside (the
            // launcher withholds them from sandboxed ones).
            cmd.env_clear().envs(crate::sandbox::unconfined_env(&ctx.config));
        }
        cmd.args(&program.args)
            .current_dir(&self.cwd)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return ToolOutput::error(format!("could not start `{}`: {e}", shell())),
        };
        let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(rustix::process::Pid::from_raw);
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        for pipe in [child.stdout.take().map(Pipe::Out), child.stderr.take().map(Pipe::Err)].into_iter().flatten() {
            let tx = tx.clone();
            tokio::spawn(async move { pipe.pump(tx).await });
        }
        drop(tx);

        let mut output = Output::default();
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        // Output is reported in batches (at most every BATCH_EVERY): a command printing a line at a
        // time must not cost a message per line.
        let mut batch = Batch::default();
        let batch_timer = tokio::time::sleep(BATCH_EVERY);
        tokio::pin!(batch_timer);
        let mut exited: Option<ExitStatus> = None;
        let mut pipes_open = true;
        let ending = loop {
            tokio::select! {
                chunk = rx.recv(), if pipes_open => match chunk {
                    Some(bytes) => {
                        if let Some(text) = output.push(&bytes) {
                            if batch.add(text) {
                                batch_timer.as_mut().reset(tokio::time::Instant::now() + BATCH_EVERY);
                            }
                            if batch.text.len() >= BATCH_BYTES {
                                batch.send(ctx);
                            }
                        }
                    }
                    // Both pipes closed: everything was read.
                    None => match exited.take() {
                        Some(status) => break Ending::Exited(status),
                        // The command goes on with its output elsewhere (`exec >log 2>&1; …`): it is
                        // still waited for within its time limit, and still cancellable.
                        None => pipes_open = false,
                    },
                },
                status = child.wait(), if exited.is_none() => {
                    let status = match status {
                        Ok(status) => exit_status(status),
                        Err(e) => return ToolOutput::error(format!("waiting for the command failed: {e}")),
                    };
                    // Give the pipes a moment to drain; children left in the background that keep
                    // them open are ended with the group.
                    match tokio::time::timeout(Duration::from_millis(200), drain(&mut rx, &mut output, &mut batch)).await {
                        Ok(()) => break Ending::Exited(status),
                        Err(_) => {
                            kill_group(group, rustix::process::Signal::KILL);
                            exited = Some(status);
                        }
                    }
                }
                () = &mut batch_timer, if batch.waiting => batch.send(ctx),
                () = &mut deadline => break Ending::TimedOut,
                () = ctx.cancel.cancelled() => break Ending::Cancelled,
            }
        };
        batch.send(ctx);
        if !matches!(ending, Ending::Exited(_)) {
            terminate(group, &mut child).await;
            // What was written before the end still counts.
            while let Ok(bytes) = rx.try_recv() {
                if let Some(text) = output.push(&bytes) {
                    batch.add(text);
                }
            }
            batch.send(ctx);
        }
        if let Some(text) = output.finish() {
            batch.add(text);
        }
        batch.send(ctx);
        let full = output.text;
        let tail = truncate::for_model(&full, USER_TAIL, "see the full output above");
        let content = if tail.is_empty() {
            Vec::new()
        } else {
            vec![ToolContent::Text(format!("```\n{}\n```", tail.trim_end()))]
        };
        self.result(ctx, &full, ending, content, Some(output.total)).await
    }

    /// The result for the model (and the user), saving long output to a file the model can read.
    async fn result(
        &self,
        ctx: &ToolContext,
        output: &str,
        ending: Ending,
        mut content: Vec<ToolContent>,
        total_bytes: Option<u64>,
    ) -> ToolOutput {
        let (status_line, is_error, raw) = match &ending {
            Ending::Exited(status) => (
                format!("[{}]", status.describe()),
                !status.success(),
                json!({"exitCode": status.code, "signal": status.signal}),
            ),
            Ending::TimedOut => (
                format!("[timed out after {} ms; the command was killed]", self.timeout.as_millis()),
                true,
                json!({"timedOut": true}),
            ),
            Ending::Cancelled => ("[cancelled; the command was killed]".to_owned(), true, json!({"cancelled": true})),
        };
        let mut how = "run the command again with its output narrowed (grep, head, tail)".to_owned();
        if output.len() > truncate::MODEL_BUDGET
            && let Some(path) = save_log(ctx, output).await
        {
            how = format!("read {} (the full output) with offset/limit", path.display());
        }
        let mut for_model = truncate::for_model(output, truncate::MODEL_BUDGET, &how);
        if total_bytes.is_some_and(|t| t > output.len() as u64) {
            for_model.push_str(&format!("\n[output beyond {MAX_KEPT} bytes was not kept]"));
        }
        if !for_model.is_empty() && !for_model.ends_with('\n') {
            for_model.push('\n');
        }
        for_model.push_str(&status_line);
        if is_error && self.confinement == Confinement::Sandboxed && !matches!(ending, Ending::Cancelled) {
            for_model.push('\n');
            for_model.push_str(&self.policy(ctx).explain());
        }
        content.push(ToolContent::Text(status_line));
        ToolOutput { for_model, content, is_error, raw_output: Some(raw) }
    }
}

async fn drain(rx: &mut mpsc::UnboundedReceiver<Vec<u8>>, output: &mut Output, batch: &mut Batch) {
    while let Some(bytes) = rx.recv().await {
        if let Some(text) = output.push(&bytes) {
            batch.add(text);
        }
    }
}

const BATCH_EVERY: Duration = Duration::from_millis(25);
const BATCH_BYTES: usize = 64 * 1024;

/// Output waiting to be reported.
#[derive(Default)]
struct Batch {
    text: String,
    /// The timer is armed.
    waiting: bool,
}

impl Batch {
    /// Adds text; true when this starts a new batch (arm the timer).
    fn add(&mut self, text: String) -> bool {
        let starts = self.text.is_empty();
        self.text.push_str(&text);
        self.waiting = true;
        starts
    }

    fn send(&mut self, ctx: &ToolContext) {
        self.waiting = false;
        if !self.text.is_empty() {
            (ctx.progress)(Progress::Output(std::mem::take(&mut self.text)));
        }
    }
}

/// `bash` when there is one, else `sh`.
/// The shell commands run in: bash, else sh — by its full path, so starting a command does not
/// search `PATH` each time.
fn shell() -> &'static str {
    static SHELL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        let find = |name: &str| {
            std::env::var_os("PATH")
                .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|p| p.is_file()))
        };
        let found =
            find("bash").or_else(|| Some(PathBuf::from("/bin/bash")).filter(|p| p.is_file())).or_else(|| find("sh"));
        found.map_or_else(|| "sh".to_owned(), |p| p.display().to_string())
    })
}

fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus { code: status.code().map(i64::from), signal: status.signal().map(signal_name) }
}

fn signal_name(sig: i32) -> String {
    match sig {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

fn kill_group(group: Option<rustix::process::Pid>, signal: rustix::process::Signal) {
    if let Some(pid) = group {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// SIGTERM to the whole group, then SIGKILL if it has not gone within a second.
async fn terminate(group: Option<rustix::process::Pid>, child: &mut tokio::process::Child) {
    kill_group(group, rustix::process::Signal::TERM);
    if tokio::time::timeout(Duration::from_secs(1), child.wait()).await.is_err() {
        kill_group(group, rustix::process::Signal::KILL);
        let _ = child.wait().await;
    }
    // Whatever the shell left behind goes too.
    kill_group(group, rustix::process::Signal::KILL);
}

enum Pipe {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
}

impl Pipe {
    async fn pump(mut self, tx: mpsc::UnboundedSender<Vec<u8>>) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match &mut self {
                Pipe::Out(p) => p.read(&mut buf).await,
                Pipe::Err(p) => p.read(&mut buf).await,
            };
            match n {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Output as text, decoded across chunk boundaries (a character split between two reads is held
/// back until it is whole; invalid bytes become U+FFFD).
#[derive(Default)]
struct Output {
    text: String,
    pending: Vec<u8>,
    total: u64,
}

impl Output {
    /// Adds bytes; returns the newly decoded text, if any.
    fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.total += bytes.len() as u64;
        self.pending.extend_from_slice(bytes);
        // Everything but an incomplete character at the very end (invalid bytes are decoded too).
        let mut valid = 0;
        loop {
            match std::str::from_utf8(&self.pending[valid..]) {
                Ok(_) => {
                    valid = self.pending.len();
                    break;
                }
                Err(e) => match e.error_len() {
                    None => {
                        valid += e.valid_up_to();
                        break;
                    }
                    Some(bad) => valid += e.valid_up_to() + bad,
                },
            }
        }
        if valid == 0 {
            return None;
        }
        let rest = self.pending.split_off(valid);
        let chunk = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        if self.text.len() < MAX_KEPT {
            self.text.push_str(&chunk);
        }
        Some(chunk)
    }

    fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let chunk = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        self.text.push_str(&chunk);
        Some(chunk)
    }
}

/// Saves long output under `$ACP_HOME/tmp/` so the model can read all of it.
async fn save_log(ctx: &ToolContext, output: &str) -> Option<PathBuf> {
    let dir = ctx.config.home.join("tmp");
    tokio::fs::create_dir_all(&dir).await.ok()?;
    let path = dir.join(format!("exec-{}.log", sanitize(&ctx.call_id)));
    tokio::fs::write(&path, output).await.ok()?;
    Some(path)
}

fn sanitize(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_hide_nothing() {
        assert_eq!(shown("cargo test"), "cargo test");
        assert_eq!(shown(&format!("ls{}&& touch PWNED1", " ".repeat(100))), "ls ⟨100 spaces⟩ && touch PWNED1");
        assert_eq!(shown("cat README.md\ntouch PWNED2"), "cat README.md\\ntouch PWNED2");
        assert_eq!(shown("echo `id`\t\u{202e}x"), "echo `id`\\t\\u{202e}x");
        assert_eq!(code_span("cargo test"), "`cargo test`");
        assert_eq!(code_span("echo `id`"), "`` echo `id` ``");
        assert_eq!(code_span("a ``b`` c"), "```a ``b`` c```");
        assert_eq!(
            shown_with_env("git status", &[("BASH_ENV".into(), "/w/evil file.sh".into())]),
            "BASH_ENV='/w/evil file.sh' git status"
        );
    }

    #[test]
    fn output_decodes_split_characters() {
        let mut o = Output::default();
        let bytes = "héllo".as_bytes();
        assert_eq!(o.push(&bytes[..2]).as_deref(), Some("h"));
        assert_eq!(o.push(&bytes[2..]).as_deref(), Some("éllo"));
        assert_eq!(o.push(b"\xff ok").as_deref(), Some("\u{fffd} ok"));
        assert_eq!(o.text, "héllo\u{fffd} ok");
        assert_eq!(o.push(b"\xc3"), None);
        assert_eq!(o.finish().as_deref(), Some("\u{fffd}"));
    }
}
