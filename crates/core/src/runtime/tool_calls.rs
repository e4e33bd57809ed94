//! Running the tool calls of one model reply. Each call: parse its arguments (never run on a
//! broken parse) → prepare (title, kind, locations, preview diff, what it touches) → announce
//! (pending) → decide (mode, remembered rules, workspace) and ask the user if needed →
//! in progress → completed or failed. Consecutive read-only calls that need no approval run
//! concurrently; everything else runs in order. On cancel, the running call is stopped and the
//! rest are answered "cancelled", so every call has a result.

use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::event::{Emitter, EventKind};
use super::settings::{LiveState, SessionSettings};
use crate::config::Config;
use crate::providers::{ToolResult, UserPart};
use crate::sync::lock;
use crate::tools::approval::{self, Decision};
use crate::tools::host::{OptionKind, PermissionAnswer, PermissionRequest};
use crate::tools::{
    Prepared, Progress, Registry, ToolCallState, ToolContent, ToolContext, ToolKind, ToolStatus, kind, paths,
};

/// A call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Call {
    /// The result of a call that was not run.
    pub(crate) fn not_run(&self, why: &str) -> UserPart {
        UserPart::ToolResult(ToolResult {
            call_id: self.id.clone(),
            name: self.name.clone(),
            content: format!("Not run: {why}."),
            is_error: true,
        })
    }
}

/// What running calls needs from the turn.
pub(crate) struct CallEnv<'a> {
    pub events: Emitter,
    pub settings: SessionSettings,
    pub live: Arc<LiveState>,
    pub registry: &'a Registry,
    pub cancel: CancellationToken,
    pub config: Arc<Config>,
    /// Messages steered into the turn ([`super::op::Op::Steer`]).
    pub steers: Arc<Steers>,
    /// What the session's tools reach the outside through.
    pub host: Arc<dyn crate::tools::host::AnyHost>,
    /// The most the turn's calls get, whatever the session's mode ([`super::op::TurnOptions`]).
    pub mode_cap: Option<crate::settings::Mode>,
    /// Only calls that write memory files (or read inside the workspace) run: the memory flush's.
    pub memory_only: bool,
    /// Where the session's hooks run.
    pub hooks: super::hooks::Place,
    /// The session's language servers: what checks the files its edits write.
    pub lsp: Option<Arc<crate::lsp::Servers>>,
}

impl<'a> CallEnv<'a> {
    /// The mode the turn's next call is decided by.
    pub(crate) fn mode(&self) -> crate::settings::Mode {
        self.live.mode().at_most(self.mode_cap)
    }

    /// The same, for the memory flush: only memory writes run, and no message steered into the
    /// turn stops them (those wait for the turn itself).
    pub(crate) fn memory_only(&self) -> CallEnv<'a> {
        CallEnv {
            events: self.events.clone(),
            settings: self.settings.clone(),
            live: self.live.clone(),
            registry: self.registry,
            cancel: self.cancel.clone(),
            config: self.config.clone(),
            steers: Arc::new(Steers::default()),
            host: self.host.clone(),
            mode_cap: self.mode_cap,
            memory_only: true,
            hooks: self.hooks.clone(),
            lsp: None,
        }
    }
}

/// Messages that arrived for a running turn: the model reads them after the current calls.
#[derive(Default)]
pub(crate) struct Steers(std::sync::Mutex<Vec<(String, tokio::sync::oneshot::Sender<bool>)>>);

impl Steers {
    pub(crate) fn add(&self, text: String, done: tokio::sync::oneshot::Sender<bool>) {
        crate::sync::lock(&self.0).push((text, done));
    }

    fn waiting(&self) -> bool {
        !crate::sync::lock(&self.0).is_empty()
    }

    /// The messages, each sender told it was taken.
    pub(crate) fn take(&self) -> Vec<String> {
        let taken = std::mem::take(&mut *crate::sync::lock(&self.0));
        taken
            .into_iter()
            .map(|(text, done)| {
                let _ = done.send(true);
                text
            })
            .collect()
    }

    /// The turn ended without reading them: their senders queue them instead.
    pub(crate) fn refuse_all(&self) {
        for (_, done) in std::mem::take(&mut *crate::sync::lock(&self.0)) {
            let _ = done.send(false);
        }
    }
}

/// A call that passed its checks and is ready to be decided on.
struct Ready {
    call: Call,
    prepared: Prepared,
    ctx: ToolContext,
    state: Arc<Mutex<ToolCallState>>,
    inside: bool,
    /// Not shown as a tool call (`update_plan`).
    hidden: bool,
    /// It writes a memory file (the memory index is told when it has).
    writes_memory: bool,
    /// What the `PreToolUse` hooks decided (`ask`, `allow`), if they ran.
    hook: Option<crate::hooks::Verdict>,
}

/// Runs every call of one reply, in order; returns one result per call, then the images the
/// calls returned (the model reads them after the results).
pub(crate) async fn run_all(env: &CallEnv<'_>, calls: Vec<Call>) -> Vec<UserPart> {
    let mut results = Vec::with_capacity(calls.len());
    let mut images = Vec::new();
    let mut pending = calls.into_iter();
    while let Some(call) = pending.next() {
        if env.cancel.is_cancelled() {
            results.push(call.not_run("the user cancelled the turn"));
            continue;
        }
        if env.steers.waiting() {
            results.push(call.not_run("skipped because the user sent a new message; read it first"));
            continue;
        }
        let ready = match prepare(env, call).await {
            Ok(ready) => ready,
            Err(result) => {
                results.push(result);
                continue;
            }
        };
        if !is_free_read(env, &ready) {
            decide_and_run(env, ready).await.into(&mut results, &mut images);
            continue;
        }
        // Gather the read-only calls that follow and run them together.
        let mut batch = vec![ready];
        let mut stopper = None;
        while stopper.is_none() {
            let Some(next) = pending.next() else { break };
            match prepare(env, next).await {
                Ok(r) if is_free_read(env, &r) => batch.push(r),
                Ok(r) => stopper = Some(Ok(r)),
                Err(result) => stopper = Some(Err(result)),
            }
        }
        for done in join_all(batch.into_iter().map(|r| execute(env, r))).await {
            done.into(&mut results, &mut images);
        }
        match stopper {
            Some(Ok(r)) => decide_and_run(env, r).await.into(&mut results, &mut images),
            Some(Err(result)) => results.push(result),
            None => {}
        }
    }
    results.extend(images);
    results
}

/// A finished call: its result, and the images it returned.
struct Done {
    result: UserPart,
    images: Vec<UserPart>,
}

impl Done {
    fn into(self, results: &mut Vec<UserPart>, images: &mut Vec<UserPart>) {
        results.push(self.result);
        images.extend(self.images);
    }
}

impl From<UserPart> for Done {
    fn from(result: UserPart) -> Self {
        Self { result, images: Vec::new() }
    }
}

/// Reads that may run without asking.
fn is_free_read(env: &CallEnv<'_>, ready: &Ready) -> bool {
    let access = &ready.prepared.access;
    // Messages reach people: they go one after another, in the order the model wrote them.
    !matches!(ready.hook, Some(crate::hooks::Verdict::Ask(_)))
        && ready.call.name != <crate::tools::message::Message as crate::tools::Tool>::NAME
        && !access.is_mutating()
        && access.network.is_none()
        && approval::decide(env.mode(), &ready.call.name, access, ready.inside, &env.live.rules()) == Decision::Allow
}

/// How long a cancelled tool may take to clean up (kill its command, release its terminal).
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The deepest tool arguments accepted. No tool needs more, and what is shown and stored must be
/// readable back (JSON readers stop at 128 levels, wrappers included).
const MAX_ARGUMENT_DEPTH: usize = 32;

/// The arguments of a call as the history keeps them: as the model wrote them, unless they nest
/// too deep to be run (or read back), then `{}` — the call's result says why it did not run.
pub(crate) fn arguments_for_history(arguments: &str) -> String {
    if nesting(arguments) > MAX_ARGUMENT_DEPTH { "{}".to_owned() } else { arguments.to_owned() }
}

/// How deeply a JSON text nests its arrays and objects, found by one pass over its bytes (no
/// parse, no recursion; brackets inside strings do not count).
fn nesting(json: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'[' | b'{' if !in_string => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' if !in_string => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses, prepares and announces a call; a call that cannot run is announced as failed and its
/// result returned.
async fn prepare(env: &CallEnv<'_>, call: Call) -> Result<Ready, UserPart> {
    let fail = |title: String, kind: ToolKind, raw_input: Value, message: String| {
        let state = ToolCallState {
            id: call.id.clone(),
            name: call.name.clone(),
            title,
            kind,
            status: ToolStatus::Failed,
            locations: Vec::new(),
            raw_input,
            content: vec![ToolContent::Text(message.clone())],
            raw_output: None,
            streams_output: false,
        };
        env.events.emit(EventKind::ToolCall(state));
        UserPart::ToolResult(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: message,
            is_error: true,
        })
    };
    if nesting(&call.arguments) > MAX_ARGUMENT_DEPTH {
        let message = format!(
            "the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; the tool was not run. Call `{}` again with flatter arguments",
            call.name
        );
        let shown = Value::String(crate::tools::truncate::line(&call.arguments, 2000).into_owned());
        return Err(fail(call.name.clone(), kind::kind_for_name(&call.name), shown, message));
    }
    let args: Value = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            let message = format!("the arguments must be a JSON object, got {other}; call `{}` again", call.name);
            return Err(fail(call.name.clone(), kind::kind_for_name(&call.name), other, message));
        }
        Err(e) => {
            let message = format!(
                "the arguments were not valid JSON ({e}); the tool was not run. Call `{}` again with a valid JSON object",
                call.name
            );
            return Err(fail(
                call.name.clone(),
                kind::kind_for_name(&call.name),
                Value::String(call.arguments.clone()),
                message,
            ));
        }
    };
    let Some(handler) = env.registry.get(&call.name) else {
        let known: Vec<String> = env.registry.specs().into_iter().map(|s| s.name).collect();
        let message = format!("there is no tool `{}`; the tools are: {}", call.name, known.join(", "));
        let (kind, title, _) = kind::describe_foreign(&call.name, &args, &env.settings.cwd);
        return Err(fail(title, kind, args, message));
    };
    // The user's `PreToolUse` hooks, before anything else: a block fails the call with their
    // reason; new arguments take the model's place only if they fit the tool's schema.
    let (mut args, mut hook, mut rewritten) = (args, None, false);
    if let Some(pre) = super::hooks::pre_tool_use(&env.hooks, &env.events, &env.cancel, &call.name, &args).await {
        let refused = |reason: String, args: Value| {
            let (kind, title, _) = kind::describe_foreign(&call.name, &args, &env.settings.cwd);
            fail(title, kind, args, format!("Not run: a hook blocked this call: {reason}."))
        };
        if let crate::hooks::Verdict::Block(reason) = pre.verdict {
            return Err(refused(reason, args));
        }
        if let Some(new) = pre.rewritten {
            if let Err(why) = super::hooks::fits(&handler.spec().parameters, &new) {
                return Err(refused(format!("the arguments it gave do not fit the tool's schema ({why})"), args));
            }
            (args, rewritten) = (new, true);
        }
        hook = Some(pre.verdict);
    }
    let state = Arc::new(Mutex::new(ToolCallState {
        id: call.id.clone(),
        name: call.name.clone(),
        title: call.name.clone(),
        kind: ToolKind::Other,
        status: ToolStatus::Pending,
        locations: Vec::new(),
        raw_input: args.clone(),
        content: Vec::new(),
        raw_output: None,
        streams_output: false,
    }));
    let ctx = context(env, &call, state.clone()).await;
    let prepared = match handler.prepare(&args, &ctx).await {
        Ok(p) => p,
        Err(message) if rewritten => {
            let (kind, title, _) = kind::describe_foreign(&call.name, &args, &env.settings.cwd);
            let message = format!("Not run: a hook rewrote the arguments and the tool refused them: {message}");
            return Err(fail(title, kind, args, message));
        }
        Err(message) => {
            let (kind, title, _) = kind::describe_foreign(&call.name, &args, &env.settings.cwd);
            return Err(fail(title, kind, args, message));
        }
    };
    let roots = env.settings.roots();
    let access = &prepared.access;
    // The agent's own home (config, rules, keys, transcripts) is never written by a tool, and
    // reading it always asks — even when the workspace contains it.
    // Every path is resolved once (symlinks followed) and compared as it really is.
    let real_roots: Vec<std::path::PathBuf> = roots.iter().map(|r| paths::real(r)).collect();
    let home = paths::real(&env.config.home);
    let exec_logs = home.join("tmp");
    let in_roots = |p: &std::path::Path| real_roots.iter().any(|r| p.starts_with(r));
    // The one exception: a session that reads the private memory writes its memory files
    // (`MEMORY.md`, `memory/**/*.md` of the agent workspace) as it would the workspace's — never
    // the other workspace files, which are instructions, and never from a group chat.
    let memory_file = memory_writable(&env.config, &env.events.session, &home);
    if let Some(path) = access.writes.iter().find(|p| {
        let real = paths::real(p);
        real.starts_with(&home) && !memory_file(&real)
    }) {
        let message = format!(
            "{} belongs to the agent itself (its configuration, permissions and sessions); no tool may change it",
            path.display()
        );
        return Err(fail(prepared.title, prepared.kind, args, message));
    }
    // Skills (`$ACP_HOME/skills`, the bundled ones included) are there to be read.
    let skills = home.join("skills");
    let workspace =
        |p: &std::path::Path| (in_roots(p) && (!p.starts_with(&home) || p.starts_with(&exec_logs))) || memory_file(p);
    let inside = access.reads.iter().all(|p| {
        let p = paths::real(p);
        p.starts_with(&skills) || workspace(&p)
    }) && access.writes.iter().all(|p| workspace(&paths::real(p)))
        && access.exec.as_ref().is_none_or(|e| in_roots(&paths::real(&e.cwd)));
    // The flush's calls: the file tools and the memory tools, reading inside the workspace and
    // writing nothing but memory files; nothing that runs, fetches, messages or spawns.
    let memory_write = FLUSH_TOOLS.contains(&call.name.as_str())
        && access.exec.is_none()
        && access.network.is_none()
        && access.mcp.is_none()
        && access.message.is_none()
        && access.control.is_none()
        && inside
        && access.writes.iter().all(|p| memory_file(&paths::real(p)));
    let writes_memory = access.writes.iter().any(|p| memory_file(&paths::real(p)));
    if writes_memory {
        crate::memory::Memory::of(&env.config).changing();
    }
    if env.memory_only && !memory_write {
        let message = "only writes of the memory files (and reads in the workspace) run while the memory is flushed; \
                       the call was not run"
            .to_owned();
        return Err(fail(prepared.title, prepared.kind, args, message));
    }
    let hidden = handler.hidden();
    {
        let mut s = lock(&state);
        s.title.clone_from(&prepared.title);
        s.kind = prepared.kind;
        s.streams_output = access.exec.is_some();
        s.locations.clone_from(&prepared.locations);
        s.content.clone_from(&prepared.preview);
        if !hidden {
            env.events.emit(EventKind::ToolCall(s.clone()));
        }
    }
    Ok(Ready { call, prepared, ctx, state, inside, hidden, writes_memory, hook })
}

/// The tools a memory flush may call.
const FLUSH_TOOLS: [&str; 9] =
    ["read", "write", "edit", "apply_patch", "ls", "glob", "grep", "memory_search", "memory_get"];

/// Whether a (real) path is a memory file session `session` may write: `MEMORY.md` (or
/// `memory.md`) or a Markdown file under `memory/` of its agent's files ([`Config::agent_dir`]:
/// `$ACP_HOME/workspace`, or `$ACP_HOME/agents/<id>`), for a session that
/// reads the private memory ([`crate::memory::private_session`]); nothing when memory is off.
fn memory_writable(config: &Config, session: &str, home: &std::path::Path) -> impl Fn(&std::path::Path) -> bool {
    let on = config.memory.enabled && crate::memory::private_session(session);
    // The agent's own files, as real a path as `home` is.
    let workspace = match config.agent_dir().strip_prefix(&config.home) {
        Ok(rest) => home.join(rest),
        Err(_) => home.join("workspace"),
    };
    let files = [crate::memory::MEMORY_FILE, "memory.md"].map(|f| workspace.join(f));
    let dir = workspace.join(crate::memory::MEMORY_DIR);
    move |p: &std::path::Path| {
        let markdown = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("md"));
        on && (files.iter().any(|f| p == f) || (p.starts_with(&dir) && markdown && p != dir))
    }
}

async fn context(env: &CallEnv<'_>, call: &Call, state: Arc<Mutex<ToolCallState>>) -> ToolContext {
    let events = env.events.clone();
    let call_id = call.id.clone();
    let progress = move |p: Progress| match p {
        Progress::Output(text) => events.emit(EventKind::ToolOutput { call_id: call_id.clone(), text }),
        Progress::Content(content) => {
            let mut s = lock(&state);
            s.content = content;
            events.emit(EventKind::ToolCallUpdate(s.clone()));
            events.flush();
        }
        Progress::Plan(entries) => {
            events.emit(EventKind::Plan(entries));
            events.flush();
        }
    };
    ToolContext {
        session: env.events.session.clone(),
        call_id: call.id.clone(),
        cwd: env.settings.cwd.clone(),
        roots: env.settings.roots(),
        host: env.host.clone(),
        config: env.config.clone(),
        cancel: env.cancel.clone(),
        network: env.live.network(),
        progress: Box::new(progress),
        checker: env.lsp.clone().map(|s| s as Arc<dyn crate::tools::check::Checker>),
    }
}

/// Approval (what the `PreToolUse` hooks said counted in), then the run.
async fn decide_and_run(env: &CallEnv<'_>, ready: Ready) -> Done {
    let name = ready.call.name.clone();
    let mut decision = approval::decide(env.mode(), &name, &ready.prepared.access, ready.inside, &env.live.rules());
    if !matches!(decision, Decision::Deny(_)) {
        match ready.hook {
            Some(crate::hooks::Verdict::Ask(_)) => decision = Decision::Ask,
            // As an "always allow" rule would: inside the workspace and the sandbox only.
            Some(crate::hooks::Verdict::Allow)
                if ready.inside
                    && ready.prepared.access.control.is_none()
                    && ready
                        .prepared
                        .access
                        .exec
                        .as_ref()
                        .is_none_or(|e| e.confinement == crate::tools::Confinement::Sandboxed) =>
            {
                decision = Decision::Allow;
            }
            _ => {}
        }
    }
    match decision {
        Decision::Allow => execute(env, ready).await,
        Decision::Deny(why) => {
            finish_unrun(env, &ready, &format!("Rejected: {why}"), &format!("the user rejected this ({why})")).into()
        }
        Decision::Ask => {
            let options = approval::options(&name, &ready.prepared, ready.inside);
            let call = lock(&ready.state).clone();
            let request = PermissionRequest { call, options };
            env.events.flush();
            let answer = env.host.request_permission(&env.events.session, &request, &env.cancel).await;
            let chosen = match &answer {
                PermissionAnswer::Selected(id) => request.options.iter().find(|o| &o.id == id).map(|o| o.kind),
                PermissionAnswer::Cancelled => {
                    // The user cancelled in the question itself: the turn ends here, even if the
                    // client's `session/cancel` has not arrived yet.
                    env.cancel.cancel();
                    None
                }
                PermissionAnswer::NoAnswer | PermissionAnswer::Unaskable(_) => None,
            };
            match chosen {
                Some(kind) => {
                    if let (PermissionAnswer::Selected(option), OptionKind::AllowAlways | OptionKind::RejectAlways) =
                        (&answer, kind)
                    {
                        remember(env, &name, &ready, option, kind.allows());
                    }
                    if kind.allows() {
                        execute(env, ready).await
                    } else {
                        finish_unrun(
                            env,
                            &ready,
                            "Rejected by the user",
                            "the user rejected this action. Do not try it again; ask them what to do instead",
                        )
                        .into()
                    }
                }
                None if env.cancel.is_cancelled() => {
                    finish_unrun(env, &ready, "Cancelled", "the user cancelled the turn").into()
                }
                None => match &answer {
                    PermissionAnswer::Unaskable(why) => {
                        finish_unrun(env, &ready, &format!("Not run: {why}"), &format!("it needs approval and {why}"))
                            .into()
                    }
                    _ => finish_unrun(env, &ready, "Not approved", "the user did not approve this action").into(),
                },
            }
        }
    }
}

/// Keeps an "always" answer for the session and in config.toml for this workspace.
fn remember(env: &CallEnv<'_>, tool: &str, ready: &Ready, option: &str, allow: bool) {
    let rule = approval::rule_for(tool, &ready.prepared.access, option, allow);
    env.live.remember(rule.clone());
    if let Err(e) = crate::config::rules::remember_rule(&env.config.home, &env.settings.cwd, &rule) {
        tracing::warn!(error = %e, "could not save the permission rule to config.toml");
    }
}

/// Ends a call that did not run: failed, with a reason for the user and one for the model.
fn finish_unrun(env: &CallEnv<'_>, ready: &Ready, for_user: &str, for_model: &str) -> UserPart {
    let mut s = lock(&ready.state);
    s.status = ToolStatus::Failed;
    s.content = vec![ToolContent::Text(for_user.to_owned())];
    if !ready.hidden {
        env.events.emit(EventKind::ToolCallUpdate(s.clone()));
    }
    UserPart::ToolResult(ToolResult {
        call_id: ready.call.id.clone(),
        name: ready.call.name.clone(),
        content: format!("Not run: {for_model}."),
        is_error: true,
    })
}

/// Runs an approved call and reports it.
async fn execute(env: &CallEnv<'_>, ready: Ready) -> Done {
    let Ready { call, prepared, ctx, state, hidden, writes_memory, .. } = ready;
    if !hidden {
        let mut s = lock(&state);
        s.status = ToolStatus::InProgress;
        env.events.emit(EventKind::ToolCallUpdate(s.clone()));
    }
    env.events.flush();
    let output = if env.cancel.is_cancelled() {
        crate::tools::ToolOutput::error("cancelled")
    } else {
        // Tools stop on cancel themselves (a command is killed, a wait on the editor ends); one
        // that does not is dropped after a grace period, so a cancel always ends the turn.
        let mut run = prepared.action.run_boxed(&ctx);
        tokio::select! {
            output = &mut run => output,
            () = env.cancel.cancelled() => match tokio::time::timeout(CANCEL_GRACE, run).await {
                Ok(output) => output,
                Err(_) => {
                    tracing::warn!(tool = %call.name, "the tool did not stop when cancelled; dropped it");
                    crate::tools::ToolOutput::error("cancelled")
                }
            },
        }
    };
    let cancelled = env.cancel.is_cancelled();
    if writes_memory {
        // Told before the write (a search meanwhile looks at the files) and after it (one
        // that ended meanwhile, having looked too early, does not count).
        crate::memory::Memory::of(&env.config).changing();
    }
    {
        let mut s = lock(&state);
        s.status = if output.is_error || cancelled { ToolStatus::Failed } else { ToolStatus::Completed };
        s.content = output.content.clone();
        if cancelled && !output.is_error {
            s.content.push(ToolContent::Text("Cancelled".into()));
        }
        s.raw_output = output.raw_output.clone();
        if !hidden {
            env.events.emit(EventKind::ToolCallUpdate(s.clone()));
        }
    }
    env.events.flush();
    let images = output
        .content
        .iter()
        .filter_map(|c| match c {
            ToolContent::Image { mime_type, data } => {
                Some(UserPart::Image { mime_type: mime_type.clone(), data: data.clone() })
            }
            _ => None,
        })
        .collect();
    let mut content = output.for_model;
    // The user's `PostToolUse` hooks: what they say is a note for the model, after the result.
    if !cancelled && env.hooks.any(crate::config::hooks::HookEvent::PostToolUse, Some(&call.name)) {
        let input = lock(&state).raw_input.clone();
        let note = super::hooks::post_tool_use(
            &env.hooks,
            &env.events,
            &env.cancel,
            &call.name,
            input,
            &content,
            output.is_error,
        )
        .await;
        if let Some(note) = note {
            content.push_str(&format!("\n\n[hook] {note}"));
        }
    }
    let result =
        UserPart::ToolResult(ToolResult { call_id: call.id, name: call.name, content, is_error: output.is_error });
    Done { result, images }
}

#[cfg(test)]
mod tests {
    use super::nesting;

    #[test]
    fn nesting_counts_brackets_outside_strings() {
        assert_eq!(nesting(r#"{"path": "a.rs"}"#), 1);
        assert_eq!(nesting(r#"{"a": [1, {"b": [[]]}]}"#), 5);
        assert_eq!(nesting(r#"{"text": "[[[{{{ \" ]]] \\"}"#), 1, "brackets in strings, escaped quotes");
        assert_eq!(nesting(&format!("{}1{}", "[".repeat(127), "]".repeat(127))), 127);
        assert_eq!(nesting("not json ]]]"), 0);
    }
}
