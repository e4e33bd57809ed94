//! Which tools exist for the model at all: `[tools] allow` and `deny` lists of names with `*`
//! globs, matched case-insensitively; deny wins; an empty allow list allows everything.

/// The `[tools]` policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl ToolPolicy {
    pub fn allows(&self, tool: &str) -> bool {
        let tool = tool.to_ascii_lowercase();
        if self.deny.iter().any(|p| glob_match(&p.to_ascii_lowercase(), &tool)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|p| glob_match(&p.to_ascii_lowercase(), &tool))
    }
}

/// `*` matches any run of characters (including none); everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> ToolPolicy {
        ToolPolicy {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
        }
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
        ] {
            assert_eq!(glob_match(pattern, text), want, "{pattern} ~ {text}");
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
