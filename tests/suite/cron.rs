//! Cron jobs and the heartbeat on a real `acp gateway` with the mock model: a job every 2 s runs
//! at each of its times and its runs are listed (also by `acp cron`); a gateway killed during a
//! run and restarted after an `at` job's time loses nothing beyond the restart policy and runs no
//! slot twice; a job's reply is delivered to a Telegram chat (the Bot API stand-in); the
//! heartbeat reads HEARTBEAT.md, keeps `HEARTBEAT_OK` to itself, delivers anything else, and
//! never runs behind a busy session; errors are the reference's; the real `openclaw cron` CLI
//! works against it.

use std::cell::Cell;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::{Client, Gateway, TOKEN};
use crate::support::mock_model::MockModel;
use crate::support::openclaw::json_in;
use crate::support::script::text;
use crate::support::telegram::FakeTelegram;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// `acp …` against `gw`, with its own home: (succeeded, stdout and stderr).
fn cli(gw: &Gateway, args: &[&str]) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(args)
        .args(["--gateway", &url, "--token", TOKEN])
        .env("ACP_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn is_cron(e: &Value, action: &str, job: &str) -> bool {
    e["event"] == "cron" && e["payload"]["action"] == action && e["payload"]["jobId"] == job
}

/// Reads until `n` runs of `job` finished; their `finished` payloads.
fn finished(client: &mut Client, job: &str, n: usize) -> Vec<Value> {
    let seen = Cell::new(0);
    let frames = client.until_event(|e| {
        if is_cron(e, "finished", job) {
            seen.set(seen.get() + 1);
        }
        seen.get() == n
    });
    frames.into_iter().filter(|e| is_cron(e, "finished", job)).map(|e| e["payload"].clone()).collect()
}

/// The scheduled time a run was for, from its id (`cron:<job>:<slot>`).
fn slot(run_id: &Value) -> i64 {
    run_id.as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn a_job_every_two_seconds_runs_at_each_of_its_times_and_its_runs_are_listed() {
    let mock = MockModel::start();
    for i in 1..=4 {
        mock.push(text("anthropic", &format!("Run {i} done.")));
    }
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    // A read-only client is told too (as the reference tells it).
    let mut reader = gw.client(&["operator.read"]);
    let added = admin.request(
        "cron.add",
        json!({"name": "tick", "schedule": {"kind": "every", "everyMs": 2000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "Say done."}}),
    );
    let job = added["payload"].clone();
    let id = job["id"].as_str().unwrap().to_owned();
    let anchor = job["schedule"]["anchorMs"].as_i64().unwrap();
    assert_eq!((job["wakeMode"].clone(), job["nextRunAtMs"].clone()), (json!("now"), json!(anchor + 2000)), "{job}");

    let runs = finished(&mut reader, &id, 3);
    admin.request("cron.update", json!({"id": id, "patch": {"enabled": false}}));
    // Each of its times in turn, none early, none skipped, none twice.
    let slots: Vec<i64> = runs.iter().map(|r| slot(&r["runId"])).collect();
    assert_eq!(slots, [anchor + 2000, anchor + 4000, anchor + 6000], "{runs:#?}");
    for run in &runs {
        assert!(run["runAtMs"].as_i64().unwrap() >= slot(&run["runId"]), "{run}");
        assert_eq!(run["status"], "ok", "{run}");
        assert!(run["sessionKey"].as_str().unwrap().starts_with(&format!("agent:main:cron:{id}:run:")), "{run}");
    }
    let summaries: Vec<&str> = runs.iter().map(|r| r["summary"].as_str().unwrap()).collect();
    assert_eq!(summaries, ["Run 1 done.", "Run 2 done.", "Run 3 done."]);
    assert!(mock.requests()[0].body.to_string().contains("Say done."));

    // The run log, oldest first, as `cron.runs` and `acp cron runs` give it.
    let log = admin.request("cron.runs", json!({"id": id, "sortDir": "asc", "limit": 3}));
    let entries = log["payload"]["entries"].as_array().unwrap();
    let logged: Vec<(i64, &str)> = entries.iter().map(|e| (slot(&e["runId"]), e["status"].as_str().unwrap())).collect();
    assert_eq!(logged, [(anchor + 2000, "ok"), (anchor + 4000, "ok"), (anchor + 6000, "ok")], "{log}");
    assert!(log["payload"]["total"].as_u64().unwrap() >= 3);
    let (ok, out) = cli(&gw, &["cron", "runs", &id]);
    let short: String = id.chars().take(8).collect();
    assert!(ok && out.matches(&format!("tick ({short})  ok")).count() >= 3 && out.contains("Run 2 done."), "{out}");
    // Off and on again from the command line.
    let (ok, off) = cli(&gw, &["cron", "disable", &id]);
    assert!(ok && off.starts_with(&format!("Turned off {id} (tick)")), "{off}");
    let (ok, on) = cli(&gw, &["cron", "enable", &id]);
    assert!(ok && on.starts_with(&format!("Turned on {id} (tick)")), "{on}");
    admin.request("cron.update", json!({"id": id, "patch": {"enabled": false}}));
    let (ok, out) = cli(&gw, &["cron", "list", "--all"]);
    assert!(ok && out.contains(&id) && out.contains("tick [off]") && out.contains("every 2s"), "{out}");
    // Each run had a session of its own, kept and listed.
    let listed = admin.request("sessions.list", json!({"limit": 100}));
    let keys = listed["payload"]["sessions"].as_array().unwrap();
    let own = keys.iter().filter(|s| s["key"].as_str().unwrap().starts_with(&format!("agent:main:cron:{id}:run:")));
    assert!(own.count() >= 3, "{listed}");
}

#[test]
fn a_killed_gateway_runs_a_missed_at_job_once_never_repeats_an_interrupted_run_and_no_slot_twice() {
    let mock = MockModel::start();
    mock.push(text("anthropic", "First tick.").when("Every job."));
    // The second run never ends: the gateway is killed during it.
    mock.push(text("anthropic", "Never finished.").when("Every job.").stall_after(1));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let every = admin.request(
        "cron.add",
        json!({"name": "every", "schedule": {"kind": "every", "everyMs": 2000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "Every job."}}),
    )["payload"]
        .clone();
    let every_id = every["id"].as_str().unwrap().to_owned();
    let anchor = every["schedule"]["anchorMs"].as_i64().unwrap();
    // Due while the gateway is down.
    let at = now_ms() + 6_000;
    let at_iso = jiff::Timestamp::from_millisecond(at).unwrap().to_string();
    let once = admin.request(
        "cron.add",
        json!({"name": "once", "schedule": {"kind": "at", "at": at_iso}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "At job."}}),
    )["payload"]
        .clone();
    let once_id = once["id"].as_str().unwrap().to_owned();
    assert_eq!((once["deleteAfterRun"].clone(), once["nextRunAtMs"].clone()), (json!(true), json!(at)));
    finished(&mut admin, &every_id, 1);
    admin.until_event(|e| is_cron(e, "started", &every_id));
    mock.wait_requests(2);

    // Killed during the second run; back after the `at` job's time.
    let home = gw.kill();
    while now_ms() < at + 500 {
        std::thread::sleep(Duration::from_millis(50));
    }
    mock.push(text("anthropic", "At done.").when("At job."));
    for i in 1..=4 {
        mock.push(text("anthropic", &format!("Tick {i} after.")).when("Every job."));
    }
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let once_ran = std::cell::RefCell::new(None);
    let after = Cell::new(0);
    admin.until_event(|e| {
        if is_cron(e, "finished", &once_id) {
            *once_ran.borrow_mut() = Some(e["payload"].clone());
        }
        if is_cron(e, "finished", &every_id) {
            after.set(after.get() + 1);
        }
        once_ran.borrow().is_some() && after.get() >= 2
    });
    admin.request("cron.update", json!({"id": every_id, "patch": {"enabled": false}}));
    let once_ran = once_ran.into_inner().unwrap();
    assert_eq!((once_ran["status"].clone(), once_ran["summary"].clone()), (json!("ok"), json!("At done.")));
    assert_eq!(slot(&once_ran["runId"]), at, "it ran for its time, once");
    // Done and removed, as `at` jobs are.
    let gone = admin.request("cron.get", json!({"id": once_id}));
    assert_eq!(gone["error"]["details"]["code"], "CRON_JOB_NOT_FOUND", "{gone}");
    // Its run stays in the log.
    let log = admin.request("cron.runs", json!({"id": once_id}));
    assert_eq!(log["payload"]["entries"][0]["summary"], "At done.", "{log}");

    let log = admin.request("cron.runs", json!({"id": every_id, "sortDir": "asc"}));
    let entries = log["payload"]["entries"].as_array().unwrap().clone();
    let ids: Vec<&str> = entries.iter().map(|e| e["runId"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "no slot ran twice: {ids:#?}");
    // The first ran; the second was cut off and is not run again; the slot missed while down
    // ran once at start (then its times went on).
    assert_eq!((slot(&entries[0]["runId"]), entries[0]["status"].clone()), (anchor + 2000, json!("ok")));
    assert_eq!(slot(&entries[1]["runId"]), anchor + 4000);
    assert_eq!(entries[1]["error"], "cron: job interrupted by gateway restart", "{log}");
    assert_eq!(slot(&entries[2]["runId"]), anchor + 6000, "{log}");
    assert_eq!(entries[2]["status"], "ok");
    // The slots missed while it was down ran once, not each: the next is after that run.
    assert!(slot(&entries[3]["runId"]) > entries[2]["runAtMs"].as_i64().unwrap(), "{log}");
    // The model was asked once per run: nothing doubled.
    let asked = |what: &str| mock.requests().iter().filter(|r| r.body.to_string().contains(what)).count();
    assert_eq!(asked("At job."), 1);
    assert_eq!(asked("Every job."), entries.len(), "{log}");
}

fn telegram_gateway(mock: &MockModel, fake: &FakeTelegram, more: &str) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\n{more}", fake.base),
    )
    .unwrap();
    Gateway::start_in(home, &mock.base(), &[])
}

#[test]
fn an_isolated_jobs_reply_is_delivered_to_a_telegram_chat() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = telegram_gateway(&mock, &fake, "");
    let (ok, out) =
        cli(&gw, &["cron", "add", "--every", "1h", "--message", "Write the report.", "--deliver", "telegram:555"]);
    assert!(ok, "{out}");
    let id = out.split_whitespace().nth(1).unwrap().to_owned();
    assert!(out.contains("every 1h · isolated → telegram:555"), "{out}");
    mock.push(text("anthropic", "The report: all green."));
    let (ok, out) = cli(&gw, &["cron", "run", &id]);
    assert!(ok && out.contains(&format!("Running {id} (manual:{id}:")), "{out}");
    assert_eq!(fake.wait_sent(555, 1), ["The report: all green."]);
    let mut admin = gw.client(&["operator.admin"]);
    let log = loop {
        let log = admin.request("cron.runs", json!({"id": id}));
        if log["payload"]["total"] == 1 {
            break log;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let entry = &log["payload"]["entries"][0];
    assert_eq!((entry["status"].clone(), entry["deliveryStatus"].clone()), (json!("ok"), json!("delivered")), "{log}");
    // A reply with nothing to say is not sent.
    mock.push(text("anthropic", "NO_REPLY"));
    let (ok, _) = cli(&gw, &["cron", "run", &id]);
    assert!(ok);
    loop {
        let log = admin.request("cron.runs", json!({"id": id}));
        if log["payload"]["total"] == 2 {
            assert_eq!(log["payload"]["entries"][0]["deliveryStatus"], "not-delivered", "{log}");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fake.wait_sent(555, 1).len(), 1);
    let (ok, out) = cli(&gw, &["cron", "rm", &id]);
    assert!(ok && out.contains("Removed"), "{out}");
    let (ok, out) = cli(&gw, &["cron", "rm", &id]);
    assert!(!ok && out.contains(&format!("no cron job {id} (acp cron list --all shows them)")), "{out}");
    // Mistakes are said in the command line's words, before anything reaches the gateway.
    for (args, said) in [
        (&["cron", "add", "--every", "5", "--message", "x"][..], "--every 5: give a unit"),
        (&["cron", "add", "--every", "500ms", "--message", "x"][..], "--every 500ms: at least 1s"),
        (&["cron", "add", "--every", "1h", "--message", " "][..], "--message is empty"),
        (&["cron", "add", "--at", "yesterday", "--message", "x"][..], "or a delay (20m, 2h)"),
        (
            &["cron", "add", "--every", "1h", "--message", "x", "--session", "main", "--deliver", "telegram:1"][..],
            "--deliver is for isolated jobs",
        ),
        (&["cron", "add", "--every", "1h", "--message", "x", "--model", "nope/none"][..], "at /payload/model"),
    ] {
        let (ok, out) = cli(&gw, args);
        assert!(!ok && out.contains(said), "{args:?}: {out}");
    }
}

fn heartbeat(client: &mut Client) -> Value {
    client.until_event(|e| e["event"] == "heartbeat").pop().unwrap()["payload"].clone()
}

#[test]
fn the_heartbeat_reads_its_checklist_keeps_heartbeat_ok_to_itself_and_never_waits_behind_a_busy_session() {
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = telegram_gateway(&mock, &fake, "[heartbeat]\nevery = \"1h\"\ntarget = \"telegram:555\"\n");
    let mut admin = gw.client(&["operator.admin"]);
    assert_eq!(admin.request("last-heartbeat", json!({}))["payload"], Value::Null);
    // No checklist, nothing queued: no model call.
    assert_eq!(admin.request("wake", json!({"mode": "now", "text": " "}))["error"]["code"], "INVALID_REQUEST");
    // The agent workspace's, beside MEMORY.md.
    let agent_workspace = gw.home.path().join("workspace");
    std::fs::create_dir_all(&agent_workspace).unwrap();
    std::fs::write(agent_workspace.join("HEARTBEAT.md"), "# Checklist\n- Check the build status\n").unwrap();

    mock.push(text("anthropic", "HEARTBEAT_OK"));
    let woke = admin.request("wake", json!({"mode": "now", "text": "The nightly build finished."}));
    assert_eq!(woke["payload"], json!({"ok": true}));
    let beat = heartbeat(&mut admin);
    assert_eq!((beat["status"].clone(), beat["silent"].clone()), (json!("ok-token"), json!(true)), "{beat}");
    let asked = mock.requests()[0].body.to_string();
    assert!(asked.contains("Check the build status") && asked.contains("The nightly build finished."), "{asked}");

    // Something to say: delivered to the target chat.
    mock.push(text("anthropic", "The build is red: 3 tests fail."));
    admin.request("wake", json!({"mode": "now", "text": "CI reported."}));
    let beat = heartbeat(&mut admin);
    assert_eq!((beat["status"].clone(), beat["to"].clone()), (json!("sent"), json!("555")), "{beat}");
    assert_eq!(fake.wait_sent(555, 1), ["The build is red: 3 tests fail."]);
    assert_eq!(admin.request("last-heartbeat", json!({}))["payload"], beat);

    // Turned off, a wake only queues its event; back on, the next heartbeat reads both.
    assert_eq!(
        admin.request("set-heartbeats", json!({"enabled": false}))["payload"],
        json!({"ok": true, "enabled": false})
    );
    admin.request("wake", json!({"mode": "now", "text": "Queued while off."}));
    admin.request("set-heartbeats", json!({"enabled": true}));
    mock.push(text("anthropic", "HEARTBEAT_OK"));
    admin.request("wake", json!({"mode": "now", "text": "Back on."}));
    assert_eq!(heartbeat(&mut admin)["status"], "ok-token");
    let asked = mock.requests()[2].body.to_string();
    assert!(asked.contains("Queued while off.") && asked.contains("Back on."), "{asked}");
    // A heartbeat that came to nothing is left out of what later turns send; one that spoke stays.
    assert!(!asked.contains("The nightly build finished."), "{asked}");
    assert!(asked.contains("CI reported.") && asked.contains("The build is red"), "{asked}");

    // A main job's event wakes it now, and is in what it reads.
    let job = admin.request(
        "cron.add",
        json!({"name": "remind", "schedule": {"kind": "every", "everyMs": 3_600_000}, "sessionTarget": "main",
            "payload": {"kind": "systemEvent", "text": "Reminder: water the plants."}}),
    );
    mock.push(text("anthropic", "HEARTBEAT_OK"));
    admin.request("cron.run", json!({"id": job["payload"]["id"]}));
    assert_eq!(heartbeat(&mut admin)["status"], "ok-token");
    assert!(mock.requests()[3].body.to_string().contains("Reminder: water the plants."));

    // The main session busy: skipped, not queued behind it.
    mock.push(text("anthropic", "Thinking about it").when("Slow question").stall_after(1));
    admin.request("chat.send", json!({"sessionKey": "main", "message": "Slow question", "idempotencyKey": "slow-1"}));
    admin.until_event(|e| {
        e["event"] == "agent" && e["payload"]["stream"] == "lifecycle" && e["payload"]["data"]["phase"] == "start"
    });
    mock.wait_requests(5);
    admin.request("wake", json!({"mode": "now", "text": "Now?"}));
    let beat = heartbeat(&mut admin);
    assert_eq!((beat["status"].clone(), beat["reason"].clone()), (json!("skipped"), json!("requests-in-flight")));
    gw.wait_stderr("heartbeat skipped");
    admin.request("chat.abort", json!({"sessionKey": "main"}));
    assert_eq!(mock.requests().len(), 5, "the skipped heartbeat asked nothing");
    assert!(mock.requests()[4].body.to_string().contains("Slow question"));
    assert_eq!(fake.wait_sent(555, 1).len(), 1, "only the one reply worth reading was sent");
}

#[test]
fn cron_and_heartbeat_errors_are_the_references() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let error = |client: &mut Client, method: &str, params: Value| client.request(method, params)["error"].clone();
    let missing = error(&mut admin, "cron.get", json!({"id": "no-such-job"}));
    assert_eq!(missing["code"], "INVALID_REQUEST");
    assert_eq!(missing["details"], json!({"code": "CRON_JOB_NOT_FOUND", "jobId": "no-such-job"}));
    for method in ["cron.update", "cron.run", "cron.remove", "cron.runs"] {
        let params = if method == "cron.update" {
            json!({"id": "no-such-job", "patch": {"enabled": false}})
        } else {
            json!({"id": "no-such-job"})
        };
        assert_eq!(error(&mut admin, method, params)["details"]["code"], "CRON_JOB_NOT_FOUND", "{method}");
    }
    let isolated = |schedule: Value| {
        json!({"name": "x", "schedule": schedule, "sessionTarget": "isolated", "wakeMode": "now",
            "payload": {"kind": "agentTurn", "message": "x"}})
    };
    let past = jiff::Timestamp::from_millisecond(now_ms() - 3_600_000).unwrap().to_string();
    let message = |e: Value| e["message"].as_str().unwrap().to_owned();
    let said = message(error(&mut admin, "cron.add", isolated(json!({"kind": "at", "at": past}))));
    assert!(
        said.starts_with(&format!("schedule.at is in the past: {past} (60 minutes ago). Current time: ")),
        "{said}"
    );
    let said = message(error(
        &mut admin,
        "cron.add",
        isolated(json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus"})),
    ));
    assert!(said.starts_with("invalid cron.add params: ") && said.contains("Mars/Olympus"), "{said}");
    let mut main = isolated(json!({"kind": "every", "everyMs": 60000}));
    main["sessionTarget"] = json!("main");
    assert_eq!(
        message(error(&mut admin, "cron.add", main)),
        "invalid cron.add params: main cron jobs require payload.kind=\"systemEvent\""
    );
    let mut bogus = isolated(json!({"kind": "every", "everyMs": 60000}));
    bogus["bogus"] = json!(1);
    assert_eq!(
        message(error(&mut admin, "cron.add", bogus)),
        "invalid cron.add params: at root: unexpected property 'bogus'"
    );
    assert_eq!(
        message(error(&mut admin, "cron.get", json!({}))),
        "invalid cron.get params: must have required property 'id'; must have required property 'jobId'; must match a \
         schema in anyOf"
    );
    assert_eq!(
        message(error(&mut admin, "wake", json!({"mode": "soon", "text": "x"}))),
        "invalid wake params: at /mode: must be equal to constant; at /mode: must match a schema in anyOf"
    );
    assert_eq!(
        message(error(&mut admin, "wake", json!({"mode": "now"}))),
        "invalid wake params: must have required property 'text'"
    );
    assert_eq!(
        message(error(&mut admin, "set-heartbeats", json!({}))),
        "invalid set-heartbeats params: enabled (boolean) required"
    );
    // Numbers from outside that would overflow, and patches of fields a job does not have, are
    // refused, and the gateway goes on.
    let far = isolated(json!({"kind": "every", "everyMs": 60000, "anchorMs": i64::MIN}));
    assert!(message(error(&mut admin, "cron.add", far)).contains("anchorMs"));
    let far = isolated(json!({"kind": "at", "at": i64::MIN.to_string()}));
    assert!(message(error(&mut admin, "cron.add", far)).contains("between 1970 and 9999"));
    let plain =
        admin.request("cron.add", isolated(json!({"kind": "every", "everyMs": 60000})))["payload"]["id"].clone();
    let odd = error(&mut admin, "cron.update", json!({"id": plain, "patch": {"delivery": {"kind": "x"}}}));
    assert_eq!(odd["code"], "INVALID_REQUEST", "{odd}");
    admin.request("cron.remove", json!({"id": plain}));
    // Reading needs the read scope; changing, the admin scope.
    let mut reader = gw.client(&["operator.read"]);
    assert_eq!(reader.request("cron.list", json!({}))["ok"], true);
    let refused = error(&mut reader, "cron.add", isolated(json!({"kind": "every", "everyMs": 60000})));
    assert!(message(refused).contains("operator.admin"));
    // Paging as the stock CLI reads it: all six fields, `nextOffset` null on the last page.
    for i in 0..3 {
        let mut job = isolated(json!({"kind": "every", "everyMs": 60000 * (i + 1)}));
        job["name"] = json!(format!("job {i}"));
        admin.request("cron.add", job);
    }
    let page = admin.request("cron.list", json!({"limit": 2}))["payload"].clone();
    assert_eq!(
        (page["total"].clone(), page["limit"].clone(), page["hasMore"].clone(), page["nextOffset"].clone()),
        (json!(3), json!(2), json!(true), json!(2))
    );
    assert_eq!(page["jobs"][0]["name"], "job 0", "soonest first");
    let last = admin.request("cron.list", json!({"limit": 2, "offset": 2}))["payload"].clone();
    assert_eq!((last["hasMore"].clone(), last["nextOffset"].clone()), (json!(false), Value::Null), "{last}");
    assert!(page["snapshotRevision"].is_string());
}

#[test]
fn the_real_openclaw_cron_cli_works_against_it() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let state = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    std::fs::write(
        state.path().join("openclaw.json"),
        json!({"gateway": {"mode": "remote", "remote": {"url": url, "token": TOKEN}}}).to_string(),
    )
    .unwrap();
    let openclaw = |args: &[&str]| crate::support::openclaw::cli(state.path(), args);
    let (ok, out) = openclaw(&[
        "cron",
        "add",
        "--name",
        "morning",
        "--cron",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Paris",
        "--message",
        "Good morning.",
        "--announce",
        "--channel",
        "telegram",
        "--to",
        "12345",
    ]);
    assert!(ok, "{out}\n{}", gw.stderr());
    let added = json_in(&out);
    assert_eq!(added["schedule"], json!({"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Paris"}));
    assert_eq!(added["delivery"], json!({"mode": "announce", "channel": "telegram", "to": "12345"}));
    let id = added["id"].as_str().unwrap().to_owned();
    let (ok, out) = openclaw(&["cron", "list"]);
    assert!(ok && out.contains(&id) && out.contains("morning"), "{out}");
    let (ok, out) = openclaw(&["cron", "disable", &id]);
    assert!(ok && json_in(&out)["enabled"] == false, "{out}");
    let (ok, out) = openclaw(&["cron", "status"]);
    assert!(ok && json_in(&out)["jobs"] == 1, "{out}");
    let (ok, out) = openclaw(&["cron", "runs", "--id", &id]);
    assert!(ok && json_in(&out)["entries"] == json!([]), "{out}");
    let (ok, out) = openclaw(&["cron", "rm", &id]);
    assert!(ok, "{out}");
    let (ok, out) = openclaw(&["cron", "list", "--all"]);
    assert!(ok && !out.contains(&id), "{out}");
}

#[test]
fn the_cron_tool_asks_in_the_chat_first_even_in_auto_mode_and_its_job_delivers_there() {
    use crate::support::script::{calls, result_for};
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let gw = telegram_gateway(&mock, &fake, "dm_policy = \"open\"\nguest_mode = \"auto\"\n");
    let mut admin = gw.client(&["operator.admin"]);
    let r = admin.request("sessions.patch", json!({"key": "agent:main:main", "mode": "auto"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let user = 777;
    let add = json!({"action": "add", "schedule": "every 1h", "message": "Check the weather."});
    mock.push(calls("anthropic", &[("c1", "cron", add)]));
    mock.push(text("anthropic", "Scheduled."));
    fake.message(user, "private", user, "check the weather every hour");
    let question = fake.wait_sent(user, 1).remove(0);
    assert!(question.starts_with("Permission needed: Add cron job: every 1h"), "{question}");
    // What will be saved is shown: delivery to this chat included.
    assert!(question.contains("\"to\": \"777\"") && question.contains("Check the weather."), "{question}");
    assert!(!question.contains("Always"), "each change is asked about: {question}");
    fake.message(user, "private", user, "1");
    assert_eq!(fake.wait_sent(user, 3)[2], "Scheduled.");
    assert!(result_for("anthropic", &mock.requests()[1].body, "c1").starts_with("Added: "));
    let jobs = admin.request("cron.list", json!({}))["payload"]["jobs"].clone();
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs[0]["delivery"], json!({"mode": "announce", "channel": "telegram", "to": "777"}));
    let id = jobs[0]["id"].as_str().unwrap().to_owned();

    // Refused: nothing changes, and the model reads why.
    mock.push(calls("anthropic", &[("c2", "cron", json!({"action": "remove", "id": id}))]));
    mock.push(text("anthropic", "Kept it."));
    fake.message(user, "private", user, "remove it");
    let question = fake.wait_sent(user, 4).remove(3);
    assert!(question.starts_with("Permission needed: Remove cron job \"Check the weather.\" (every 1h)"), "{question}");
    assert!(question.contains(&id) && question.contains("\"to\": \"777\""), "what is removed is shown: {question}");
    fake.message(user, "private", user, "/deny");
    assert_eq!(fake.wait_sent(user, 6)[5], "Kept it.");
    assert!(!result_for("anthropic", &mock.requests()[3].body, "c2").starts_with("Removed"));
    assert_eq!(admin.request("cron.get", json!({"id": id}))["payload"]["id"], id.as_str());
    // Reading asks nothing.
    mock.push(calls("anthropic", &[("c3", "cron", json!({"action": "list"}))]));
    mock.push(text("anthropic", "One job."));
    fake.message(user, "private", user, "what is scheduled?");
    assert_eq!(fake.wait_sent(user, 7)[6], "One job.");
    let listed = result_for("anthropic", &mock.requests()[5].body, "c3");
    assert!(listed.contains(&id) && listed.contains("every 1h"), "{listed}");
}

/// The frames of the real OpenClaw's capture: (method or event, params, payload) in order.
fn captured() -> Vec<(String, Value, Value)> {
    let path = crate::support::mock_model::fixtures_dir().join("openclaw-wire/cron/12_cron.jsonl");
    let mut asked = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Value = serde_json::from_str(line).unwrap();
        let frame = &f["frame"];
        if f["conn"] != "main" || frame.is_null() {
            continue;
        }
        match frame["type"].as_str() {
            Some("req") => {
                asked.insert(
                    frame["id"].clone(),
                    (frame["method"].as_str().unwrap().to_owned(), frame["params"].clone()),
                );
            }
            Some("res") if frame["ok"] == true => {
                let (method, params) = asked[&frame["id"]].clone();
                out.push((method, params, frame["payload"].clone()));
            }
            Some("event") if frame["event"] == "cron" => {
                let action = frame["payload"]["action"].as_str().unwrap_or_default();
                out.push((format!("cron {action}"), Value::Null, frame["payload"].clone()));
            }
            _ => {}
        }
    }
    out
}

fn keys(v: &Value) -> std::collections::BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// Every field of `ours` is one the reference sends in `theirs`, and every field it always sends
/// (`required`) is there.
fn same_shape(what: &str, ours: &Value, theirs: &Value, required: &[&str]) {
    let (ours_keys, theirs_keys) = (keys(ours), keys(theirs));
    let extra: Vec<&String> = ours_keys.difference(&theirs_keys).collect();
    assert!(extra.is_empty(), "{what}: fields the reference does not send: {extra:?}\nours: {ours}\ntheirs: {theirs}");
    for field in required {
        assert!(ours_keys.contains(*field), "{what}: `{field}` missing: {ours}");
    }
}

#[test]
fn results_and_events_have_the_shapes_the_real_openclaw_gave() {
    let captured = captured();
    let find = |what: &str, name: Option<&str>| {
        captured
            .iter()
            .find(|(m, p, r)| m == what && name.is_none_or(|n| p["name"] == n || r["job"]["name"] == n))
            .unwrap_or_else(|| panic!("{what} not captured"))
            .clone()
    };
    let mock = MockModel::start();
    mock.push(text("anthropic", "cron job done"));
    let gw = Gateway::start(&mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);

    let (_, _, status) = find("cron.status", None);
    same_shape("cron.status", &admin.request("cron.status", json!({}))["payload"], &status, &["enabled", "jobs"]);
    // The same jobs as the capture's, added the same way.
    let (_, params, theirs) = find("cron.add", Some("cron-ny"));
    let ours = admin.request("cron.add", params)["payload"].clone();
    let job_fields = [
        "id",
        "name",
        "enabled",
        "createdAtMs",
        "updatedAtMs",
        "schedule",
        "sessionTarget",
        "wakeMode",
        "payload",
        "state",
        "nextRunAtMs",
    ];
    same_shape("cron.add", &ours, &theirs, &job_fields);
    assert_eq!(ours["nextRunAtMs"], ours["state"]["nextRunAtMs"]);
    let id = ours["id"].as_str().unwrap().to_owned();
    let (_, params, theirs) = find("cron.add", Some("main-event"));
    let main = admin.request("cron.add", params)["payload"].clone();
    same_shape("cron.add main", &main, &theirs, &job_fields);
    assert_eq!(
        (main["payload"].clone(), main["wakeMode"].clone()),
        (theirs["payload"].clone(), theirs["wakeMode"].clone())
    );
    let (_, _, theirs) = find("cron.list", None);
    let page = admin.request("cron.list", json!({}))["payload"].clone();
    same_shape("cron.list", &page, &theirs, &["jobs", "total", "offset", "limit", "hasMore", "nextOffset"]);
    same_shape("cron.list job", &page["jobs"][0], &theirs["jobs"][0], &job_fields);
    let (_, _, theirs) = find("cron.update", None);
    let updated = admin.request("cron.update", json!({"id": id, "patch": {"enabled": false}}))["payload"].clone();
    same_shape("cron.update", &updated, &theirs, &["id", "enabled", "state"]);
    assert_eq!(updated["enabled"], false);

    // A run: its events and its log entry.
    let ran = admin.request("cron.run", json!({"id": id, "mode": "force"}))["payload"].clone();
    let (_, _, theirs) = find("cron.run", None);
    same_shape("cron.run", &ran, &theirs, &["ok", "enqueued", "runId"]);
    let frames = admin.until_event(|e| is_cron(e, "finished", &id));
    let started = frames.iter().find(|e| is_cron(e, "started", &id)).unwrap()["payload"].clone();
    same_shape("cron started", &started, &find("cron started", None).2, &["jobId", "action", "job", "runAtMs"]);
    let finished = frames.last().unwrap()["payload"].clone();
    let (_, _, theirs) = find("cron finished", Some("cron-ny"));
    same_shape("cron finished", &finished, &theirs, &["jobId", "action", "status", "summary", "runAtMs", "durationMs"]);
    assert_eq!((finished["status"].clone(), finished["summary"].clone()), (json!("ok"), json!("cron job done")));
    let runs = admin.request("cron.runs", json!({"id": id, "limit": 5}))["payload"].clone();
    let (_, _, theirs) = find("cron.runs", None);
    same_shape("cron.runs", &runs, &theirs, &["entries", "total", "offset", "limit", "hasMore", "nextOffset"]);
    let reference_entry = captured
        .iter()
        .filter(|(m, _, _)| m == "cron.runs")
        .flat_map(|(_, _, r)| r["entries"].as_array().cloned().unwrap_or_default())
        .find(|e| e["status"] == "ok")
        .unwrap();
    same_shape(
        "cron.runs entry",
        &runs["entries"][0],
        &reference_entry,
        &["ts", "jobId", "action", "status", "summary", "runId", "runAtMs", "durationMs", "sessionKey"],
    );
    let removed = admin.request("cron.remove", json!({"id": id}))["payload"].clone();
    assert_eq!(removed, find("cron.remove", None).2);
}

#[test]
fn the_sessions_of_old_runs_go_after_the_retention_time_and_their_log_stays() {
    let mock = MockModel::start();
    for i in 1..=4 {
        mock.push(text("anthropic", &format!("Run {i}.")));
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[cron]\nsession_retention = \"1s\"\nmax_jobs = 1\n").unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    let id = admin.request(
        "cron.add",
        json!({"name": "short-lived", "schedule": {"kind": "every", "everyMs": 2000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "Go."}}),
    )["payload"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // One job is the most this gateway keeps: another is refused, saying so.
    let more = admin.request(
        "cron.add",
        json!({"name": "one too many", "schedule": {"kind": "every", "everyMs": 60000}, "sessionTarget": "isolated",
            "payload": {"kind": "agentTurn", "message": "No."}}),
    );
    assert!(more["error"]["message"].as_str().unwrap().contains("[cron] max_jobs"), "{more}");
    let runs = finished(&mut admin, &id, 3);
    admin.request("cron.update", json!({"id": id, "patch": {"enabled": false}}));
    let first = runs[0]["sessionKey"].as_str().unwrap().to_owned();
    let listed = |admin: &mut Client| {
        let page = admin.request("sessions.list", json!({"limit": 100}));
        page["payload"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["key"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while listed(&mut admin).contains(&first) {
        assert!(std::time::Instant::now() < deadline, "the first run's session was never deleted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = runs[2]["sessionKey"].as_str().unwrap();
    assert!(listed(&mut admin).iter().any(|k| k == last), "the newest run's session is kept");
    let log = admin.request("cron.runs", json!({"id": id, "sortDir": "asc"}));
    assert_eq!(log["payload"]["entries"][0]["summary"], "Run 1.", "{log}");
}
