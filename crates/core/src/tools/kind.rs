//! Tool kinds (the categories editors use to pick an icon and a presentation), the places a call
//! touches (`Location`), and how to tell the kind, title and locations of calls to tools we did
//! not define (MCP servers, remote agents) from their names and arguments — plus which shell
//! commands only read. Pure functions, table-tested.
//!
//! Names are split into words (`snake_case`, `kebab-case`, `camelCase`, dots) before matching, so
//! `thread_list` is not a read and `readFile` is; the first rule in the order read → edit → delete
//! → move → search → execute → fetch → think that has a matching word wins.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A place a tool call touches, shown by editors to follow the agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub path: PathBuf,
    /// 1-based.
    pub line: Option<u32>,
}

impl Location {
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), line: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    SwitchMode,
    Other,
}

const RULES: &[(ToolKind, &[&str])] = &[
    (ToolKind::Read, &["read", "cat", "view", "open", "show"]),
    (ToolKind::Edit, &["write", "edit", "update", "patch", "replace", "modify", "create", "insert", "append", "save"]),
    (ToolKind::Delete, &["delete", "remove", "rm", "unlink", "del", "trash"]),
    (ToolKind::Move, &["move", "rename", "mv"]),
    (ToolKind::Search, &["search", "find", "grep", "glob", "query", "lookup", "list", "ls"]),
    (
        ToolKind::Execute,
        &["exec", "execute", "run", "bash", "shell", "sh", "command", "cmd", "terminal", "spawn", "process"],
    ),
    (ToolKind::Fetch, &["fetch", "http", "https", "url", "web", "download", "curl", "wget", "browse", "browser"]),
    (ToolKind::Think, &["think", "thinking", "reason", "plan"]),
];

/// Splits a tool name into lower-case words.
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The kind of a tool we did not define, from its name.
pub fn kind_for_name(name: &str) -> ToolKind {
    let words = words(name);
    RULES
        .iter()
        .find(|(_, keys)| {
            words.iter().any(|w| {
                keys.iter().any(|k| w == k || (k.len() >= 4 && w.starts_with(k) && is_inflection(&w[k.len()..])))
            })
        })
        .map_or(ToolKind::Other, |(kind, _)| *kind)
}

/// `reads`, `reading`, `reader`, `edited` … but not `readme`.
fn is_inflection(rest: &str) -> bool {
    matches!(rest, "s" | "es" | "ing" | "er" | "ed" | "d")
}

/// The kind of a shell command: read-only commands (and pipelines of them) are `read` or
/// `search`; anything that may change something — or that we cannot be sure about — is `execute`.
pub fn kind_for_command(command: &str) -> ToolKind {
    let command = command.trim();
    if command.is_empty() {
        return ToolKind::Execute;
    }
    // Sequencing, substitution and redirection can hide writes.
    if ["&&", "||", ";", "`", "$(", ">", "<", "&"].iter().any(|op| command.contains(op)) || command.contains('\n') {
        return ToolKind::Execute;
    }
    let mut kind = ToolKind::Read;
    for segment in command.split('|') {
        match segment_kind(segment) {
            ToolKind::Read => {}
            ToolKind::Search => kind = ToolKind::Search,
            other => return other,
        }
    }
    kind
}

fn segment_kind(segment: &str) -> ToolKind {
    let words: Vec<&str> = segment.split_whitespace().collect();
    let Some(&program) = words.first() else { return ToolKind::Execute };
    let program = program.rsplit('/').next().unwrap_or(program);
    let args = &words[1..];
    let has = |flag: &str| args.contains(&flag);
    match program {
        "cat" | "head" | "tail" | "less" | "more" | "wc" | "file" | "stat" | "pwd" | "ls" | "tree" | "du" | "echo"
        | "nl" | "realpath" | "basename" | "dirname" | "which" | "type" | "sort" | "uniq" | "cut" | "tr" | "diff"
        | "cmp" | "od" | "hexdump" | "column" | "jq" => {
            if program == "tail" && has("-f") {
                ToolKind::Execute
            } else {
                ToolKind::Read
            }
        }
        // `sed -n` prints; any other sed (or one with -i) may edit.
        "sed" if has("-n") && !args.iter().any(|a| a.starts_with("-i") || a.starts_with("--in-place")) => {
            ToolKind::Read
        }
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack" | "fd" | "fdfind" | "locate" => ToolKind::Search,
        "find"
            if !args.iter().any(|a| matches!(*a, "-exec" | "-execdir" | "-delete" | "-ok" | "-okdir" | "-fprint")) =>
        {
            ToolKind::Search
        }
        "git" => match args.first().copied() {
            Some("status" | "diff" | "log" | "show" | "blame" | "ls-files" | "rev-parse" | "describe") => {
                ToolKind::Read
            }
            Some("grep") => ToolKind::Search,
            Some("branch" | "tag" | "remote") if args.len() == 1 => ToolKind::Read,
            _ => ToolKind::Execute,
        },
        _ => ToolKind::Execute,
    }
}

/// Argument names that hold file paths in other tools' calls.
const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "target",
    "targetPath",
    "target_path",
    "source",
    "destination",
    "oldPath",
    "newPath",
    "old_path",
    "new_path",
    "directory",
    "dir",
];

/// A title for a call of a tool we did not define: `name: key: value, …`, each value cut to 100
/// characters (on a character boundary) with line breaks and control characters escaped.
pub fn title_for(name: &str, args: &Value) -> String {
    let base = if name.is_empty() { "tool" } else { name };
    let Some(obj) = args.as_object().filter(|o| !o.is_empty()) else { return base.to_owned() };
    let parts: Vec<String> = obj
        .iter()
        .map(|(k, v)| {
            let raw = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{k}: {}", clip(&escape(&raw), 100))
        })
        .collect();
    format!("{base}: {}", parts.join(", "))
}

fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '\n' => vec!['\\', 'n'],
            '\r' => vec!['\\', 'r'],
            '\t' => vec!['\\', 't'],
            '\u{2028}' | '\u{2029}' => vec![' '],
            c if c.is_control() => format!("\\u{{{:x}}}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect()
}

fn clip(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}

/// Kind, title and locations for a call of a tool we did not define.
pub fn describe_foreign(name: &str, args: &Value, cwd: &Path) -> (ToolKind, String, Vec<Location>) {
    let mut locations = Vec::new();
    if let Some(obj) = args.as_object() {
        for key in PATH_KEYS {
            if let Some(p) = obj.get(*key).and_then(Value::as_str).filter(|p| !p.is_empty()) {
                let line = obj.get("line").and_then(Value::as_u64).and_then(|l| u32::try_from(l).ok());
                locations.push(Location { path: super::paths::resolve(cwd, p), line });
            }
        }
    }
    let kind = match name {
        "bash" | "shell" | "exec" | "run_command" => {
            args.get("command").and_then(Value::as_str).map_or(ToolKind::Execute, kind_for_command)
        }
        _ => kind_for_name(name),
    };
    (kind, title_for(name, args), locations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    #[test]
    fn names() {
        let table = [
            ("read", ToolKind::Read),
            ("read_file", ToolKind::Read),
            ("readFile", ToolKind::Read),
            ("fs.read", ToolKind::Read),
            ("write", ToolKind::Edit),
            ("edit_file", ToolKind::Edit),
            ("str_replace_editor", ToolKind::Edit),
            ("delete_file", ToolKind::Delete),
            ("remove-branch", ToolKind::Delete),
            ("rename_symbol", ToolKind::Move),
            ("move", ToolKind::Move),
            ("memory_search", ToolKind::Search),
            ("web_search", ToolKind::Search),
            ("find_references", ToolKind::Search),
            ("list_files", ToolKind::Search),
            ("exec", ToolKind::Execute),
            ("run_tests", ToolKind::Execute),
            ("bash", ToolKind::Execute),
            ("web_fetch", ToolKind::Fetch),
            ("http_request", ToolKind::Fetch),
            ("sequential_thinking", ToolKind::Think),
            // The seed heuristic's mistakes, fixed:
            ("thread_list", ToolKind::Search),
            ("get_thread", ToolKind::Other),
            ("spreadsheet_export", ToolKind::Other),
            ("readme_lookup", ToolKind::Search),
            ("runbook", ToolKind::Other),
            ("apply_patch", ToolKind::Edit),
            ("process", ToolKind::Execute),
            ("browser", ToolKind::Fetch),
            ("sessions_spawn", ToolKind::Execute),
            ("", ToolKind::Other),
            ("memory_get", ToolKind::Other),
        ];
        for (name, want) in table {
            assert_eq!(kind_for_name(name), want, "{name}");
        }
    }

    #[test]
    fn shell_commands() {
        let table = [
            ("cat src/lib.rs", ToolKind::Read),
            ("sed -n '1,20p' src/lib.rs", ToolKind::Read),
            ("sed -i 's/a/b/' src/lib.rs", ToolKind::Execute),
            ("sed -n -i 's/a/b/p' f", ToolKind::Execute),
            ("head -50 README.md", ToolKind::Read),
            ("ls -la", ToolKind::Read),
            ("/bin/ls", ToolKind::Read),
            ("find . -name '*.rs'", ToolKind::Search),
            ("find . -name '*.tmp' -delete", ToolKind::Execute),
            ("rg -n TODO src", ToolKind::Search),
            ("grep -rn foo .", ToolKind::Search),
            ("git status", ToolKind::Read),
            ("git diff HEAD~1", ToolKind::Read),
            ("git log --oneline -5", ToolKind::Read),
            ("git grep fn main", ToolKind::Search),
            ("git commit -am x", ToolKind::Execute),
            ("git branch", ToolKind::Read),
            ("git branch -D old", ToolKind::Execute),
            ("cat a | grep b | wc -l", ToolKind::Search),
            ("cat a | sh", ToolKind::Execute),
            ("cat a > b", ToolKind::Execute),
            ("ls && rm -rf x", ToolKind::Execute),
            ("echo $(rm x)", ToolKind::Execute),
            ("cargo test", ToolKind::Execute),
            ("tail -f log", ToolKind::Execute),
            ("", ToolKind::Execute),
        ];
        for (cmd, want) in table {
            assert_eq!(kind_for_command(cmd), want, "{cmd}");
        }
    }

    #[test]
    fn titles_are_clipped_and_escaped() {
        assert_eq!(title_for("search", &json!({})), "search");
        assert_eq!(title_for("", &json!(null)), "tool");
        assert_eq!(title_for("fetch", &json!({"url": "http://x", "n": 3})), "fetch: url: http://x, n: 3");
        let long = "é".repeat(150);
        let t = title_for("t", &json!({ "q": long }));
        assert_eq!(t, format!("t: q: {}...", "é".repeat(100)));
        assert_eq!(title_for("t", &json!({"s": "a\nb\u{7}"})), "t: s: a\\nb\\u{7}");
    }

    #[test]
    fn foreign_calls_get_locations() {
        let (kind, _, locs) = describe_foreign("read_file", &json!({"path": "src/a.rs", "line": 7}), Path::new("/p"));
        assert_eq!(kind, ToolKind::Read);
        assert_eq!(locs, vec![Location { path: PathBuf::from("/p/src/a.rs"), line: Some(7) }]);
        let (kind, _, _) = describe_foreign("bash", &json!({"command": "git status"}), Path::new("/p"));
        assert_eq!(kind, ToolKind::Read);
    }
}
