//! `cron`: the agent's scheduled jobs on the gateway (offered only there), one tool with an
//! `action`: `list` and `runs` read; `add`, `update`, `remove` and `run` change what the agent
//! will do on its own, so each is asked about first, in every mode, with the job as it will be
//! saved shown in the question. A job added from a chat delivers its replies to that chat unless
//! told otherwise.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Access, Action, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput};
use crate::config::cron::parse_duration;

pub struct Cron;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CronAction {
    List,
    Add,
    Update,
    Remove,
    Run,
    Runs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CronArgs {
    action: CronAction,
    /// The job (update, remove, run, runs)
    id: Option<String>,
    /// "every 30m", "in 20m", "at <ISO time>", or cron "0 9 * * 1-5"
    schedule: Option<String>,
    /// Of a cron expression, e.g. "Europe/Paris"
    tz: Option<String>,
    /// What you are told at each run
    message: Option<String>,
    name: Option<String>,
    /// "isolated" (default) or "main" (a note for the main session's next heartbeat)
    session: Option<String>,
    /// Where replies go: "telegram:CHAT" or "none"; default: this chat
    deliver: Option<String>,
    /// update: on or off
    enabled: Option<bool>,
}

impl Tool for Cron {
    const NAME: &'static str = "cron";
    type Args = CronArgs;

    fn description(&self) -> String {
        "Scheduled jobs: list, add, update, remove, run (now), runs (log). Each run sends `message` to a \
         fresh session of yours; the user approves each change."
            .into()
    }

    async fn prepare(&self, args: CronArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let id = || args.id.clone().filter(|i| !i.trim().is_empty()).ok_or("give the job's `id` (see action list)");
        let (method, params, title) = match args.action {
            CronAction::List => ("cron.list", json!({"includeDisabled": true}), "List cron jobs".to_owned()),
            CronAction::Runs => {
                let params = match &args.id {
                    Some(id) => json!({"id": id, "limit": 20}),
                    None => json!({"scope": "all", "limit": 20}),
                };
                ("cron.runs", params, "Read the cron run log".to_owned())
            }
            CronAction::Remove => {
                let job = current(ctx, &id()?).await?;
                ("cron.remove", json!({"id": id()?}), format!("Remove cron job {}", named(&job)))
            }
            CronAction::Run => {
                let job = current(ctx, &id()?).await?;
                ("cron.run", json!({"id": id()?}), format!("Run cron job {} now", named(&job)))
            }
            CronAction::Add => {
                let job = add(&args, ctx)?;
                let title =
                    format!("Add cron job: {} — {}", when(&args)?, short(args.message.as_deref().unwrap_or("")));
                ("cron.add", job, title)
            }
            CronAction::Update => {
                let job = current(ctx, &id()?).await?;
                let patch = patch(&args, job["sessionTarget"].as_str().unwrap_or("isolated"), ctx)?;
                if patch.is_empty() {
                    return Err("nothing to change: give schedule, message, name, session, deliver or enabled".into());
                }
                ("cron.update", json!({"id": id()?, "patch": patch}), format!("Change cron job {}", named(&job)))
            }
        };
        let changes =
            matches!(args.action, CronAction::Add | CronAction::Update | CronAction::Remove | CronAction::Run);
        let access = Access { control: changes.then(|| title.clone()), ..Access::default() };
        // The question shows the job as it will be saved (and, for a job there already, what it
        // is now).
        let shown = match args.action {
            CronAction::Add => params.clone(),
            CronAction::Update => json!({"job": essentials(&current(ctx, &id()?).await?), "changes": params["patch"]}),
            CronAction::Remove | CronAction::Run => essentials(&current(ctx, &id()?).await?),
            CronAction::List | CronAction::Runs => Value::Null,
        };
        let preview = if changes {
            vec![ToolContent::Text(serde_json::to_string_pretty(&shown).unwrap_or_default())]
        } else {
            Vec::new()
        };
        Ok(Prepared {
            title,
            kind: if changes { ToolKind::Other } else { ToolKind::Read },
            locations: Vec::new(),
            preview,
            access,
            action: Box::new(Call { method, params }),
        })
    }
}

/// The job `cron.add` is given.
fn add(args: &CronArgs, ctx: &ToolContext) -> Result<Value, String> {
    let message = args.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).ok_or("give the `message`")?;
    let schedule = schedule(args.schedule.as_deref().ok_or("give the `schedule`")?, args.tz.as_deref())?;
    let session = args.session.as_deref().unwrap_or("isolated");
    let mut job = Map::new();
    job.insert("name".into(), args.name.clone().unwrap_or_else(|| short(message)).into());
    job.insert("schedule".into(), schedule);
    job.insert("sessionTarget".into(), session.into());
    job.insert("payload".into(), payload(session, message)?);
    if session == "isolated"
        && let Some(delivery) = delivery(args.deliver.as_deref(), ctx)?
    {
        job.insert("delivery".into(), delivery);
    }
    Ok(Value::Object(job))
}

/// Job `id` as it is now (an unknown one is the model's to hear about, before any question).
async fn current(ctx: &ToolContext, id: &str) -> Result<Value, String> {
    ctx.host.cron(&ctx.session, "cron.get", json!({"id": id})).await
}

/// A job's name and when it runs, for a title.
fn named(job: &Value) -> String {
    format!("\"{}\" ({})", job["name"].as_str().unwrap_or_default(), schedule_text(&job["schedule"]))
}

/// What a job does, as a question shows it.
fn essentials(job: &Value) -> Value {
    let mut shown = Map::new();
    for key in ["id", "name", "enabled", "schedule", "sessionTarget", "payload", "delivery"] {
        if let Some(v) = job.get(key) {
            shown.insert(key.into(), v.clone());
        }
    }
    Value::Object(shown)
}

/// What `cron.update` changes (`target`: the job's session target, unless this changes it).
fn patch(args: &CronArgs, target: &str, ctx: &ToolContext) -> Result<Map<String, Value>, String> {
    let mut patch = Map::new();
    if let Some(schedule) = &args.schedule {
        patch.insert("schedule".into(), self::schedule(schedule, args.tz.as_deref())?);
    }
    if let Some(name) = &args.name {
        patch.insert("name".into(), name.clone().into());
    }
    if let Some(on) = args.enabled {
        patch.insert("enabled".into(), on.into());
    }
    if let Some(session) = &args.session {
        patch.insert("sessionTarget".into(), session.clone().into());
    }
    if let Some(message) = &args.message {
        patch.insert("payload".into(), payload(args.session.as_deref().unwrap_or(target), message)?);
    }
    if args.deliver.is_some() {
        patch.insert("delivery".into(), delivery(args.deliver.as_deref(), ctx)?.unwrap_or(json!({"mode": "none"})));
    }
    Ok(patch)
}

fn payload(session: &str, message: &str) -> Result<Value, String> {
    match session {
        "isolated" => Ok(json!({"kind": "agentTurn", "message": message})),
        "main" => Ok(json!({"kind": "systemEvent", "text": message})),
        other => Err(format!("`session` is \"isolated\" or \"main\", not {other:?}")),
    }
}

/// Where replies go: the chat named, none, or this conversation's chat (if it is in one).
fn delivery(deliver: Option<&str>, ctx: &ToolContext) -> Result<Option<Value>, String> {
    match deliver.map(str::trim) {
        Some("none") => Ok(Some(json!({"mode": "none"}))),
        Some(target) => match crate::tools::host::ChatTarget::parse(target) {
            Ok(t) => {
                let mut d = json!({"mode": "announce", "channel": t.channel, "to": t.to});
                if let Some(thread) = t.thread {
                    d["threadId"] = thread.into();
                }
                Ok(Some(d))
            }
            Err(_) => Err(format!(
                "`deliver` is \"channel:chat\" (telegram:123, telegram@account:123) or \"none\", not {target:?}"
            )),
        },
        None => Ok(ctx.host.own_chat(&ctx.session).map(|own| {
            let mut d = json!({"mode": "announce", "channel": own.channel, "to": own.to});
            if let Some(thread) = own.thread {
                d["threadId"] = thread.into();
            }
            d
        })),
    }
}

/// A schedule as the wire has it, from how people say it.
fn schedule(said: &str, tz: Option<&str>) -> Result<Value, String> {
    let said = said.trim();
    if let Some(every) = said.strip_prefix("every ") {
        return Ok(json!({"kind": "every", "everyMs": parse_duration(every)?}));
    }
    if let Some(delay) = said.strip_prefix("in ") {
        let at = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_millis(i64::try_from(parse_duration(delay)?).unwrap_or(i64::MAX)))
            .map_err(|e| e.to_string())?;
        return Ok(json!({"kind": "at", "at": at.to_string()}));
    }
    if let Some(at) = said.strip_prefix("at ") {
        let at: jiff::Timestamp = at
            .trim()
            .parse()
            .map_err(|_| format!("{at:?} is not a time with an offset (2026-12-24T09:00:00+01:00)"))?;
        return Ok(json!({"kind": "at", "at": at.to_string()}));
    }
    let fields = said.split_whitespace().count();
    if !(5..=6).contains(&fields) {
        return Err(format!(
            "{said:?} is not a schedule: say \"every 30m\", \"in 20m\", \"at <ISO time>\" or a cron expression"
        ));
    }
    let mut cron = json!({"kind": "cron", "expr": said});
    if let Some(tz) = tz {
        cron["tz"] = tz.into();
    }
    Ok(cron)
}

fn when(args: &CronArgs) -> Result<String, String> {
    Ok(args.schedule.clone().ok_or("give the `schedule`")?.trim().to_owned())
}

/// The start of `text`, for a title or a name.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(48) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

struct Call {
    method: &'static str,
    params: Value,
}

impl Action for Call {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        match ctx.host.cron(&ctx.session, self.method, self.params).await {
            Ok(result) => ToolOutput::ok(said(self.method, &result), Vec::new()),
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// A result as compact text.
fn said(method: &str, result: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let time = |v: &Value| {
        v.as_i64()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map_or_else(|| "-".to_owned(), |t| t.to_string())
    };
    let job_line = |job: &Value| {
        let on = if job["enabled"] == true { "" } else { " (off)" };
        format!(
            "{} · {}{on} · {} · next {} · last {}",
            text(&job["id"]),
            text(&job["name"]),
            schedule_text(&job["schedule"]),
            time(&job["state"]["nextRunAtMs"]),
            job["state"]["lastRunStatus"].as_str().unwrap_or("-"),
        )
    };
    match method {
        "cron.list" => {
            let jobs = result["jobs"].as_array().cloned().unwrap_or_default();
            if jobs.is_empty() {
                "No cron jobs.".into()
            } else {
                jobs.iter().map(job_line).collect::<Vec<_>>().join("\n")
            }
        }
        "cron.runs" => {
            let entries = result["entries"].as_array().cloned().unwrap_or_default();
            if entries.is_empty() {
                return "No runs yet.".into();
            }
            entries
                .iter()
                .map(|e| {
                    let said = e["error"].as_str().or(e["summary"].as_str()).unwrap_or_default();
                    format!(
                        "{} · {} · {} · {}",
                        time(&e["runAtMs"]),
                        text(&e["jobId"]),
                        text(&e["status"]),
                        short(said)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        "cron.add" => format!("Added: {}", job_line(result)),
        "cron.update" => format!("Changed: {}", job_line(result)),
        "cron.remove" => "Removed.".into(),
        _ => match (result["runId"].as_str(), result["reason"].as_str()) {
            (Some(run), _) => format!("Running now ({run}); action runs shows how it went."),
            (None, Some(reason)) => format!("Not run: {reason}."),
            _ => "Not run.".into(),
        },
    }
}

fn schedule_text(schedule: &Value) -> String {
    match schedule["kind"].as_str() {
        Some("every") => format!("every {}", span(schedule["everyMs"].as_u64().unwrap_or(0))),
        Some("at") => format!("at {}", schedule["at"].as_str().unwrap_or_default()),
        _ => {
            let tz = schedule["tz"].as_str().map(|tz| format!(" {tz}")).unwrap_or_default();
            format!("cron {}{tz}", schedule["expr"].as_str().unwrap_or_default())
        }
    }
}

/// `90000` → `90s`, `3600000` → `1h`.
fn span(ms: u64) -> String {
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}
