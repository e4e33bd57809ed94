//! One prompt, start to finish, for scripts (`acp run`): initialize, open (or continue) a session,
//! send the prompt, answer permission questions from a [`Policy`], print the reply, and turn the
//! outcome into an exit code.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;

use acp_protocol::acp::client_methods as m;
use acp_protocol::jsonrpc::{ErrorObject, RequestId, code};
use serde_json::{Value, json};

use crate::conn::{Incoming, Receiver, Sender};
use crate::policy::{Policy, ToolIdentity};
use crate::requests::{self, Client};

/// Exit codes of `acp run`.
pub mod exit {
    /// The model finished its reply (`end_turn`).
    pub const OK: u8 = 0;
    /// Something else went wrong: the agent could not be started, or exited mid-turn.
    pub const FAILED: u8 = 1;
    /// Bad usage: arguments, an unknown model or mode, an empty prompt, a bad directory.
    pub const USAGE: u8 = 2;
    /// The model provider failed (after the agent's retries).
    pub const PROVIDER: u8 = 3;
    /// Authentication: no usable provider (an API key or a provider in config.toml is missing),
    /// or the provider rejected the key (HTTP 401/403).
    pub const SETUP: u8 = 4;
    /// The model refused.
    pub const REFUSAL: u8 = 5;
    /// The reply stopped early: output token limit or turn request limit.
    pub const INCOMPLETE: u8 = 6;
    /// The configuration file (`$ACP_HOME/config.toml`) could not be read.
    pub const CONFIG: u8 = 7;
    /// Cancelled by Ctrl-C / SIGINT / SIGTERM.
    pub const CANCELLED: u8 = 130;
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub prompt: String,
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub mode: Option<String>,
    /// Continue (or create) the session with this id.
    pub session: Option<String>,
    /// Without `session`: the id the new session gets (else the agent picks one). Known before
    /// the agent answers, it lets the prompt follow `session/new` at once.
    pub new_session_id: Option<String>,
    /// NDJSON: every `session/update`, then the result.
    pub json: bool,
    pub policy: Policy,
}

/// Where output goes: the reply (or NDJSON) to `out`, progress and problems to `err`.
pub struct Output<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output").finish_non_exhaustive()
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The process's exit code (see [`exit`]).
    pub code: u8,
    /// The agent answered the prompt. An agent saves a turn before it answers it, so nothing of
    /// the run is left for it to write.
    pub answered: bool,
}

/// Runs the prompt.
pub fn run(tx: &Sender, rx: &Receiver, opts: &RunOptions, output: &mut Output<'_>) -> Ended {
    let mut state = State {
        opts,
        session: None,
        tools: HashMap::new(),
        answers: HashMap::new(),
        text_open: false,
        interrupted: false,
        answered: false,
    };
    let code = match state.drive(tx, rx, output) {
        Ok(code) => code,
        Err(Stop::Code(code, message)) => {
            state.end_text(output);
            if opts.json {
                let line = json!({"sessionId": state.session, "error": {"message": message}, "exitCode": code});
                let _ = writeln!(output.out, "{line}");
            }
            let _ = writeln!(output.err, "acp run: {message}");
            code
        }
    };
    Ended { code, answered: state.answered }
}

/// An agent's error message without what only means something on the wire: the JSON-RPC error
/// class (`invalid params: `) and the parameter it names (`` `value`: ``).
pub fn user_words(message: &str) -> &str {
    let mut rest = message;
    for class in ["invalid params: ", "internal error: "] {
        rest = rest.strip_prefix(class).unwrap_or(rest);
    }
    if let Some(after) = rest.strip_prefix('`')
        && let Some((field, tail)) = after.split_once("`: ")
        && !field.contains(' ')
    {
        rest = tail;
    }
    rest
}

enum Stop {
    Code(u8, String),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Stop::Code(exit::FAILED, format!("the agent's input is closed: {e}"))
    }
}

struct State<'a> {
    opts: &'a RunOptions,
    session: Option<String>,
    tools: HashMap<String, ToolIdentity>,
    /// Answers that came while another was waited for.
    answers: HashMap<RequestId, Result<Value, ErrorObject>>,
    /// Reply text was printed without a final newline yet.
    text_open: bool,
    interrupted: bool,
    /// The prompt's answer came.
    answered: bool,
}

impl State<'_> {
    fn drive(&mut self, tx: &Sender, rx: &Receiver, output: &mut Output<'_>) -> Result<u8, Stop> {
        // Nothing but permission questions is answered: no files, no terminals. The session is
        // asked for right behind `initialize`, without waiting for its answer, and when its id is
        // known (and nothing is to be set first) the prompt follows at once: the agent handles
        // them in order, and a failed step is still reported as such (the prompt then fails too,
        // with no session to run in).
        let init = tx.request(&requests::initialize(Client { name: "acp-run", title: "acp run", host: false }))?;
        let key = self.opts.session.as_deref().or(self.opts.new_session_id.as_deref());
        // A fresh session starts with --model, so a wrong name is said before a missing key.
        let first_model = self.opts.model.as_deref().filter(|_| self.opts.session.is_none());
        let id = tx.request(&requests::new_session(&self.opts.cwd, key, first_model))?;
        let prompted = match key {
            Some(key) if self.opts.model.is_none() && self.opts.mode.is_none() => {
                // From now on an interrupt cancels it.
                self.session = Some(key.to_owned());
                Some(tx.request(&requests::prompt(key, &self.opts.prompt))?)
            }
            _ => None,
        };
        self.wait(tx, rx, &init, output)?.map_err(|e| Stop::Code(exit::FAILED, format!("initialize failed: {e}")))?;
        let opened = self.wait(tx, rx, &id, output)?.map_err(|e| match e.code {
            // A provider without its key; with --model, that model's.
            code::AUTH_REQUIRED => match first_model {
                Some(model) => Stop::Code(
                    exit::SETUP,
                    format!("--model {model}: {}", e.message.trim_start_matches("authentication required: ")),
                ),
                None => Stop::Code(exit::SETUP, e.message),
            },
            code::INVALID_PARAMS if self.opts.session.is_some() => {
                Stop::Code(exit::USAGE, format!("--session: {}", user_words(&e.message)))
            }
            code::INVALID_PARAMS => match first_model {
                Some(model) => Stop::Code(exit::USAGE, format!("--model {model}: {}", user_words(&e.message))),
                None => Stop::Code(exit::USAGE, user_words(&e.message).to_owned()),
            },
            _ => Stop::Code(exit::FAILED, format!("could not open a session: {}", user_words(&e.message))),
        })?;
        let session = opened["sessionId"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| self.opts.session.clone())
            .ok_or_else(|| Stop::Code(exit::FAILED, "the agent answered session/new without a sessionId".into()))?;
        self.session = Some(session.clone());

        if prompted.is_none()
            && first_model.is_none()
            && let Some(model) = &self.opts.model
        {
            let id = tx.request(&requests::set_model(&session, model))?;
            self.wait(tx, rx, &id, output)?.map_err(|e| {
                // A provider without its key is a setup problem, as without --model.
                let code = if e.code == code::AUTH_REQUIRED { exit::SETUP } else { exit::USAGE };
                Stop::Code(code, format!("--model {model}: {}", user_words(&e.message)))
            })?;
        }
        if prompted.is_none()
            && let Some(mode) = &self.opts.mode
        {
            let id = tx.request(&requests::set_mode(&session, mode))?;
            self.wait(tx, rx, &id, output)?
                .map_err(|e| Stop::Code(exit::USAGE, format!("--mode {mode}: {}", user_words(&e.message))))?;
        }

        let id = match prompted {
            Some(id) => id,
            None => tx.request(&requests::prompt(&session, &self.opts.prompt))?,
        };
        let answer = self.wait(tx, rx, &id, output)?;
        self.answered = true;
        self.end_text(output);
        let (code, line) = match answer {
            Ok(result) => {
                let code = match result["stopReason"].as_str() {
                    Some("end_turn") => exit::OK,
                    Some("refusal") => exit::REFUSAL,
                    Some("cancelled") => exit::CANCELLED,
                    Some("max_tokens" | "max_turn_requests") => exit::INCOMPLETE,
                    _ => exit::FAILED,
                };
                if code != exit::OK && !self.opts.json {
                    let reason = result["stopReason"].as_str().unwrap_or("unknown");
                    let _ = writeln!(output.err, "acp run: the turn ended: {reason}");
                }
                (code, json!({"sessionId": session, "result": result, "exitCode": code}))
            }
            Err(e) => {
                let code = if e.code == code::AUTH_REQUIRED { exit::SETUP } else { exit::PROVIDER };
                if !self.opts.json {
                    let _ = writeln!(output.err, "acp run: {}", e.message);
                }
                (code, json!({"sessionId": session, "error": e, "exitCode": code}))
            }
        };
        if self.opts.json {
            let _ = writeln!(output.out, "{line}");
        }
        let _ = output.out.flush();
        Ok(code)
    }

    /// Handles everything until the answer to request `id` arrives.
    fn wait(
        &mut self,
        tx: &Sender,
        rx: &Receiver,
        id: &RequestId,
        output: &mut Output<'_>,
    ) -> Result<Result<Value, ErrorObject>, Stop> {
        if let Some(result) = self.answers.remove(id) {
            return Ok(result);
        }
        loop {
            match rx.recv() {
                Incoming::Response { id: got, result } if got == *id => return Ok(result),
                // An answer to a request sent before this one, kept for its own wait.
                Incoming::Response { id: got, result } => {
                    self.answers.insert(got, result);
                }
                Incoming::Notification { method, params } => {
                    if method == m::SESSION_UPDATE {
                        self.update(&params, output);
                    }
                }
                Incoming::Request { id, method, params } => self.agent_request(tx, &id, &method, &params, output)?,
                Incoming::Interrupt => {
                    if self.interrupted {
                        return Err(Stop::Code(exit::CANCELLED, "interrupted".into()));
                    }
                    self.interrupted = true;
                    match &self.session {
                        Some(session) => {
                            let _ = writeln!(output.err, "acp run: cancelling (interrupt again to quit at once)");
                            tx.notify(&requests::cancel(session))?;
                        }
                        None => return Err(Stop::Code(exit::CANCELLED, "interrupted".into())),
                    }
                }
                Incoming::Closed(why) => {
                    let why = why.unwrap_or_else(|| "the agent exited".into());
                    return Err(Stop::Code(exit::FAILED, format!("{why} before answering")));
                }
            }
        }
    }

    fn update(&mut self, params: &Value, output: &mut Output<'_>) {
        if self.opts.json {
            let _ = writeln!(output.out, "{params}");
            return;
        }
        let update = &params["update"];
        match update["sessionUpdate"].as_str() {
            // The agent's note of a failed turn: the error goes to stderr, not into the reply.
            Some("agent_message_chunk") if update["_meta"]["error"] == true => {}
            // The agent's own notices (an MCP server is not available) are not the reply.
            Some("agent_message_chunk") if update["_meta"]["notice"] == true => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.progress(output, &format!("acp run: {}", text.trim_end()));
                }
            }
            Some("agent_message_chunk") => {
                if let Some(text) = update["content"]["text"].as_str() {
                    let _ = output.out.write_all(text.as_bytes());
                    let _ = output.out.flush();
                    self.text_open = !text.ends_with('\n');
                }
            }
            Some("tool_call") => {
                let id = update["toolCallId"].as_str().unwrap_or_default().to_owned();
                let tool = ToolIdentity {
                    name: update["_meta"]["toolName"].as_str().map(str::to_owned),
                    kind: update["kind"].as_str().map(str::to_owned),
                    title: update["title"].as_str().unwrap_or("tool").to_owned(),
                };
                // A call refused before it ran (a hook's block, broken arguments) arrives failed.
                let line = match update["status"].as_str() {
                    Some("failed") => {
                        let why = update["content"][0]["content"]["text"].as_str().unwrap_or_default();
                        format!("✗ {}{}", tool.title, if why.is_empty() { String::new() } else { format!(" — {why}") })
                    }
                    _ => format!("· {}", tool.title),
                };
                self.progress(output, &line);
                self.tools.insert(id, tool);
            }
            Some("tool_call_update") => {
                let id = update["toolCallId"].as_str().unwrap_or_default();
                let Some(tool) = self.tools.get_mut(id) else { return };
                if let Some(title) = update["title"].as_str() {
                    title.clone_into(&mut tool.title);
                }
                let line = match update["status"].as_str() {
                    Some("completed") => format!("✓ {}", tool.title),
                    Some("failed") => format!("✗ {}", tool.title),
                    _ => return,
                };
                self.progress(output, &line);
            }
            _ => {}
        }
    }

    /// A progress line on stderr, never in the middle of reply text on a shared terminal.
    fn progress(&mut self, output: &mut Output<'_>, line: &str) {
        self.end_text(output);
        let _ = writeln!(output.err, "{line}");
    }

    fn end_text(&mut self, output: &mut Output<'_>) {
        if self.text_open && !self.opts.json {
            let _ = writeln!(output.out);
            let _ = output.out.flush();
        }
        self.text_open = false;
    }

    fn agent_request(
        &mut self,
        tx: &Sender,
        id: &RequestId,
        method: &str,
        params: &Value,
        output: &mut Output<'_>,
    ) -> Result<(), Stop> {
        if method != m::SESSION_REQUEST_PERMISSION {
            // Nothing else was advertised.
            let error = ErrorObject::new(code::METHOD_NOT_FOUND, format!("acp run does not offer `{method}`"));
            tx.respond(id, Err(error))?;
            return Ok(());
        }
        let call = &params["toolCall"];
        let call_id = call["toolCallId"].as_str().unwrap_or_default();
        let mut tool = self.tools.get(call_id).cloned().unwrap_or_default();
        if let Some(title) = call["title"].as_str() {
            title.clone_into(&mut tool.title);
        }
        if let Some(kind) = call["kind"].as_str() {
            tool.kind = Some(kind.to_owned());
        }
        let options = params["options"].as_array().map(Vec::as_slice).unwrap_or_default();
        let decision = self.opts.policy.answer(&tool, options);
        if !decision.allowed && !self.opts.json {
            let which = tool.name.as_deref().or(tool.kind.as_deref()).unwrap_or("TOOL");
            self.progress(output, &format!("✗ not allowed: {} (allow it with --allow {which})", tool.title));
        }
        tx.respond(id, Ok(json!({"outcome": decision.outcome})))?;
        Ok(())
    }
}
