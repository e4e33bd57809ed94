//! When a tool call needs the user's approval, what they are offered, and the rules their "always"
//! answers leave behind. The session mode sets the baseline; remembered rules refine it; anything
//! outside the workspace, and any command that would run outside the sandbox, always asks.

use super::host::{OptionKind, PermissionOption};
use super::{Access, Confinement, ExecAccess, Prepared};
use crate::settings::{Mode, Rule};

/// Whether `rule` covers a call of `tool` touching `access`.
fn rule_matches(rule: &Rule, tool: &str, access: &Access) -> bool {
    let whole_server = access.mcp.as_ref().is_some_and(|m| rule.tool == m.every_tool);
    if rule.tool != tool && !whole_server {
        return false;
    }
    match (&rule.command, &access.exec) {
        (Some(rule), Some(exec)) => command_matches(rule, exec),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// What makes a command more than one program with its arguments: chaining, pipes, redirection,
/// substitution, expansion, globs, comments, background jobs. Such a command is never covered by
/// a rule (the rule would not say what it runs).
fn is_compound(command: &str) -> bool {
    command.contains(['&', '|', ';', '`', '$', '>', '<', '\n', '\r', '(', ')', '{', '}', '*', '?', '[', '#', '~', '\\'])
}

/// The program and its arguments, when the command is nothing more.
fn argv(command: &str) -> Option<Vec<String>> {
    if is_compound(command) {
        return None;
    }
    let words = shlex::split(command)?;
    // `NAME=value cmd` sets the environment for the program.
    if words.is_empty() || words[0].contains('=') {
        return None;
    }
    Some(words)
}

/// A rule covers a command when both are the same program with the same arguments, and the call
/// sets no variables of its own (`BASH_ENV`, `PATH` and the like change what runs).
fn command_matches(rule: &str, exec: &ExecAccess) -> bool {
    if !exec.env.is_empty() {
        return false;
    }
    match (argv(rule), argv(&exec.command)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Whether an "always" answer can cover this command (one program with its arguments, nothing
/// set around it).
pub fn rememberable(exec: &ExecAccess) -> bool {
    exec.env.is_empty() && argv(&exec.command).is_some()
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
    let confinement = access.exec.as_ref().map(|e| e.confinement);
    // A "never" rule wins; an "always" rule is honoured only inside the workspace, and never lets
    // a command out of the sandbox, nor a change to what the agent does on its own unasked.
    if let Some(rule) = rules.iter().rev().find(|r| rule_matches(r, tool, access)) {
        if !rule.allow {
            return Decision::Deny(format!("the user chose to always reject {}", rule_subject(rule)));
        }
        if inside && confinement != Some(Confinement::Escape) && access.control.is_none() {
            return Decision::Allow;
        }
    }
    if !inside || matches!(confinement, Some(Confinement::Escape | Confinement::NoSandbox)) {
        return Decision::Ask;
    }
    // What the agent will do on its own later is the user's to approve, whatever the mode.
    if access.control.is_some() {
        return Decision::Ask;
    }
    // An MCP tool can do whatever its server does: it asks unless a rule allows it, or its
    // server says it only reads and the mode lets reads run.
    if let Some(mcp) = &access.mcp {
        return if mcp.read_only && mode != Mode::Ask { Decision::Allow } else { Decision::Ask };
    }
    match mode {
        Mode::Ask if access.is_mutating() || access.network.is_some() || access.message.is_some() => Decision::Ask,
        Mode::Code if access.network.is_some() || access.message.is_some() => Decision::Ask,
        Mode::Ask | Mode::Code | Mode::Auto => Decision::Allow,
    }
}

fn rule_subject(rule: &Rule) -> String {
    match &rule.command {
        Some(command) => format!("`{command}`"),
        None => format!("`{}`", rule.tool),
    }
}

/// The choices offered for a call; "always" choices only inside the workspace (outside, the
/// question is asked every time anyway) and only for what a rule can name exactly.
pub fn options(tool: &str, prepared: &Prepared, inside: bool) -> Vec<PermissionOption> {
    let (subject, can_remember) = match &prepared.access.exec {
        // Leaving the sandbox is approved one command at a time.
        Some(exec) => (
            super::exec::code_span(&super::exec::shown(&exec.command)),
            rememberable(exec) && exec.confinement != Confinement::Escape,
        ),
        // Each change to what the agent does on its own is asked about.
        None => (format!("`{tool}`"), prepared.access.control.is_none()),
    };
    let always = inside && can_remember;
    let mut options =
        vec![PermissionOption { id: "allow-once".into(), label: "Allow once".into(), kind: OptionKind::AllowOnce }];
    if always {
        options.push(PermissionOption {
            id: "allow-always".into(),
            label: format!("Always allow {subject}"),
            kind: OptionKind::AllowAlways,
        });
        if let Some(mcp) = &prepared.access.mcp {
            options.push(PermissionOption {
                id: ALLOW_SERVER.into(),
                label: format!("Always allow every tool of `{}`", mcp.server),
                kind: OptionKind::AllowAlways,
            });
        }
    }
    options.push(PermissionOption { id: "reject-once".into(), label: "Reject".into(), kind: OptionKind::RejectOnce });
    if always {
        options.push(PermissionOption {
            id: "reject-always".into(),
            label: format!("Always reject {subject}"),
            kind: OptionKind::RejectAlways,
        });
    }
    options
}

/// The option that allows every tool of an MCP server.
pub const ALLOW_SERVER: &str = "allow-server";

/// The rule an "always" answer (option `option`) leaves.
pub fn rule_for(tool: &str, access: &Access, option: &str, allow: bool) -> Rule {
    if let Some(mcp) = access.mcp.as_ref().filter(|_| option == ALLOW_SERVER) {
        return Rule { tool: mcp.every_tool.clone(), command: None, allow };
    }
    Rule { tool: tool.to_owned(), command: access.exec.as_ref().map(|e| e.command.trim().to_owned()), allow }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::McpAccess;
    use std::path::PathBuf;

    fn read() -> Access {
        Access { reads: vec![PathBuf::from("/w/a")], ..Access::default() }
    }

    fn write() -> Access {
        Access { writes: vec![PathBuf::from("/w/a")], ..Access::default() }
    }

    fn exec(cmd: &str) -> Access {
        Access {
            exec: Some(ExecAccess {
                command: cmd.to_owned(),
                cwd: PathBuf::from("/w"),
                env: Vec::new(),
                confinement: Confinement::Sandboxed,
            }),
            ..Access::default()
        }
    }

    fn confined(cmd: &str, confinement: Confinement) -> Access {
        let mut access = exec(cmd);
        if let Some(e) = access.exec.as_mut() {
            e.confinement = confinement;
        }
        access
    }

    fn unconfined(cmd: &str) -> Access {
        confined(cmd, Confinement::Escape)
    }

    fn with_env(cmd: &str, name: &str, value: &str) -> Access {
        let mut access = exec(cmd);
        if let Some(e) = access.exec.as_mut() {
            e.env.push((name.into(), value.into()));
        }
        access
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
            (Mode::Ask, unconfined("ls"), Ask),
            (Mode::Ask, fetch(), Ask),
            (Mode::Code, read(), Allow),
            (Mode::Code, write(), Allow),
            (Mode::Code, exec("cargo test"), Allow),
            (Mode::Code, unconfined("cargo test"), Ask),
            (Mode::Code, fetch(), Ask),
            (Mode::Auto, read(), Allow),
            (Mode::Auto, write(), Allow),
            (Mode::Auto, exec("rm -rf target"), Allow),
            (Mode::Auto, unconfined("cargo publish"), Ask),
            (Mode::Code, confined("ls", Confinement::NoSandbox), Ask),
            (Mode::Auto, confined("ls", Confinement::NoSandbox), Ask),
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
        let always = [Rule { tool: "read".into(), command: None, allow: true }];
        assert_eq!(decide(Mode::Auto, "read", &read(), false, &always), Decision::Ask);
    }

    #[test]
    fn remembered_rules_cover_exactly_the_command_shown() {
        let rules = [
            Rule { tool: "exec".into(), command: Some("git status".into()), allow: true },
            Rule { tool: "exec".into(), command: Some("rm -rf x".into()), allow: false },
            Rule { tool: "edit".into(), command: None, allow: true },
        ];
        let allowed = |access: &Access| decide(Mode::Ask, "exec", access, true, &rules) == Decision::Allow;
        assert!(allowed(&exec("git status")));
        assert!(allowed(&exec("  git   'status' ")), "the same argv, spelled differently");
        for smuggled in [
            "git status --short",
            "git status && touch PWNED",
            "git status; touch PWNED",
            "git status\ntouch PWNED",
            "git status > out",
            "git status $(touch PWNED)",
            "git status `touch PWNED`",
            "BASH_ENV=evil.sh git status",
            "git status | sh",
            "git status &",
        ] {
            assert!(!allowed(&exec(smuggled)), "{smuggled:?}");
        }
        assert!(!allowed(&with_env("git status", "BASH_ENV", "/w/evil.sh")));
        assert!(!allowed(&with_env("git status", "PATH", "/w/bin")));
        assert_eq!(decide(Mode::Ask, "exec", &unconfined("git status"), true, &rules), Decision::Ask, "leaving asks");
        assert!(allowed(&confined("git status", Confinement::NoSandbox)), "without a sandbox, rules still hold");
        assert!(matches!(decide(Mode::Auto, "exec", &exec("rm -rf x"), true, &rules), Decision::Deny(_)));
        assert_eq!(decide(Mode::Ask, "edit", &write(), true, &rules), Decision::Allow);
        assert_eq!(decide(Mode::Ask, "write", &write(), true, &rules), Decision::Ask, "rules are per tool");
    }

    fn mcp(read_only: bool) -> Access {
        let mcp = McpAccess { server: "files".into(), every_tool: "mcp__files__*".into(), read_only };
        Access { mcp: Some(mcp), ..Access::default() }
    }

    #[test]
    fn mcp_tools_ask_unless_allowed_or_read_only_in_code_mode() {
        use Decision::{Allow, Ask};
        for (mode, read_only, want) in [
            (Mode::Ask, true, Ask),
            (Mode::Ask, false, Ask),
            (Mode::Code, true, Allow),
            (Mode::Code, false, Ask),
            (Mode::Auto, true, Allow),
            (Mode::Auto, false, Ask),
        ] {
            assert_eq!(decide(mode, "mcp__files__write", &mcp(read_only), true, &[]), want, "{mode:?} {read_only}");
        }
        let tool = [Rule { tool: "mcp__files__write".into(), command: None, allow: true }];
        assert_eq!(decide(Mode::Ask, "mcp__files__write", &mcp(false), true, &tool), Allow);
        assert_eq!(decide(Mode::Ask, "mcp__files__move", &mcp(false), true, &tool), Ask, "one tool, not its server");
        let server = [rule_for("mcp__files__write", &mcp(false), ALLOW_SERVER, true)];
        assert_eq!(server[0].tool, "mcp__files__*");
        assert_eq!(decide(Mode::Ask, "mcp__files__move", &mcp(false), true, &server), Allow);
        let other = Access {
            mcp: Some(McpAccess { server: "web".into(), every_tool: "mcp__web__*".into(), read_only: false }),
            ..Access::default()
        };
        assert_eq!(decide(Mode::Ask, "mcp__web__move", &other, true, &server), Ask, "another server");
        assert_eq!(decide(Mode::Auto, "mcp__files__move", &Access::default(), true, &server), Allow.clone());
        let never = [Rule { tool: "mcp__files__*".into(), command: None, allow: false }];
        assert!(matches!(decide(Mode::Auto, "mcp__files__read", &mcp(true), true, &never), Decision::Deny(_)));
    }

    #[test]
    fn only_plain_commands_can_be_remembered() {
        let plain = |c: &str| ExecAccess { command: c.into(), ..ExecAccess::default() };
        assert!(rememberable(&plain("cargo test --lib")));
        assert!(rememberable(&plain("git log --oneline -n 5")));
        assert!(!rememberable(&plain("cargo build && cargo test")));
        assert!(!rememberable(&plain("echo \"$HOME\"")));
        assert!(!rememberable(&plain("FOO=1 make")));
        assert!(!rememberable(&ExecAccess { env: vec![("A".into(), "1".into())], ..plain("make") }));
    }
}
