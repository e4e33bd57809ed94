//! Cron jobs and the heartbeat on the gateway (OpenClaw's `cron.*`, `wake`, `set-heartbeats`,
//! `last-heartbeat`): when jobs run (`schedule.rs`, read by croner), what a job may be
//! (`jobs.rs`), the jobs held and the one timer over them all (`book.rs`), one run
//! (`run.rs`), the heartbeat (`heartbeat.rs`); here, loading them at start with the restart
//! policy, the timer's loop, and the methods. Jobs and their run log live in the store
//! (`acp.db`): a run is claimed there before it starts, so no slot ever runs twice.
//!
//! After a restart: a run the stopped process left going is logged as interrupted (and not run
//! again); a job whose time passed while the gateway was down runs once at start, however many
//! times it was due (`[cron] missed = "run-once"`), or waits for its next time (`"skip"`,
//! logged as skipped).

// `ErrorShape` is the wire's error, made once per failed request.
#![allow(clippy::result_large_err)]

pub mod book;
pub mod heartbeat;
pub mod jobs;
pub mod run;
pub mod schedule;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acp_protocol::gateway::cron::*;
use acp_protocol::gateway::events::name;
use acp_protocol::gateway::{ErrorShape, code};
use serde_json::json;
use tokio::sync::{Notify, Semaphore, watch};

use super::Gateway;
use crate::clock::now_ms;
use crate::config::Config;
use crate::config::cron::{CronConfig, Missed};
use crate::runtime::store::{CronEnd, CronRuns, SessionStore, StoreFuture};

pub struct Cron {
    pub book: book::Book,
    pub heartbeat: heartbeat::Heartbeat,
    config: CronConfig,
    /// The `cron` lane: runs going at once.
    lane: Semaphore,
    /// The timer looks again (a job was added or changed).
    changed: Notify,
    /// The jobs are loaded (methods wait for it).
    loaded: watch::Sender<bool>,
    /// Runs asked for (`manual:<job>:<ms>:<n>`).
    asked: AtomicU64,
    /// One change of a job at a time, from reading it in the book to saving it in the store
    /// (an edit, a claim, a run's end): none overwrites another.
    edit: tokio::sync::Mutex<()>,
    store_path: String,
}

/// A job that is not there, as the reference says it.
fn not_found(id: &str) -> ErrorShape {
    let mut error = ErrorShape::invalid(format!(
        "cron job not found: {id}. List the jobs (cron.list) and retry with a current id."
    ));
    error.details = Some(json!({"code": "CRON_JOB_NOT_FOUND", "jobId": id}));
    error
}

fn unavailable(e: impl std::fmt::Display) -> ErrorShape {
    ErrorShape::new(code::UNAVAILABLE, format!("the cron store: {e}"))
}

/// A job's model, if it names one, is one this gateway can run.
fn model_known(gw: &Gateway, job: &CronJob) -> Result<(), ErrorShape> {
    let config = gw.runtime.config();
    if let Some(agent) = job.agent_id.as_deref() {
        if !config.has_agent(agent) {
            return Err(ErrorShape::invalid(format!(
                "invalid cron params: at /agentId: no agent `{agent}` (agents: {})",
                config.agent_ids().join(", ")
            )));
        }
        if job.session_target == "main" && agent != config.default_agent() {
            return Err(ErrorShape::invalid(format!(
                "invalid cron params: at /agentId: a main-session job runs in the default agent's main session \
                 (`{}`); use sessionTarget \"isolated\" for agent `{agent}`",
                config.default_agent()
            )));
        }
    }
    match &job.payload {
        Payload::AgentTurn { model: Some(model), .. } => gw
            .runtime
            .config()
            .resolve_model(model)
            .map(|_| ())
            .map_err(|e| ErrorShape::invalid(format!("invalid cron params: at /payload/model: {e}"))),
        _ => Ok(()),
    }
}

/// The job `id` or `jobId` names, or the reference's error.
fn named(method: &str, id: Option<&str>, job_id: Option<&str>) -> Result<String, ErrorShape> {
    id.or(job_id).filter(|s| !s.is_empty()).map(str::to_owned).ok_or_else(|| {
        ErrorShape::invalid(format!(
            "invalid {method} params: must have required property 'id'; must have required property 'jobId'; must match \
             a schema in anyOf"
        ))
    })
}

impl Cron {
    pub fn new(config: &Config) -> Self {
        Self {
            book: book::Book::default(),
            heartbeat: heartbeat::Heartbeat::new(config.heartbeat.clone(), config.cron.timeout),
            lane: Semaphore::new(config.cron.max_concurrent.clamp(1, 1024)),
            config: config.cron.clone(),
            changed: Notify::new(),
            loaded: watch::channel(false).0,
            asked: AtomicU64::new(0),
            edit: tokio::sync::Mutex::new(()),
            store_path: config.home.join("acp.db").display().to_string(),
        }
    }

    /// Loads the jobs (the restart policy applied), then runs each when it is due, and the
    /// heartbeat, until `stop`.
    pub async fn serve(self: Arc<Self>, gw: std::sync::Weak<Gateway>, stop: tokio_util::sync::CancellationToken) {
        let heartbeat = {
            let (me, gw, stop) = (self.clone(), gw.clone(), stop.clone());
            tokio::spawn(async move { me.heartbeat.run(gw, stop).await })
        };
        if let Some(gateway) = gw.upgrade()
            && let Err(e) = self.load(&gateway).await
        {
            tracing::error!(error = %e, "could not load the cron jobs; none will run");
        }
        self.loaded.send_replace(true);
        // Old sessions of runs, those of removed jobs included: once the jobs are in, then hourly.
        let sweeper = {
            let (me, gw) = (self.clone(), gw.clone());
            tokio::spawn(async move {
                loop {
                    let Some(gateway) = gw.upgrade() else { return };
                    for agent in gateway.runtime.config().agent_ids() {
                        me.sweep(&gateway, &format!("agent:{agent}:cron:")).await;
                    }
                    drop(gateway);
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
            })
        };
        if self.config.enabled {
            self.timer(&gw, &stop).await;
        } else {
            stop.cancelled().await;
        }
        heartbeat.abort();
        sweeper.abort();
    }

    /// The timer: sleeps until the next job is due (or the jobs change), begins those due.
    async fn timer(self: &Arc<Self>, gw: &std::sync::Weak<Gateway>, stop: &tokio_util::sync::CancellationToken) {
        // A second after the jobs last changed, what adding or changing them took (the requests
        // parsed, the events sent) goes back to the system.
        let mut trim_at: Option<tokio::time::Instant> = None;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = now_ms();
            let (due, next) = self.book.due(now, |id, at| format!("cron:{id}:{at}"));
            for begun in due {
                let Some(gateway) = gw.upgrade() else { return };
                self.spawn_run(gateway, begun);
            }
            let wait = async {
                match next {
                    // At most a minute at a time: the wall clock may jump (a suspend, a new time).
                    Some(at) => {
                        let ms = at.saturating_sub(now).clamp(0, 60_000) as u64;
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            let trim = async {
                match trim_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = wait => {}
                () = &mut changed => trim_at = Some(tokio::time::Instant::now() + std::time::Duration::from_secs(1)),
                () = trim => {
                    trim_at = None;
                    super::limits::return_memory();
                }
                () = stop.cancelled() => return,
            }
        }
    }

    /// Claims `begun` in the store and runs it in the `cron` lane, then logs how it went.
    fn spawn_run(self: &Arc<Self>, gw: Arc<Gateway>, begun: book::Begun) {
        let me = self.clone();
        tokio::spawn(async move {
            let claimed = {
                let _editing = me.edit.lock().await;
                // The job as the book has it now (an edit since it began included).
                let job = me.book.get(&begun.job.id).unwrap_or_else(|| begun.job.clone());
                let job = serde_json::to_string(&job).unwrap_or_default();
                let (id, slot, run_id, at) = (begun.job.id.clone(), begun.slot, begun.run_id.clone(), begun.at);
                match gw.runtime.store().await {
                    Ok(s) => s.cron_claim(id, slot, run_id, at, job).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                }
            };
            match claimed {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(job = %begun.job.id, slot = ?begun.slot, "a cron slot ran before; not again");
                    me.book.abandon(&begun.job.id, &begun.run_id, None, now_ms());
                    me.changed.notify_one();
                    return;
                }
                Err(e) => {
                    // Not recorded, so not run: its time stays due, tried again a little later.
                    tracing::error!(job = %begun.job.id, error = %e, "could not record a cron run; trying again in 5 s");
                    let retry = begun.was_next.map(|next| next.max(now_ms() + 5_000));
                    me.book.abandon(&begun.job.id, &begun.run_id, Some(retry), now_ms());
                    me.changed.notify_one();
                    return;
                }
            }
            let entry = {
                let _place = me.lane.acquire().await;
                run::run(&gw, &begun, me.config.timeout).await
            };
            me.finish(&gw, &begun, entry).await;
        });
    }

    /// Run `begun` ended as `entry` says: the job's state, the store, the events.
    async fn finish(&self, gw: &Gateway, begun: &book::Begun, entry: RunEntry) {
        let _editing = self.edit.lock().await;
        let now = now_ms();
        let after = self.book.finish(&begun.job.id, &begun.run_id, &entry, now);
        self.changed.notify_one();
        let text = serde_json::to_string(&entry).unwrap_or_default();
        let kept = after
            .as_ref()
            .filter(|(_, removed)| !removed)
            .map(|(job, _)| serde_json::to_string(job).unwrap_or_default());
        let end = CronEnd {
            id: begun.job.id.clone(),
            run_id: begun.run_id.clone(),
            ended_at: now,
            status: entry.status.clone(),
            entry: text,
            job: kept,
        };
        if let Err(e) = finish(gw, end).await {
            tracing::error!(job = %begun.job.id, error = %e, "could not record how a cron run ended");
        }
        let job = after.as_ref().map_or_else(|| begun.job.clone(), |(job, _)| job.clone());
        tracing::info!(job = %job.id, name = %job.name, run = %begun.run_id, status = %entry.status,
            error = entry.error.as_deref().unwrap_or(""), "cron run finished");
        run::finished(gw, job.clone(), &entry);
        if after.as_ref().is_some_and(|(_, removed)| *removed) {
            self.event(gw, "removed", &job);
        }
        drop(_editing);
        if entry.session_key.is_some() {
            let agent = begun.job.agent_id.clone().unwrap_or_else(|| gw.default_agent());
            self.sweep(gw, &format!("agent:{agent}:cron:{}:run:", begun.job.id)).await;
        }
    }

    /// Deletes the sessions of isolated runs (ids starting `prefix`) unused for longer than
    /// `[cron] session_retention`.
    async fn sweep(&self, gw: &Gateway, prefix: &str) {
        let keep = i64::try_from(self.config.session_retention).unwrap_or(i64::MAX);
        if keep == 0 {
            return;
        }
        let (prefix, before) = (prefix.to_owned(), now_ms().saturating_sub(keep));
        // 500 at a time, until none is left (or one cannot be deleted).
        loop {
            let (prefix, before) = (prefix.clone(), before);
            let old = match stored(gw.runtime.store().await, |s| s.cron_sessions_before(prefix, before, 500)).await {
                Ok(old) => old,
                Err(e) => return tracing::warn!(error = %e, "could not look for old cron sessions"),
            };
            let full = old.len() == 500;
            for id in old {
                if gw.open.handle(&id).is_some() {
                    return;
                }
                if let Err(e) = gw.runtime.delete_session(&id).await {
                    return tracing::warn!(error = %e, session = %id, "could not delete an old cron session");
                }
            }
            if !full {
                return;
            }
        }
    }

    /// Loads the jobs, with the restart policy: runs left going are logged as interrupted,
    /// jobs due while the gateway was down run once or skip to their next time.
    async fn load(&self, gw: &Gateway) -> Result<(), String> {
        let store = gw.runtime.store().await?;
        let stored = store.cron_jobs().await.map_err(|e| e.to_string())?;
        let unfinished = store.cron_unfinished().await.map_err(|e| e.to_string())?;
        let now = now_ms();
        let mut jobs: Vec<CronJob> = Vec::with_capacity(stored.len());
        for text in stored {
            match serde_json::from_str::<CronJob>(&text) {
                Ok(job) => jobs.push(job),
                Err(e) => tracing::warn!(error = %e, "a stored cron job does not read; left out"),
            }
        }
        // (job, run, its entry, the job as it is now)
        let mut writes: Vec<[String; 4]> = Vec::new();
        for run in unfinished {
            let Some(job) = jobs.iter_mut().find(|j| j.id == run.job_id) else { continue };
            let entry = RunEntry {
                ts: now,
                job_id: job.id.clone(),
                action: "finished".into(),
                status: "error".into(),
                error: Some("cron: job interrupted by gateway restart".into()),
                run_id: Some(run.run_id.clone()),
                run_at_ms: Some(run.started_at),
                job_name: Some(job.name.clone()),
                ..RunEntry::default()
            };
            job.state.running_at_ms = None;
            job.state.last_run_at_ms = Some(run.started_at);
            job.state.last_run_status = Some("error".into());
            job.state.last_status = Some("error".into());
            job.state.last_error = entry.error.clone();
            job.state.consecutive_errors = Some(job.state.consecutive_errors.unwrap_or(0) + 1);
            if matches!(job.schedule, Schedule::At { .. }) {
                // It began once: never again on its own.
                job.enabled = false;
                job.state.next_run_at_ms = None;
            }
            let entry = serde_json::to_string(&entry).unwrap_or_default();
            writes.push([job.id.clone(), run.run_id, entry, serde_json::to_string(&*job).unwrap_or_default()]);
        }
        let mut skipped = Vec::new();
        for job in jobs.iter_mut().filter(|j| j.enabled) {
            job.state.running_at_ms = None;
            let missed = job.state.next_run_at_ms.is_some_and(|next| next <= now);
            if missed && self.config.missed == Missed::Skip && !matches!(job.schedule, Schedule::At { .. }) {
                let slot = job.state.next_run_at_ms.unwrap_or(now);
                job.state.next_run_at_ms = book::next_time(job, now);
                let entry = RunEntry {
                    ts: now,
                    job_id: job.id.clone(),
                    action: "finished".into(),
                    status: "skipped".into(),
                    error: Some("missed while the gateway was down ([cron] missed = \"skip\")".into()),
                    run_at_ms: Some(slot),
                    next_run_at_ms: job.state.next_run_at_ms,
                    job_name: Some(job.name.clone()),
                    ..RunEntry::default()
                };
                skipped.push((
                    job.id.clone(),
                    serde_json::to_string(&entry).unwrap_or_default(),
                    serde_json::to_string(&*job).unwrap_or_default(),
                ));
            }
            // Missed and run once: due now, for the first slot it missed.
        }
        if !writes.is_empty() || !skipped.is_empty() {
            for [id, run_id, entry, job] in writes {
                let end = CronEnd { id, run_id, ended_at: now, status: "error".into(), entry, job: Some(job) };
                store.cron_finish(end).await.map_err(|e| e.to_string())?;
            }
            for (id, entry, job) in skipped {
                let run_id = format!("skipped:{id}:{now}");
                store.cron_log(id, run_id, now, entry, job).await.map_err(|e| e.to_string())?;
            }
        }
        let count = jobs.len();
        self.book.load(jobs);
        // What reading them took goes back to the system.
        super::limits::return_memory();
        tracing::info!(jobs = count, "cron jobs loaded");
        Ok(())
    }

    /// Waits until the jobs are loaded.
    async fn ready(&self) {
        let mut loaded = self.loaded.subscribe();
        let _ = loaded.wait_for(|l| *l).await;
    }

    fn event(&self, gw: &Gateway, action: &str, job: &CronJob) {
        let event = CronEvent {
            job_id: job.id.clone(),
            action: action.into(),
            next_run_at_ms: job.state.next_run_at_ms.filter(|_| job.enabled),
            job: Some(job.clone()),
            ..CronEvent::default()
        };
        gw.hub.broadcast(name::CRON, &event, false);
    }

    // ---- the methods ----

    pub async fn status(&self) -> CronInfo {
        self.ready().await;
        CronInfo {
            enabled: self.config.enabled,
            triggers_enabled: self.config.enabled,
            store_path: self.store_path.clone(),
            storage: "sqlite".into(),
            sqlite_path: self.store_path.clone(),
            jobs: self.book.count() as u64,
            next_wake_at_ms: self.book.next_wake(),
        }
    }

    /// The jobs (of agent `owner.0` only, when given; `owner.1` the default agent, whose jobs
    /// name none).
    pub async fn list(&self, p: CronListParams, owner: Option<(&str, &str)>) -> CronPage {
        self.ready().await;
        let (jobs, revision) = self.book.all();
        let jobs: Vec<CronJob> = match owner {
            Some((agent, default)) => {
                jobs.into_iter().filter(|j| j.agent_id.as_deref().unwrap_or(default) == agent).collect()
            }
            None => jobs,
        };
        let which = p.enabled.as_deref().unwrap_or(if p.include_disabled == Some(true) { "all" } else { "enabled" });
        let query = p.query.as_deref().map(str::to_lowercase).filter(|q| !q.trim().is_empty());
        let mut jobs: Vec<CronJob> = jobs
            .into_iter()
            .filter(|j| match which {
                "all" => true,
                "disabled" => !j.enabled,
                _ => j.enabled,
            })
            .filter(|j| {
                query.as_deref().is_none_or(|q| {
                    j.name.to_lowercase().contains(q)
                        || j.id.contains(q)
                        || j.description.as_deref().is_some_and(|d| d.to_lowercase().contains(q))
                })
            })
            .collect();
        let next = |j: &CronJob| j.state.next_run_at_ms.filter(|_| j.enabled).unwrap_or(i64::MAX);
        match p.sort_by.as_deref() {
            Some("name") => jobs.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id))),
            Some("updatedAtMs") => jobs.sort_by_key(|j| (j.updated_at_ms, j.id.clone())),
            _ => jobs.sort_by_key(|j| (next(j), j.created_at_ms, j.id.clone())),
        }
        if p.sort_dir.as_deref() == Some("desc") {
            jobs.reverse();
        }
        let total = jobs.len() as u64;
        let offset = p.offset.unwrap_or(0).min(total);
        let limit = p.limit.unwrap_or(total.max(1));
        let page: Vec<JobShown> =
            jobs.into_iter().skip(offset as usize).take(limit as usize).map(JobShown::from).collect();
        let end = offset + page.len() as u64;
        let delivery_previews =
            page.iter().map(|j| (j.job.id.clone(), DeliveryPreview::of(j.job.delivery.as_ref()))).collect();
        CronPage {
            delivery_previews,
            jobs: page,
            snapshot_revision: format!("rev:{revision}"),
            total,
            offset,
            limit,
            has_more: end < total,
            next_offset: (end < total).then_some(end),
        }
    }

    pub async fn get(&self, p: &JobIdParams) -> Result<JobShown, ErrorShape> {
        self.ready().await;
        let id = named("cron.get", p.id.as_deref(), p.job_id.as_deref())?;
        self.book.get(&id).map(JobShown::from).ok_or_else(|| not_found(&id))
    }

    pub async fn add(&self, gw: &Gateway, p: CronAddParams) -> Result<JobShown, ErrorShape> {
        self.ready().await;
        let now = now_ms();
        let job = jobs::new_job(p, uuid::Uuid::new_v4().to_string(), now).map_err(ErrorShape::invalid)?;
        model_known(gw, &job)?;
        let _editing = self.edit.lock().await;
        // A client cannot fill the gateway's memory with jobs.
        let most = self.config.max_jobs;
        if self.book.count() >= most {
            return Err(ErrorShape::invalid(format!(
                "{most} cron jobs are kept already, the most this gateway holds ([cron] max_jobs); remove some first"
            )));
        }
        self.save(gw, &job, true).await?;
        self.book.put(job.clone());
        self.changed.notify_one();
        self.event(gw, "added", &job);
        Ok(job.into())
    }

    pub async fn update(&self, gw: &Gateway, p: CronUpdateParams) -> Result<JobShown, ErrorShape> {
        self.ready().await;
        let id = named("cron.update", p.id.as_deref(), p.job_id.as_deref())?;
        let _editing = self.edit.lock().await;
        let job = self.book.get(&id).ok_or_else(|| not_found(&id))?;
        let job = jobs::patched(&job, &p.patch, now_ms()).map_err(ErrorShape::invalid)?;
        model_known(gw, &job)?;
        self.save(gw, &job, false).await?;
        self.book.put(job.clone());
        self.changed.notify_one();
        let job = self.book.get(&id).unwrap_or(job);
        self.event(gw, "updated", &job);
        Ok(job.into())
    }

    pub async fn remove(&self, gw: &Gateway, p: &JobIdParams) -> Result<CronRemoved, ErrorShape> {
        self.ready().await;
        let id = named("cron.remove", p.id.as_deref(), p.job_id.as_deref())?;
        let _editing = self.edit.lock().await;
        let job = self.book.get(&id).ok_or_else(|| not_found(&id))?;
        let gone = id.clone();
        stored(gw.runtime.store().await, |s| s.cron_remove(gone)).await.map_err(unavailable)?;
        self.book.remove(&id);
        self.changed.notify_one();
        self.event(gw, "removed", &job);
        Ok(CronRemoved { ok: true, removed: true })
    }

    /// `cron.run`: runs the job now (`force`), or only if it is due (`due`).
    pub async fn run(self: &Arc<Self>, gw: Arc<Gateway>, p: &CronRunParams) -> Result<CronRunAck, ErrorShape> {
        self.ready().await;
        let id = named("cron.run", p.id.as_deref(), p.job_id.as_deref())?;
        let job = self.book.get(&id).ok_or_else(|| not_found(&id))?;
        let now = now_ms();
        let not_run = |reason: &str| CronRunAck {
            ok: true,
            ran: Some(false),
            reason: Some(reason.into()),
            ..CronRunAck::default()
        };
        let slot = match p.mode.as_deref() {
            Some("due") => match job.state.next_run_at_ms.filter(|_| job.enabled) {
                Some(next) if next <= now => Some(next),
                _ => return Ok(not_run("not-due")),
            },
            _ => None,
        };
        let n = self.asked.fetch_add(1, Ordering::Relaxed) + 1;
        let run_id = format!("manual:{id}:{now}:{n}");
        match self.book.begin(&id, slot, run_id.clone(), now) {
            Ok(begun) => {
                self.spawn_run(gw, begun);
                Ok(CronRunAck { ok: true, enqueued: Some(true), run_id: Some(run_id), ..CronRunAck::default() })
            }
            Err(book::NotBegun::AlreadyRunning) => Ok(not_run("already-running")),
            Err(book::NotBegun::NotFound) => Err(not_found(&id)),
        }
    }

    pub async fn runs(&self, gw: &Gateway, p: CronRunsParams) -> Result<CronRunsPage, ErrorShape> {
        self.ready().await;
        let job = match (p.scope.as_deref(), p.id.as_deref().or(p.job_id.as_deref()).filter(|s| !s.is_empty())) {
            (Some("all"), _) | (_, None) => None,
            (_, Some(id)) => Some(id.to_owned()),
        };
        let status = p.status.filter(|s| s != "all");
        let oldest_first = p.sort_dir.as_deref() == Some("asc");
        let (offset, limit) = (p.offset.unwrap_or(0), p.limit.unwrap_or(50));
        let query = CronRuns { id: job.clone(), status, oldest_first, offset, limit };
        let (entries, total) = stored(gw.runtime.store().await, |s| s.cron_runs(query)).await.map_err(unavailable)?;
        // A job neither held nor in the log (an `at` job done and gone keeps its log).
        if let Some(id) =
            p.id.as_deref().or(p.job_id.as_deref()).filter(|_| total == 0 && p.scope.as_deref() != Some("all"))
            && self.book.get(id).is_none()
        {
            return Err(not_found(id));
        }
        let entries: Vec<RunEntry> = entries.iter().filter_map(|e| serde_json::from_str(e).ok()).collect();
        let end = offset + entries.len() as u64;
        Ok(CronRunsPage {
            entries,
            total,
            offset,
            limit,
            has_more: end < total,
            next_offset: (end < total).then_some(end),
        })
    }

    /// Method `method` called by the `cron` tool of session `session` here, its params checked as
    /// a client's are. A session of an agent sees, adds and changes that agent's jobs only.
    pub async fn call(
        self: &Arc<Self>,
        gw: Arc<Gateway>,
        session: &str,
        method: &str,
        mut params: serde_json::Value,
    ) -> Result<serde_json::Value, ErrorShape> {
        use super::methods::parse;
        use acp_protocol::gateway::Method;
        use acp_protocol::gateway::methods::{CronAdd, CronGet, CronList, CronRemove, CronRun, CronRuns, CronUpdate};
        let value = |v: Result<serde_json::Value, serde_json::Error>| v.map_err(|e| ErrorShape::invalid(e.to_string()));
        let default = gw.default_agent();
        let agent = crate::config::agents::agent_of(session).unwrap_or(&default).to_owned();
        let job_id = params.get("id").or(params.get("jobId")).and_then(|v| v.as_str()).map(str::to_owned);
        if method == CronAdd::NAME {
            match params.get("agentId").and_then(|v| v.as_str()).map(str::to_lowercase) {
                Some(other) if other != agent => {
                    return Err(ErrorShape::invalid(format!(
                        "a session of agent `{agent}` adds jobs of its own agent only, not of `{other}`"
                    )));
                }
                _ if agent != default => params["agentId"] = serde_json::json!(agent),
                _ => {}
            }
        } else if let Some(id) = &job_id
            && let Some(job) = self.book.get(id)
            && job.agent_id.as_deref().unwrap_or(&default) != agent
        {
            // Another agent's job is not this session's to see.
            return Err(not_found(id));
        } else if method == CronRuns::NAME && job_id.is_none() && agent != default {
            return Err(ErrorShape::invalid("name the job whose runs to show (`id`)"));
        }
        match method {
            CronList::NAME => {
                value(serde_json::to_value(self.list(parse::<CronList>(&params)?, Some((&agent, &default))).await))
            }
            CronGet::NAME => value(serde_json::to_value(self.get(&parse::<CronGet>(&params)?).await?)),
            CronRuns::NAME => value(serde_json::to_value(self.runs(&gw, parse::<CronRuns>(&params)?).await?)),
            CronAdd::NAME => value(serde_json::to_value(self.add(&gw, parse::<CronAdd>(&params)?).await?)),
            CronUpdate::NAME => value(serde_json::to_value(self.update(&gw, parse::<CronUpdate>(&params)?).await?)),
            CronRemove::NAME => value(serde_json::to_value(self.remove(&gw, &parse::<CronRemove>(&params)?).await?)),
            CronRun::NAME => {
                let p = parse::<CronRun>(&params)?;
                value(serde_json::to_value(self.run(gw, &p).await?))
            }
            other => Err(ErrorShape::invalid(format!("unknown method: {other}"))),
        }
    }

    /// Saves `job`: a new one, or a change of one still stored (else it is not found).
    async fn save(&self, gw: &Gateway, job: &CronJob, new: bool) -> Result<(), ErrorShape> {
        let (id, created, text) = (job.id.clone(), job.created_at_ms, serde_json::to_string(job).unwrap_or_default());
        let store = gw.runtime.store().await.map_err(unavailable)?;
        let saved = if new {
            store.cron_put(id, created, text).await.map(|()| true)
        } else {
            store.cron_replace(id, text).await
        };
        let saved = saved.map_err(unavailable)?;
        if saved { Ok(()) } else { Err(not_found(&job.id)) }
    }
}

/// Runs `query` on the store, if it opened.
async fn stored<T>(
    store: Result<std::sync::Arc<dyn SessionStore>, String>,
    query: impl for<'a> FnOnce(&'a dyn SessionStore) -> StoreFuture<'a, T>,
) -> Result<T, String> {
    let store = store?;
    query(&*store).await.map_err(|e| e.to_string())
}

/// Records how a cron run ended.
async fn finish(gw: &Gateway, end: CronEnd) -> Result<(), String> {
    stored(gw.runtime.store().await, |s| s.cron_finish(end)).await
}
