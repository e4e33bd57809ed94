//! The parser on every example of the OpenLang specification, the printer, and each error with
//! its position.

use super::*;

/// Every example the specification gives, as it gives them (one message each).
const SPEC_EXAMPLES: &[&str] = &[
    // The sigil table.
    "?fnd @fs {p:\"src/*.ts\"}",
    "!del @fs {p:\"tmp/\"}",
    ">ok {n:3 paths:[...]}",
    "#ctx {lang:ts env:node}",
    "~L2\n~ack\n~err {code:E_PARSE lvl:warn msg:\"unknown token\"}",
    "^if {cond} {then} ^el {else}",
    "!git:mrg\n!db:mrg",
    // The control-flow reference, comments included.
    "^if {cond} {then} ^el {else} -- conditional\n\
     ^lp {n:5} {body} -- loop\n\
     ^ea {src} ->$item {body} -- each/iterate\n\
     ^par [!t1, !t2, !t3] -- parallel\n\
     ^seq [!t1, !t2, !t3] -- sequential\n\
     ^wt {cond} / ^rt {val} -- wait / return\n\
     ^br / ^ct -- break / continue\n\
     ^frk:name {body} -- fork named task\n\
     ^jn [names] ->$results -- join/await\n\
     ^lk:name / ^ulk:name -- mutex lock/unlock\n\
     ^ch:name ::type buf:N -- declare channel\n\
     ^tx:name {v:$val} / ^rx:name ->$val -- send/receive channel\n\
     ^tmo:N -- timeout (seconds)",
    "^ea {$files} ->$f <<\n?rd @fs {p:$f} ->$content\n^if {$content.sz>1000} {!mod @fs {p:$f trunc:true}}\n>>",
    "?fnd @fs {p:\"*.ts\" rgx:\"parse\"} ->$lst | ^ea ->$f !tst @sh {cmd:\"vitest $f\"} ->$rpt",
    "~err {code:E_PARSE lvl:warn msg:\"unknown token\"}\n~err {code:E_FS_NOT_FOUND lvl:fatal msg:\"missing config\"}",
    "~unk {tok:\"xyz\" req:def} -- request definition\n~def {tok:\"xyz\" means:\"...\"} -- define inline",
    "~L3\nQ.fs.fnd.`app.config.ts`.rec\nR.ok.3.[`src/a.ts`:5,`src/b.ts`:12]",
    "~openlang\n?fnd @fs chg rcn {p:\"src/**/*.ts\" p:!~\"*.test.ts\" rgx:\"TODO\"} ->$lst\n\
     ^ea ->$f {!rd @fs {p:$f} ->$content; !prs @mem {src:$content k:\"todos\"}}\n\
     >ok {summary:true fmt:map}",
    "~openlang\n>ok {n:12 todos:[\n{f:\"src/api.ts\" ln:42 msg:\"refactor auth flow\"},\n\
     {f:\"src/db.ts\" ln:18 msg:\"add connection pooling\"}\n] truncated:10}\n\
     ~L1: most TODOs are in api.ts and db.ts, concentrated around auth and connection handling",
    "-- Agent A -> Agent B\n~openlang\n?fnd @db {tbl:trades rcn lmt:100} ->$trades\n\
     !prs @mem {src:$trades k:pnl} ->$analysis\n>ok {$analysis}",
    "-- Agent B -> Agent A\n~openlang\n>ok {pnl:+2.3% win_rate:0.68 sharpe:1.42 trades:100\n\
     top:{sym:\"AAPL\" pnl:+890} worst:{sym:\"TSLA\" pnl:-340}}",
];

#[test]
fn every_example_of_the_specification_parses() {
    for example in SPEC_EXAMPLES {
        if let Err(e) = parse(example) {
            panic!("{example}\n→ {e} ({:?})", e.kind);
        }
    }
}

#[test]
fn the_bundled_skill_s_examples_parse() {
    let skill = include_str!("../skills/bundled/openlang/SKILL.md");
    let blocks: Vec<&str> = skill.split("```").skip(1).step_by(2).collect();
    assert!(blocks.len() >= 5);
    for block in blocks {
        if let Err(e) = parse(block.trim()) {
            panic!("{block}\n→ {e}");
        }
    }
}

#[test]
fn statements_have_their_parts() {
    let m = parse("~openlang\n?fnd @fs chg {p:\"src/*.rs\" n:-3} ->$hits | !run @sh {cmd:\"cargo test\"}").unwrap();
    let [Part::Statement(s)] = m.parts.as_slice() else { panic!("{m:#?}") };
    assert_eq!((s.sigil, s.head.as_str(), s.line, s.column), ('?', "fnd", 2, 1));
    assert_eq!(
        s.args,
        [
            Value::Target("fs".into()),
            Value::Word("chg".into()),
            Value::Map(vec![
                (Some("p".into()), Value::Str("src/*.rs".into())),
                (Some("n".into()), Value::Num("-3".into()))
            ]),
        ]
    );
    assert_eq!(s.bind.as_deref(), Some("hits"));
    let then = s.then.as_ref().unwrap();
    assert_eq!((then.sigil, then.head.as_str()), ('!', "run"));

    let m = parse("^if {$r.n>0} {!fix @fs {p:$r.paths}} ^el {>ok}").unwrap();
    let [Part::Statement(s)] = m.parts.as_slice() else { panic!() };
    assert_eq!(
        s.args[0],
        Value::Map(vec![(
            None,
            Value::Compare(
                Box::new(Value::Var(vec!["r".into(), "n".into()])),
                ">".into(),
                Box::new(Value::Num("0".into()))
            )
        )])
    );
    assert!(matches!(&s.args[1], Value::Block(b) if b[0].head == "fix"));
    assert!(matches!(&s.args[2], Value::Statement(e) if e.head == "el"));

    let m = parse("~L3:R.ok.2.[`src/a.rs`:5,`src/b.rs`:12]\n#rng {lines:1..10 mode:(fast | safe)}").unwrap();
    assert_eq!(
        m.parts[0],
        Part::Record(vec![
            Field::Text("R".into()),
            Field::Text("ok".into()),
            Field::Text("2".into()),
            Field::List(vec![("src/a.rs".into(), Some("5".into())), ("src/b.rs".into(), Some("12".into()))]),
        ])
    );
    let Part::Statement(s) = &m.parts[1] else { panic!() };
    assert_eq!(
        s.args[0],
        Value::Map(vec![
            (Some("lines".into()), Value::Range(Box::new(Value::Num("1".into())), Box::new(Value::Num("10".into())))),
            (
                Some("mode".into()),
                Value::Group(vec![vec![Value::Word("fast".into())], vec![Value::Word("safe".into())]])
            ),
        ])
    );
}

#[test]
fn words_numbers_and_groups_as_agents_write_them() {
    let m = parse(
        "#rel {v:1.47.1 lock:Cargo.lock hash:46aaf70 n:30s pct:+2.3% flag:\"--release\"}\n\
                   ^if {$r.ok} {(!git:mrg {take:theirs} | !git:abort)} -- resolve\n\
                   #env {os:(kernel:\"5.13\" | landlock:off)}",
    )
    .unwrap();
    let [Part::Statement(rel), Part::Statement(branch), Part::Statement(env)] = m.parts.as_slice() else {
        panic!("{m:#?}")
    };
    assert_eq!(
        rel.args[0],
        Value::Map(vec![
            (Some("v".into()), Value::Num("1.47.1".into())),
            (Some("lock".into()), Value::Word("Cargo.lock".into())),
            (Some("hash".into()), Value::Word("46aaf70".into())),
            (Some("n".into()), Value::Num("30s".into())),
            (Some("pct".into()), Value::Num("+2.3%".into())),
            (Some("flag".into()), Value::Str("--release".into())),
        ])
    );
    let Value::Map(entries) = &branch.args[1] else { panic!("{branch:#?}") };
    let Value::Group(alternatives) = &entries[0].1 else { panic!("{entries:#?}") };
    assert_eq!(alternatives.len(), 2, "statements as alternatives");
    assert!(matches!(&env.args[0], Value::Map(e) if matches!(&e[0].1, Value::Group(g) if g.len() == 2)));
    // `--flag` unquoted is an error, never a silent comment.
    assert_eq!(parse("!run @sh --release").unwrap_err().kind, ErrorKind::Unexpected);
}

#[test]
fn the_printer_spells_the_message_out() {
    let m = parse(
        "~openlang\n?fnd @fs chg rcn {p:\"src/**/*.rs\"} ->$hits\n^ea {$hits} ->$h <<\n!mod @fs {p:$h.path}\n>>\n\
         !git:mrg {br:main}\n~L1: two left in generated code\n~L3:R.ok.3",
    )
    .unwrap();
    assert_eq!(
        explain(&m),
        "Ask: find in the filesystem changed recent (p = \"src/**/*.rs\") → $hits\n\
         Control: for each ($hits) → $h:\n  Do: modify in the filesystem (p = $h.path)\n\
         Do: merge (git) (br = main)\n\
         Said plainly: two left in generated code\n\
         Result · ok · 3 (L3)"
    );
}

/// (message, kind, line, column).
const MALFORMED: &[(&str, ErrorKind, usize, usize)] = &[
    ("~openlang\n", ErrorKind::Empty, 1, 10),
    ("", ErrorKind::Empty, 1, 1),
    ("~openlang\nfind the files", ErrorKind::NoSigil, 2, 1),
    ("?fnd @fs {p:\"src", ErrorKind::Unclosed, 1, 13),
    ("?fnd @fs {p:\"src\"\n!del @fs", ErrorKind::Unclosed, 1, 10),
    ("!run @sh [a, b", ErrorKind::Unclosed, 1, 10),
    ("^ea {$f} ->$x <<\n!rd @fs {p:$x}", ErrorKind::Unclosed, 1, 15),
    ("#x (a | b", ErrorKind::Unclosed, 1, 4),
    ("?fnd @fs {p:[1, 2}", ErrorKind::Mismatched, 1, 18),
    ("?fnd @fs }", ErrorKind::Mismatched, 1, 10),
    ("?fnd @fs {p:%}", ErrorKind::Unexpected, 1, 13),
    ("?fnd @fs {p:$}", ErrorKind::Dangling, 1, 13),
    ("?fnd @ {p:1}", ErrorKind::Dangling, 1, 6),
    ("!mk ::", ErrorKind::Dangling, 1, 5),
    ("?fnd @fs ->", ErrorKind::Dangling, 1, 10),
    ("? @fs", ErrorKind::Dangling, 1, 2),
    ("^when {x} {y}", ErrorKind::UnknownControl, 1, 1),
    ("~openlang\n>fl\n~err {lvl:fatal msg:\"no code\"}", ErrorKind::ErrWithoutCode, 3, 1),
    ("~L3:X.fs.fnd", ErrorKind::BadRecord, 1, 5),
    ("~L3:Q..fnd", ErrorKind::BadRecord, 1, 7),
    ("~L3:Q", ErrorKind::BadRecord, 1, 5),
    ("~L3:Q.`app.ts", ErrorKind::Unclosed, 1, 7),
    ("?fnd @fs ->$a ->$b", ErrorKind::Unexpected, 1, 15),
];

#[test]
fn each_malformed_message_is_refused_with_its_kind_and_position() {
    for (text, kind, line, column) in MALFORMED {
        match parse(text) {
            Ok(m) => panic!("{text:?} parsed: {m:#?}"),
            Err(e) => assert_eq!((e.kind, e.line, e.column), (*kind, *line, *column), "{text:?}: {e}"),
        }
    }
}

#[test]
fn an_error_goes_back_as_openlang() {
    let e = parse("~openlang\n?fnd @fs {p:\"src").unwrap_err();
    let reply = e.to_openlang();
    assert_eq!(
        reply,
        "~openlang\n~err {code:E_PARSE lvl:warn kind:unclosed ln:2 col:13 msg:\"this string is never closed with `\\\"`\"}"
    );
    assert!(parse(&reply).is_ok(), "the reply is itself valid OpenLang");
    assert!(is_openlang("  ~openlang\n>ok") && !is_openlang("hello ~openlang"));
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // On a thread with half the stack a worker thread has.
    let deep = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut out = Vec::new();
            for input in [
                format!("?a {}", "[".repeat(100_000)),
                format!("?a {}", "{".repeat(100_000)),
                format!("?a {}", "!~".repeat(100_000)),
                format!("~openlang\n?a {}", "?a ".repeat(100_000)),
            ] {
                out.push(parse(&input).map(drop).map_err(|e| e.kind));
            }
            out
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(deep.iter().all(|r| *r == Err(ErrorKind::TooDeep)), "{deep:?}");
    assert!(parse(&format!("?a {}{}", "[".repeat(30), "]".repeat(30))).is_ok(), "30 levels are fine");
}

#[test]
fn nothing_panics_on_any_input() {
    // Every prefix of every example and malformed message, and some noise.
    let mut inputs: Vec<String> = Vec::new();
    for text in SPEC_EXAMPLES.iter().chain(MALFORMED.iter().map(|(t, ..)| t)) {
        let chars: Vec<char> = text.chars().collect();
        for n in 0..=chars.len() {
            inputs.push(chars[..n].iter().collect());
        }
    }
    inputs.extend(
        [
            "\u{0}",
            "~",
            "^",
            "->",
            "<<",
            ">>",
            "~L",
            "~L4:",
            "{{{{",
            "]]]",
            "\"\\",
            "$.",
            "@@",
            "::",
            "1..",
            "İ?",
            "?a {b:ü}",
        ]
        .map(String::from),
    );
    for input in inputs {
        let _ = parse(&input);
    }
}

#[test]
fn the_corpus_parses() {
    let corpus = include_str!("../../../../fixtures/openlang/corpus.jsonl");
    let mut n = 0;
    for line in corpus.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        for field in ["l2", "l3"] {
            if let Some(text) = entry[field].as_str()
                && let Err(e) = parse(text)
            {
                panic!("{} {field}: {e}\n{text}", entry["id"]);
            }
        }
        assert!(entry["english"].as_str().is_some_and(|e| !e.is_empty()), "{}", entry["id"]);
        n += 1;
    }
    assert!(n >= 50, "{n} exchanges");
}
