//! The memory index on real files and a real SQLite file: finding, following edits and
//! deletions, CJK text, extra paths, a damaged index, and what `memory_get` may read.

use std::path::Path;

use super::*;

fn memory(home: &Path) -> Memory {
    let home = home.display().to_string();
    let config = Config::load_with(&|name| (name == "ACP_HOME").then(|| home.clone()));
    Memory::of(&config)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn paths(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.path.as_str()).collect()
}

#[test]
fn finds_facts_with_their_lines_and_follows_edits_and_deletions() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    let ws = m.workspace().to_path_buf();
    write(
        &ws.join("MEMORY.md"),
        "# Preferences\n\nThe user prefers tabs over spaces.\n\n# People\n\nAlice runs the Berlin office.\n",
    );
    write(&ws.join("memory/2026-11-25.md"), "# Notes\n\nDeployed build a828e60 to staging.\n");
    write(&ws.join("memory/2026-11-26.md"), "# Notes\n\nThe gateway host is the Mac Studio.\n");

    let (hits, synced) = m.search("who runs the Berlin office?", 5, 0.0).unwrap();
    assert_eq!((synced.added, synced.changed, synced.removed), (3, 0, 0));
    assert_eq!(hits[0].path, "MEMORY.md");
    assert_eq!((hits[0].start_line, hits[0].end_line, hits[0].best_line), (5, 7, 7), "{hits:?}");
    assert!(hits[0].snippet.contains("Alice runs the Berlin office."));
    assert!(hits[0].score > 0.0 && hits[0].score < 1.0);

    let (hits, synced) = m.search("a828e60", 5, 0.0).unwrap();
    assert_eq!(paths(&hits), ["memory/2026-11-25.md"]);
    assert_eq!((synced.added, synced.unchanged), (0, 3), "nothing read again");

    // An edit is found on the next search, and what it replaced is not.
    write(&ws.join("memory/2026-11-25.md"), "# Notes\n\nRolled staging back to b3b9895.\n");
    let (hits, synced) = m.search("a828e60", 5, 0.0).unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    assert_eq!(synced.changed, 1);
    assert_eq!(paths(&m.search("b3b9895", 5, 0.0).unwrap().0), ["memory/2026-11-25.md"]);

    // A deleted file leaves the index.
    std::fs::remove_file(ws.join("memory/2026-11-26.md")).unwrap();
    let (hits, synced) = m.search("Mac Studio", 5, 0.0).unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    assert_eq!(synced.removed, 1);
    assert_eq!(m.status().unwrap().counts.files, 2);
}

#[test]
fn the_index_survives_the_process_and_is_rebuilt_when_damaged() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    write(&m.workspace().join("MEMORY.md"), "The cat is called Miso.\n");
    assert_eq!(paths(&m.search("Miso", 5, 0.0).unwrap().0), ["MEMORY.md"]);
    // As a new process would find it: nothing to read again.
    forget_shared(m.index_path());
    let (hits, synced) = m.search("cat", 5, 0.0).unwrap();
    assert_eq!((paths(&hits), synced.unchanged, synced.added), (vec!["MEMORY.md"], 1, 0));

    // Garbage where the index was: rebuilt, and the search still answers.
    forget_shared(m.index_path());
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", m.index_path().display()));
    }
    std::fs::write(m.index_path(), vec![0x5a; 64 * 1024]).unwrap();
    let (hits, synced) = m.search("Miso", 5, 0.0).unwrap();
    assert_eq!((paths(&hits), synced.added), (vec!["MEMORY.md"], 1));
    assert!(m.index_path().with_extension("sqlite.broken").exists(), "the damaged file is kept aside");
}

#[test]
fn chinese_japanese_and_korean_text_is_found_by_a_query_in_it() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    write(
        &m.workspace().join("memory/2026-11-27.md"),
        "# 今天\n\n用户喜欢用 Rust 写服务器，不喜欢 Java。\n\n# 日本語\n\n東京のオフィスは金曜日に閉まります。\n\n한국어 메모: 회의는 화요일입니다.\n",
    );
    write(&m.workspace().join("MEMORY.md"), "# English\n\nNothing in Chinese here, only servers in Go.\n");
    let hits = m.search("服务器", 5, 0.0).unwrap().0;
    assert_eq!(paths(&hits), ["memory/2026-11-27.md"], "{hits:?}");
    assert!(hits[0].snippet.contains("写服务器"));
    assert_eq!(hits[0].best_line, 3);
    assert_eq!(paths(&m.search("金曜日", 5, 0.0).unwrap().0), ["memory/2026-11-27.md"]);
    assert_eq!(paths(&m.search("회의", 5, 0.0).unwrap().0), ["memory/2026-11-27.md"]);
    // A query in no text finds nothing; one of symbols only is no query.
    assert!(m.search("数据库", 5, 0.0).unwrap().0.is_empty());
    assert!(m.search("?!… ()", 5, 0.0).unwrap().0.is_empty());
}

#[test]
fn extra_paths_are_searched_and_get_reads_only_memory_files() {
    let home = tempfile::tempdir().unwrap();
    let notes = tempfile::tempdir().unwrap();
    write(&notes.path().join("team/oncall.md"), "Bob is on call this week.\n");
    write(&notes.path().join("team/secret.txt"), "not markdown\n");
    std::fs::write(
        home.path().join("config.toml"),
        format!("[memory]\nextra_paths = [{:?}]\n", notes.path().display().to_string()),
    )
    .unwrap();
    let m = memory(home.path());
    write(&m.workspace().join("MEMORY.md"), "Short.\n");
    write(&m.workspace().join("AGENTS.md"), "Not memory.\n");
    let hits = m.search("who is on call", 5, 0.0).unwrap().0;
    let oncall = notes.path().join("team/oncall.md");
    assert_eq!(paths(&hits), [oncall.display().to_string().as_str()]);

    assert_eq!(m.resolve("MEMORY.md"), Some(m.workspace().join("MEMORY.md")));
    assert_eq!(m.resolve(&oncall.display().to_string()), Some(oncall));
    for refused in ["AGENTS.md", "../config.toml", "memory/../AGENTS.md", "/etc/passwd", "nothing.md"] {
        assert_eq!(m.resolve(refused), None, "{refused}");
    }
    let secret = notes.path().join("team/secret.txt");
    assert_eq!(m.resolve(&secret.display().to_string()), None);
}

#[test]
fn the_best_results_come_first_and_a_minimum_score_drops_the_rest() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    write(&m.workspace().join("memory/a.md"), "deploy deploy deploy the staging cluster\n");
    write(&m.workspace().join("memory/b.md"), "we talked about lunch and a deploy\n");
    write(&m.workspace().join("memory/c.md"), "lunch only\n");
    let hits = m.search("deploy staging", 5, 0.0).unwrap().0;
    assert_eq!(paths(&hits), ["memory/a.md", "memory/b.md"]);
    assert!(hits[0].score > hits[1].score);
    let strict = m.search("deploy staging", 5, (hits[0].score + hits[1].score) / 2.0).unwrap().0;
    assert_eq!(paths(&strict), ["memory/a.md"]);
    assert_eq!(m.search("deploy", 1, 0.0).unwrap().0.len(), 1);
}

#[test]
fn group_channel_and_subagent_sessions_do_not_read_the_private_memory() {
    for private in ["0f8a2c", "my-session", "agent:main:main", "agent:main:telegram:dm:42", "agent:work:main"] {
        assert!(private_session(private), "{private}");
    }
    for shared in [
        "agent:main:telegram:group:-100200",
        "agent:main:telegram:group:-100200:topic:42",
        "agent:main:discord:channel:77",
        "agent:main:telegram:work:group:-1",
        "agent:main:subagent:9f1c",
    ] {
        assert!(!private_session(shared), "{shared}");
    }
}

#[test]
fn a_watcher_sync_of_some_files_agrees_with_a_full_one() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    let ws = m.workspace().to_path_buf();
    write(&ws.join("MEMORY.md"), "# Team\n\nGrace owns billing.\n");
    write(&ws.join("memory/a.md"), "Alpha notes.\n");
    m.sync().unwrap();

    // Changed, added, deleted, grown too large, and paths that are not memory files.
    write(&ws.join("memory/a.md"), "Alpha notes, revised.\n");
    write(&ws.join("memory/b.md"), "Beta notes.\n");
    std::fs::remove_file(ws.join("MEMORY.md")).unwrap();
    write(&ws.join("AGENTS.md"), "Obey.\n");
    write(&ws.join("memory/.hidden.md"), "Hidden.\n");
    let changed = ["MEMORY.md", "memory/a.md", "memory/b.md", "AGENTS.md", "memory/.hidden.md"];
    let synced = m.sync_paths(changed.iter().map(|p| ws.join(p)).collect()).unwrap();
    assert_eq!((synced.added, synced.changed, synced.removed), (1, 1, 1));
    let indexed = |m: &Memory| m.status().unwrap().files.into_iter().map(|(p, _)| p).collect::<Vec<_>>();
    assert_eq!(
        m.with_open(|i| i.files()).unwrap().into_iter().map(|(p, _)| p).collect::<Vec<_>>(),
        ["memory/a.md", "memory/b.md"]
    );
    let big = std::fs::File::create(ws.join("memory/b.md")).unwrap();
    big.set_len(index::MAX_FILE_BYTES + 1).unwrap();
    let synced = m.sync_paths(vec![ws.join("memory/b.md")]).unwrap();
    assert_eq!((synced.removed, synced.skipped.len()), (1, 1));
    // A full sync finds the same.
    assert_eq!(indexed(&m), ["memory/a.md"]);
}

#[test]
fn an_index_built_anew_is_filled_before_it_is_trusted() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    write(&m.workspace().join("MEMORY.md"), "# Garden\n\nThe irrigation timer runs at six.\n");
    // A damaged file where the index should be: opening it sets it aside and begins anew, and a
    // caller that does not walk the files still reads them.
    write(m.index_path(), "not a database at all");
    let hits = m.with_open(|index| index.search("irrigation timer", 5, 0.0)).unwrap();
    assert_eq!(paths(&hits), ["MEMORY.md"]);
}

#[test]
fn a_large_index_still_finds_rare_words_among_common_ones_and_all_common_queries() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    let mut text = String::new();
    for n in 0..6_000 {
        text.push_str(&format!("## Entry {n}\n\nthe project status update number{n}\n\n"));
    }
    text.push_str("## Special\n\nthe project moved to the harbour office\n\n");
    text.push_str("## Plain\n\nstatus project update\n");
    write(&m.workspace().join("memory/log.md"), &text);
    m.sync().unwrap();
    // "the", "project", "status" are in nearly every piece: the rare word decides.
    let (hits, _) = m.search("the project harbour", 3, 0.0).unwrap();
    assert!(hits[0].snippet.contains("harbour office"), "{hits:?}");
    assert!(hits[0].score > 0.8, "every word held: {hits:?}");
    // Common words only: the pieces holding all of them.
    let (hits, _) = m.search("project status update", 3, 0.0).unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h.score >= 0.8), "{hits:?}");
    let (hits, _) = m.search("number42", 3, 0.0).unwrap();
    assert!(hits[0].snippet.contains("number42\n") || hits[0].snippet.ends_with("number42"), "{hits:?}");
}

#[test]
fn an_index_another_process_holds_is_searched_in_memory_meanwhile() {
    let home = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    write(&m.workspace().join("MEMORY.md"), "# Keys\n\nThe spare key is with the neighbour.\n");
    m.sync().unwrap();
    write(&m.workspace().join("memory/new.md"), "The boiler was serviced in May.\n");
    // Another process writes the index and does not let go.
    let other = rusqlite::Connection::open(m.index_path()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; DELETE FROM meta WHERE key = 'none';").unwrap();
    let (hits, _) = m.search("boiler serviced", 3, 0.0).unwrap();
    assert_eq!(paths(&hits), ["memory/new.md"]);
    other.execute_batch("COMMIT").unwrap();
    drop(other);
    let (hits, synced) = m.search("boiler serviced", 3, 0.0).unwrap();
    assert_eq!((paths(&hits), synced.added), (vec!["memory/new.md"], 1), "the file again, brought up to date");
}

#[cfg(unix)]
#[test]
fn a_link_out_of_the_memory_is_left_out_and_one_inside_it_is_read() {
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let m = memory(home.path());
    let ws = m.workspace().to_path_buf();
    write(&outside.path().join("secret.md"), "The root password is hunter2.\n");
    write(&ws.join("notes/team.md"), "The team meets on Mondays.\n");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), ws.join("memory/secret.md")).unwrap();
    std::os::unix::fs::symlink(ws.join("notes/team.md"), ws.join("memory/team.md")).unwrap();
    let (hits, _) = m.search("root password hunter2", 5, 0.0).unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    assert_eq!(m.resolve("memory/secret.md"), None);
    let (hits, _) = m.search("team meets", 5, 0.0).unwrap();
    assert_eq!(paths(&hits), ["memory/team.md"]);
}
