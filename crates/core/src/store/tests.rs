//! Store tests: the index (paging, cursors, counters, migrations, concurrent opens) and the
//! transcripts (one writer, torn and damaged lines, timed text writes, replay of cut turns).

use std::path::{Path, PathBuf};

use super::transcript::Live;
use super::transcript::{self, Transcript};
use super::*;
use crate::history::StopReason;
use crate::history::input::UserBlock;
use crate::history::record::Record;
use crate::history::replay::{self, Shown};
use crate::providers::{AssistantPart, Message, ToolResult, Usage, UserPart};
use crate::settings::Mode;
use crate::tools::{ToolCallState, ToolContent, ToolKind, ToolStatus};

struct Home(PathBuf);

impl Home {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("acp-store-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn session(id: &str, cwd: &str, updated_at: i64) -> SessionRow {
    SessionRow {
        id: id.into(),
        cwd: cwd.into(),
        additional_dirs: vec![],
        title: Some(format!("title of {id}")),
        created_at: updated_at,
        updated_at,
        model: "anthropic/claude".into(),
        mode: "ask".into(),
        reasoning: None,
        input_tokens: 0,
        output_tokens: 0,
        context_tokens: 0,
        parent_id: None,
        origin: "acp".into(),
        prompted: true,
    }
}

/// The `n`th id of the form `session/new` makes up.
fn made_up_id(n: u8) -> String {
    format!("sess_{n:032x}")
}

fn header(id: &str) -> Record {
    Record::Session { v: crate::history::record::FORMAT_VERSION, id: id.into(), cwd: "/w".into(), created_at: 1 }
}

#[test]
fn sessions_page_newest_first_and_filter_by_cwd() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    for i in 0..25 {
        let cwd = if i % 2 == 0 { "/a" } else { "/b" };
        // Pairs share a timestamp: the id breaks the tie.
        store.create(&session(&format!("s{i:02}"), cwd, 1000 + i / 2)).unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (rows, next) = store.list(None, cursor.as_ref(), 10).unwrap();
        seen.extend(rows.into_iter().map(|r| r.id));
        match next {
            Some(c) => cursor = Some(Cursor::decode(&c.encode()).unwrap()),
            None => break,
        }
    }
    let mut expected: Vec<String> = (0..25).map(|i| format!("s{i:02}")).collect();
    expected.reverse();
    assert_eq!(seen, expected);

    let (rows, next) = store.list(Some(Path::new("/a")), None, 100).unwrap();
    assert!(next.is_none());
    assert_eq!(rows.len(), 13);
    assert!(rows.iter().all(|r| r.cwd == Path::new("/a")));
}

#[test]
fn sessions_are_found_by_search_id_and_title_in_one_query_each() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    for i in 0..12 {
        let mut row = session(&format!("agent:main:s{i:02}"), "/w", 1000 + i);
        row.title = Some(if i % 3 == 0 { format!("Deploy notes {i}") } else { format!("chat {i}") });
        store.create(&row).unwrap();
    }
    let mut unprompted = session("agent:main:quiet", "/w", 5000);
    unprompted.prompted = false;
    unprompted.title = Some("Deploy notes".into());
    store.create(&unprompted).unwrap();
    // Any case, title or id; newest first; paged by offset with the total.
    let found = store.find("DEPLOY", 0, 2).unwrap();
    assert_eq!(found.total, 4, "s00, s03, s06, s09 (the unprompted one is not listed)");
    let ids: Vec<&str> = found.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["agent:main:s09", "agent:main:s06"]);
    let rest: Vec<String> = store.find("deploy", 2, 10).unwrap().rows.into_iter().map(|r| r.id).collect();
    assert_eq!(rest, ["agent:main:s03", "agent:main:s00"]);
    assert_eq!(store.find("s1", 0, 50).unwrap().total, 2, "s10 and s11 by id");
    assert_eq!(store.find("", 0, 5).unwrap().total, 12);
    assert_eq!(store.find("", 0, 5).unwrap().rows.len(), 5);
    // By id and by title: only prompted sessions.
    assert_eq!(store.prompted("agent:main:s04").unwrap().map(|r| r.id).as_deref(), Some("agent:main:s04"));
    assert!(store.prompted("agent:main:quiet").unwrap().is_none());
    assert!(store.prompted("agent:main:nope").unwrap().is_none());
    assert_eq!(store.titled("chat 7").unwrap().map(|r| r.id).as_deref(), Some("agent:main:s07"));
    assert!(store.titled("Deploy notes").unwrap().is_none(), "the unprompted one is not found");
}

#[test]
fn cursors_are_opaque_and_checked() {
    let c = Cursor { updated_at: 42, id: "sess_1".into() };
    assert_eq!(Cursor::decode(&c.encode()), Some(c));
    assert_eq!(Cursor::decode("zz"), None);
    assert_eq!(Cursor::decode("abc"), None);
}

#[test]
fn turns_update_counters_and_keep_the_first_title() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    let mut row = session("s", "/w", 1);
    row.title = None;
    row.prompted = false;
    store.create(&row).unwrap();
    store.finish_turn("s", 10, 5, Some(15), Some("first"), false).unwrap();
    assert!(!store.get("s").unwrap().unwrap().prompted);
    store.finish_turn("s", 20, 7, None, Some("second"), true).unwrap();
    store.finish_turn("s", 1, 1, None, None, false).unwrap();
    let got = store.get("s").unwrap().unwrap();
    assert_eq!((got.input_tokens, got.output_tokens, got.context_tokens), (31, 13, 15));
    assert_eq!(got.title.as_deref(), Some("first"));
    assert!(got.prompted, "a turn that was not answered leaves the session listed");
    assert!(got.updated_at >= row.updated_at);
}

#[test]
fn delete_removes_row_and_transcript_and_tolerates_unknown_ids() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    store.create(&session("s", "/w", 1)).unwrap();
    drop(Transcript::create(&store.transcript_path("s"), &header("s")).unwrap());
    store.delete("s").unwrap();
    assert!(store.get("s").unwrap().is_none());
    assert!(!store.transcript_path("s").exists());
    store.delete("never-existed").unwrap();
}

#[test]
fn a_database_from_a_newer_acp_is_refused() {
    let home = Home::new();
    drop(Store::open(&home.0).unwrap());
    let db = rusqlite::Connection::open(home.0.join("acp.db")).unwrap();
    db.pragma_update(None, "user_version", 99).unwrap();
    drop(db);
    let err = Store::open(&home.0).unwrap_err();
    assert!(err.0.contains("newer acp"), "{err}");
    // A negative version is damage, not "nothing to migrate".
    let db = rusqlite::Connection::open(home.0.join("acp.db")).unwrap();
    db.pragma_update(None, "user_version", -5).unwrap();
    drop(db);
    let err = Store::open(&home.0).unwrap_err();
    assert!(err.0.contains("damaged"), "{err}");
}

#[test]
fn any_printable_key_is_an_id_and_gets_a_safe_distinct_file_name() {
    let long = "é".repeat(128);
    let ok = ["sess_0123abc", "agent:main:main", "agent:main:telegram:dm:123", "a b", "..", "a/b", "Demo", &long];
    for id in ok {
        assert!(valid_id(id), "{id:?}");
    }
    for bad in ["", "a\nb", "tab\there", "nul\0", "del\u{7f}", &"x".repeat(257)] {
        assert!(!valid_id(bad), "{bad:?}");
    }
    // Plain lower-case ids keep their own name; every other id gets a hashed one.
    assert_eq!(file_name("sess_0123abc"), "sess_0123abc.jsonl");
    assert_eq!(file_name("demo"), "demo.jsonl");
    let mut names = std::collections::HashSet::new();
    let ids = ["demo", "Demo", "DEMO", "..", ".", "../../etc/passwd", "a/b", "a\\b", "agent:main:main", &long];
    for id in ids {
        let name = file_name(id);
        assert!(!name.contains('/') && !name.contains('\\') && !name.starts_with('.'), "{id:?} → {name}");
        assert!(name.len() <= 100, "{id:?} → {name}");
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-~".contains(c)), "{name}");
        // Case-insensitive file systems: no two ids share a name, whatever the case.
        assert!(names.insert(name.to_ascii_lowercase()), "{id:?} → {name} collides");
    }
    // A plain id can never take a hashed id's name.
    assert!(
        file_name("Demo").contains('~') && !file_name("demo~0123456789abcdef").contains("demo~0123456789abcdef.jsonl")
    );
}

#[test]
fn a_session_is_stored_when_created_and_listed_once_prompted() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    let mut row = session("agent:main:main", "/w", 10);
    row.prompted = false;
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    let t = store.create_session(&row, &settings).unwrap();
    assert!(t.path().starts_with(home.0.join("sessions")));
    assert_eq!(store.get("agent:main:main").unwrap().unwrap().id, "agent:main:main");
    assert!(store.list(None, None, 10).unwrap().0.is_empty(), "not listed before its first prompt");
    // A second creation of the same id: busy while this one holds it, then it exists.
    assert!(matches!(store.create_session(&row, &settings), Err(CreateError::Exists)));
    store.mark_prompted("agent:main:main").unwrap();
    assert_eq!(store.list(None, None, 10).unwrap().0.len(), 1);
    drop(t);
    let (_, replayed) = store.read_session("agent:main:main").unwrap().unwrap();
    assert_eq!(replayed.settings.unwrap().model, "anthropic/x");
}

#[test]
fn a_fresh_session_is_begun_before_the_store_opens_and_indexed_after() {
    // A new home: nothing there yet, not even the transcripts' directory.
    let home = Home::new();
    let mut row = session(&made_up_id(1), "/w", 10);
    row.prompted = false;
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    let t = begin_fresh_session(&home.0, &row, &settings).unwrap().expect("begun");
    let store = Store::open(&home.0).unwrap();
    assert_eq!(t.path(), store.transcript_path(&made_up_id(1)));
    assert_eq!(store.get(&made_up_id(1)).unwrap(), None, "not indexed yet");
    store.index_new(&row).unwrap();
    assert_eq!(store.get(&made_up_id(1)).unwrap(), Some(row.clone()));
    // Locked as its writer, as a created session's is.
    assert!(matches!(store.create_session(&row, &settings), Err(CreateError::Exists)));
    assert!(Transcript::open(t.path()).is_err());
    drop(t);
    let (_, replayed) = store.read_session(&made_up_id(1)).unwrap().unwrap();
    assert_eq!(replayed.settings.unwrap().model, "anthropic/x");
    // A file there already after all: left to `create_session`, untouched.
    assert!(begin_fresh_session(&home.0, &row, &settings).unwrap().is_none());
    assert_eq!(transcript::read(&store.transcript_path(&made_up_id(1))).unwrap().records.len(), 2);
    // A row whose transcript was lost: indexing the new one says it exists.
    let lost = session(&made_up_id(2), "/w", 10);
    store.create(&lost).unwrap();
    let again = begin_fresh_session(&home.0, &lost, &settings).unwrap().expect("no transcript there");
    assert_eq!(store.index_new(&lost), Err(CreateError::Exists));
    drop(again);
    for bad in ["", "line\nbreak", "sess_chosen", "nightly"] {
        assert!(begin_fresh_session(&home.0, &session(bad, "/w", 1), &settings).is_err(), "{bad:?} is not made up");
    }
}

#[test]
fn a_fresh_session_left_unindexed_by_a_stopped_process_is_indexed_not_lost() {
    let home = Home::new();
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    // Begun, prompted and answered; the process stopped before storing its row.
    let row = session(&made_up_id(3), "/w", 10);
    let t = begin_fresh_session(&home.0, &row, &settings).unwrap().unwrap();
    t.record(&Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("hi")], at: 11 });
    t.record(&Record::Message { message: Message::User(vec![UserPart::Text("hi".into())]) });
    t.record(&Record::Message { message: Message::Assistant(vec![AssistantPart::Text("hello".into())]) });
    let usage = Usage { input: 5, output: 7, ..Usage::default() };
    t.record(&Record::End {
        turn: 1,
        stop: Some(StopReason::EndTurn),
        error: None,
        usage,
        context: Some(12),
        model: None,
        interrupted: false,
        at: 12,
    });
    drop(t);
    // Begun but never prompted: nothing to keep.
    let empty = session(&made_up_id(4), "/w", 10);
    drop(begin_fresh_session(&home.0, &empty, &settings).unwrap().unwrap());

    let store = Store::open(&home.0).unwrap();
    assert_eq!(store.get(&made_up_id(3)).unwrap(), None);
    // Creating it again (`acp run --session sess_stopped`) finds it, indexed now.
    assert_eq!(store.create_session(&row, &settings).err(), Some(CreateError::Exists));
    let indexed = store.get(&made_up_id(3)).unwrap().expect("indexed");
    assert_eq!(
        (
            indexed.cwd.as_path(),
            indexed.model.as_str(),
            indexed.mode.as_str(),
            indexed.input_tokens,
            indexed.output_tokens
        ),
        (Path::new("/w"), "anthropic/x", "ask", 5, 7)
    );
    assert_eq!(
        (indexed.context_tokens, indexed.prompted, indexed.created_at, indexed.origin.as_str()),
        (12, true, 10, "run")
    );
    let (_, replayed) = store.read_session(&made_up_id(3)).unwrap().unwrap();
    assert_eq!(replayed.turns, 1);
    // The empty one is begun again, as any left-over transcript is.
    let t = store.create_session(&empty, &settings).unwrap();
    assert_eq!(store.get(&made_up_id(4)).unwrap().map(|r| r.id), Some(made_up_id(4)));
    drop(t);
    // A transcript open in a live process is not touched.
    let live = session(&made_up_id(5), "/w", 10);
    let writer = begin_fresh_session(&home.0, &live, &settings).unwrap().unwrap();
    writer.record(&Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("hi")], at: 11 });
    assert!(matches!(store.create_session(&live, &settings), Err(CreateError::Busy(_))));
    assert_eq!(store.get(&made_up_id(5)).unwrap(), None);
}

#[test]
fn left_over_transcripts_are_swept_after_a_day_indexed_if_they_hold_a_turn() {
    let home = Home::new();
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(25 * 60 * 60);
    let begin = |n: u8, prompted: bool, old: bool| {
        let t = begin_fresh_session(&home.0, &session(&made_up_id(n), "/w", 10), &settings).unwrap().unwrap();
        if prompted {
            t.record(&Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("hi")], at: 11 });
        }
        if n == 3 {
            // Its turn ended (failed): not a crash, so not listed before a day has passed.
            t.record(&Record::End {
                turn: 1,
                stop: None,
                error: Some("no key".into()),
                usage: Default::default(),
                context: None,
                model: None,
                interrupted: false,
                at: 12,
            });
        }
        if old {
            std::fs::File::options().append(true).open(t.path()).unwrap().set_modified(day_ago).unwrap();
        }
        t
    };
    drop(begin(1, true, true));
    drop(begin(2, false, true));
    drop(begin(3, true, false));
    let open = begin(4, true, true);
    // Not made up: never a left-over of a fresh session (a deleted session's file, say).
    let chosen = home.0.join("sessions/nightly.jsonl");
    std::fs::write(&chosen, "{}\n").unwrap();
    let store = Store::open(&home.0).unwrap();
    let before = now_ms() - 24 * 60 * 60 * 1000;
    assert_eq!(store.sweep_unprompted(before).unwrap(), 2);
    assert!(store.get(&made_up_id(1)).unwrap().is_some_and(|r| r.prompted), "a turn its process stopped in: listed");
    assert!(!store.transcript_path(&made_up_id(2)).exists(), "nothing to keep: removed");
    assert!(store.transcript_path(&made_up_id(3)).exists() && store.get(&made_up_id(3)).unwrap().is_none(), "recent");
    assert!(store.get(&made_up_id(4)).unwrap().is_none(), "open in a live process");
    assert!(chosen.exists());
    drop(open);
}

#[test]
fn a_transcript_being_created_elsewhere_is_busy_and_a_left_over_one_is_taken_over() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    let row = session("k", "/w", 10);
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    // Another process has created (and locked) the transcript but not stored the row yet.
    let other = Transcript::create(&store.transcript_path("k"), &header("k")).unwrap();
    assert!(matches!(store.create_session(&row, &settings), Err(CreateError::Busy(_))));
    other.record(&Record::Text { id: "m".into(), text: "left over".into() });
    drop(other);
    // That process died: the file is taken over and begun again.
    let t = store.create_session(&row, &settings).unwrap();
    drop(t);
    let records = transcript::read(&store.transcript_path("k")).unwrap().records;
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(matches!(records[0], Record::Session { .. }) && matches!(records[1], Record::Settings { .. }));
}

#[test]
fn never_prompted_sessions_are_swept_unless_open() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    let settings = Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None };
    let mut open = Vec::new();
    for id in ["old-unused", "old-unused-open", "old-used", "new-unused"] {
        let mut row = session(id, "/w", if id == "new-unused" { 5000 } else { 1 });
        row.prompted = id == "old-used";
        open.push(store.create_session(&row, &settings).unwrap());
    }
    let keep_open = open.remove(1);
    drop(open);
    assert_eq!(store.sweep_unprompted(1000).unwrap(), 1);
    assert!(store.get("old-unused").unwrap().is_none());
    assert!(!store.transcript_path("old-unused").exists());
    for id in ["old-unused-open", "old-used", "new-unused"] {
        assert!(store.get(id).unwrap().is_some(), "{id}");
    }
    drop(keep_open);
}

#[test]
fn one_writer_per_transcript() {
    let home = Home::new();
    let path = home.0.join("s.jsonl");
    let first = Transcript::create(&path, &header("s")).unwrap();
    let err = Transcript::open(&path).unwrap_err();
    assert!(err.0.contains("open in another acp process"), "{err}");
    drop(first);
    Transcript::open(&path).unwrap();
}

#[test]
fn a_torn_last_line_is_skipped_on_read_and_cut_before_the_next_append() {
    let home = Home::new();
    let path = home.0.join("s.jsonl");
    let t = Transcript::create(&path, &header("s")).unwrap();
    t.record(&Record::Text { id: "m1".into(), text: "whole".into() });
    drop(t);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"t":"text","id":"m1","te"#);
    std::fs::write(&path, &bytes).unwrap();

    let loaded = transcript::read(&path).unwrap();
    assert_eq!(loaded.records.len(), 2);
    assert_eq!(loaded.torn_bytes, 25);

    let t = Transcript::open(&path).unwrap();
    t.record(&Record::Text { id: "m1".into(), text: " and more".into() });
    drop(t);
    let loaded = transcript::read(&path).unwrap();
    assert_eq!(loaded.torn_bytes, 0);
    assert_eq!(loaded.skipped_lines, 0);
    assert_eq!(loaded.records[2], Record::Text { id: "m1".into(), text: " and more".into() });
}

#[test]
fn damaged_and_unknown_lines_are_skipped_not_fatal() {
    let path = Path::new("/x.jsonl");
    let bytes = b"{\"t\":\"text\",\"id\":\"a\",\"text\":\"1\"}\nnot json\n{\"t\":\"from_the_future\"}\n{\"t\":\"text\",\"id\":\"a\",\"text\":\"2\"}\n";
    let loaded = transcript::parse(bytes, path);
    assert_eq!(loaded.records.len(), 2);
    assert_eq!(loaded.skipped_lines, 2);
}

fn tool(id: &str, status: ToolStatus, content: Vec<ToolContent>) -> ToolCallState {
    ToolCallState {
        id: id.into(),
        name: "edit".into(),
        title: format!("Edit {id}"),
        kind: ToolKind::Edit,
        status,
        locations: vec![],
        raw_input: serde_json::json!({"path": "a.rs"}),
        content,
        raw_output: None,
        streams_output: false,
    }
}

#[test]
fn events_are_recorded_merged_and_replayed_in_order() {
    let home = Home::new();
    let path = home.0.join("s.jsonl");
    let t = Transcript::create(&path, &header("s")).unwrap();
    let diff = ToolContent::Diff { path: "/w/a.rs".into(), old_text: Some("a".into()), new_text: "b".into() };
    t.record(&Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("hi")], at: 1 });
    t.record(&Record::Message { message: Message::User(vec![UserPart::Text("hi".into())]) });
    let id: std::sync::Arc<str> = "m1".into();
    t.record_live(Live::Text { thought: true, message_id: &"th".into(), text: "hmm" });
    t.record_live(Live::Text { thought: false, message_id: &id, text: "Hel" });
    t.record_live(Live::Text { thought: false, message_id: &id, text: "lo" });
    t.flush();
    t.record_live(Live::Text { thought: false, message_id: &id, text: "!" });
    t.record_live(Live::ToolCall(&tool("c1", ToolStatus::Pending, vec![diff.clone()])));
    t.record_live(Live::ToolCallUpdate(&tool("c1", ToolStatus::InProgress, vec![diff.clone()])));
    t.record_live(Live::ToolCallUpdate(&tool("c1", ToolStatus::Completed, vec![diff.clone()])));
    t.record(&Record::End {
        turn: 1,
        stop: Some(StopReason::EndTurn),
        error: None,
        usage: Usage { input: 10, output: 3, ..Usage::default() },
        context: Some(13),
        model: None,
        interrupted: false,
        at: 2,
    });
    drop(t);

    let loaded = transcript::read(&path).unwrap();
    // The final state is stored as what changed: no second copy of the diff.
    let end = loaded.records.iter().find(|r| matches!(r, Record::ToolEnd { .. })).unwrap();
    assert_eq!(
        end,
        &Record::ToolEnd {
            id: "c1".into(),
            patch: crate::stream::tool_update::Patch { status: Some(ToolStatus::Completed), ..Default::default() }
        }
    );
    let r = replay::replay(loaded.records);
    assert_eq!(
        r.shown,
        vec![
            Shown::User { id: "u1".into(), blocks: vec![UserBlock::text("hi")], at: 1 },
            Shown::Thought { id: "th".into(), text: "hmm".into() },
            Shown::Text { id: "m1".into(), text: "Hello!".into() },
            Shown::Tool(Box::new(tool("c1", ToolStatus::Completed, vec![diff]))),
        ]
    );
    assert!(r.repair.is_empty());
    assert_eq!(r.usage.input, 10);
    assert_eq!(r.context_tokens, Some(13));
}

#[test]
fn a_subagent_call_outlives_its_turn_and_is_closed_only_if_it_never_ended() {
    let base = vec![
        header("s"),
        Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("go")], at: 1 },
        Record::Message { message: Message::User(vec![UserPart::Text("go".into())]) },
        Record::Tool { state: tool("subagent-1", ToolStatus::InProgress, vec![]) },
        Record::Message { message: Message::Assistant(vec![AssistantPart::Text("Started.".into())]) },
        Record::End {
            turn: 1,
            stop: Some(crate::history::StopReason::EndTurn),
            error: None,
            usage: Default::default(),
            context: None,
            model: None,
            interrupted: false,
            at: 2,
        },
    ];
    let status = |r: &replay::Replay| {
        r.shown
            .iter()
            .find_map(|s| match s {
                Shown::Tool(state) => Some(state.status),
                _ => None,
            })
            .unwrap()
    };
    // It ended after its turn: shown as it ended, nothing to repair.
    let mut ended = base.clone();
    ended.push(Record::ToolEnd {
        id: "subagent-1".into(),
        patch: crate::stream::tool_update::Patch { status: Some(ToolStatus::Completed), ..Default::default() },
    });
    let r = replay::replay(ended);
    assert_eq!(status(&r), ToolStatus::Completed);
    assert!(r.repair.is_empty());
    // The process stopped before it ended: it fails, once and for good.
    let r = replay::replay(base.clone());
    assert_eq!(status(&r), ToolStatus::Failed);
    assert_eq!(r.repair.len(), 1);
    let mut repaired = base;
    repaired.extend(r.repair);
    let again = replay::replay(repaired);
    assert!(again.repair.is_empty());
    assert_eq!(status(&again), ToolStatus::Failed);
}

#[test]
fn a_turn_cut_short_is_closed_where_it_stopped() {
    let call = |id: &str| AssistantPart::ToolCall { id: id.into(), name: "edit".into(), arguments: "{}".into() };
    let base = vec![
        header("s"),
        Record::Settings { model: "anthropic/x".into(), mode: Mode::Ask, reasoning: None },
        Record::User { turn: 1, id: "u1".into(), blocks: vec![UserBlock::text("go")], at: 1 },
        Record::Message { message: Message::User(vec![UserPart::Text("go".into())]) },
    ];

    // Killed while the reply streamed: the text shown becomes the assistant's message.
    let mut records = base.clone();
    records.push(Record::Text { id: "m".into(), text: "Part".into() });
    let r = replay::replay(records);
    assert_eq!(r.conversation.messages().last(), Some(&Message::Assistant(vec![AssistantPart::Text("Part".into())])));
    assert!(matches!(r.repair.last(), Some(Record::End { interrupted: true, .. })));
    assert!(matches!(r.shown.last(), Some(Shown::Notice { .. })));

    // Killed while a tool ran: the call fails, and the model learns it may not have happened.
    let mut records = base.clone();
    records.push(Record::Message { message: Message::Assistant(vec![call("c1")]) });
    records.push(Record::Tool { state: tool("c1", ToolStatus::Pending, vec![]) });
    let r = replay::replay(records);
    let Some(Message::User(parts)) = r.conversation.messages().last() else { panic!("{:?}", r.conversation) };
    assert!(matches!(&parts[0], UserPart::ToolResult(ToolResult { call_id, is_error: true, .. }) if call_id == "c1"));
    let Some(Shown::Tool(state)) = r.shown.iter().find(|s| matches!(s, Shown::Tool(_))) else { panic!() };
    assert_eq!(state.status, ToolStatus::Failed);

    // Killed before any reply: the prompt leaves the context, so it can be sent again.
    let r = replay::replay(base.clone());
    assert!(r.conversation.is_empty());
    assert_eq!(r.settings.unwrap().model, "anthropic/x");

    // The repair, appended, closes the turn for good: replaying again needs none.
    let mut records = base;
    records.push(Record::Text { id: "m".into(), text: "Part".into() });
    let first = replay::replay(records.clone());
    records.extend(first.repair.clone());
    let second = replay::replay(records);
    assert!(second.repair.is_empty());
    assert_eq!(second.conversation.messages(), first.conversation.messages());
    assert_eq!(second.shown, first.shown);
}

#[test]
fn streamed_text_is_written_in_timed_batches_and_before_anything_else() {
    let home = Home::new();
    let path = home.0.join("s.jsonl");
    let t = Transcript::create(&path, &header("s")).unwrap();
    let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
    let id: std::sync::Arc<str> = "m1".into();
    t.record_live(Live::Text { thought: false, message_id: &id, text: "a" });
    t.flush_due();
    t.record_live(Live::Text { thought: false, message_id: &id, text: "b" });
    t.flush_due();
    assert_eq!(lines(), 1, "a fresh burst of text waits in memory");
    std::thread::sleep(transcript::TEXT_FLUSH_INTERVAL);
    t.flush_due();
    assert_eq!(lines(), 2, "text that has waited long enough is written");
    t.record_live(Live::Text { thought: false, message_id: &id, text: "c" });
    t.record_live(Live::Plan(&[]));
    assert_eq!(lines(), 4, "the text goes out before the plan");
    drop(t);
    let r = replay::replay(transcript::read(&path).unwrap().records);
    assert_eq!(r.shown, vec![Shown::Text { id: "m1".into(), text: "abc".into() }, Shown::Plan(vec![])]);
}

/// Eight connections open one new home at the same instant, `rounds` times; every one must get the
/// store (the first open switches the database to WAL, which SQLite refuses at once, without
/// waiting, while another connection reads it).
fn open_a_new_home_at_once(rounds: usize) {
    for round in 0..rounds {
        let home = Home::new();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let opened: Vec<_> = (0..8)
            .map(|_| {
                let (dir, barrier) = (home.0.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&dir).map(|_| ())
                })
            })
            .collect();
        for handle in opened {
            if let Err(e) = handle.join().unwrap() {
                panic!("round {round}: {e}");
            }
        }
    }
}

#[test]
fn processes_opening_a_new_home_at_once_all_get_the_store() {
    open_a_new_home_at_once(20);
}

/// The same, 500 times (`.ci/run` runs it: `cargo test -- --ignored stress_`).
#[test]
#[ignore = "stress loop, run by .ci/run"]
fn stress_processes_opening_a_new_home_at_once() {
    open_a_new_home_at_once(500);
}

/// A process that exits leaves its WAL for the next to replay frame by frame: checkpoints keep
/// it short however much is written.
#[test]
fn the_wal_left_for_the_next_process_stays_short() {
    let home = Home::new();
    let store = Store::open(&home.0).unwrap();
    let cwd = "/w".repeat(200);
    for i in 0..400 {
        store.create(&session(&format!("s{i:03}"), &cwd, i)).unwrap();
    }
    drop(store);
    let wal = std::fs::metadata(home.0.join("acp.db-wal")).unwrap().len();
    // A frame is a 4 KiB page and its 24-byte header; a checkpoint runs at the first commit
    // past the limit, so a few frames of that commit may come on top.
    let limit = (WAL_AUTOCHECKPOINT as u64 + 10) * (4096 + 24) + 32;
    assert!(wal > 0 && wal <= limit, "the WAL is {wal} bytes (limit {limit})");
    // Nothing was lost: a new process sees every session.
    let store = Store::open(&home.0).unwrap();
    assert!(store.get("s000").unwrap().is_some() && store.get("s399").unwrap().is_some());
}
