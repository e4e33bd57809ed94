//! One run of a cron job, from its claim to its entry in the run log: a message for the agent
//! runs as a turn of its own fresh session (`agent:main:cron:<job>:run:<id>`, kept and listed,
//! closed when done), within the job's time limit; a system event goes to the heartbeat (read at
//! the next one, or one now). The result is delivered to the job's chat if it asks, and the
//! `cron` events say each step.

use std::time::Duration;

use acp_protocol::gateway::cron::{CronEvent, CronJob, Delivery, Payload, RunEntry, RunFields};
use acp_protocol::gateway::events::name;

use super::super::Gateway;
use super::super::hub::RunEnd;
use super::book::Begun;
use crate::clock::now_ms;
use crate::runtime::{Op, UserBlock};

/// The longest summary a run-log entry keeps of a reply.
const SUMMARY_CHARS: usize = 2_000;

/// Replies that mean "nothing to say" (never delivered).
pub const SILENT: &[&str] = &["HEARTBEAT_OK", "NO_REPLY"];

/// How a run went, before it is logged.
#[derive(Debug, Default)]
struct Done {
    error: Option<String>,
    reply: Option<String>,
    session_key: Option<String>,
    model: Option<String>,
}

/// Runs `begun` (already claimed in the store) to its end; its run-log entry.
pub async fn run(gw: &Gateway, begun: &Begun, timeout_ms: u64) -> RunEntry {
    let job = &begun.job;
    started(gw, begun);
    let done = match &job.payload {
        Payload::AgentTurn { message, model, thinking, timeout_seconds } => {
            let limit = timeout_seconds.map_or(timeout_ms, |s| s.saturating_mul(1000));
            agent_turn(gw, job, &begun.run_id, message, model.as_deref(), thinking.as_deref(), limit).await
        }
        Payload::SystemEvent { text } => {
            let now = job.wake_mode == "now";
            gw.cron.heartbeat.enqueue(text, now);
            Done { reply: Some(text.clone()), ..Done::default() }
        }
    };
    let mut entry = RunEntry {
        ts: 0,
        job_id: job.id.clone(),
        action: "finished".into(),
        status: if done.error.is_some() { "error" } else { "ok" }.into(),
        error: done.error,
        summary: done.reply.as_deref().map(summary),
        session_id: done.session_key.clone(),
        session_key: done.session_key,
        run_id: Some(begun.run_id.clone()),
        run_at_ms: Some(begun.at),
        model: done.model,
        job_name: Some(job.name.clone()),
        ..RunEntry::default()
    };
    let reply = done.reply.filter(|_| entry.error.is_none() && matches!(job.payload, Payload::AgentTurn { .. }));
    deliver(gw, job.delivery.as_ref(), reply.as_deref(), &mut entry).await;
    entry.ts = now_ms();
    entry.duration_ms = Some(entry.ts - begun.at);
    entry
}

/// `started`, to every client.
fn started(gw: &Gateway, begun: &Begun) {
    let event = CronEvent {
        job_id: begun.job.id.clone(),
        action: "started".into(),
        job: Some(begun.job.clone()),
        run_at_ms: Some(begun.at),
        ..CronEvent::default()
    };
    gw.hub.broadcast(name::CRON, &event, false);
}

/// `finished`, to every client.
pub fn finished(gw: &Gateway, job: CronJob, entry: &RunEntry) {
    let event = CronEvent {
        job_id: entry.job_id.clone(),
        action: "finished".into(),
        next_run_at_ms: job.state.next_run_at_ms.filter(|_| job.enabled),
        job: Some(job),
        run_at_ms: entry.run_at_ms,
        run: Some(RunFields {
            status: entry.status.clone(),
            error: entry.error.clone(),
            summary: entry.summary.clone(),
            delivery_status: entry.delivery_status.clone(),
            session_key: entry.session_key.clone(),
            duration_ms: entry.duration_ms,
            run_id: entry.run_id.clone(),
        }),
    };
    gw.hub.broadcast(name::CRON, &event, false);
}

/// The job's message as a turn of a fresh session of its own, stopped at `limit_ms`.
async fn agent_turn(
    gw: &Gateway,
    job: &CronJob,
    run_id: &str,
    message: &str,
    model: Option<&str>,
    thinking: Option<&str>,
    limit_ms: u64,
) -> Done {
    let agent = job.agent_id.clone().unwrap_or_else(|| gw.default_agent());
    let key = format!("agent:{agent}:cron:{}:run:{}", job.id, uuid::Uuid::new_v4());
    let fail = |error: String| Done { error: Some(error), session_key: Some(key.clone()), ..Done::default() };
    let config = gw.runtime.config_for(&key);
    let mut ops = Vec::new();
    let chosen = match model {
        Some(model) => match config.resolve_model(model) {
            Ok((model, _)) => {
                ops.push(Op::SetModel(model.clone()));
                Some(model.to_string())
            }
            Err(e) => return fail(format!("the job's model `{model}`: {e}")),
        },
        None => config.default_model_ref().ok().map(|m| m.to_string()),
    };
    if let Some(level) = thinking {
        match super::super::chat::reasoning("cron", level) {
            Ok(op) => ops.push(op),
            Err(e) => return fail(e),
        }
    }
    let ticket = match gw.open.admit(&key, message.len()) {
        Ok(ticket) => ticket,
        Err(e) => return fail(e.message.clone()),
    };
    let handle = match gw.open(&key).await {
        Ok(handle) => handle,
        Err(e) => return fail(e),
    };
    for op in ops {
        handle.send(op);
    }
    let blocks = vec![UserBlock::Text { text: message.to_owned() }];
    let (turn, mut ended, outcome) = gw.runs.begin(&handle, &key, run_id, blocks, gw.open.run_options(), None);
    let timed_out = !within(&handle, turn, outcome, Duration::from_millis(limit_ms)).await;
    drop(ticket);
    let end = if timed_out { None } else { ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone()) };
    if tokio::time::timeout(CANCEL_GRACE, gw.close_session(&key)).await.is_err() {
        tracing::warn!(session = %key, "a cron run's session did not close");
    }
    let mut done = Done { session_key: Some(key), model: chosen, ..Done::default() };
    match end {
        _ if timed_out => done.error = Some(format!("timed out after {}", seconds(limit_ms))),
        Some(RunEnd::Final { text, .. }) => done.reply = Some(text),
        Some(RunEnd::Aborted { .. }) => done.error = Some("the run was stopped".into()),
        Some(RunEnd::Error { message }) => done.error = Some(message),
        None => done.error = Some("the run ended without a result".into()),
    }
    done
}

/// Waits for a turn's `outcome` up to `limit`; past it, the turn is cancelled and given a little
/// longer to end (a turn that does not is left behind). Whether it ended within `limit`.
pub async fn within(
    handle: &crate::runtime::SessionHandle,
    turn: crate::runtime::TurnId,
    outcome: impl std::future::Future<Output = Option<crate::runtime::TurnOutcome>>,
    limit: Duration,
) -> bool {
    tokio::pin!(outcome);
    if tokio::time::timeout(limit, &mut outcome).await.is_ok() {
        return true;
    }
    handle.send(Op::CancelTurn(turn));
    if tokio::time::timeout(CANCEL_GRACE, &mut outcome).await.is_err() {
        tracing::warn!("a turn past its time limit did not stop when cancelled; left behind");
    }
    false
}

/// How long a cancelled turn is given to end.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// Delivers `reply` as `delivery` asks, and says how in `entry`. A failed delivery fails the
/// run unless the job said `bestEffort`.
async fn deliver(gw: &Gateway, delivery: Option<&Delivery>, reply: Option<&str>, entry: &mut RunEntry) {
    let Some(delivery) = delivery.filter(|d| d.mode == "announce") else {
        entry.delivery_status = Some("not-requested".into());
        return;
    };
    let Some(reply) = reply.map(str::trim).filter(|r| !r.is_empty() && !SILENT.contains(r)) else {
        // Nothing to say (or the run failed): nothing is sent.
        entry.delivered = Some(false);
        entry.delivery_status = Some("not-delivered".into());
        return;
    };
    let agent = entry.session_key.as_deref().and_then(crate::config::agents::agent_of).map(str::to_owned);
    let agent = agent.unwrap_or_else(|| gw.default_agent());
    let sent = match target(gw, delivery, &agent) {
        Ok(target) => gw.channels.outbox.send(&target, reply, None).await,
        Err(e) => Err(e),
    };
    entry.delivered = Some(sent.is_ok());
    entry.delivery_status = Some(if sent.is_ok() { "delivered" } else { "not-delivered" }.into());
    if let Err(e) = sent {
        if !delivery.best_effort.unwrap_or(false) && entry.error.is_none() {
            entry.status = "error".into();
            entry.error = Some(format!("delivery failed: {e}"));
        }
        entry.delivery_error = Some(e);
    }
}

/// The chat `delivery` names: `channel` and `to`, or the chat the user last wrote from.
/// Where `delivery` goes for a job of `agent` (`last`: that agent's last chat).
fn target(gw: &Gateway, delivery: &Delivery, agent: &str) -> Result<crate::runtime::host::ChatTarget, String> {
    let channel = delivery.channel.as_deref().filter(|c| *c != "last");
    match (channel, delivery.to.as_deref()) {
        (Some(channel), Some(to)) => Ok(crate::runtime::host::ChatTarget {
            channel: channel.to_owned(),
            to: to.to_owned(),
            thread: delivery.thread_id.clone(),
        }),
        _ => gw.channels.last_chat(agent).ok_or_else(|| {
            "no chat to deliver to: nobody has written to the agent on a channel yet; give the job delivery.channel and \
             delivery.to (acp cron add --deliver telegram:CHAT)"
                .to_owned()
        }),
    }
}

/// `reply`, cut to [`SUMMARY_CHARS`].
fn summary(reply: &str) -> String {
    let reply = reply.trim();
    match reply.char_indices().nth(SUMMARY_CHARS) {
        Some((at, _)) => format!("{}…", &reply[..at]),
        None => reply.to_owned(),
    }
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) { format!("{} s", ms / 1000) } else { format!("{ms} ms") }
}
