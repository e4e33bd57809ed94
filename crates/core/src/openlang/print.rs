//! A parsed message read back in plain words (the abbreviations spelled out), for people
//! watching what agents say to each other.

use super::{Field, Message, Part, Statement, Value};

fn word(w: &str) -> &str {
    match w {
        "fnd" => "find",
        "mk" => "make",
        "del" => "delete",
        "mod" => "modify",
        "rd" => "read",
        "wr" => "write",
        "cpy" => "copy",
        "mv" => "move",
        "mrg" => "merge",
        "tst" => "test",
        "vfy" => "verify",
        "prs" => "parse",
        "fmt" => "format",
        "snd" => "send",
        "rcv" => "receive",
        "rec" => "recursive",
        "par" => "parallel",
        "seq" => "sequential",
        "dry" => "dry run",
        "frc" => "force",
        "tmp" => "temporary",
        "vrb" => "verbose",
        "sil" => "silent",
        "lmt" => "limit",
        "dep" => "depth",
        "pri" => "priority",
        "unq" => "unique",
        "neg" => "negated",
        "rcn" => "recent",
        "lrg" => "large",
        "sml" => "small",
        "chg" => "changed",
        "stl" => "stale",
        "nw" => "new",
        "act" => "active",
        "idl" => "idle",
        "fld" => "failed",
        "hlt" => "healthy",
        "cld" => "cold",
        "ok" => "ok",
        "fl" => "failed",
        "prt" => "partial",
        "pnd" => "pending",
        "skp" => "skipped",
        "blk" => "blocked",
        "str" => "string",
        "int" => "integer",
        "bln" => "boolean",
        "lst" => "list",
        "pth" => "path",
        "rgx" => "regex",
        "err" => "error",
        "nul" => "null",
        other => other,
    }
}

fn target(t: &str) -> &str {
    match t {
        "fs" => "the filesystem",
        "sh" => "the shell",
        "git" => "git",
        "net" => "the network",
        "db" => "the database",
        "mem" => "memory",
        "env" => "the environment",
        "usr" => "the user",
        "proc" => "processes",
        "pkg" => "packages",
        other => other,
    }
}

fn control(c: &str) -> &str {
    match c {
        "if" => "if",
        "el" => "else",
        "lp" => "loop",
        "ea" => "for each",
        "par" => "in parallel",
        "seq" => "in sequence",
        "wt" => "wait until",
        "rt" => "return",
        "br" => "break",
        "ct" => "continue",
        "frk" => "fork",
        "jn" => "join",
        "lk" => "lock",
        "ulk" => "unlock",
        "ch" => "declare channel",
        "tx" => "send on channel",
        "rx" => "receive on channel",
        "tmo" => "time out after",
        other => other,
    }
}

fn sigil(s: char) -> &'static str {
    match s {
        '?' => "Ask",
        '!' => "Do",
        '>' => "Result",
        '#' => "State",
        '~' => "Note",
        _ => "Control",
    }
}

fn head(s: &Statement) -> String {
    let (first, rest) = s.head.split_once(':').map_or((s.head.as_str(), None), |(a, b)| (a, Some(b)));
    match (s.sigil, rest) {
        ('^', Some(arg)) => format!("{} {arg}", control(first)),
        ('^', None) => control(first).to_owned(),
        ('~', _) => match s.head.as_str() {
            "err" => "error".into(),
            "ack" => "acknowledged".into(),
            "unk" => "unknown word".into(),
            "def" => "definition".into(),
            other => other.to_owned(),
        },
        // `git:mrg`: a scoped action.
        (_, Some(action)) => format!("{} ({})", word(action), target(first)),
        (_, None) => word(first).to_owned(),
    }
}

fn value(v: &Value, indent: usize) -> String {
    match v {
        Value::Word(w) => word(w).to_owned(),
        Value::Str(s) => format!("\"{s}\""),
        Value::Num(n) => n.clone(),
        Value::Var(path) => format!("${}", path.join(".")),
        Value::Target(t) => format!("in {}", target(t)),
        Value::Type(t) => format!("of type {}", word(t)),
        Value::Map(entries) => {
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, v)| match k {
                    Some(k) => format!("{} = {}", word(k), value(v, indent)),
                    None => value(v, indent),
                })
                .collect();
            format!("({})", inner.join(", "))
        }
        Value::List(items) => {
            format!("[{}]", items.iter().map(|i| value(i, indent)).collect::<Vec<_>>().join(", "))
        }
        Value::Group(alternatives) => format!(
            "({})",
            alternatives
                .iter()
                .map(|a| a.iter().map(|v| value(v, indent)).collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        Value::Block(body) => {
            let mut out = String::from(":");
            for s in body {
                out.push('\n');
                out.push_str(&statement(s, indent + 1));
            }
            out
        }
        Value::Range(a, b) => format!("{} to {}", value(a, indent), value(b, indent)),
        Value::Not(v) => format!("not {}", value(v, indent)),
        Value::Compare(a, op, b) => format!("{} {op} {}", value(a, indent), value(b, indent)),
        Value::Statement(s) => statement(s, indent).trim_start().to_owned(),
    }
}

fn statement(s: &Statement, indent: usize) -> String {
    let mut out = format!("{}{}: {}", "  ".repeat(indent), sigil(s.sigil), head(s));
    let (bodies, args): (Vec<&Value>, Vec<&Value>) = s.args.iter().partition(|a| matches!(a, Value::Block(_)));
    for arg in args {
        out.push(' ');
        out.push_str(&value(arg, indent));
    }
    if let Some(bind) = &s.bind {
        out.push_str(&format!(" → ${bind}"));
    }
    for body in bodies {
        out.push_str(&value(body, indent));
    }
    if let Some(then) = &s.then {
        out.push_str(&format!("; then {}", statement(then, indent).trim_start()));
    }
    out
}

/// The message in plain words, a line per statement, text or record.
pub fn explain(message: &Message) -> String {
    let mut lines = Vec::new();
    for part in &message.parts {
        lines.push(match part {
            Part::Statement(s) => statement(s, 0),
            Part::Plain(text) => format!("Said plainly: {text}"),
            Part::Record(fields) => {
                let mut shown = Vec::new();
                for (i, f) in fields.iter().enumerate() {
                    shown.push(match f {
                        Field::Text(t) if i == 0 => match t.as_str() {
                            "Q" => "Ask".to_owned(),
                            "C" => "Do".to_owned(),
                            "R" => "Result".to_owned(),
                            "S" => "State".to_owned(),
                            _ => "Error".to_owned(),
                        },
                        Field::Text(t) => word(t).to_owned(),
                        Field::List(items) => format!(
                            "[{}]",
                            items
                                .iter()
                                .map(|(k, v)| v.as_ref().map_or(k.clone(), |v| format!("{k}: {v}")))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
                format!("{} (L3)", shown.join(" · "))
            }
        });
    }
    lines.join("\n")
}
