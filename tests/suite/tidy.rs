//! The code's shape, checked: every source file opens with a `//!` line saying what it owns, none
//! grows past 800 lines, and each module of the server imports only the modules below it (the
//! layering drawn in docs/architecture.md).

use std::path::{Path, PathBuf};

/// The server's modules, lowest first, each with what it may import: the table under "## Layers"
/// in docs/architecture.md (its one copy). A module may only import modules listed before it, so
/// the table is also the proof that there are no cycles between modules.
fn layers() -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let section = doc.split("\n## Layers\n").nth(1).expect("a Layers section").split("\n## ").next().unwrap();
    let names = |cell: &str| -> Vec<String> {
        cell.split(',').filter_map(|n| n.trim().strip_prefix('`')?.strip_suffix('`').map(str::to_owned)).collect()
    };
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let module = names(cells[1]).pop().expect("one module per row");
            (module, names(cells[2]))
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

fn all_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "protocol/src", "clients/repl/src", "tests"] {
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
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for path in files {
        let name = relative(&path);
        let Some(module) = name.strip_prefix("src/").and_then(|n| n.split(['/', '.']).next()) else { continue };
        // The binaries and the code map sit above every module.
        if matches!(module, "main" | "lib" | "bin") {
            continue;
        }
        let Some((_, allowed)) = layers.iter().find(|(m, _)| m == module) else {
            wrong.push(format!("{name}: module `{module}` is not in the layer table (docs/architecture.md)"));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for dependency in crate_modules(&text) {
            if dependency != module && !allowed.contains(&dependency) {
                wrong.push(format!("{name}: `{module}` imports `{dependency}`"));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert_eq!(wrong, Vec::<String>::new(), "imports against the layering (docs/architecture.md)");
}

#[test]
fn the_client_crate_knows_only_the_protocol() {
    let manifest = std::fs::read_to_string(root().join("clients/repl/Cargo.toml")).unwrap();
    let table: toml::Table = manifest.parse().unwrap();
    let dependencies = table["dependencies"].as_table().unwrap();
    assert!(dependencies.contains_key("acp-protocol"));
    assert!(!dependencies.contains_key("acp"), "the terminal client must drive any agent, not link this one");
}
