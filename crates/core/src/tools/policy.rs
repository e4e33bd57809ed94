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
        Self { allow: compile(allow, Closed::AllowNone), deny: compile(deny, Closed::DenyAll) }
    }

    pub fn allows(&self, tool: &str) -> bool {
        if self.deny.as_ref().is_some_and(|d| d.is_match(tool)) {
            return false;
        }
        self.allow.as_ref().is_none_or(|a| a.is_match(tool))
    }
}

/// The patterns as one set (`None` for none): `*` matches any run of characters, everything else
/// itself, case ignored. A set that cannot be built fails closed: an allow list that allows
/// nothing, a deny list that denies everything (and the log says why).
fn compile(patterns: &[String], fail_closed: Closed) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let literal: Vec<String> = p.split('*').map(globset::escape).collect();
        match GlobBuilder::new(&literal.join("*")).case_insensitive(true).backslash_escape(false).build() {
            Ok(glob) => {
                set.add(glob);
            }
            Err(e) => {
                tracing::error!(pattern = %p, error = %e, "a [tools] pattern cannot be used; {}", fail_closed.says());
                return Some(fail_closed.set());
            }
        }
    }
    Some(set.build().unwrap_or_else(|e| {
        tracing::error!(error = %e, "the [tools] patterns cannot be used; {}", fail_closed.says());
        fail_closed.set()
    }))
}

/// What a list that cannot be used becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    AllowNone,
    DenyAll,
}

impl Closed {
    fn says(self) -> &'static str {
        match self {
            Self::AllowNone => "no tool is allowed",
            Self::DenyAll => "every tool is denied",
        }
    }

    fn set(self) -> GlobSet {
        let mut set = GlobSetBuilder::new();
        if self == Self::DenyAll
            && let Ok(all) = GlobBuilder::new("*").build()
        {
            set.add(all);
        }
        set.build().unwrap_or_else(|_| GlobSet::empty())
    }
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
            ("a\\b", "a\\b", true),
            ("a\\*", "a\\x", true),
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
