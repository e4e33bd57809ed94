//! The store behind its trait: the same sessions, transcripts, idempotency keys and cron runs
//! kept alike by SQLite under `$ACP_HOME` and by a real PostgreSQL server (a private instance,
//! tests/support/postgres.rs), and PostgreSQL's leases: one process writes a session at a time.

use std::path::PathBuf;
use std::sync::Arc;

use acp::history::StopReason;
use acp::history::input::UserBlock;
use acp::history::record::Record;
use acp::history::replay::Shown;
use acp::providers::Usage;
use acp::store::backend::{CronEnd, CronRuns};
use acp::store::backend::{SessionStore, Sqlite};
use acp::store::postgres::Postgres;
use acp::store::transcript::IndexUpdate;
use acp::store::{CreateError, SessionRow, Store};

use crate::support::postgres;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn row(id: &str, cwd: &str, at: i64) -> SessionRow {
    SessionRow {
        id: id.into(),
        cwd: PathBuf::from(cwd),
        additional_dirs: vec![],
        title: None,
        created_at: at,
        updated_at: at,
        model: "mock/model".into(),
        mode: "ask".into(),
        reasoning: None,
        input_tokens: 0,
        output_tokens: 0,
        context_tokens: 0,
        parent_id: None,
        origin: "gateway".into(),
        prompted: false,
    }
}

fn settings() -> Record {
    serde_json::from_value(
        serde_json::json!({"t": "settings", "model": "mock/model", "mode": "ask", "reasoning": null}),
    )
    .unwrap()
}

fn user(turn: u64, text: &str) -> Record {
    Record::User { turn, id: format!("u{turn}"), blocks: vec![UserBlock::Text { text: text.into() }], at: 1 }
}

fn end(turn: u64) -> Record {
    Record::End {
        turn,
        stop: Some(StopReason::EndTurn),
        error: None,
        usage: Usage::default(),
        context: None,
        model: None,
        interrupted: false,
        at: 2,
    }
}

fn texts(shown: &[Shown]) -> Vec<String> {
    shown
        .iter()
        .filter_map(|s| match s {
            Shown::Text { text, .. } => Some(text.clone()),
            Shown::User { blocks, .. } => match blocks.first() {
                Some(UserBlock::Text { text }) => Some(format!("> {text}")),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// One answered turn in a new session `id`.
async fn answered(store: &dyn SessionStore, id: &str, cwd: &str, at: i64, prompt: &str, reply: &str) {
    let t = store.create_session(row(id, cwd, at), settings()).await.unwrap();
    t.record(&user(1, prompt));
    t.record(&Record::Text { id: "m1".into(), text: reply.into() });
    t.record(&end(1));
    let turn =
        IndexUpdate::TurnEnded { input: 10, output: 5, context: Some(15), title: Some(prompt.into()), prompted: true };
    if !t.index(&turn) {
        store.update(id, &turn).unwrap();
    }
    t.synced().await;
}

/// Everything the runtime and the gateway ask of a store, asked of `store`.
async fn keeps_what_the_runtime_asks(store: Arc<dyn SessionStore>) {
    let s = &*store;
    // Sessions in two working directories, three of them answered.
    for (i, id) in ["alpha", "beta", "gamma"].iter().enumerate() {
        answered(
            s,
            id,
            if i == 1 { "/b" } else { "/a" },
            1000 + i as i64,
            &format!("prompt {id}"),
            &format!("reply {id}"),
        )
        .await;
    }
    drop(s.create_session(row("unanswered", "/a", 5000), settings()).await.unwrap());
    assert!(matches!(s.create_session(row("alpha", "/a", 1), settings()).await, Err(CreateError::Exists)));

    // Listings leave the unanswered one out, newest first, a page at a time.
    let (page, next) = s.list(None, None, 2).await.unwrap();
    let ids: Vec<_> = page.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let (rest, last) = s.list(None, next, 2).await.unwrap();
    let mut all: Vec<String> = page.iter().chain(&rest).map(|r| r.id.clone()).collect();
    assert_eq!(last, None);
    all.sort();
    assert_eq!(all, ["alpha", "beta", "gamma"]);
    let (in_b, _) = s.list(Some(PathBuf::from("/b")), None, 10).await.unwrap();
    assert_eq!(in_b.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["beta"]);

    // The row as the turn left it, and the transcript as written.
    let beta = s.get("beta".into()).await.unwrap().unwrap();
    assert_eq!((beta.input_tokens, beta.output_tokens, beta.context_tokens), (10, 5, 15));
    assert_eq!(beta.title.as_deref(), Some("prompt beta"));
    assert!(beta.prompted);
    let (_, replay) = s.read_session("beta".into()).await.unwrap().unwrap();
    assert_eq!(texts(&replay.shown), ["> prompt beta", "reply beta"]);
    assert_eq!(replay.turns, 1);
    assert!(s.read_session("nobody".into()).await.unwrap().is_none());

    // Found by id or title, any case.
    let found = s.find("PROMPT G".into(), 0, 10).await.unwrap();
    assert_eq!((found.total, found.rows[0].id.as_str()), (1, "gamma"));
    assert_eq!(s.titled("prompt alpha".into()).await.unwrap().unwrap().id, "alpha");
    assert!(s.prompted("unanswered".into()).await.unwrap().is_none());

    // Opened again: the writer goes on after what is there; a turn left open is closed.
    let opened = s.open_session("gamma".into(), "/c".into(), vec![]).await.unwrap().unwrap();
    assert_eq!(opened.replay.turns, 1);
    opened.writer.record(&user(2, "second"));
    opened.writer.record(&Record::Text { id: "m2".into(), text: "cut off".into() });
    opened.writer.synced().await;
    assert!(
        s.open_session("gamma".into(), "/c".into(), vec![]).await.is_err(),
        "a session open in this process is not opened twice"
    );
    drop(opened);
    let reopened = s.open_session("gamma".into(), "/c".into(), vec![]).await.unwrap().unwrap();
    assert!(!reopened.replay.repair.is_empty(), "the turn left open is closed");
    assert_eq!(reopened.row.id, "gamma");
    reopened.writer.synced().await;
    drop(reopened);
    let (row, replay) = s.read_session("gamma".into()).await.unwrap().unwrap();
    assert_eq!(row.cwd, PathBuf::from("/c"), "the new working directory is recorded");
    assert_eq!(texts(&replay.shown), ["> prompt gamma", "reply gamma", "> second", "cut off"]);
    assert!(replay.repair.is_empty(), "the repair was stored");

    // Moved aside, then deleted.
    s.archive("alpha".into(), "alpha-old".into()).await.unwrap();
    assert!(s.get("alpha".into()).await.unwrap().is_none());
    let (_, replay) = s.read_session("alpha-old".into()).await.unwrap().unwrap();
    assert_eq!(texts(&replay.shown), ["> prompt alpha", "reply alpha"]);
    s.delete_if_closed("alpha-old".into()).await.unwrap();
    assert!(s.read_session("alpha-old".into()).await.unwrap().is_none());
    s.delete_if_closed("never-was".into()).await.unwrap();

    // Idempotency keys: claimed once; what ended is told to a retry; a forgotten one is free.
    assert!(s.claim_key("k1".into(), "beta".into()).await.unwrap().is_none());
    let again = s.claim_key("k1".into(), "beta".into()).await.unwrap().unwrap();
    assert_eq!((again.session.as_str(), again.ended_at), ("beta", None));
    s.end_key("k1".into(), "{\"status\":\"ok\"}".into()).await.unwrap();
    let ended = s.key("k1".into()).await.unwrap().unwrap();
    assert_eq!(ended.outcome.as_deref(), Some("{\"status\":\"ok\"}"));
    s.forget_key("k1".into()).await.unwrap();
    assert!(s.claim_key("k1".into(), "beta".into()).await.unwrap().is_none());

    // Cron: a slot runs once, its end is logged, a removed job takes its runs along.
    s.cron_put("job1".into(), 1, "{\"id\":\"job1\"}".into()).await.unwrap();
    assert_eq!(s.cron_jobs().await.unwrap(), ["{\"id\":\"job1\"}"]);
    assert!(
        s.cron_claim("job1".into(), Some(60), "run1".into(), 10, "{\"id\":\"job1\",\"v\":2}".into()).await.unwrap()
    );
    assert!(!s.cron_claim("job1".into(), Some(60), "run2".into(), 11, "{}".into()).await.unwrap(), "a slot runs once");
    assert_eq!(s.cron_unfinished().await.unwrap().len(), 1);
    let end = CronEnd {
        id: "job1".into(),
        run_id: "run1".into(),
        ended_at: 20,
        status: "ok".into(),
        entry: "{\"status\":\"ok\"}".into(),
        job: Some("{\"id\":\"job1\",\"v\":3}".into()),
    };
    s.cron_finish(end).await.unwrap();
    assert!(s.cron_unfinished().await.unwrap().is_empty());
    let (runs, total) =
        s.cron_runs(CronRuns { id: Some("job1".into()), limit: 10, ..CronRuns::default() }).await.unwrap();
    assert_eq!((runs, total), (vec!["{\"status\":\"ok\"}".to_owned()], 1));
    assert_eq!(s.cron_job("job1".into()).await.unwrap().as_deref(), Some("{\"id\":\"job1\",\"v\":3}"));
    assert!(s.cron_replace("job1".into(), "{\"id\":\"job1\",\"v\":4}".into()).await.unwrap());
    assert!(s.cron_remove("job1".into()).await.unwrap());
    assert!(!s.cron_remove("job1".into()).await.unwrap());
    let (runs, _) = s.cron_runs(CronRuns { limit: 10, ..CronRuns::default() }).await.unwrap();
    assert!(runs.is_empty());
    assert_eq!(s.cron_sessions_before("be".into(), i64::MAX, 10).await.unwrap(), ["beta"]);
}

#[test]
fn sqlite_keeps_what_the_runtime_asks() {
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(Sqlite(Arc::new(Store::open(home.path()).unwrap())));
    rt().block_on(keeps_what_the_runtime_asks(store));
}

#[test]
fn postgres_keeps_what_the_runtime_asks_alike() {
    let pg = postgres::Postgres::start();
    let url = pg.create_db("acp");
    rt().block_on(async {
        let store = Postgres::connect(&url).await.unwrap();
        keeps_what_the_runtime_asks(Arc::new(store.clone())).await;
        // Records are rows keyed (session, seq), in order, one per record.
        let seqs =
            pg.psql("acp", "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM acp_records WHERE session_id = 'beta'");
        assert_eq!(seqs, "0,1,2,3,4");
        // A second connection (another gateway starting) finds the schema as it is.
        Postgres::connect(&url).await.unwrap();
    });
    assert_eq!(pg.psql("acp", "SELECT version FROM acp_schema"), "1");
}

#[test]
fn a_session_is_written_by_one_process_at_a_time_and_taken_over_once_its_lease_lapses() {
    let pg = postgres::Postgres::start();
    let url = pg.create_db("acp");
    rt().block_on(async {
        let lease = std::time::Duration::from_secs(2);
        let a = Postgres::connect_with(&url, lease).await.unwrap();
        let b = Postgres::connect_with(&url, lease).await.unwrap();
        assert_ne!(a.owner(), b.owner());
        let t = a.create_session(row("shared", "/w", 1), settings()).await.unwrap();
        t.record(&user(1, "hello"));
        t.synced().await;
        // Renewed while A holds it: B is refused, however long it waits.
        tokio::time::sleep(lease * 2).await;
        let refused = b.open_session("shared".into(), "/w".into(), vec![]).await.err().expect("held by A");
        assert!(refused.0.contains("open on another gateway"), "{refused}");
        // A lets it go when it closes it: B takes it at once.
        drop(t);
        a.close(std::time::Duration::from_secs(10)).await;
        let opened = b.open_session("shared".into(), "/w".into(), vec![]).await.unwrap().unwrap();
        assert!(!opened.replay.repair.is_empty(), "the turn A left open is closed as interrupted");
        opened.writer.record(&Record::Text { id: "m1".into(), text: "from b".into() });
        opened.writer.synced().await;
        // A cannot take it back while B holds it, nor write over B: an old writer of A's
        // finds its lease gone.
        assert!(a.open_session("shared".into(), "/w".into(), vec![]).await.is_err());
        drop(opened);
        b.close(std::time::Duration::from_secs(10)).await;
        let (_, replay) = a.read_session("shared".into()).await.unwrap().unwrap();
        assert_eq!(texts(&replay.shown), ["> hello", "from b"]);
    });
    // Nothing doubled, nothing lost: records numbered without a gap.
    let records = pg.psql(
        "acp",
        "SELECT count(*) = max(seq) + 1 AND count(*) = count(DISTINCT seq) FROM acp_records WHERE session_id = 'shared'",
    );
    assert_eq!(records, "t");
    assert_eq!(pg.psql("acp", "SELECT count(*) FROM acp_sessions WHERE owner IS NOT NULL"), "0");
}

#[test]
fn leases_of_a_process_that_stopped_lapse_and_a_stale_writer_cannot_write() {
    let pg = postgres::Postgres::start();
    let url = pg.create_db("acp");
    rt().block_on(async {
        let lease = std::time::Duration::from_secs(2);
        let a = Postgres::connect_with(&url, lease).await.unwrap();
        let b = Postgres::connect_with(&url, lease).await.unwrap();
        let t = a.create_session(row("s", "/w", 1), settings()).await.unwrap();
        t.record(&user(1, "before"));
        t.synced().await;
        // A's host stops answering: its lease is not renewed (as if A were gone) and lapses.
        pg.psql("acp", "UPDATE acp_sessions SET lease_until = now() - interval '1 second'");
        let opened = b.open_session("s".into(), "/w".into(), vec![]).await.unwrap().unwrap();
        // A comes back and writes: refused, nothing of it stored.
        t.record(&Record::Text { id: "stale".into(), text: "from a stale writer".into() });
        t.synced().await;
        opened.writer.record(&Record::Text { id: "m".into(), text: "from b".into() });
        opened.writer.synced().await;
        drop(opened);
        drop(t);
        b.close(std::time::Duration::from_secs(10)).await;
        let (_, replay) = b.read_session("s".into()).await.unwrap().unwrap();
        assert_eq!(texts(&replay.shown), ["> before", "from b"]);
    });
}

#[test]
fn a_bad_store_url_or_an_unreachable_server_is_a_clear_error() {
    rt().block_on(async {
        let e = Postgres::connect("postgres://user:secret@127.0.0.1:1/db").await.err().unwrap();
        assert!(!e.0.contains("secret"), "the password is not shown: {e}");
        assert!(e.0.contains("PostgreSQL"), "{e}");
        let e = Postgres::connect("postgres://u:p@h/db?sslmode=require").await.err().unwrap();
        assert!(e.0.contains("TLS"), "{e}");
        let e = Postgres::connect("postgres://h/db?nonsense=1").await.err().unwrap();
        assert!(e.0.contains("not a PostgreSQL URL"), "{e}");
    });
}
