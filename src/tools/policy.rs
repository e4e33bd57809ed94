//! Which tools exist for the model at all: `[tools] allow` and `deny` lists of names with `*`
//! globs, matched case-insensitively; deny wins; an empty allow list allows everything.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// The `[tools]` policy, its patterns compiled.
#[derive(Debug, Clone, Default)]
pub struct ToolPolicy {
    allow: Option<GlobSet>,
    deny: Option<GlobSet>,
}

impl ToolPolicy {
    pub fn new(allow: &[String], deny: &[String]) -> Self {
        Self { allow: compile(allow), deny: compile(deny) }
    }

    pub fn allows(&self, tool: &str) -> bool {
        if self.deny.as_ref().is_some_and(|d| d.is_match(tool)) {
            return false;
        }
        self.allow.as_ref().is_none_or(|a| a.is_match(tool))
    }
}

/// The patterns as one set (`None` for none): `*` matches any run of characters, everything else
/// itself, case ignored.
fn compile(patterns: &[String]) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let literal: Vec<String> = p.split('*').map(globset::escape).collect();
        match GlobBuilder::new(&literal.join("*")).case_insensitive(true).build() {
            Ok(glob) => {
                set.add(glob);
            }
            Err(e) => tracing::warn!(pattern = %p, error = %e, "ignoring a [tools] pattern"),
        }
    }
    set.build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> ToolPolicy {
        let strings = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        ToolPolicy::new(&strings(allow), &strings(deny))
    }

    #[test]
    fn globs() {
        for (pattern, text, want) in [
            ("*", "anything", true),
            ("web_*", "web_fetch", true),
            ("web_*", "grep", false),
            ("*_fetch", "web_fetch", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "acb", false),
            ("exec", "exec", true),
            ("exec", "exec2", false),
            ("ab*ba", "aba", false),
            ("read?", "read?", true),
            ("read?", "reads", false),
            ("[a]*", "[a]x", true),
            ("mcp__files__*", "mcp__files__read/x", true),
        ] {
            assert_eq!(policy(&[pattern], &[]).allows(text), want, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn deny_wins_and_case_does_not_matter() {
        let p = policy(&["*"], &["WEB_*"]);
        assert!(p.allows("read"));
        assert!(!p.allows("web_fetch"));
        let p = policy(&["read", "Grep"], &[]);
        assert!(p.allows("grep"));
        assert!(!p.allows("exec"));
        let p = policy(&["exec"], &["exec"]);
        assert!(!p.allows("exec"));
        assert!(ToolPolicy::default().allows("exec"));
    }
}
