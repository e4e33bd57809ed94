//! `acp cron list|add|rm|run|runs`: the running gateway's cron jobs (`cron.*`), asked as
//! `acp pairing` asks (`--gateway`, `--token`, `--token-file`). Output on stdout (`--json` for
//! scripts); problems on stderr, exit code 1.

use std::process::ExitCode;

use acp_protocol::gateway::cron::{CronJob, JobShown, Payload, RunEntry, Schedule};
use acp_protocol::gateway::methods::{
    CronAdd, CronAddParams, CronList, CronListParams, CronRemove, CronRun, CronRunParams, CronRuns, CronRunsParams,
    JobIdParams,
};
use serde_json::{Value, json};

use super::pairing::{GatewayTarget, ask, finish, target};
use crate::config::Config;
use crate::gateway::cron::schedule::{parse_duration, parse_time};

// Parsed once per process: the size of `Add` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum CronCommand {
    /// The jobs, soonest first.
    List {
        /// Also the jobs turned off.
        #[arg(long)]
        all: bool,
        /// As JSON (the gateway's `cron.list`).
        #[arg(long)]
        json: bool,
    },
    /// Adds a job: when (--every, --at or --cron), and what (--message).
    #[command(group = clap::ArgGroup::new("when").required(true).args(["every", "at", "cron"]))]
    Add {
        /// Every interval: 30s, 5m, 2h, 1d.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// Once: an ISO time with an offset (2026-12-24T09:00:00+01:00), or a delay (20m).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// By a cron expression (5 fields, or 6 with seconds first): "0 9 * * 1-5".
        #[arg(long, value_name = "EXPR")]
        cron: Option<String>,
        /// The time zone of --cron (default: the gateway host's): Europe/Paris.
        #[arg(long, value_name = "ZONE", requires = "cron")]
        tz: Option<String>,
        /// What the agent is told (isolated), or the event for the main session (main).
        #[arg(long, value_name = "TEXT")]
        message: String,
        /// `isolated` (default: a fresh session per run) or `main` (an event for the main session's
        /// heartbeat).
        #[arg(long, value_name = "TARGET", default_value = "isolated", value_parser = ["isolated", "main"])]
        session: String,
        /// Sends each run's reply to a chat: telegram:CHAT (telegram:CHAT:TOPIC for a forum topic).
        #[arg(long, value_name = "CHANNEL:CHAT")]
        deliver: Option<String>,
        /// A main job's event wakes the heartbeat `now` (default) or waits for the `next-heartbeat`.
        #[arg(long, value_name = "WHEN", value_parser = ["now", "next-heartbeat"])]
        wake: Option<String>,
        /// The job's name (default: the start of its message).
        #[arg(long)]
        name: Option<String>,
        /// The model of its runs (default: the gateway's).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// How long a run may take (default: `[cron] timeout`, 10m).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Added turned off.
        #[arg(long)]
        disabled: bool,
        /// An --at job stays (turned off) after it ran, rather than being removed.
        #[arg(long)]
        keep: bool,
    },
    /// Removes a job (and its run log).
    Rm {
        /// The job's id (as `acp cron list` shows it).
        id: String,
    },
    /// Runs a job now (its schedule goes on as before).
    Run {
        id: String,
        /// Only if it is due.
        #[arg(long)]
        due: bool,
    },
    /// The run log: of one job, or of all, newest first.
    Runs {
        /// The job's id (default: every job).
        id: Option<String>,
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: u64,
        #[arg(long)]
        json: bool,
    },
}

/// `acp cron …`.
pub fn cron(command: CronCommand, t: &GatewayTarget) -> ExitCode {
    let config = Config::load();
    let options = match target(&config, t) {
        Ok(options) => options,
        Err(e) => return finish(Err(e)),
    };
    finish(match command {
        CronCommand::List { all, json } => {
            let params = CronListParams { include_disabled: Some(all), ..CronListParams::default() };
            ask::<CronList>(options, params).map(|page| if json { pretty(&page) } else { list(&page.jobs) })
        }
        CronCommand::Add {
            every,
            at,
            cron,
            tz,
            message,
            session,
            deliver,
            wake,
            name,
            model,
            timeout,
            disabled,
            keep,
        } => {
            let when = When { every, at, cron, tz };
            let what = What { message, session, deliver, wake, name, model, timeout, disabled, keep };
            add_params(when, what)
                .and_then(|params| ask::<CronAdd>(options, params))
                .map(|job| format!("Added {} ({}): {}", job.job.id, job.job.name, describe(&job)))
        }
        CronCommand::Rm { id } => ask::<CronRemove>(options, JobIdParams::of(&id)).map(|_| format!("Removed {id}.")),
        CronCommand::Run { id, due } => {
            let params = CronRunParams { id: Some(id.clone()), job_id: None, mode: due.then(|| "due".into()) };
            ask::<CronRun>(options, params).map(|ack| match (ack.run_id, ack.reason) {
                (Some(run), _) => format!("Running {id} ({run}); `acp cron runs {id}` shows how it went."),
                (None, Some(reason)) => format!("Not run: {reason}."),
                (None, None) => "Not run.".into(),
            })
        }
        CronCommand::Runs { id, limit, json } => {
            let params = CronRunsParams {
                scope: Some(if id.is_some() { "job" } else { "all" }.into()),
                id,
                limit: Some(limit.clamp(1, 200)),
                ..CronRunsParams::default()
            };
            ask::<CronRuns>(options, params).map(|page| if json { pretty(&page) } else { runs(&page.entries) })
        }
    })
}

struct When {
    every: Option<String>,
    at: Option<String>,
    cron: Option<String>,
    tz: Option<String>,
}

struct What {
    message: String,
    session: String,
    deliver: Option<String>,
    wake: Option<String>,
    name: Option<String>,
    model: Option<String>,
    timeout: Option<String>,
    disabled: bool,
    keep: bool,
}

fn add_params(when: When, what: What) -> Result<CronAddParams, String> {
    let schedule = match (when.every, when.at, when.cron) {
        (Some(every), _, _) => json!({"kind": "every", "everyMs": parse_duration(&every)?}),
        (_, Some(at), _) => {
            let ms = match parse_time(&at) {
                Ok(ms) => ms,
                Err(e) => {
                    let delay = i64::try_from(parse_duration(&at).map_err(|_| e)?).unwrap_or(i64::MAX);
                    jiff::Timestamp::now().as_millisecond().checked_add(delay).ok_or("--at: too far ahead")?
                }
            };
            let iso = jiff::Timestamp::from_millisecond(ms).map_err(|e| e.to_string())?.to_string();
            json!({"kind": "at", "at": iso})
        }
        (_, _, Some(expr)) => json!({"kind": "cron", "expr": expr, "tz": when.tz}),
        _ => return Err("say when: --every, --at or --cron".into()),
    };
    let message = what.message.trim().to_owned();
    let payload = if what.session == "main" {
        json!({"kind": "systemEvent", "text": message})
    } else {
        let timeout = what.timeout.map(|t| parse_duration(&t).map(|ms| ms.div_ceil(1000).max(1))).transpose()?;
        json!({"kind": "agentTurn", "message": message, "model": what.model, "timeoutSeconds": timeout})
    };
    let delivery = what
        .deliver
        .map(|d| {
            let mut parts = d.splitn(3, ':');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(channel), Some(to), thread) if !channel.is_empty() && !to.is_empty() => {
                    Ok(json!({"mode": "announce", "channel": channel, "to": to, "threadId": thread}))
                }
                _ => Err(format!("--deliver {d}: write it as channel:chat (telegram:123456)")),
            }
        })
        .transpose()?;
    let name = what.name.unwrap_or_else(|| {
        let first = message.lines().next().unwrap_or_default();
        first.chars().take(40).collect::<String>()
    });
    Ok(CronAddParams {
        name,
        enabled: what.disabled.then_some(false),
        delete_after_run: what.keep.then_some(false),
        schedule: strip_nulls(schedule),
        session_target: what.session,
        wake_mode: what.wake,
        payload: strip_nulls(payload),
        delivery: delivery.map(strip_nulls),
        ..CronAddParams::default()
    })
}

fn strip_nulls(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    v
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A time as the host reads it.
fn local(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

fn schedule_text(job: &CronJob) -> String {
    match &job.schedule {
        Schedule::At { at } => format!("at {at}"),
        Schedule::Every { every_ms, .. } => format!("every {}", span(*every_ms)),
        Schedule::Cron { expr, tz, .. } => match tz {
            Some(tz) => format!("cron \"{expr}\" {tz}"),
            None => format!("cron \"{expr}\""),
        },
    }
}

fn span(ms: u64) -> String {
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn describe(shown: &JobShown) -> String {
    let job = &shown.job;
    let what = match &job.payload {
        Payload::AgentTurn { .. } => "isolated",
        Payload::SystemEvent { .. } => "main",
    };
    let next = shown.next_run_at_ms.map_or_else(|| "not scheduled".to_owned(), |at| format!("next {}", local(at)));
    let to = job
        .delivery
        .as_ref()
        .filter(|d| d.mode == "announce")
        .map(|d| format!(" → {}:{}", d.channel.as_deref().unwrap_or("last"), d.to.as_deref().unwrap_or("last chat")))
        .unwrap_or_default();
    format!("{} · {what}{to} · {next}", schedule_text(job))
}

fn list(jobs: &[JobShown]) -> String {
    if jobs.is_empty() {
        return "No cron jobs (acp cron add --every 1h --message TEXT adds one).".into();
    }
    jobs.iter()
        .map(|shown| {
            let job = &shown.job;
            let off = if job.enabled { "" } else { " [off]" };
            let last = match (&job.state.last_run_status, job.state.last_run_at_ms) {
                (Some(status), Some(at)) => format!(" · last {status} {}", local(at)),
                _ => String::new(),
            };
            format!("{}  {}{off}  {}{last}", job.id, job.name, describe(shown))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn runs(entries: &[RunEntry]) -> String {
    if entries.is_empty() {
        return "No runs yet.".into();
    }
    entries
        .iter()
        .map(|e| {
            let at = e.run_at_ms.map_or_else(String::new, local);
            let took = e.duration_ms.map(|ms| format!(" in {:.1}s", ms as f64 / 1000.0)).unwrap_or_default();
            let said = e.error.as_deref().or(e.summary.as_deref()).unwrap_or_default();
            let said: String = said.lines().next().unwrap_or_default().chars().take(100).collect();
            let delivered = match e.delivery_status.as_deref() {
                Some("delivered") => " · delivered",
                _ => "",
            };
            format!("{at}  {}  {}{took}{delivered}  {said}", e.job_name.as_deref().unwrap_or(&e.job_id), e.status)
        })
        .collect::<Vec<_>>()
        .join("\n")
}
