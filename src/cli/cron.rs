//! `acp cron list|add|rm|run|runs`: the running gateway's cron jobs (`cron.*`), asked as
//! `acp pairing` asks (`--gateway`, `--token`, `--token-file`). Output on stdout (`--json` for
//! scripts); problems on stderr, exit code 1.

use std::process::ExitCode;

use acp_protocol::gateway::cron::{CronJob, JobShown, Payload, RunEntry, Schedule};
use acp_protocol::gateway::methods::{
    CronAdd, CronAddParams, CronList, CronListParams, CronRemove, CronRun, CronRunParams, CronRuns, CronRunsParams,
    CronUpdate, CronUpdateParams, JobIdParams,
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
        /// Every interval, with its unit: 30s, 5m, 2h, 1d (at least 1s).
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
        /// Sends each run's reply to a chat (isolated jobs): telegram:CHAT (telegram:CHAT:TOPIC for a
        /// forum topic), or `last`: the direct chat someone last wrote to the agent from.
        #[arg(long, value_name = "CHANNEL:CHAT")]
        deliver: Option<String>,
        /// A main job's event wakes the heartbeat `now` (default) or waits for the `next-heartbeat`
        /// (main jobs only).
        #[arg(long, value_name = "WHEN", value_parser = ["now", "next-heartbeat"])]
        wake: Option<String>,
        /// The job's name (default: the start of its message).
        #[arg(long)]
        name: Option<String>,
        /// The model of its runs (default: the gateway's).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// How long a run may take (default: `[cron] timeout`, 10m; at least 1s).
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
        /// The job's id (as `acp cron list` shows it).
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
        /// As JSON (the gateway's `cron.runs`).
        #[arg(long)]
        json: bool,
    },
    /// Turns a job on (it runs at its next time).
    Enable {
        /// The job's id.
        id: String,
    },
    /// Turns a job off (kept, listed with --all; `acp cron run` still runs it).
    Disable {
        /// The job's id.
        id: String,
    },
}

/// `acp cron …`.
pub fn cron(command: CronCommand, t: &GatewayTarget) -> ExitCode {
    let config = Config::load();
    let options = match target(&config, t) {
        Ok(options) => options,
        Err(e) => return finish(Err(e)),
    };
    let command_kind = match &command {
        CronCommand::Enable { .. } => Kind::Enable,
        _ => Kind::Other,
    };
    finish(for_people(match command {
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
        CronCommand::Enable { id } | CronCommand::Disable { id } => {
            let on = matches!(command_kind, Kind::Enable);
            let mut patch = serde_json::Map::new();
            patch.insert("enabled".into(), on.into());
            let params = CronUpdateParams { id: Some(id.clone()), job_id: None, patch };
            ask::<CronUpdate>(options, params).map(|job| {
                format!("{} {id} ({}): {}", if on { "Turned on" } else { "Turned off" }, job.job.name, describe(&job))
            })
        }
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
    }))
}

/// The gateway's words for a job not found, in the command line's.
fn for_people(result: Result<String, String>) -> Result<String, String> {
    result.map_err(|e| match e.find("cron job not found: ") {
        Some(at) => {
            let id = e[at + 20..].split(['.', ' ']).next().unwrap_or_default();
            format!("no cron job {id} (acp cron list --all shows them)")
        }
        None => e,
    })
}

enum Kind {
    Enable,
    Other,
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
    let span = |flag: &str, given: &str| -> Result<u64, String> {
        if given.trim().chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("{flag} {given}: give a unit (30s, 5m, 2h, 1d)"));
        }
        let ms = parse_duration(given).map_err(|e| format!("{flag}: {e}"))?;
        if ms < 1000 {
            return Err(format!("{flag} {given}: at least 1s"));
        }
        Ok(ms)
    };
    if what.message.trim().is_empty() {
        return Err("--message is empty: say what the agent should do".into());
    }
    if what.session == "main" && what.deliver.is_some() {
        return Err("--deliver is for isolated jobs: a main job's event is read at the heartbeat, which delivers to [heartbeat] target".into());
    }
    if what.session == "isolated" && what.wake.is_some() {
        return Err("--wake is for main jobs (--session main)".into());
    }
    if what.session == "main" && (what.model.is_some() || what.timeout.is_some()) {
        return Err("--model and --timeout are for isolated jobs".into());
    }
    let schedule = match (when.every, when.at, when.cron) {
        (Some(every), _, _) => json!({"kind": "every", "everyMs": span("--every", &every)?}),
        (_, Some(at), _) => match parse_time(&at) {
            // As given: its offset is how it is shown.
            Ok(_) => json!({"kind": "at", "at": at.trim()}),
            Err(_) => {
                let delay = parse_duration(&at).map_err(|_| {
                    format!("--at {at}: a time with an offset (2026-12-24T09:00:00+01:00) or a delay (20m, 2h)")
                })?;
                let delay = i64::try_from(delay).unwrap_or(i64::MAX);
                let ms = jiff::Timestamp::now().as_millisecond().checked_add(delay).ok_or("--at: too far ahead")?;
                let iso = jiff::Timestamp::from_millisecond(ms).map_err(|e| e.to_string())?.to_string();
                json!({"kind": "at", "at": iso})
            }
        },
        (_, _, Some(expr)) => json!({"kind": "cron", "expr": expr, "tz": when.tz}),
        _ => return Err("say when: --every, --at or --cron".into()),
    };
    let message = what.message.trim().to_owned();
    let payload = if what.session == "main" {
        json!({"kind": "systemEvent", "text": message})
    } else {
        let timeout = what.timeout.map(|t| span("--timeout", &t).map(|ms| ms.div_ceil(1000))).transpose()?;
        json!({"kind": "agentTurn", "message": message, "model": what.model, "timeoutSeconds": timeout})
    };
    let delivery = what
        .deliver
        .map(|d| {
            if d.trim() == "last" {
                return Ok(json!({"mode": "announce", "channel": "last"}));
            }
            match crate::tools::host::ChatTarget::parse(&d) {
                Ok(t) => Ok(json!({"mode": "announce", "channel": t.channel, "to": t.to, "threadId": t.thread})),
                Err(_) => Err(format!(
                    "--deliver {d}: write it as channel[@account]:chat (telegram:123456, telegram@family:123456), or last"
                )),
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
        .map(|t| t.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S %Z").to_string())
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
            let line = said.lines().next().unwrap_or_default();
            let mut said: String = line.chars().take(160).collect();
            if line.chars().count() > 160 {
                said.push('…');
            }
            let delivered = match e.delivery_status.as_deref() {
                Some("delivered") => " · delivered",
                _ => "",
            };
            let short: String = e.job_id.chars().take(8).collect();
            format!(
                "{at}  {} ({short})  {}{took}{delivered}  {said}",
                e.job_name.as_deref().unwrap_or(&e.job_id),
                e.status
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
