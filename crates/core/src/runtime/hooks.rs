//! The user's hooks ([`crate::hooks`]) at a session's lifecycle points: what each event sends
//! them, and what the session does with their answers. With no hook configured for an event,
//! nothing runs and nothing is built. A hook that fails is logged and the user told once
//! (until it works again); it never blocks.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::event::{Emitter, EventKind};
use super::settings::LiveState;
use crate::config::Config;
use crate::config::hooks::{HookConfig, HookEvent};
use crate::hooks::{self, HookResult, Ran, Verdict};

/// Where a session's hooks run: config.toml's and the workspace's allowed ones, in its directory.
#[derive(Clone)]
pub(crate) struct Place {
    pub config: Arc<Config>,
    pub workspace: Arc<crate::hooks::workspace::Workspace>,
    pub cwd: PathBuf,
}

impl Place {
    pub(crate) fn new(config: Arc<Config>, live: &LiveState, cwd: PathBuf) -> Self {
        Self { config, workspace: live.workspace_hooks(), cwd }
    }

    fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&HookConfig> {
        hooks::matching(self.config.hooks.iter().chain(self.workspace.hooks()), event, subject)
    }

    /// Whether any hook is configured for `event` with `subject`.
    pub(crate) fn any(&self, event: HookEvent, subject: Option<&str>) -> bool {
        !self.matching(event, subject).is_empty()
    }

    /// Runs the hooks for `event` (`subject` for their matchers) on `fields` and the common ones;
    /// `None` when none matches. A cancelled wait ends with no results (the caller sees the
    /// token). A hook that newly failed is told to the user.
    pub(crate) async fn fire(
        &self,
        events: &Emitter,
        cancel: Option<&CancellationToken>,
        event: HookEvent,
        subject: Option<&str>,
        fields: Value,
    ) -> Option<Vec<Ran>> {
        let ran = self.run(&events.session, cancel, event, subject, fields).await?;
        for notice in ran.iter().filter_map(|r| r.failure_notice(event)) {
            events.emit(EventKind::Notice(notice));
        }
        Some(ran)
    }

    /// [`Place::fire`] without telling anyone of failures (they are logged).
    async fn run(
        &self,
        session: &str,
        cancel: Option<&CancellationToken>,
        event: HookEvent,
        subject: Option<&str>,
        fields: Value,
    ) -> Option<Vec<Ran>> {
        let matched = self.matching(event, subject);
        if matched.is_empty() {
            return None;
        }
        let mut input = json!({
            "hook_event_name": event.name(),
            "session_id": session,
            "cwd": self.cwd,
        });
        if let (Value::Object(input), Value::Object(fields)) = (&mut input, fields) {
            input.extend(fields);
        }
        let run = hooks::run(&self.config, &matched, &input, &self.cwd);
        let ran = match cancel {
            Some(cancel) => tokio::select! {
                ran = run => ran,
                () = cancel.cancelled() => Vec::new(),
            },
            None => run.await,
        };
        Some(ran)
    }
}

/// `UserPromptSubmit`: what the hooks decide on the prompt; `None` when none is configured.
pub(crate) async fn prompt_submit(
    place: &Place,
    events: &Emitter,
    cancel: &CancellationToken,
    prompt: &str,
) -> Option<Verdict> {
    let ran = place.fire(events, Some(cancel), HookEvent::UserPromptSubmit, None, json!({"prompt": prompt})).await?;
    Some(hooks::verdict(&ran))
}

/// What the `PreToolUse` hooks said of a call.
pub(crate) struct PreTool {
    pub verdict: Verdict,
    /// The arguments a hook put in the model's place (`updatedInput`).
    pub rewritten: Option<Value>,
}

/// `PreToolUse`: what the hooks decide on a call about to be decided on; `None` when none
/// matches. Cancelled while they run, the call is blocked.
pub(crate) async fn pre_tool_use(
    place: &Place,
    events: &Emitter,
    cancel: &CancellationToken,
    name: &str,
    args: &Value,
) -> Option<PreTool> {
    // On every call: nothing is built when no hook matches.
    if !place.any(HookEvent::PreToolUse, Some(name)) {
        return None;
    }
    let fields = json!({"tool_name": name, "tool_input": args});
    let ran = place.fire(events, Some(cancel), HookEvent::PreToolUse, Some(name), fields).await?;
    if cancel.is_cancelled() {
        return Some(PreTool { verdict: Verdict::Block("the turn was cancelled".into()), rewritten: None });
    }
    let verdict = hooks::verdict(&ran);
    // The last of the user's own hooks that rewrote the arguments wins (never a workspace's: the
    // model can change what those run); a blocked call runs with none.
    let rewritten = ran
        .iter()
        .filter(|r| !r.workspace)
        .filter_map(|r| match &r.result {
            HookResult::Done(said) => said.json.as_ref(),
            _ => None,
        })
        .filter_map(|json| {
            json.get("hookSpecificOutput")
                .and_then(|s| s.get("updatedInput"))
                .or_else(|| json.get("updatedInput"))
                .cloned()
        })
        .next_back();
    Some(PreTool { verdict, rewritten })
}

/// `PostToolUse`: the hooks' note for the model after a call's result (a block's reason, or the
/// context they add), if any. The caller checks [`Place::any`] first (the result is copied here).
pub(crate) async fn post_tool_use(
    place: &Place,
    events: &Emitter,
    cancel: &CancellationToken,
    name: &str,
    args: Value,
    result: &str,
    is_error: bool,
) -> Option<String> {
    let fields = json!({
        "tool_name": name,
        "tool_input": args,
        "tool_response": {"output": result, "is_error": is_error},
    });
    let ran = place.fire(events, Some(cancel), HookEvent::PostToolUse, Some(name), fields).await?;
    match hooks::verdict(&ran) {
        Verdict::Block(note) | Verdict::Go(Some(note)) => Some(note),
        _ => None,
    }
}

/// `Stop`: the turn is about to end. Returns what the model is asked to do before it does, when a
/// hook blocks the stop — unless `active` (the turn already went on once for a `Stop` hook: the
/// loop guard; the hooks see `stop_hook_active` and their block is not followed again).
pub(crate) async fn stop(
    place: &Place,
    events: &Emitter,
    cancel: &CancellationToken,
    active: bool,
    last_reply: &str,
) -> Option<String> {
    let fields = json!({"stop_hook_active": active, "last_assistant_message": last_reply});
    let ran = place.fire(events, Some(cancel), HookEvent::Stop, None, fields).await?;
    match hooks::verdict(&ran) {
        Verdict::Block(reason) if !cancel.is_cancelled() => {
            if active {
                tracing::info!(%reason, "a Stop hook asked for more again; the turn ends (one more is the most)");
                None
            } else {
                Some(reason)
            }
        }
        _ => None,
    }
}

/// What the `SessionStart` hooks said, for the session's first model turn.
#[derive(Debug, Default, Clone)]
pub(crate) struct Started {
    pub context: Option<String>,
    /// Failures the user is told of.
    pub notices: Vec<String>,
}

/// `SessionStart` (`source`: `startup`, `load`, `resume`): the context the hooks give the
/// session's next prompt, and what the user is told with it.
pub(crate) async fn session_start(place: &Place, session: &str, source: &str) -> Started {
    let fields = json!({"source": source});
    let Some(ran) = place.run(session, None, HookEvent::SessionStart, Some(source), fields).await else {
        return Started::default();
    };
    let notices = ran.iter().filter_map(|r| r.failure_notice(HookEvent::SessionStart)).collect();
    let context = match hooks::verdict(&ran) {
        Verdict::Go(context) => context,
        _ => None,
    };
    Started { context, notices }
}

/// What the `SessionStart` hooks will say, worked out in the background: every model turn awaits
/// it until one reaches the model with it (so a first prompt that fails or is blocked loses none).
pub(crate) type StartSaid = futures_util::future::Shared<futures_util::future::BoxFuture<'static, Started>>;

/// Runs the `SessionStart` hooks (`source`) in the background, after the `SessionEnd` ones
/// (`clear`) if `ended`; `None` when no hook would run.
pub(crate) fn start_later(place: Place, session: &str, source: &'static str, ended: bool) -> Option<StartSaid> {
    use futures_util::FutureExt;
    let end = ended && place.any(HookEvent::SessionEnd, Some("clear"));
    if !end && !place.any(HookEvent::SessionStart, Some(source)) {
        return None;
    }
    let session = session.to_owned();
    let task = tokio::spawn(async move {
        if end {
            session_end(&place, &session, "clear").await;
        }
        session_start(&place, &session, source).await
    });
    Some(async move { task.await.unwrap_or_default() }.boxed().shared())
}

/// `SessionEnd`: the session closes (`reason`); what the hooks say is not used.
pub(crate) async fn session_end(place: &Place, session: &str, reason: &str) {
    place.run(session, None, HookEvent::SessionEnd, Some(reason), json!({"reason": reason})).await;
}

/// `PreCompact` (`trigger`: `manual` or `auto`): what the hooks add to the summary's instructions.
pub(crate) async fn pre_compact(
    place: &Place,
    events: &Emitter,
    cancel: &CancellationToken,
    trigger: &str,
    instructions: Option<&str>,
) -> Option<String> {
    let fields = json!({"trigger": trigger, "custom_instructions": instructions.unwrap_or_default()});
    let ran = place.fire(events, Some(cancel), HookEvent::PreCompact, Some(trigger), fields).await?;
    match hooks::verdict(&ran) {
        Verdict::Go(context) => context,
        _ => None,
    }
}

/// Whether `args` fit a tool's JSON `schema` at its top level: an object, every required
/// property there, no property the schema closes out, each one given of the type it names. (The
/// built-in tools then decode them as strictly as the model's own; an MCP server checks its.)
pub(crate) fn fits(schema: &Value, args: &Value) -> Result<(), String> {
    let Value::Object(args) = args else { return Err("they are not a JSON object".into()) };
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !args.contains_key(name) {
            return Err(format!("`{name}` is missing"));
        }
    }
    for (name, value) in args {
        let Some(property) = properties.and_then(|p| p.get(name)) else {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                return Err(format!("there is no `{name}`"));
            }
            continue;
        };
        let types: Vec<&str> = match property.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        let is = |t: &str| match t {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if !types.iter().any(|t| is(t)) {
            return Err(format!("`{name}` must be {}", types.join(" or ")));
        }
    }
    Ok(())
}
