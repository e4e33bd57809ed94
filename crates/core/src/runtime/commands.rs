//! Slash commands: a prompt whose text starts with `/name` naming one of these is a command, not a
//! message to the model. Anything else that starts with `/` (a path, say) goes to the model as
//! typed. Commands answer as agent text and end the prompt with `end_turn`; wrong arguments get
//! the command's usage, never an error and never a hang.
//!
//! `/help`, `/status`, `/usage`, `/context`, `/mcp` and `/stop` answer at once, even while a turn runs;
//! the others (`/compact`, `/model`, `/think`, `/new`, `/reset`, `/network`) wait for the running turn, like a
//! prompt, because they change what the next request sends.
//!
//! This file holds the table and the parser (pure), what each command does to a session
//! ([`run`]), and the reports (`/status`, `/usage`, `/context`).

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::compaction::{self, Accounting, CompactEnv};
use super::context;
use super::directives;
use super::event::new_message_id;
use super::event::{Emitter, EventKind, SettingsChange, StopReason, TurnError, TurnOutcome};
use super::op::TurnId;
use super::session::state::Session;
use super::settings::SessionSettings;
use super::shared::Shared;
use super::turn::{self, TurnResult};
use crate::history::conversation::Conversation;
use crate::history::input::{UserBlock, plain_text};
use crate::providers::Usage;
use crate::settings::ReasoningEffort;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Status,
    Usage,
    Context {
        detail: bool,
    },
    Stop,
    Compact {
        instructions: Option<String>,
    },
    /// `None`: show the current model and the choices.
    Model(Option<String>),
    /// `None` inside: off (the provider's default).
    Think(Option<ReasoningEffort>),
    /// Several directives alone in a message (`/think high /model a/b`): all are set.
    Directives {
        reasoning: Option<Option<ReasoningEffort>>,
        model: Option<String>,
    },
    /// Clear the context; `/new` may name the model to continue with.
    New {
        model: Option<String>,
    },
    Reset,
    /// Network for sandboxed commands: `None` shows the sandbox's state.
    Network(Option<bool>),
    /// The session's MCP servers; `restart` starts one again first.
    Mcp {
        restart: Option<String>,
    },
    /// The session's language servers: their state, files and problems.
    Lsp,
    /// The skills found, offered or not, and why.
    Skills,
    /// The memory files, their index, and whether the session reads them.
    Memory,
    /// The hooks and how each last went; `allow`: allow the workspace's hooks file as it is.
    Hooks {
        allow: bool,
    },
}

impl Command {
    /// Answered at once, even while a turn runs.
    pub fn is_immediate(&self) -> bool {
        matches!(
            self,
            Self::Help
                | Self::Status
                | Self::Usage
                | Self::Context { .. }
                | Self::Stop
                | Self::Mcp { .. }
                | Self::Lsp
                | Self::Skills
                | Self::Memory
                | Self::Hooks { .. }
        )
    }
}

/// One command as advertised to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// What the argument is, for commands that take one.
    pub hint: Option<&'static str>,
    pub usage: &'static str,
}

pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo { name: "help", description: "List the slash commands", hint: None, usage: "/help" },
    CommandInfo {
        name: "status",
        description: "Model, mode, context-window fill, tokens and session id",
        hint: None,
        usage: "/status",
    },
    CommandInfo {
        name: "context",
        description: "What the context holds: instruction files, tool schemas, system prompt, history",
        hint: Some("list | detail"),
        usage: "/context [list|detail]",
    },
    CommandInfo {
        name: "compact",
        description: "Summarise the conversation so far to free the context window",
        hint: Some("what the summary should keep (optional)"),
        usage: "/compact [instructions for the summary]",
    },
    CommandInfo {
        name: "model",
        description: "Show or switch the model",
        hint: Some("provider/model"),
        usage: "/model [provider/model]",
    },
    CommandInfo {
        name: "think",
        description: "How much the model reasons before answering",
        hint: Some("off | minimal | low | medium | high | xhigh"),
        usage: "/think off|minimal|low|medium|high|xhigh",
    },
    CommandInfo {
        name: "new",
        description: "Start over with an empty context (optionally with another model)",
        hint: Some("provider/model (optional)"),
        usage: "/new [provider/model]",
    },
    CommandInfo { name: "reset", description: "Clear the conversation's context", hint: None, usage: "/reset" },
    CommandInfo {
        name: "stop",
        description: "Stop the running turn and everything queued",
        hint: None,
        usage: "/stop",
    },
    CommandInfo { name: "usage", description: "Tokens used by this session", hint: None, usage: "/usage" },
    CommandInfo {
        name: "network",
        description: "Let sandboxed commands use the network, or not (this session)",
        hint: Some("on | off"),
        usage: "/network [on|off]",
    },
    CommandInfo {
        name: "mcp",
        description: "MCP servers: their state, tools, prompts, resources and last error",
        hint: Some("restart NAME (optional)"),
        usage: "/mcp [restart NAME]",
    },
    CommandInfo {
        name: "lsp",
        description: "Language servers: their state, open files and problems",
        hint: None,
        usage: "/lsp",
    },
    CommandInfo {
        name: "skills",
        description: "Skills: those offered to the model, where each comes from, and why others are not",
        hint: None,
        usage: "/skills",
    },
    CommandInfo {
        name: "memory",
        description: "Memory: the files indexed for memory_search, and whether this session reads them",
        hint: None,
        usage: "/memory",
    },
    CommandInfo {
        name: "hooks",
        description: "Hooks: those configured, the workspace's, and how each last went",
        hint: Some("allow (the workspace's hooks file, as it is now)"),
        usage: "/hooks [allow]",
    },
];

/// A prompt, read as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    NotACommand,
    Command(Command),
    /// A known command with arguments it does not take: the answer is this text.
    BadArgs(String),
}

pub fn parse(blocks: &[UserBlock]) -> Parsed {
    // Only a prompt that is text alone can be a command.
    if blocks.iter().any(|b| !matches!(b, UserBlock::Text { .. })) {
        return Parsed::NotACommand;
    }
    let text = plain_text(blocks);
    let text = text.trim();
    let Some(rest) = text.strip_prefix('/') else { return Parsed::NotACommand };
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let name = if name == "thinking" { "think" } else { name };
    if matches!(name, "verbose" | "reasoning") {
        return Parsed::BadArgs(format!(
            "`/{name}` chooses what a chat channel (Telegram) shows of a run; send it in that chat. \
             Here tool calls and the model's reasoning are always shown."
        ));
    }
    let Some(info) = COMMANDS.iter().find(|c| c.name == name) else { return Parsed::NotACommand };
    let bad = |why: &str| Parsed::BadArgs(format!("{why}\n\nUsage: `{}` — {}.", info.usage, info.description));
    let no_args = |command: Command| {
        if args.is_empty() { Parsed::Command(command) } else { bad("This command takes no arguments.") }
    };
    if matches!(name, "think" | "model") && !args.is_empty() {
        // Directives: alone they set the session; with other words, that message (see `inline`).
        let found =
            directives::scan(text, directives::SESSION, |name, arg| name == "model" || think_level(arg).is_some());
        if !found.directives.is_empty() && !found.rest.is_empty() {
            return Parsed::NotACommand;
        }
        if found.directives.len() > 1 {
            let (mut reasoning, mut model) = (None, None);
            for d in found.directives {
                match d.name {
                    "think" => reasoning = think_level(&d.arg),
                    _ => model = Some(d.arg),
                }
            }
            return Parsed::Command(Command::Directives { reasoning, model });
        }
    }
    match name {
        "help" => no_args(Command::Help),
        "status" => no_args(Command::Status),
        "usage" => no_args(Command::Usage),
        "stop" => no_args(Command::Stop),
        "skills" => no_args(Command::Skills),
        "memory" => no_args(Command::Memory),
        "hooks" => match args {
            "" => Parsed::Command(Command::Hooks { allow: false }),
            "allow" => Parsed::Command(Command::Hooks { allow: true }),
            other => bad(&format!("Unknown argument `{other}`: use `allow`, or nothing.")),
        },
        "reset" => no_args(Command::Reset),
        "context" => match args {
            "" | "list" => Parsed::Command(Command::Context { detail: false }),
            "detail" => Parsed::Command(Command::Context { detail: true }),
            other => bad(&format!("Unknown argument `{other}`: use `list` or `detail`.")),
        },
        "compact" => Parsed::Command(Command::Compact { instructions: (!args.is_empty()).then(|| args.to_owned()) }),
        "model" => match args.split_whitespace().count() {
            0 => Parsed::Command(Command::Model(None)),
            1 => Parsed::Command(Command::Model(Some(args.to_owned()))),
            _ => bad("Give one model, as `provider/model`."),
        },
        "new" => match args.split_whitespace().count() {
            0 => Parsed::Command(Command::New { model: None }),
            1 => Parsed::Command(Command::New { model: Some(args.to_owned()) }),
            _ => bad("Give at most one model, as `provider/model`."),
        },
        "network" => match args {
            "" => Parsed::Command(Command::Network(None)),
            "on" => Parsed::Command(Command::Network(Some(true))),
            "off" => Parsed::Command(Command::Network(Some(false))),
            other => bad(&format!("Unknown argument `{other}`: use `on` or `off`.")),
        },
        "mcp" => match args.split_whitespace().collect::<Vec<_>>().as_slice() {
            [] => Parsed::Command(Command::Mcp { restart: None }),
            ["restart", name] => Parsed::Command(Command::Mcp { restart: Some((*name).to_owned()) }),
            _ => bad("Use `/mcp` or `/mcp restart NAME`."),
        },
        "lsp" if args.is_empty() => Parsed::Command(Command::Lsp),
        "lsp" => bad("`/lsp` takes no argument."),
        "think" => match think_level(args) {
            Some(level) => Parsed::Command(Command::Think(level)),
            None if args.is_empty() => bad(&format!("Say how much: off, {}.", ReasoningEffort::CHOICES)),
            None => bad(&format!("Unknown level `{args}`: use off, {}.", ReasoningEffort::CHOICES)),
        },
        _ => Parsed::NotACommand,
    }
}

/// A `/think` level: `Some(None)` is off (the provider's default).
pub fn think_level(arg: &str) -> Option<Option<ReasoningEffort>> {
    match arg.to_lowercase().as_str() {
        "off" | "default" | "none" => Some(None),
        level => ReasoningEffort::parse(level).map(Some),
    }
}

/// A message's inline directives (`/think`, `/model` among other words): the input without them
/// and the settings its turn runs with, the session's own unchanged. Err: the answer when the
/// message starts with a directive whose argument does not work.
pub(super) fn inline(
    input: Vec<UserBlock>,
    config: &crate::config::Config,
    settings: &SessionSettings,
) -> Result<(Vec<UserBlock>, SessionSettings), String> {
    let mut settings = settings.clone();
    let mut out = Vec::with_capacity(input.len());
    let mut first = true;
    for block in input {
        let UserBlock::Text { text } = block else {
            out.push(block);
            continue;
        };
        let found = directives::scan(&text, directives::SESSION, |name, arg| match name {
            "think" => think_level(arg).is_some(),
            _ => config.resolve_model(arg).is_ok(),
        });
        if let Some(refused) = found.refused_first.filter(|_| std::mem::take(&mut first)) {
            return Err(match refused.name {
                "think" => format!("Unknown level `{}`: use off, {}.", refused.arg, ReasoningEffort::CHOICES),
                _ => match config.resolve_model(&refused.arg) {
                    Err(e) => format!("{e}\n\nNothing was sent."),
                    Ok(_) => String::new(),
                },
            });
        }
        first = false;
        for d in &found.directives {
            match d.name {
                "think" => settings.reasoning = think_level(&d.arg).unwrap_or(settings.reasoning),
                _ => {
                    if let Ok((model, _)) = config.resolve_model(&d.arg) {
                        settings.model = model;
                    }
                }
            }
        }
        if found.directives.is_empty() {
            out.push(UserBlock::Text { text });
        } else if !found.rest.is_empty() {
            out.push(UserBlock::Text { text: found.rest });
        }
    }
    Ok((out, settings))
}

pub fn help_text() -> String {
    let mut out = String::from("**Commands**\n\n");
    for c in COMMANDS {
        out.push_str(&format!("- `{}` — {}\n", c.usage, c.description));
    }
    out
}

/// `12345` → `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What running a command came to.
pub(super) enum Ran {
    /// A report, answered at once; nothing is recorded.
    Answer(String),
    /// Done, recorded as the session's turn `seq`.
    Done { seq: u64 },
    /// Runs like a turn (cancellable, in order with prompts), recorded as turn `seq`.
    Job { seq: u64, cancel: CancellationToken, task: JoinHandle<TurnResult> },
}

/// Runs a command whose turn has come.
pub(super) fn run(
    session: &mut Session,
    turn: TurnId,
    input: &[crate::history::input::UserBlock],
    command: Command,
) -> Ran {
    if command.is_immediate() {
        return Ran::Answer(report(session, &command));
    }
    let seq = session.begin_turn(input);
    let events = session.emitter(turn, true);
    let say = |text: String| {
        events.emit(EventKind::TextDelta { message_id: new_message_id(), text });
        events.flush();
    };
    match command {
        Command::Compact { instructions } => {
            let cancel = CancellationToken::new();
            let job = CompactJob {
                shared: session.shared.clone(),
                settings: session.settings.clone(),
                events,
                cancel: cancel.clone(),
                conversation: session.conversation.clone(),
                accounting: session.accounting,
                instructions,
                hooks: super::hooks::Place::new(
                    session.shared.config_for(&session.id),
                    &session.live,
                    session.settings.cwd.clone(),
                ),
                live: session.live.clone(),
            };
            return Ran::Job { seq, cancel, task: tokio::spawn(job.run()) };
        }
        Command::Model(None) => say(model_list(session)),
        Command::Model(Some(reference)) => match session.shared.config_for(&session.id).resolve_model(&reference) {
            Ok((model, _)) => {
                session.settings.model = model.clone();
                settings_changed(session, turn);
                say(format!("Model: `{model}`, from the next prompt on."));
            }
            Err(e) => say(format!("{e}\n\n{}", model_list(session))),
        },
        Command::Think(level) => {
            session.settings.reasoning = level;
            settings_changed(session, turn);
            say(format!("Thinking: {}.", level.map_or("off (the provider's default)", |l| l.as_str())));
        }
        Command::Directives { reasoning, model } => {
            let model =
                model.map(|m| session.shared.config_for(&session.id).resolve_model(&m).map(|(r, _)| r)).transpose();
            match model {
                Err(e) => say(format!("{e}\n\nNothing was changed.")),
                Ok(model) => {
                    let mut said = Vec::new();
                    if let Some(level) = reasoning {
                        session.settings.reasoning = level;
                        said.push(format!("Thinking: {}.", level.map_or("off", |l| l.as_str())));
                    }
                    if let Some(model) = model {
                        said.push(format!("Model: `{model}`, from the next prompt on."));
                        session.settings.model = model;
                    }
                    settings_changed(session, turn);
                    say(said.join(" "));
                }
            }
        }
        Command::New { model } => {
            let switched = match model.map(|m| session.shared.config_for(&session.id).resolve_model(&m).map(|(r, _)| r))
            {
                None => Ok(None),
                Some(Ok(model)) => Ok(Some(model)),
                Some(Err(e)) => Err(e),
            };
            match switched {
                Err(e) => say(format!("{e}\n\nNothing was changed.")),
                Ok(model) => {
                    clear_context(session, turn);
                    let mut text = String::from("Started over: the model sees an empty conversation from here on.");
                    if let Some(model) = model {
                        session.settings.model = model.clone();
                        settings_changed(session, turn);
                        text.push_str(&format!(" Model: `{model}`."));
                    }
                    say(text);
                }
            }
        }
        Command::Reset => {
            clear_context(session, turn);
            say("The context is cleared: the model sees an empty conversation from here on.".into());
        }
        Command::Network(on) => {
            if let Some(on) = on {
                session.live.set_network(on);
            }
            let config = session.shared.config_for(&session.id);
            say(format!("Sandbox: {}", crate::sandbox::status(&config, session.live.network())));
        }
        Command::Help
        | Command::Status
        | Command::Usage
        | Command::Context { .. }
        | Command::Stop
        | Command::Mcp { .. }
        | Command::Lsp
        | Command::Skills
        | Command::Memory
        | Command::Hooks { .. } => {}
    }
    Ran::Done { seq }
}

/// A command changed a setting: save it and tell the surface.
fn settings_changed(session: &Session, turn: TurnId) {
    let s = &session.settings;
    session.log.settings(s);
    session.emitter(turn, false).emit(EventKind::Settings(SettingsChange {
        model: s.model.clone(),
        mode: s.mode,
        reasoning: s.reasoning,
    }));
}

/// Clears the context (`/new`, `/reset`): the ending conversation's gist saved to the memory
/// first, and the hooks told (`SessionEnd`, then `SessionStart`, both `clear`).
fn clear_context(session: &mut Session, turn: TurnId) {
    if let Some(saved) = hooks::save_gist(session) {
        session.emitter(turn, false).emit(EventKind::Notice(format!("Saved the conversation's gist to {saved}.")));
    }
    hooks::cleared(session);
    session.conversation.reset();
    session.accounting.forget_report();
    session.context_tokens = Some(0);
    if let Some(size) = session.context_window() {
        session.emitter(turn, false).emit(EventKind::Usage { used: 0, size });
    }
}

fn model_list(session: &Session) -> String {
    let config = session.shared.config_for(&session.id);
    let current = session.settings.model.to_string();
    let mut out = format!("Current model: `{current}`.\n\nAvailable (switch with `/model provider/model`):\n");
    for (model, name) in config.model_choices() {
        let model = model.to_string();
        let name = if name == model { String::new() } else { format!(" — {name}") };
        let mark = if model == current { " ← current" } else { "" };
        out.push_str(&format!("- `{model}`{name}{mark}\n"));
    }
    let held = |provider: &str| session.live.held.get(provider);
    let state = crate::models::report(&config, &session.shared.models, &held, crate::store::now_ms(), false);
    if !state.is_empty() {
        out.push('\n');
        out.push_str(&state);
    }
    out
}

// ---- reports ----

/// The text of a report (`/help`, `/status`, `/usage`, `/context`).
pub(super) fn report(session: &Session, command: &Command) -> String {
    match command {
        Command::Help => help_text(),
        Command::Status => status(session),
        Command::Usage => usage_report(session),
        Command::Context { detail } => context_report(session, *detail),
        Command::Mcp { restart: None } => session.mcp.report(),
        Command::Lsp => session.lsp.report(),
        Command::Memory => {
            let config = session.shared.config_for(&session.id);
            let reads = turn::memory_use(&config, &session.id) == context::MemoryUse::Private;
            let mut out = crate::memory::Memory::of(&config).report(config.memory.enabled, reads);
            if reads {
                out.push_str(&compaction::flush_line(&config, &session.conversation));
            }
            out
        }
        Command::Skills => {
            let config = session.shared.config_for(&session.id);
            crate::skills::Catalog::load(&config.home, &session.settings.cwd, &config.skills).report()
        }
        Command::Hooks { allow } => hooks::report(session, *allow),
        Command::Mcp { restart: Some(name) } => match session.mcp.get(name) {
            Some(server) => {
                server.restart();
                format!("Restarting `{name}`.\n\n{}", session.mcp.report())
            }
            None => format!("There is no MCP server `{name}` in this session.\n\n{}", session.mcp.report()),
        },
        _ => String::new(),
    }
}

/// The system prompt and tool schemas the next request would carry.
fn request_parts(session: &Session) -> (context::SystemPrompt, Vec<crate::tools::ToolSpec>) {
    let config = session.shared.config_for(&session.id);
    let memory = turn::memory_use(&config, &session.id);
    let mut registry = turn::registry(&config, session.shared.host().as_ref(), memory);
    session.mcp.add_ready_tools(&mut registry);
    (turn::system_prompt(&config, &session.settings, memory), registry.specs())
}

fn fill(session: &Session) -> String {
    let (system, tools) = request_parts(session);
    let fixed = turn::fixed_chars(&system.text, &tools);
    let used = session.accounting.estimate(fixed, session.conversation.messages());
    match session.context_window() {
        Some(size) if size > 0 => {
            format!("~{} of {} tokens ({}%)", thousands(used), thousands(size), (used * 100).div_ceil(size))
        }
        _ => format!("~{} tokens", thousands(used)),
    }
}

fn status(session: &Session) -> String {
    let s = &session.settings;
    let transcript = match session.log.location() {
        Some(location) => location,
        None => "not saved (the session store is unavailable; see the log)".into(),
    };
    format!(
        "**Session** `{id}`\n\n\
         - Model: `{model}`\n\
         - Mode: {mode} · Thinking: {thinking}\n\
         - Context: {fill}\n\
         - Tokens: {input} in · {output} out\n\
         - Turns: {turns} · Messages in context: {messages}\n\
         - Working directory: `{cwd}`\n\
         - Sandbox: {sandbox}\n\
         - Transcript: {transcript}\n",
        id = session.id,
        model = s.model,
        mode = s.mode.name(),
        thinking = s.reasoning.map_or("default", |r| r.as_str()),
        fill = fill(session),
        input = thousands(session.usage.input),
        output = thousands(session.usage.output),
        turns = session.turns,
        messages = session.conversation.len(),
        cwd = s.cwd.display(),
        sandbox = crate::sandbox::status(&session.shared.config_for(&session.id), session.live.network()),
    )
}

fn usage_report(session: &Session) -> String {
    let u = &session.usage;
    let mut out = format!(
        "**Usage** (this session)\n\n- Input: {} tokens (cache read {}, cache write {})\n- Output: {} tokens",
        thousands(u.input),
        thousands(u.cache_read),
        thousands(u.cache_write),
        thousands(u.output),
    );
    if let Some(r) = u.reasoning {
        out.push_str(&format!(" (reasoning {})", thousands(r)));
    }
    if u.input > 0 {
        // What prompt caching saved, as the provider reported it.
        let share = (u128::from(u.cache_read) * 100 / u128::from(u.input)).min(100);
        out.push_str(&format!("\n- Read from the prompt cache: {share}% of input"));
    }
    out.push_str(&format!("\n- Total: {} tokens\n- Context now: {}\n", thousands(u.total()), fill(session)));
    out
}

fn context_report(session: &Session, detail: bool) -> String {
    let (system, tools) = request_parts(session);
    let per = session.accounting.chars_per_token;
    let tok = |chars: usize| thousands((chars as f64 / per).ceil() as u64);
    let tool_chars: usize =
        tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum();
    let history_chars: usize =
        session.conversation.messages().iter().map(|m| serde_json::to_string(m).map_or(0, |s| s.len())).sum();
    let mut out = format!(
        "**Context**: {fill}\n\n\
         | Part | Characters | ≈ Tokens |\n|---|---:|---:|\n\
         | System prompt | {sys} | {sys_t} |\n\
         | Tool schemas ({n} tools) | {tools} | {tools_t} |\n\
         | Conversation ({m} messages) | {hist} | {hist_t} |\n",
        fill = fill(session),
        sys = thousands(system.text.len() as u64),
        sys_t = tok(system.text.len()),
        n = tools.len(),
        tools = thousands(tool_chars as u64),
        tools_t = tok(tool_chars),
        m = session.conversation.len(),
        hist = thousands(history_chars as u64),
        hist_t = tok(history_chars),
    );
    out.push_str("\n**Injected files**\n\n");
    if system.files.is_empty() {
        out.push_str("None (no AGENTS.md or CLAUDE.md from the repository root to the working directory).\n");
    }
    for f in &system.files {
        let source = match f.source {
            context::Source::Project => "project",
            context::Source::AgentWorkspace => "agent workspace",
        };
        let size = match f.chars {
            None => "missing".to_owned(),
            Some(c) if f.truncated => {
                format!("{} of {} chars (truncated)", thousands(f.injected as u64), thousands(c as u64))
            }
            Some(c) => format!("{} chars", thousands(c as u64)),
        };
        out.push_str(&format!("- `{}` ({source}): {size}\n", f.path.display()));
    }
    if detail {
        out.push_str("\n**Tools**\n\n");
        for t in &tools {
            let chars = t.name.len() + t.description.len() + t.parameters.to_string().len();
            out.push_str(&format!("- `{}`: {} chars\n", t.name, thousands(chars as u64)));
        }
        out.push_str("\n**System prompt**\n\n````text\n");
        out.push_str(&system.text);
        out.push_str("\n````\n");
    }
    out
}

/// `/compact`, run like a turn (cancellable, in order with prompts).
struct CompactJob {
    shared: Arc<Shared>,
    settings: SessionSettings,
    events: Emitter,
    cancel: CancellationToken,
    conversation: Conversation,
    accounting: Accounting,
    instructions: Option<String>,
    hooks: super::hooks::Place,
    live: Arc<super::settings::LiveState>,
}

impl CompactJob {
    async fn run(mut self) -> TurnResult {
        let (text, context) = match self.compact().await {
            Ok(done) => done,
            Err(e) => (format!("Could not compact the conversation: {}", e.message), None),
        };
        let cancelled = self.cancel.is_cancelled();
        if !cancelled {
            self.events.emit(EventKind::TextDelta { message_id: new_message_id(), text });
        }
        self.events.flush();
        let reason = if cancelled { StopReason::Cancelled } else { StopReason::EndTurn };
        TurnResult {
            conversation: self.conversation,
            accounting: self.accounting,
            outcome: TurnOutcome::Stopped { reason, usage: Usage::default() },
            context,
            model: None,
        }
    }

    /// The text to answer with, and the context's size after.
    async fn compact(&mut self) -> Result<(String, Option<u64>), TurnError> {
        if self.conversation.len() < 2 {
            return Ok(("Nothing to compact yet.".into(), None));
        }
        self.shared.discovered().await;
        let config = self.shared.config_for(&self.events.session);
        let router =
            super::failover::Router::new(&self.shared, &config, &self.settings.model, &self.live.held, &self.events)?;
        let model = router.primary().clone();
        let memory = turn::memory_use(&config, &self.events.session);
        let system = turn::system_prompt(&config, &self.settings, memory);
        let tools = turn::registry(&config, self.shared.host().as_ref(), memory).specs();
        let env = CompactEnv {
            router: &router,
            model: &model,
            retry: &config.retry,
            config: &config.compaction,
            cancel: &self.cancel,
            events: &self.events,
            fixed_chars: turn::fixed_chars(&system.text, &tools),
            hooks: &self.hooks,
            manual: true,
        };
        let done =
            compaction::compact(&env, &mut self.conversation, &mut self.accounting, self.instructions.as_deref())
                .await?;
        self.events.emit(EventKind::Usage { used: done.tokens_after, size: model.context_window });
        let text = format!(
            "Compacted the conversation: ~{} → ~{} tokens ({} messages summarised, {} kept as they were).",
            thousands(done.tokens_before),
            thousands(done.tokens_after),
            done.summarised,
            done.kept
        );
        Ok((text, Some(done.tokens_after)))
    }
}

mod hooks;

#[cfg(test)]
mod tests;
