//! The answers the user asked to remember: `[[permissions]]` entries of `$ACP_HOME/config.toml`,
//! read per workspace, and appended (under a lock, keeping the rest of the file as it was).

use std::path::Path;

use serde::Deserialize;

use super::{Decision, PermissionEntry, read_config};
use crate::settings::Rule;

/// The remembered answers for a workspace as config.toml has them now (another session, or another
/// `acp` process, may have added some since this one started).
pub fn saved_rules(home: &Path, workspace: &Path) -> Vec<Rule> {
    #[derive(Deserialize)]
    struct OnlyPermissions {
        #[serde(default)]
        permissions: Vec<PermissionEntry>,
    }
    let Ok(text) = read_config(&home.join("config.toml")) else { return Vec::new() };
    let Ok(file) = toml::from_str::<OnlyPermissions>(&text) else { return Vec::new() };
    rules_in(&file.permissions, workspace)
}

fn rules_in(entries: &[PermissionEntry], workspace: &Path) -> Vec<Rule> {
    entries
        .iter()
        .filter(|p| p.workspace == workspace)
        .map(|p| Rule { tool: p.tool.clone(), command: p.command.clone(), allow: p.decision == Decision::Allow })
        .collect()
}

/// Appends a remembered answer to `$ACP_HOME/config.toml` as a `[[permissions]]` entry, keeping
/// the rest of the file (comments included) as it was.
pub fn remember_rule(home: &Path, workspace: &Path, rule: &Rule) -> Result<(), String> {
    std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    // Another answer, in this process or another, may be saving at the same moment: one writer at
    // a time, each re-reading the file under the lock so no answer is lost.
    let lock_path = home.join(".config.toml.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // Held until `lock` is dropped (closed) at the end of this function.
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let path = home.join("config.toml");
    let text = match read_config(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{}: {e}", path.display()))?;
    let entries = doc
        .entry("permissions")
        .or_insert(toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()))
        .as_array_of_tables_mut()
        .ok_or_else(|| format!("{}: `permissions` is not a list of tables", path.display()))?;
    let mut entry = toml_edit::Table::new();
    entry.insert("workspace", toml_edit::value(workspace.display().to_string()));
    entry.insert("tool", toml_edit::value(rule.tool.clone()));
    if let Some(command) = &rule.command {
        entry.insert("command", toml_edit::value(command.clone()));
    }
    entry.insert("decision", toml_edit::value(if rule.allow { "allow" } else { "reject" }));
    entries.push(entry);
    crate::files::write_atomic(&path, doc.to_string().as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}
