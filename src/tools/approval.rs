//! When a tool call needs the user's approval, what they are offered, and the rules their "always"
//! answers leave behind. The session mode sets the baseline; remembered rules refine it; anything
//! outside the workspace always asks.

use super::host::{OptionKind, PermissionOption};
use super::{Access, Prepared};

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every edit, command and fetch asks.
    Ask,
    /// Reads inside the workspace are free; edits, commands and fetches ask.
    #[default]
    Code,
    /// Nothing inside the workspace asks.
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Ask, Mode::Code, Mode::Auto];

    pub fn id(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Code => "code",
            Self::Auto => "auto",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "Ask",
            Self::Code => "Code",
            Self::Auto => "Auto",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::Ask => "Ask before every edit, command and fetch",
            Self::Code => "Read freely inside the workspace; ask before edits, commands and fetches",
            Self::Auto => "Act inside the workspace without asking",
        }
    }

    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }
}

/// A remembered answer: for `exec` it covers a command prefix, for other tools the whole tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub command_prefix: Option<String>,
    pub allow: bool,
}

impl Rule {
    fn matches(&self, tool: &str, access: &Access) -> bool {
        if self.tool != tool {
            return false;
        }
        match (&self.command_prefix, &access.exec) {
            (Some(prefix), Some((command, _))) => command_matches(prefix, command),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }
}

/// The shell operators that could smuggle a second command past a prefix rule.
fn has_operators(command: &str) -> bool {
    ["&&", "||", ";", "|", "`", "$(", ">", "<", "&", "\n"].iter().any(|op| command.contains(op))
}

fn command_matches(prefix: &str, command: &str) -> bool {
    let command = command.trim();
    if command == prefix {
        return true;
    }
    !has_operators(command) && command.starts_with(prefix) && command[prefix.len()..].starts_with(' ')
}

/// The prefix an "always" answer to `command` covers: the program and its first argument unless
/// that is a flag (`cargo test`, `git status`, `sh check.sh`, `ls`), or the whole command when it
/// chains several.
pub fn command_prefix(command: &str) -> String {
    let command = command.trim();
    if has_operators(command) {
        return command.to_owned();
    }
    let mut words = command.split_whitespace();
    let Some(program) = words.next() else { return String::new() };
    match words.next() {
        Some(sub) if !sub.starts_with('-') && !sub.contains(['\'', '"', '$', '*', '?', '=']) => {
            format!("{program} {sub}")
        }
        _ => program.to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    Deny(String),
}

/// Decides one call. `inside` says whether every path it touches (and the directory a command
/// runs in) is inside the workspace.
pub fn decide(mode: Mode, tool: &str, access: &Access, inside: bool, rules: &[Rule]) -> Decision {
    // A "never" rule wins; an "always" rule is honoured only inside the workspace.
    if let Some(rule) = rules.iter().rev().find(|r| r.matches(tool, access)) {
        if !rule.allow {
            return Decision::Deny(format!("the user chose to always reject {}", rule_subject(rule)));
        }
        if inside {
            return Decision::Allow;
        }
    }
    if !inside {
        return Decision::Ask;
    }
    let touches_outside_world = access.is_mutating() || access.network.is_some();
    match mode {
        Mode::Auto => Decision::Allow,
        Mode::Ask | Mode::Code if touches_outside_world => Decision::Ask,
        Mode::Ask | Mode::Code => Decision::Allow,
    }
}

fn rule_subject(rule: &Rule) -> String {
    match &rule.command_prefix {
        Some(prefix) => format!("`{prefix}`"),
        None => format!("`{}`", rule.tool),
    }
}

/// The choices offered for a call; "always" choices only inside the workspace (outside, the
/// question is asked every time anyway).
pub fn options(tool: &str, prepared: &Prepared, inside: bool) -> Vec<PermissionOption> {
    let subject = match &prepared.access.exec {
        Some((command, _)) => format!("`{}`", command_prefix(command)),
        None => format!("`{tool}`"),
    };
    let mut options =
        vec![PermissionOption { id: "allow-once".into(), label: "Allow once".into(), kind: OptionKind::AllowOnce }];
    if inside {
        options.push(PermissionOption {
            id: "allow-always".into(),
            label: format!("Always allow {subject}"),
            kind: OptionKind::AllowAlways,
        });
    }
    options.push(PermissionOption { id: "reject-once".into(), label: "Reject".into(), kind: OptionKind::RejectOnce });
    if inside {
        options.push(PermissionOption {
            id: "reject-always".into(),
            label: format!("Always reject {subject}"),
            kind: OptionKind::RejectAlways,
        });
    }
    options
}

/// The rule an "always" answer leaves.
pub fn rule_for(tool: &str, access: &Access, allow: bool) -> Rule {
    Rule { tool: tool.to_owned(), command_prefix: access.exec.as_ref().map(|(c, _)| command_prefix(c)), allow }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn read() -> Access {
        Access { reads: vec![PathBuf::from("/w/a")], ..Access::default() }
    }

    fn write() -> Access {
        Access { writes: vec![PathBuf::from("/w/a")], ..Access::default() }
    }

    fn exec(cmd: &str) -> Access {
        Access { exec: Some((cmd.to_owned(), PathBuf::from("/w"))), ..Access::default() }
    }

    fn fetch() -> Access {
        Access { network: Some("https://example.org".into()), ..Access::default() }
    }

    #[test]
    fn modes() {
        use Decision::{Allow, Ask};
        let table = [
            (Mode::Ask, read(), Allow),
            (Mode::Ask, write(), Ask),
            (Mode::Ask, exec("ls"), Ask),
            (Mode::Ask, fetch(), Ask),
            (Mode::Code, read(), Allow),
            (Mode::Code, write(), Ask),
            (Mode::Code, exec("cargo test"), Ask),
            (Mode::Code, fetch(), Ask),
            (Mode::Auto, read(), Allow),
            (Mode::Auto, write(), Allow),
            (Mode::Auto, exec("rm -rf target"), Allow),
            (Mode::Auto, fetch(), Allow),
        ];
        for (mode, access, want) in table {
            assert_eq!(decide(mode, "t", &access, true, &[]), want, "{mode:?} {access:?}");
        }
    }

    #[test]
    fn outside_the_workspace_always_asks() {
        for mode in Mode::ALL {
            assert_eq!(decide(mode, "read", &read(), false, &[]), Decision::Ask, "{mode:?}");
        }
        let always = [Rule { tool: "read".into(), command_prefix: None, allow: true }];
        assert_eq!(decide(Mode::Auto, "read", &read(), false, &always), Decision::Ask);
    }

    #[test]
    fn remembered_rules() {
        let rules = [
            Rule { tool: "exec".into(), command_prefix: Some("cargo test".into()), allow: true },
            Rule { tool: "exec".into(), command_prefix: Some("rm".into()), allow: false },
            Rule { tool: "edit".into(), command_prefix: None, allow: true },
        ];
        assert_eq!(decide(Mode::Code, "exec", &exec("cargo test --lib"), true, &rules), Decision::Allow);
        assert_eq!(decide(Mode::Code, "exec", &exec("cargo test"), true, &rules), Decision::Allow);
        assert_eq!(decide(Mode::Code, "exec", &exec("cargo testing"), true, &rules), Decision::Ask);
        assert_eq!(decide(Mode::Code, "exec", &exec("cargo test && rm -rf /"), true, &rules), Decision::Ask);
        assert!(matches!(decide(Mode::Auto, "exec", &exec("rm -rf x"), true, &rules), Decision::Deny(_)));
        assert_eq!(decide(Mode::Ask, "edit", &write(), true, &rules), Decision::Allow);
        assert_eq!(decide(Mode::Ask, "write", &write(), true, &rules), Decision::Ask, "rules are per tool");
    }

    #[test]
    fn prefixes() {
        for (cmd, want) in [
            ("cargo test --lib foo", "cargo test"),
            ("git status", "git status"),
            ("ls -la", "ls"),
            ("python3 script.py", "python3 script.py"),
            ("sh check.sh --verbose", "sh check.sh"),
            ("echo \"$HOME\"", "echo"),
            ("npm run build", "npm run"),
            ("make", "make"),
            ("cargo build && cargo test", "cargo build && cargo test"),
        ] {
            assert_eq!(command_prefix(cmd), want, "{cmd}");
        }
    }
}
