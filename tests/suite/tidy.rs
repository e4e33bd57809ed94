//! The code's shape, checked: every source file opens with a `//!` line saying what it owns, none
//! grows past 800 lines, each module of the server imports only the modules above it in the layer
//! table of docs/architecture.md, each part of the `acp-protocol` crate is used only where its
//! table there allows, and within a module no new file-level import cycle appears (the ones left
//! are listed, to be broken).

use std::path::{Path, PathBuf};

/// The server's modules, lowest first, each with what it may import: the table under "## Layers"
/// in docs/architecture.md (its one copy). A module may only import modules listed before it, so
/// the table is also the proof that there are no cycles between modules.
fn layers() -> Vec<(String, Vec<String>)> {
    doc_table("Layers")
}

/// The table under "## `title`" in docs/architecture.md: each row's first cell (one name in
/// backticks) and the names in backticks of its second.
fn doc_table(title: &str) -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let heading = format!("\n## {title}\n");
    let section = doc.split(&heading).nth(1).unwrap_or_else(|| panic!("a {title} section")).split("\n## ").next();
    let names = |cell: &str| -> Vec<String> {
        cell.split(',').filter_map(|n| n.trim().strip_prefix('`')?.strip_suffix('`').map(str::to_owned)).collect()
    };
    section
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            (names(cells[1]).pop().unwrap_or_else(|| panic!("one name per row of {title}")), names(cells[2]))
        })
        .collect()
}

/// Files allowed past [`MAX_LINES`] for now; each entry must go once its file is split.
const LONG_FOR_NOW: &[&str] = &[];

const MAX_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source roots of the `acp`, `acp-core` and `acp-gateway` crates: one module tree, cut in
/// three (`acp-core` holds the modules up to `runtime`, `acp-gateway` the `gateway` module).
const TREE: &[&str] = &["src", "crates/core/src", "crates/gateway/src"];

/// The files of the module tree, whichever crate holds each.
fn tree_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in TREE {
        rust_files(&root().join(dir), &mut files);
    }
    files
}

/// A file's name in the module tree: `crates/core/src/runtime/turn.rs` → `src/runtime/turn.rs`.
fn tree_name(path: &Path) -> String {
    let name = relative(path);
    match TREE.iter().find_map(|dir| name.strip_prefix(&format!("{dir}/"))) {
        Some(inner) => format!("src/{inner}"),
        None => name,
    }
}

fn all_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in TREE.iter().chain(&["protocol/src", "clients/repl/src", "tests"]) {
        rust_files(&root().join(dir), &mut files);
    }
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

#[test]
fn every_file_says_what_it_owns_on_its_first_line() {
    let missing: Vec<String> = all_sources()
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().starts_with("//! "))
        .map(|p| relative(&p))
        .collect();
    assert_eq!(missing, Vec::<String>::new(), "files without a `//!` header line");
}

#[test]
fn no_file_grows_past_800_lines() {
    let mut long = Vec::new();
    for path in all_sources() {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        let name = relative(&path);
        let allowed = LONG_FOR_NOW.contains(&name.as_str());
        if lines > MAX_LINES && !allowed {
            long.push(format!("{name}: {lines} lines; split it by concern"));
        }
        if allowed && lines <= MAX_LINES {
            long.push(format!("{name}: {lines} lines now; take it off LONG_FOR_NOW"));
        }
    }
    assert_eq!(long, Vec::<String>::new());
}

/// The top-level modules a file names through `crate::…` (in `use` lines, paths and doc links).
fn crate_modules(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c}`: the first segment of each item.
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                found.push(name);
            }
        } else {
            found.push(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
        }
    }
    found.retain(|n| !n.is_empty());
    found
}

#[test]
fn crate_modules_finds_paths_groups_and_doc_links() {
    let text = "use crate::tools::ToolSpec;\nuse crate::{config, store::x};\n/// [`A`](crate::rpc::A)\n";
    assert_eq!(crate_modules(text), ["tools", "config", "store", "rpc"]);
}

#[test]
fn each_module_imports_only_the_modules_below_it() {
    let layers = layers();
    assert!(layers.len() > 10, "the table in docs/architecture.md: {layers:?}");
    for (i, (module, allowed)) in layers.iter().enumerate() {
        let below: Vec<&String> = layers[..i].iter().map(|(m, _)| m).collect();
        for dependency in allowed {
            assert!(below.contains(&dependency), "`{module}` may import `{dependency}`, which is not listed above it");
        }
    }
    let mut wrong = Vec::new();
    for path in tree_files() {
        let (name, shown) = (tree_name(&path), relative(&path));
        let Some(module) = name.strip_prefix("src/").and_then(|n| n.split(['/', '.']).next()) else { continue };
        // The binaries and the code map sit above every module.
        if matches!(module, "main" | "lib" | "bin") {
            continue;
        }
        let Some((_, allowed)) = layers.iter().find(|(m, _)| m == module) else {
            wrong.push(format!("{shown}: module `{module}` is not in the layer table (docs/architecture.md)"));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for dependency in crate_modules(&text) {
            if dependency != module && !allowed.contains(&dependency) {
                wrong.push(format!("{shown}: `{module}` imports `{dependency}`"));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert_eq!(wrong, Vec::<String>::new(), "imports against the layering (docs/architecture.md)");
}

/// Each `acp-protocol` module and the source paths that may use it: the table under
/// "## Protocol use" in docs/architecture.md.
fn protocol_use() -> Vec<(String, Vec<String>)> {
    doc_table("Protocol use")
}

/// The `acp_protocol` modules `text` names (`acp_protocol::gateway::…`).
fn protocol_modules(text: &str) -> Vec<String> {
    let mut found: Vec<String> = text
        .split("acp_protocol::")
        .skip(1)
        .map(|rest| rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>())
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn each_wire_is_spoken_only_where_it_is_served_or_called() {
    let table = protocol_use();
    assert!(table.len() >= 4, "the table in docs/architecture.md: {table:?}");
    assert_eq!(protocol_modules("use acp_protocol::gateway::{A, B};\nacp_protocol::acp::X"), ["acp", "gateway"]);
    let mut wrong = Vec::new();
    for path in tree_files() {
        let (name, shown) = (tree_name(&path), relative(&path));
        let text = std::fs::read_to_string(&path).unwrap();
        for module in protocol_modules(&text) {
            let Some((_, allowed)) = table.iter().find(|(m, _)| *m == module) else {
                wrong.push(format!("{shown}: `acp_protocol::{module}` is not in the table (docs/architecture.md)"));
                continue;
            };
            let under = |prefix: &String| name == format!("{prefix}.rs") || name.starts_with(&format!("{prefix}/"));
            if !allowed.iter().any(under) {
                wrong.push(format!("{shown}: uses `acp_protocol::{module}`"));
            }
        }
    }
    wrong.sort();
    assert_eq!(wrong, Vec::<String>::new(), "protocol use against docs/architecture.md (## Protocol use)");
}

#[test]
fn the_client_crate_knows_only_the_protocol() {
    let manifest = std::fs::read_to_string(root().join("clients/repl/Cargo.toml")).unwrap();
    let table: toml::Table = manifest.parse().unwrap();
    let dependencies = table["dependencies"].as_table().unwrap();
    assert!(dependencies.contains_key("acp-protocol"));
    assert!(!dependencies.contains_key("acp"), "the terminal client must drive any agent, not link this one");
}

/// A file's module path: `src/runtime/session.rs` → `runtime::session`; a `mod.rs` is its folder.
fn module_path(name: &str) -> Vec<String> {
    let inner = name.strip_prefix("src/").unwrap_or(name).strip_suffix(".rs").unwrap_or(name);
    let mut segments: Vec<String> = inner.split('/').map(str::to_owned).collect();
    if segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    segments
}

fn ident(s: &str) -> String {
    s.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// The items of a path after `::`: one path, or each item of a `{…}` group (one level).
fn path_items(rest: &str) -> Vec<Vec<String>> {
    let one = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut s = s;
        loop {
            let name = ident(s);
            if name.is_empty() {
                break;
            }
            s = &s.trim_start()[name.len()..];
            out.push(name);
            match s.strip_prefix("::") {
                Some(next) if !next.starts_with('{') => s = next,
                _ => break,
            }
        }
        out
    };
    let Some(group) = rest.strip_prefix('{') else { return vec![one(rest)] };
    // The group's items at its own level (a nested group stays with its item).
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.into_iter().map(one).filter(|p| !p.is_empty()).collect()
}

/// The module paths a file names through `crate::`, `super::` and `self::` paths, and `use` lines
/// that start with one of its own child modules — absolute, not yet resolved to files.
fn paths_named(text: &str, here: &[String], children: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("self::", here.to_vec())] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            // `pub(in crate::x)` restricts who sees an item; it imports nothing.
            let visibility = rest[..at].ends_with("(in ");
            rest = &rest[at + prefix.len()..];
            if visibility || before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            for item in path_items(rest) {
                found.push(base.iter().cloned().chain(item).collect());
            }
        }
    }
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        let before = rest[..at].chars().last();
        let visibility = rest[..at].ends_with("(in ");
        rest = &rest[at..];
        let mut base = here.to_vec();
        while let Some(next) = rest.strip_prefix("super::") {
            base.pop();
            rest = next;
        }
        if visibility || before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        for item in path_items(rest) {
            found.push(base.iter().cloned().chain(item).collect());
        }
    }
    for line in text.lines() {
        let line = line.trim_start();
        let Some(used) =
            ["use ", "pub use ", "pub(crate) use ", "pub(super) use "].iter().find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        if children.contains(&ident(used)) {
            for item in path_items(used) {
                found.push(here.iter().cloned().chain(item).collect());
            }
        }
    }
    found
}

/// Files that import each other, directly or through others: each cycle's files, sorted.
fn file_cycles() -> Vec<Vec<String>> {
    let files: Vec<PathBuf> = tree_files().into_iter().filter(|p| !tree_name(p).starts_with("src/bin/")).collect();
    let names: Vec<String> = files.iter().map(|p| tree_name(p)).collect();
    let modules: Vec<Vec<String>> = names.iter().map(|n| module_path(n)).collect();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    for (i, name) in names.iter().enumerate() {
        let here = &modules[i];
        if matches!(name.as_str(), "src/lib.rs" | "src/main.rs") {
            continue;
        }
        let children: Vec<String> = modules
            .iter()
            .filter(|m| m.len() == here.len() + 1 && m.starts_with(here))
            .map(|m| m[here.len()].clone())
            .collect();
        let text = std::fs::read_to_string(&files[i]).unwrap();
        // Tests (an inline module at the end, where `super` is the file itself) are left out.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        for path in paths_named(text, here, &children) {
            // The longest prefix that is a file, within this top-level module.
            let target = (1..=path.len())
                .rev()
                .find_map(|n| modules.iter().position(|m| m.as_slice() == &path[..n]))
                .filter(|&j| j != i && modules[j].first() == here.first());
            if let Some(j) = target {
                edges[i].push(j);
            }
        }
    }
    // Files on a cycle: those that reach themselves; grouped by what they reach of each other.
    let reach = |from: usize| -> Vec<bool> {
        let mut seen = vec![false; names.len()];
        let mut stack = edges[from].clone();
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut seen[n], true) {
                stack.extend(&edges[n]);
            }
        }
        seen
    };
    let reaches: Vec<Vec<bool>> = (0..names.len()).map(reach).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for (i, reach) in reaches.iter().enumerate() {
        if !reach[i] {
            continue;
        }
        let mut group: Vec<String> =
            (0..names.len()).filter(|&j| reach[j] && reaches[j][i]).map(|j| names[j].clone()).collect();
        group.sort();
        if !cycles.contains(&group) {
            cycles.push(group);
        }
    }
    cycles.sort();
    cycles
}

#[test]
fn files_within_a_module_do_not_import_each_other_in_a_cycle() {
    let found = file_cycles();
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a file that imports neither): {found:#?}"
    );
}

#[test]
fn paths_resolve_against_the_file_they_are_in() {
    let here = vec!["runtime".to_owned(), "session".to_owned()];
    let text = "use super::{commands::{self, Command}, Shared};\nuse crate::tools::ToolSpec;\nlet x = super::super::config::X;\n";
    let found = paths_named(text, &here, &[]);
    assert!(found.contains(&vec!["runtime".into(), "commands".into()]), "{found:?}");
    assert!(found.contains(&vec!["runtime".into(), "Shared".into()]), "{found:?}");
    assert!(found.contains(&vec!["tools".into(), "ToolSpec".into()]), "{found:?}");
    assert!(found.contains(&vec!["config".into(), "X".into()]), "{found:?}");
    let found = paths_named("pub(in crate::runtime) x: u8,\npub(in super::super) y: u8,\n", &here, &[]);
    assert!(found.is_empty(), "a visibility is not an import: {found:?}");
    let parent = vec!["runtime".to_owned()];
    let found = paths_named("pub use session::SessionHandle;\n", &parent, &["session".into()]);
    assert_eq!(found, vec![vec!["runtime".to_owned(), "session".into(), "SessionHandle".into()]]);
}
