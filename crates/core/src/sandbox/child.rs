//! A long-lived helper process the agent talks to over its standard streams (an MCP server, a
//! language server): started in its own process group, killed with the whole group when dropped,
//! sent SIGKILL by the kernel when the agent dies without dropping it, and the last lines of its
//! stderr kept to explain why it stopped.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::sync::lock;

/// Lines of stderr kept.
const STDERR_KEPT: usize = 20;

/// A process and its group, killed together when dropped.
pub struct Process {
    /// Until whoever watches it for its exit takes it.
    child: Option<Child>,
    pgid: Option<rustix::process::Pid>,
    /// The last lines it wrote to stderr.
    pub stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    /// Starts `cmd` (its streams piped) and returns it with its stdin and stdout; each line of its
    /// stderr goes to `log` as well as to the kept tail. `command` names it in errors.
    pub fn spawn(
        mut cmd: Command,
        command: &str,
        log: impl Fn(&str) + Send + 'static,
    ) -> Result<(Self, ChildStdin, ChildStdout), String> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
        // It must not outlive an agent that is killed (and so cannot kill its group): it gets
        // SIGKILL when the agent's thread that started it ends.
        // SAFETY: between fork and exec the child makes one system call (prctl), which is
        // async-signal-safe; nothing is allocated or locked.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("`{command}` was not found"),
            _ => format!("`{command}` could not be started: {e}"),
        })?;
        let pgid = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32));
        let (Some(stdout), Some(stdin), Some(stderr)) = (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            return Err("the process's standard streams could not be opened".into());
        };
        let kept = Arc::new(Mutex::new(VecDeque::new()));
        let process = Self { child: Some(child), pgid, stderr: kept.clone() };
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log(&line);
                let mut kept = lock(&kept);
                if kept.len() == STDERR_KEPT {
                    kept.pop_front();
                }
                kept.push_back(line.chars().take(300).collect());
            }
        });
        Ok((process, stdin, stdout))
    }

    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// The last lines of its stderr, for an error message.
    pub fn stderr_tail(stderr: &Mutex<VecDeque<String>>) -> String {
        let lines = lock(stderr);
        if lines.is_empty() {
            return String::new();
        }
        let text: Vec<&str> = lines.iter().map(String::as_str).collect();
        format!("; its last output: {}", text.join(" / "))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Servers run through `npx`, `uvx` or a shell leave children of their own; the group goes
        // at once (many servers do not stop when their stdin closes).
        if let Some(pgid) = self.pgid {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}
