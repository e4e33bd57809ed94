//! The jobs a gateway holds in memory and when each runs next: one heap ordered by next run for
//! all of them (the timer sleeps until its top; no task per job), a job taken off it while it
//! runs (so it never runs twice at once) and put back when it ends, its next time worked out
//! then. A job is held as its JSON (what `cron.get` and `cron.list` read back) beside the few
//! fields scheduling reads: 10,000 jobs take a few megabytes. Persisting is the caller's; this
//! file only keeps the books.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

use acp_protocol::gateway::cron::{CronJob, RunEntry, Schedule};

use super::jobs;
use crate::sync::lock;

/// How long after a failed run the job waits at least, by how many failed in a row (the last
/// one for more): a job that keeps failing does not call the model every few seconds.
pub const BACKOFF_MS: &[i64] = &[30_000, 60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];

#[derive(Default)]
pub struct Book {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    jobs: HashMap<Arc<str>, Held>,
    /// (next run, generation, job): an entry whose generation is not its job's is stale.
    heap: BinaryHeap<Reverse<(i64, u64, Arc<str>)>>,
    generation: u64,
    /// Bumped by every change (`cron.list`'s `snapshotRevision`).
    revision: u64,
}

struct Held {
    /// The map's key, shared with the heap's entries.
    id: Arc<str>,
    /// The job, its state included.
    json: Box<str>,
    enabled: bool,
    next: Option<i64>,
    generation: u64,
    /// The run going, if one is.
    running: Option<String>,
}

impl Held {
    fn new(id: Arc<str>, job: &CronJob) -> Self {
        let mut held = Self { id, json: Box::from(""), enabled: false, next: None, generation: 0, running: None };
        held.set(job);
        held
    }

    fn job(&self) -> CronJob {
        serde_json::from_str(&self.json).unwrap_or_else(|e| {
            tracing::error!(job = %self.id, error = %e, "a held cron job does not read back");
            CronJob { id: self.id.to_string(), ..CronJob::default() }
        })
    }

    fn set(&mut self, job: &CronJob) {
        self.json = serde_json::to_string(job).unwrap_or_default().into_boxed_str();
        self.enabled = job.enabled;
        self.next = job.state.next_run_at_ms;
    }
}

/// A run that has begun: the job as it is while it runs (saved with the claim).
#[derive(Debug, Clone)]
pub struct Begun {
    pub job: CronJob,
    pub run_id: String,
    /// The scheduled time it runs for (`None`: asked for).
    pub slot: Option<i64>,
    pub at: i64,
    /// Its next time before it began (given back if the run cannot be recorded).
    pub was_next: Option<i64>,
}

/// Why a run asked for does not begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotBegun {
    NotFound,
    AlreadyRunning,
}

impl Book {
    /// Holds `jobs` (loaded from the store) and schedules them.
    pub fn load(&self, jobs: Vec<CronJob>) {
        let mut state = lock(&self.state);
        state.jobs.reserve(jobs.len());
        for job in jobs {
            let id: Arc<str> = Arc::from(job.id.as_str());
            state.jobs.insert(id.clone(), Held::new(id.clone(), &job));
            state.schedule(&id);
        }
        state.jobs.shrink_to_fit();
        state.revision += 1;
    }

    /// Holds `job`, new or changed, and (re)schedules it; a run going on it goes on.
    pub fn put(&self, mut job: CronJob) {
        let mut state = lock(&self.state);
        let id: Arc<str> = Arc::from(job.id.as_str());
        match state.jobs.get_mut(&id) {
            Some(held) => {
                // Its run's state is the run's until it ends.
                if held.running.is_some() {
                    job.state.running_at_ms = held.job().state.running_at_ms;
                }
                held.set(&job);
            }
            None => {
                state.jobs.insert(id.clone(), Held::new(id.clone(), &job));
            }
        }
        state.schedule(&id);
        state.revision += 1;
    }

    pub fn remove(&self, id: &str) -> Option<CronJob> {
        let mut state = lock(&self.state);
        state.revision += 1;
        state.jobs.remove(id).map(|held| held.job())
    }

    pub fn get(&self, id: &str) -> Option<CronJob> {
        lock(&self.state).jobs.get(id).map(Held::job)
    }

    /// Every job, with the revision they are of.
    pub fn all(&self) -> (Vec<CronJob>, u64) {
        let (texts, revision) = {
            let state = lock(&self.state);
            (state.jobs.values().map(|held| (held.id.clone(), held.json.clone())).collect::<Vec<_>>(), state.revision)
        };
        // Read back outside the lock.
        let jobs = texts
            .into_iter()
            .map(|(id, json)| {
                serde_json::from_str(&json).unwrap_or_else(|_| CronJob { id: id.to_string(), ..CronJob::default() })
            })
            .collect();
        (jobs, revision)
    }

    pub fn count(&self) -> usize {
        lock(&self.state).jobs.len()
    }

    /// When the next job is due.
    pub fn next_wake(&self) -> Option<i64> {
        let mut state = lock(&self.state);
        state.drop_stale();
        state.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Begins every job due at `now` (each for its scheduled time); and when the next one is.
    pub fn due(&self, now: i64, run_id: impl Fn(&str, i64) -> String) -> (Vec<Begun>, Option<i64>) {
        let mut state = lock(&self.state);
        let mut begun = Vec::new();
        loop {
            state.drop_stale();
            match state.heap.peek() {
                Some(Reverse((at, _, _))) if *at <= now => {
                    let Some(Reverse((at, _, id))) = state.heap.pop() else { break };
                    if let Ok(run) = state.begin(&id, Some(at), run_id(&id, at), now) {
                        begun.push(run);
                    }
                }
                Some(Reverse((at, _, _))) => return (begun, Some(*at)),
                None => return (begun, None),
            }
        }
        (begun, None)
    }

    /// Begins a run of job `id` asked for now: of its scheduled time `slot` (`due` mode), or
    /// out of turn (`None`).
    pub fn begin(&self, id: &str, slot: Option<i64>, run_id: String, now: i64) -> Result<Begun, NotBegun> {
        lock(&self.state).begin(id, slot, run_id, now)
    }

    /// A run that began did not happen: its slot was claimed before (`restore` `None`: the job
    /// goes on to its next time), or the claim failed (`Some(next)`: the job is due then again).
    pub fn abandon(&self, id: &str, run_id: &str, restore: Option<Option<i64>>, now: i64) {
        let mut state = lock(&self.state);
        if let Some(held) = state.jobs.get_mut(id).filter(|h| h.running.as_deref() == Some(run_id)) {
            held.running = None;
            let mut job = held.job();
            job.state.running_at_ms = None;
            if let Some(next) = restore {
                job.state.next_run_at_ms = next;
            } else if job.state.next_run_at_ms.is_some_and(|next| next <= now) {
                job.state.next_run_at_ms = next_time(&job, now);
            }
            held.set(&job);
            state.schedule(id);
        }
    }

    /// Run `run_id` of job `id` ended as `entry` says: the job's state says so, and when it runs
    /// next (a failure waits [`BACKOFF_MS`]; an `at` job is removed, or turned off when it
    /// failed or is kept). The job as it is now, and whether it was removed; `None` when it was
    /// removed during the run.
    pub fn finish(&self, id: &str, run_id: &str, entry: &RunEntry, now: i64) -> Option<(CronJob, bool)> {
        let mut state = lock(&self.state);
        let held = state.jobs.get_mut(id)?;
        if held.running.as_deref() == Some(run_id) {
            held.running = None;
        }
        let mut job = held.job();
        let s = &mut job.state;
        s.running_at_ms = None;
        s.last_run_at_ms = entry.run_at_ms;
        s.last_run_status = Some(entry.status.clone());
        s.last_status = Some(entry.status.clone());
        s.last_error = entry.error.clone();
        s.last_duration_ms = entry.duration_ms;
        s.last_delivery_status = entry.delivery_status.clone();
        let failed = entry.status == "error";
        s.consecutive_errors = Some(if failed { s.consecutive_errors.unwrap_or(0) + 1 } else { 0 });
        if matches!(job.schedule, Schedule::At { .. }) {
            if !failed && job.delete_after_run.unwrap_or(true) {
                state.jobs.remove(id);
                state.revision += 1;
                return Some((job, true));
            }
            job.enabled = false;
            job.state.next_run_at_ms = None;
        } else if job.enabled {
            let mut next = job.state.next_run_at_ms.filter(|next| *next > now).or_else(|| next_time(&job, now));
            if failed {
                let errors = job.state.consecutive_errors.unwrap_or(1) as usize;
                let wait = BACKOFF_MS[errors.clamp(1, BACKOFF_MS.len()) - 1];
                next = next.map(|n| n.max(now + wait));
            }
            job.state.next_run_at_ms = next;
        }
        held.set(&job);
        state.schedule(id);
        state.revision += 1;
        Some((job, false))
    }
}

impl State {
    fn begin(&mut self, id: &str, slot: Option<i64>, run_id: String, now: i64) -> Result<Begun, NotBegun> {
        let generation = self.bump();
        let held = self.jobs.get_mut(id).ok_or(NotBegun::NotFound)?;
        if held.running.is_some() {
            return Err(NotBegun::AlreadyRunning);
        }
        // Off the heap while it runs; its next time is worked out now (and saved with the
        // claim, so a restart during the run does not run this slot again).
        held.generation = generation;
        let mut job = held.job();
        let was_next = job.state.next_run_at_ms;
        if let Some(slot) = slot {
            job.state.next_run_at_ms = match job.schedule {
                Schedule::At { .. } => None,
                _ => next_time(&job, slot.max(now)),
            };
        }
        job.state.running_at_ms = Some(now);
        held.set(&job);
        held.running = Some(run_id.clone());
        self.revision += 1;
        Ok(Begun { job, run_id, slot, at: now, was_next })
    }

    fn bump(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Puts job `id` on the heap at its next run (if it is on, not running, and has one).
    fn schedule(&mut self, id: &str) {
        let generation = self.bump();
        let Some(held) = self.jobs.get_mut(id) else { return };
        held.generation = generation;
        if held.running.is_some() || !held.enabled {
            return;
        }
        if let Some(next) = held.next {
            self.heap.push(Reverse((next, generation, held.id.clone())));
        }
        // Stale entries (changed jobs) are dropped as they surface; past twice the jobs, now.
        if self.heap.len() > 2 * self.jobs.len() + 64 {
            let jobs = &self.jobs;
            self.heap.retain(|Reverse((_, g, id))| jobs.get(id).is_some_and(|h| h.generation == *g));
        }
    }

    fn drop_stale(&mut self) {
        while let Some(Reverse((_, generation, id))) = self.heap.peek() {
            if self.jobs.get(id).is_some_and(|h| h.generation == *generation) {
                return;
            }
            self.heap.pop();
        }
    }
}

/// The job's next time after `after` by its schedule (`None` for an `at` job, or a schedule
/// that no longer reads).
pub fn next_time(job: &CronJob, after: i64) -> Option<i64> {
    match jobs::timing(&job.schedule, job.created_at_ms, false) {
        Ok(timing) => timing.next_after(after),
        Err(e) => {
            tracing::warn!(job = %job.id, error = %e, "a cron job's schedule does not read; it does not run");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acp_protocol::gateway::cron::{JobState, Payload};

    fn every(id: &str, ms: u64, next: i64) -> CronJob {
        CronJob {
            id: id.into(),
            name: id.into(),
            enabled: true,
            schedule: Schedule::Every { every_ms: ms, anchor_ms: Some(0) },
            session_target: "isolated".into(),
            wake_mode: "now".into(),
            payload: Payload::AgentTurn { message: "x".into(), model: None, thinking: None, timeout_seconds: None },
            state: JobState { next_run_at_ms: Some(next), ..Default::default() },
            ..Default::default()
        }
    }

    fn ended(status: &str) -> RunEntry {
        RunEntry { status: status.into(), run_at_ms: Some(0), ..Default::default() }
    }

    #[test]
    fn one_heap_runs_each_job_at_its_time_and_never_while_it_runs() {
        let book = Book::default();
        book.load(vec![every("a", 1000, 1000), every("b", 5000, 5000)]);
        let id = |job: &str, at: i64| format!("{job}@{at}");
        let (none, next) = book.due(999, id);
        assert!(none.is_empty());
        assert_eq!(next, Some(1000));
        let (begun, next) = book.due(1000, id);
        assert_eq!(begun.iter().map(|b| b.run_id.as_str()).collect::<Vec<_>>(), ["a@1000"]);
        assert_eq!(begun[0].job.state.next_run_at_ms, Some(2000));
        // While `a` runs, it is off the heap: `b` is next, and `a` cannot begin again.
        assert_eq!(next, Some(5000));
        assert_eq!(book.begin("a", None, "m".into(), 1500).unwrap_err(), NotBegun::AlreadyRunning);
        // It ended late: its next time is after now.
        let (job, removed) = book.finish("a", "a@1000", &ended("ok"), 2500).unwrap();
        assert!(!removed);
        assert_eq!(job.state.next_run_at_ms, Some(3000));
        assert_eq!(book.next_wake(), Some(3000));
        // A failure waits out its backoff.
        let (begun, _) = book.due(3000, id);
        assert_eq!(begun.len(), 1);
        let (job, _) = book.finish("a", "a@3000", &ended("error"), 3100).unwrap();
        assert_eq!(job.state.next_run_at_ms, Some(3100 + BACKOFF_MS[0]));
        assert_eq!(job.state.consecutive_errors, Some(1));
    }

    #[test]
    fn a_run_that_could_not_be_recorded_leaves_its_time_due() {
        let book = Book::default();
        book.load(vec![every("a", 1000, 1000)]);
        let (begun, _) = book.due(1000, |j, at| format!("{j}{at}"));
        assert_eq!(begun[0].was_next, Some(1000));
        book.abandon("a", &begun[0].run_id, Some(Some(6000)), 1000);
        assert_eq!(book.get("a").unwrap().state.next_run_at_ms, Some(6000));
        assert_eq!(book.next_wake(), Some(6000));
        // Claimed before: it goes on to its next time.
        let (begun, _) = book.due(6000, |j, at| format!("{j}{at}"));
        book.abandon("a", &begun[0].run_id, None, 6000);
        assert_eq!(book.next_wake(), Some(7000));
    }

    #[test]
    fn a_changed_or_removed_job_leaves_no_run_behind() {
        let book = Book::default();
        book.load(vec![every("a", 1000, 1000)]);
        let mut later = every("a", 1000, 9000);
        later.name = "later".into();
        book.put(later);
        assert_eq!(book.next_wake(), Some(9000));
        book.remove("a");
        assert_eq!(book.next_wake(), None);
        let (begun, _) = book.due(10_000, |j, at| format!("{j}{at}"));
        assert!(begun.is_empty());
    }
}
