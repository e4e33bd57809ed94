//! `acp client`: spawns an ACP agent, opens (or loads) a session, and runs the conversation in the
//! terminal — line editing with history and slash-command completion, live rendering, permission
//! questions, Ctrl-C to cancel a turn (twice to leave), and the client side of `fs/*` and
//! `terminal/*`.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use acp_protocol::acp::client_methods as m;
use acp_protocol::acp::schema::{
    ClientRequest, RequestPermissionOutcome, RequestPermissionResponse, SelectedPermissionOutcome,
};
use acp_protocol::jsonrpc::{ErrorObject, RequestId, code};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use serde_json::{Value, json};

use crate::ask::{self, Choice};
use crate::conn::{self, Incoming, Receiver, Sender};
use crate::host::{self, Terminals};
use crate::render::{Renderer, Thoughts};
use crate::requests::{self, Client};
use crate::run::user_words;

/// How `acp client` was started.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The agent's command line (program and arguments).
    pub agent: Vec<String>,
    pub cwd: PathBuf,
    /// Load this session instead of starting one.
    pub session: Option<String>,
    pub mode: Option<String>,
    pub model: Option<String>,
    /// Approve "allow once" questions without asking.
    pub yes: bool,
    /// Show each file write the agent asks for as a diff and ask before writing it.
    pub review: bool,
    /// Raw frames to stderr.
    pub verbose: bool,
    pub thoughts: Thoughts,
    /// Where the input history is kept.
    pub history: Option<PathBuf>,
    /// Where the agent's stderr goes (`None`: this process's stderr).
    pub agent_log: Option<PathBuf>,
}

/// Exit codes of `acp client`: those of `acp run` (see [`crate::run::exit`]) that can happen here.
pub mod exit {
    /// Left with /quit, /exit or Ctrl-D.
    pub const OK: u8 = crate::run::exit::OK;
    /// The agent could not be started, failed to initialise, or exited.
    pub const AGENT: u8 = crate::run::exit::FAILED;
    /// Bad usage: arguments, an unknown model or mode, a session that cannot be loaded.
    pub const USAGE: u8 = crate::run::exit::USAGE;
    /// Authentication: no usable provider, or the chosen model's provider has no key.
    pub const SETUP: u8 = crate::run::exit::SETUP;
    /// Left with Ctrl-C twice.
    pub const INTERRUPTED: u8 = crate::run::exit::CANCELLED;
}

/// The terminal's width; 80 when it reports none (0 columns, or no terminal).
fn terminal_width() -> usize {
    match crossterm::terminal::size() {
        Ok((w, _)) if w > 0 => w as usize,
        _ => 80,
    }
}

/// What an agent's error means for the exit code.
fn code_of(e: &ErrorObject) -> u8 {
    match e.code {
        code::AUTH_REQUIRED => exit::SETUP,
        code::INVALID_PARAMS => exit::USAGE,
        _ => exit::AGENT,
    }
}

/// The slash commands the agent advertised, for completion.
#[derive(Default, Clone)]
struct Commands(Arc<Mutex<Vec<(String, String)>>>);

impl Commands {
    /// From an `available_commands_update`.
    fn set(&self, update: &Value) {
        let list = update["availableCommands"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c["name"].as_str()?.to_owned(), c["description"].as_str().unwrap_or("").to_owned())))
            .collect();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = list;
    }
}

struct LineHelper {
    commands: Commands,
}

impl Helper for LineHelper {}
impl Hinter for LineHelper {
    type Hint = String;
}
impl Highlighter for LineHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _default: bool) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Completer for LineHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        if !before.starts_with('/') || before.contains(char::is_whitespace) {
            return Ok((0, Vec::new()));
        }
        let typed = &before[1..];
        let commands = self.commands.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found: Vec<Pair> = commands
            .iter()
            .chain(CLIENT_COMMANDS.iter().map(|(n, d)| (n.to_string(), d.to_string())).collect::<Vec<_>>().iter())
            .filter(|(name, _)| name.starts_with(typed))
            .map(|(name, description)| Pair {
                display: format!("/{name}  {description}"),
                replacement: format!("/{name} "),
            })
            .collect();
        found.sort_by(|a, b| a.replacement.cmp(&b.replacement));
        found.dedup_by(|a, b| a.replacement == b.replacement);
        Ok((0, found))
    }
}

/// Commands the client handles itself.
const CLIENT_COMMANDS: &[(&str, &str)] = &[("quit", "Leave acp client"), ("exit", "Leave acp client")];

impl Validator for LineHelper {
    /// A line ending in `\` continues on the next one, and so does an open ``` block.
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        if input.ends_with('\\') || input.matches("```").count() % 2 == 1 {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

/// The prompt text from what was typed: `\`-newlines joined.
fn prompt_text(input: &str) -> String {
    input.replace("\\\n", "\n")
}

struct Session<'a> {
    child: Child,
    tx: Sender,
    rx: Receiver,
    id: String,
    renderer: Renderer<io::Stdout>,
    terminals: Terminals,
    commands: Commands,
    opts: &'a ClientOptions,
    interactive: bool,
    /// When Ctrl-C last cancelled a turn: another one soon after leaves, even at the prompt.
    last_interrupt: Option<Instant>,
    /// The running turn is being cancelled: its late text is not shown.
    cancelling: bool,
    /// Writes the user approved in a permission question, as (path, new text): `--review` does
    /// not ask about the same diff twice.
    approved_writes: Vec<(String, String)>,
    /// The session's model and mode, for the header.
    model: Option<String>,
    mode: Option<String>,
}

/// Runs the client; returns the exit code.
pub fn run(opts: &ClientOptions) -> u8 {
    let mut err = io::stderr();
    let Some((program, args)) = opts.agent.split_first() else {
        let _ = writeln!(err, "acp client: no agent command");
        return exit::USAGE;
    };
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(&opts.cwd).stdin(Stdio::piped()).stdout(Stdio::piped());
    // Its own process group: Ctrl-C at the terminal is for the client (which cancels the turn),
    // not a signal that ends the agent.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    match opts.agent_log.as_ref().map(std::fs::File::create) {
        Some(Ok(file)) => {
            cmd.stderr(file);
        }
        Some(Err(e)) => tracing_free_warn(&format!("could not create the agent log: {e}")),
        None => {}
    }
    let mut child: Child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = writeln!(err, "acp client: could not start `{}`: {e}", opts.agent.join(" "));
            return exit::AGENT;
        }
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return exit::AGENT;
    };
    // The slash commands are kept current from the reader thread, so completion knows them while
    // the prompt waits for input.
    let commands = Commands::default();
    let known = commands.clone();
    let tap = move |message: &Incoming| {
        if let Incoming::Notification { method, params } = message
            && method == m::SESSION_UPDATE
            && params["update"]["sessionUpdate"] == "available_commands_update"
        {
            known.set(&params["update"]);
        }
    };
    let (tx, rx) = match conn::connect_with_tap(stdout, stdin, opts.verbose, tap) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "acp client: {e}");
            return exit::AGENT;
        }
    };
    let interrupter = rx.interrupter();

    let color = io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let width = terminal_width();
    let terminals = Terminals::default();
    let mut renderer = Renderer::new(io::stdout(), color, width, opts.thoughts);
    renderer.terminals = Some(terminals.clone());
    let mut session = Session {
        child,
        tx,
        rx,
        id: String::new(),
        renderer,
        terminals,
        commands,
        opts,
        interactive: io::stdin().is_terminal(),
        last_interrupt: None,
        cancelling: false,
        approved_writes: Vec::new(),
        model: None,
        mode: None,
    };
    // The line editor installs its own SIGINT handler; ours is registered after it and chains to it.
    let config =
        rustyline::Config::builder().auto_add_history(true).completion_type(rustyline::CompletionType::List).build();
    let mut editor: Editor<LineHelper, rustyline::history::FileHistory> = match Editor::with_config(config) {
        Ok(e) => e,
        Err(e) => return session.fail(&format!("no line editor: {e}"), exit::AGENT),
    };
    if let Err(e) = forward_interrupts(move || interrupter.interrupt()) {
        tracing_free_warn(&format!("Ctrl-C will not cancel turns: {e}"));
    }
    let code = match session.start() {
        Ok(()) => session.conversation(&mut editor),
        Err(code) => code,
    };
    session.terminals.kill_all();
    let Session { tx, mut child, .. } = session;
    finish_agent(tx, &mut child);
    code
}

fn tracing_free_warn(message: &str) {
    let _ = writeln!(io::stderr(), "acp client: {message}");
}

/// Closes the agent's input and gives it a moment to save and exit, then kills it.
fn finish_agent(tx: Sender, child: &mut Child) {
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn forward_interrupts(on_signal: impl Fn() + Send + 'static) -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for _ in signals.forever() {
            on_signal();
        }
    })?;
    Ok(())
}

enum Wait {
    Answer(Result<Value, ErrorObject>),
    /// Ctrl-C twice, or the agent is gone.
    Quit(u8),
}

impl Session<'_> {
    fn start(&mut self) -> Result<(), u8> {
        let answer =
            self.call(&requests::initialize(Client { name: "acp-client", title: "acp client", host: true }))?;
        let caps = answer.map_err(|e| self.fail(&format!("initialize failed: {e}"), exit::AGENT))?;
        let agent = caps["agentInfo"]["title"].as_str().or(caps["agentInfo"]["name"].as_str()).unwrap_or("agent");
        let agent = agent.to_owned();
        let cwd = self.opts.cwd.clone();
        // A new session starts with --model; a loaded one is switched to it.
        let mut model_given = false;
        match self.opts.session.clone() {
            Some(id) => {
                if caps["agentCapabilities"]["loadSession"] != true {
                    return Err(self.fail(&format!("{agent} cannot load sessions"), exit::USAGE));
                }
                self.id.clone_from(&id);
                let loaded = self.call(&requests::load_session(&id, &cwd))?.map_err(|e| {
                    self.fail(&format!("could not load session {id}: {}", user_words(&e.message)), exit::USAGE)
                })?;
                self.note_settings(&loaded);
                self.renderer.turn_end(None, None);
            }
            None => {
                let model = self.opts.model.clone();
                model_given = true;
                let answer = self.call(&requests::new_session(&cwd, None, model.as_deref()))?;
                let session = answer.map_err(|e| match &model {
                    Some(model) if e.code == code::INVALID_PARAMS => {
                        self.fail(&format!("--model {model}: {}", user_words(&e.message)), exit::USAGE)
                    }
                    Some(model) if e.code == code::AUTH_REQUIRED => {
                        let why = e.message.trim_start_matches("authentication required: ");
                        self.fail(&format!("--model {model}: {why}"), exit::SETUP)
                    }
                    _ => self.fail(user_words(&e.message), code_of(&e)),
                })?;
                self.id = session["sessionId"].as_str().unwrap_or_default().to_owned();
                self.note_settings(&session);
            }
        }
        if let Some(model) = self.opts.model.clone().filter(|_| !model_given) {
            let set = self.call(&requests::set_model(&self.id, &model))?.map_err(|e| {
                let code = if e.code == code::AUTH_REQUIRED { exit::SETUP } else { exit::USAGE };
                self.fail(&format!("--model {model}: {}", user_words(&e.message)), code)
            })?;
            self.note_settings(&set);
        }
        if let Some(mode) = self.opts.mode.clone() {
            self.call(&requests::set_mode(&self.id, &mode))?
                .map_err(|e| self.fail(&format!("--mode {mode}: {}", user_words(&e.message)), exit::USAGE))?;
            self.mode = Some(mode);
        }
        let mut header = vec![agent];
        header.extend(self.model.clone());
        header.extend(self.mode.as_ref().map(|m| format!("{m} mode")));
        header.push(format!("session {}", self.id));
        header.push("/help for commands, /quit or Ctrl-D to leave".into());
        self.renderer.notice(&header.join(" · "));
        Ok(())
    }

    /// The model and mode an answer (`session/new|load`, `set_config_option`) reports.
    fn note_settings(&mut self, answer: &Value) {
        let options = answer["configOptions"].as_array().map(Vec::as_slice).unwrap_or_default();
        let current = |category: &str| {
            options
                .iter()
                .find(|o| o["category"] == category || o["id"] == category)
                .and_then(|o| o["currentValue"].as_str())
                .map(str::to_owned)
        };
        if let Some(model) = current("model") {
            self.model = Some(model);
        }
        if let Some(mode) = answer["modes"]["currentModeId"].as_str().map(str::to_owned).or_else(|| current("mode")) {
            self.mode = Some(mode);
        }
    }

    fn fail(&mut self, message: &str, code: u8) -> u8 {
        self.renderer.notice(&format!("acp client: {message}"));
        code
    }

    /// A request whose answer is waited for (updates and agent requests handled meanwhile).
    fn call(&mut self, request: &ClientRequest) -> Result<Result<Value, ErrorObject>, u8> {
        let id = self.tx.request(request).map_err(|e| self.fail(&format!("the agent is gone: {e}"), exit::AGENT))?;
        match self.wait(&id) {
            Wait::Answer(answer) => Ok(answer),
            Wait::Quit(code) => Err(code),
        }
    }

    fn conversation(&mut self, editor: &mut Editor<LineHelper, rustyline::history::FileHistory>) -> u8 {
        editor.set_helper(Some(LineHelper { commands: self.commands.clone() }));
        if let Some(path) = &self.opts.history {
            let _ = editor.load_history(path);
        }
        let code = loop {
            if let Some(code) = self.between_turns() {
                break code;
            }
            let line = match editor.readline("› ") {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => {
                    // The second Ctrl-C of a pair whose first one cancelled a turn.
                    if self.last_interrupt.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
                        break exit::INTERRUPTED;
                    }
                    continue;
                }
                Err(ReadlineError::Eof) => break exit::OK,
                Err(e) => break self.fail(&format!("reading input failed: {e}"), exit::AGENT),
            };
            let text = prompt_text(&line);
            match text.trim() {
                "" => continue,
                "/quit" | "/exit" => break exit::OK,
                _ => {}
            }
            if let Err(code) = self.prompt(&text) {
                break code;
            }
            if text.trim() == "/help" {
                self.renderer.notice(
                    "In this client: /quit or /exit (or Ctrl-D) leaves · Ctrl-C cancels a turn, twice leaves · Tab completes commands",
                );
            }
        };
        if let Some(path) = &self.opts.history {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.save_history(path);
        }
        code
    }

    /// Handles what arrived after the last turn ended and before the prompt is shown: late
    /// updates, and a Ctrl-C that came in between (the terminal was not in the line editor's hands,
    /// so it arrived as a signal): a second one soon after a cancel leaves, as at the prompt.
    fn between_turns(&mut self) -> Option<u8> {
        // Right after a cancel, a second Ctrl-C may still be on its way from the signal thread
        // (typed during the turn, forwarded just after it ended): give it a moment to arrive.
        let recent = self.last_interrupt.is_some_and(|t| t.elapsed() < Duration::from_secs(2));
        let settle = if recent { Duration::from_millis(50) } else { Duration::ZERO };
        while let Some(message) = self.rx.recv_timeout(settle) {
            match message {
                Incoming::Interrupt => {
                    if self.last_interrupt.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
                        self.renderer.notice("interrupted");
                        return Some(exit::INTERRUPTED);
                    }
                    self.last_interrupt = Some(Instant::now());
                }
                Incoming::Notification { method, params } if method == m::SESSION_UPDATE => {
                    if !self.cancelling {
                        self.renderer.update(&params["update"]);
                    }
                }
                Incoming::Request { id, method, params } => {
                    host::answer(&self.tx, &self.terminals, id, &method, params)
                }
                Incoming::Closed(why) => {
                    let why = why.unwrap_or_else(|| self.agent_exit());
                    let tail = self.agent_log_tail();
                    self.renderer.notice(&format!("acp client: {why}{tail}"));
                    return Some(exit::AGENT);
                }
                Incoming::Notification { .. } | Incoming::Response { .. } => {}
            }
        }
        self.renderer.flush();
        None
    }

    fn prompt(&mut self, text: &str) -> Result<(), u8> {
        let answer = self.call(&requests::prompt(&self.id, text))?;
        match answer {
            Ok(result) => self.renderer.turn_end(result["stopReason"].as_str(), result.get("usage")),
            Err(e) => {
                self.renderer.notice(&format!("error: {}", e.message));
            }
        }
        Ok(())
    }

    /// Handles everything until the answer to `id`.
    fn wait(&mut self, id: &RequestId) -> Wait {
        let mut interrupted = false;
        self.cancelling = false;
        loop {
            let Some(message) = self.rx.recv_timeout(Duration::from_millis(80)) else {
                self.renderer.tick();
                continue;
            };
            match message {
                Incoming::Response { id: got, result } if got == *id => {
                    self.renderer.release_pending();
                    return Wait::Answer(result);
                }
                Incoming::Response { .. } => {}
                Incoming::Notification { method, params } if method == m::SESSION_UPDATE => {
                    let update = &params["update"];
                    // Once the cancel is shown, text still on its way from the turn is dropped.
                    let late_text =
                        matches!(update["sessionUpdate"].as_str(), Some("agent_message_chunk" | "agent_thought_chunk"));
                    if !(self.cancelling && late_text) {
                        self.renderer.update(update);
                    }
                }
                Incoming::Notification { .. } => {}
                Incoming::Request { id, method, params } => {
                    if method == m::SESSION_REQUEST_PERMISSION {
                        if let Some(code) = self.permission(&id, &params) {
                            return Wait::Quit(code);
                        }
                    } else if method == m::FS_WRITE_TEXT_FILE && self.opts.review && !self.review_write(&params) {
                        let declined = ErrorObject::new(code::INTERNAL_ERROR, "the user declined this write");
                        let _ = self.tx.respond(&id, Err(declined));
                    } else {
                        host::answer(&self.tx, &self.terminals, id, &method, params);
                    }
                }
                Incoming::Interrupt => {
                    self.renderer.erase_echo();
                    if interrupted || self.id.is_empty() {
                        self.renderer.notice("interrupted");
                        return Wait::Quit(exit::INTERRUPTED);
                    }
                    interrupted = true;
                    self.cancelling = true;
                    self.last_interrupt = Some(Instant::now());
                    self.renderer.notice("cancelling… (Ctrl-C again to leave)");
                    let _ = self.tx.notify(&requests::cancel(&self.id));
                }
                Incoming::Closed(why) => {
                    let why = why.unwrap_or_else(|| self.agent_exit());
                    let tail = self.agent_log_tail();
                    self.renderer.notice(&format!("acp client: {why}{tail}"));
                    return Wait::Quit(exit::AGENT);
                }
            }
        }
    }

    /// How the agent ended, waiting a moment for it to finish exiting.
    fn agent_exit(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return match status.code() {
                        Some(code) => format!("the agent exited (exit code {code})"),
                        None => format!("the agent was killed ({status})"),
                    };
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => return "the agent closed its output".into(),
            }
        }
    }

    fn agent_log_tail(&self) -> String {
        let Some(text) = self.opts.agent_log.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) else {
            return String::new();
        };
        let lines: Vec<&str> = text.trim_end().lines().collect();
        if lines.is_empty() {
            return String::new();
        }
        let tail = lines[lines.len().saturating_sub(5)..].join("\n  ");
        format!("; its last words:\n  {tail}")
    }

    /// Answers a permission question; `Some(code)` when the client must quit.
    fn permission(&mut self, id: &RequestId, params: &Value) -> Option<u8> {
        let options = params["options"].as_array().cloned().unwrap_or_default();
        let call = &params["toolCall"];
        let call_id = call["toolCallId"].as_str().unwrap_or_default();
        let title = call["title"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| self.renderer.tool(call_id).map(|t| t.title.clone()))
            .unwrap_or_else(|| "a tool".into());
        if self.opts.yes
            && let Some(option) = ask::option_of(&options, &["allow_once"])
        {
            self.renderer.notice(&format!("allowed once (--yes): {title}"));
            self.answer_permission(id, selected(option));
            return None;
        }
        self.renderer.notice(&format!("Allow {title}?"));
        self.show_request(call_id);
        let mut out = io::stdout();
        let choice = if self.interactive {
            ask::choose_interactive(&mut out, &options)
        } else {
            ask::choose_line(&mut out, &mut io::stdin().lock(), &options)
        };
        let choice = choice.unwrap_or(Choice::Refused { cancel_turn: false });
        self.renderer.notice(&format!("→ {}", ask::describe(&choice, &options)));
        let outcome = match &choice {
            Choice::Option(option) => {
                let allowed = options.iter().any(|o| {
                    o["optionId"] == option.as_str() && o["kind"].as_str().is_some_and(|k| k.starts_with("allow"))
                });
                if allowed {
                    self.remember_approved_writes(call_id);
                }
                selected(option.clone())
            }
            // Ctrl-C: the turn is cancelled, and so is the question (not "rejected").
            Choice::Refused { cancel_turn: true } => {
                self.cancelling = true;
                self.last_interrupt = Some(Instant::now());
                let _ = self.tx.notify(&requests::cancel(&self.id));
                RequestPermissionOutcome::Cancelled
            }
            Choice::Refused { cancel_turn: false } => match ask::option_of(&options, &["reject_once", "reject_always"])
            {
                Some(option) => selected(option),
                None => RequestPermissionOutcome::Cancelled,
            },
        };
        self.answer_permission(id, outcome);
        None
    }

    fn answer_permission(&self, id: &RequestId, outcome: RequestPermissionOutcome) {
        let answer = serde_json::to_value(RequestPermissionResponse::new(outcome)).map_err(ErrorObject::internal);
        let _ = self.tx.respond(id, answer);
    }

    /// The writes an allowed call will make, as its diffs show them.
    fn remember_approved_writes(&mut self, call_id: &str) {
        let Some(tool) = self.renderer.tool(call_id) else { return };
        for item in tool.content.iter().filter(|c| c["type"] == "diff") {
            if let (Some(path), Some(new)) = (item["path"].as_str(), item["newText"].as_str()) {
                self.approved_writes.push((path.to_owned(), new.to_owned()));
            }
        }
    }

    /// `--review`: a write the user approved as a diff a moment ago goes ahead; any other is shown
    /// and asked about.
    fn review_write(&mut self, params: &Value) -> bool {
        let path = params["path"].as_str().unwrap_or_default();
        let content = params["content"].as_str().unwrap_or_default();
        if let Some(i) = self.approved_writes.iter().position(|(p, new)| p == path && new == content) {
            self.approved_writes.remove(i);
            return true;
        }
        self.approve_write(params)
    }

    /// `--review`: the write as a diff against the file on disk, then Write or Skip.
    fn approve_write(&mut self, params: &Value) -> bool {
        let path = params["path"].as_str().unwrap_or_default();
        let old = host::read_file(std::path::Path::new(path)).unwrap_or_default();
        let new = params["content"].as_str().unwrap_or_default();
        self.renderer.notice(&format!("Write {path}?"));
        self.renderer.diff(path, &crate::render::diff_lines(&old, new));
        self.renderer.flush();
        let options = [
            json!({"optionId": "write", "name": "Write it", "kind": "allow_once"}),
            json!({"optionId": "skip", "name": "Skip this write", "kind": "reject_once"}),
        ];
        let mut out = io::stdout();
        let choice = if self.interactive {
            ask::choose_interactive(&mut out, &options)
        } else {
            ask::choose_line(&mut out, &mut io::stdin().lock(), &options)
        };
        let choice = choice.unwrap_or(Choice::Refused { cancel_turn: false });
        self.renderer.notice(&format!("→ {}", ask::describe(&choice, &options)));
        matches!(choice, Choice::Option(ref id) if id == "write")
    }

    /// What the question is about: the diff (not shown again when the call ends), or the command.
    fn show_request(&mut self, call_id: &str) {
        let Some(tool) = self.renderer.tool(call_id).cloned() else { return };
        if tool.content.iter().any(|c| c["type"] == "diff") {
            self.renderer.diff_was_shown(call_id);
        }
        for item in &tool.content {
            if item["type"] == "diff" {
                let lines = crate::render::diff_lines(
                    item["oldText"].as_str().unwrap_or_default(),
                    item["newText"].as_str().unwrap_or_default(),
                );
                self.renderer.diff(item["path"].as_str().unwrap_or_default(), &lines);
            }
        }
        if let Some(command) = tool.raw_input["command"].as_str() {
            self.renderer.notice(&format!("  $ {command}"));
        }
        self.renderer.flush();
    }
}

/// The permission option the user (or `--yes`) chose.
fn selected(option: String) -> RequestPermissionOutcome {
    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_lines_join() {
        assert_eq!(prompt_text("one \\\ntwo"), "one \ntwo");
    }
}
