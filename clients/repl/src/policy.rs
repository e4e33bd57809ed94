//! Answers to `session/request_permission` without a person: allow what the user listed, refuse
//! the rest. Tools are matched by the name the agent gives them (`_meta.toolName`, as acp sends)
//! or by their ACP kind (`edit`, `execute`, `fetch`, …), so a policy also works with other agents.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::{Value, json};

/// Which tools may run when the agent asks.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The patterns as given, lower-cased (ASCII).
    allow: Vec<String>,
    matcher: GlobSet,
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow
    }
}

impl Eq for Policy {}

impl Policy {
    /// Patterns: tool names or kinds, `*` as a wildcard (any run of characters), comma-separated
    /// lists allowed; the rest is literal and ASCII letters match either case.
    pub fn allow<I: IntoIterator<Item = S>, S: AsRef<str>>(patterns: I) -> Self {
        let allow: Vec<String> = patterns
            .into_iter()
            .flat_map(|p| p.as_ref().split(',').map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>())
            .filter(|p| !p.is_empty())
            .collect();
        let mut set = GlobSetBuilder::new();
        for pattern in &allow {
            // Only `*` is special: glob syntax (`?`, `[…]`, `{…}`, `\`) in a tool name is literal,
            // and a run of stars is one star (not globset's `**`, which treats `/` apart).
            let mut glob = pattern.split('*').map(globset::escape).collect::<Vec<_>>().join("*");
            while glob.contains("**") {
                glob = glob.replace("**", "*");
            }
            // Escaped, a pattern is always a valid glob.
            if let Ok(glob) = GlobBuilder::new(&glob).backslash_escape(false).build() {
                set.add(glob);
            }
        }
        Self { matcher: set.build().unwrap_or_default(), allow }
    }

    pub fn allows(&self, tool: &ToolIdentity) -> bool {
        [tool.name.as_deref(), tool.kind.as_deref()]
            .into_iter()
            .flatten()
            .any(|n| self.matcher.is_match(n.to_ascii_lowercase()))
    }

    /// The answer to a permission request: an allow option (once, preferably) for an allowed tool,
    /// else a reject option (once, preferably); cancelled when no such option is offered.
    pub fn answer(&self, tool: &ToolIdentity, options: &[Value]) -> Decision {
        let allowed = self.allows(tool);
        let wanted: &[&str] = if allowed { &["allow_once", "allow_always"] } else { &["reject_once", "reject_always"] };
        let chosen = wanted.iter().find_map(|kind| {
            options.iter().find(|o| o["kind"] == *kind).and_then(|o| o["optionId"].as_str()).map(str::to_owned)
        });
        match chosen {
            Some(option) => Decision { allowed, outcome: json!({"outcome": "selected", "optionId": option}) },
            None => Decision { allowed: false, outcome: json!({"outcome": "cancelled"}) },
        }
    }
}

/// What a tool call is called, as far as the client knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolIdentity {
    pub name: Option<String>,
    pub kind: Option<String>,
    pub title: String,
}

/// A permission answer and whether it lets the tool run.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    /// The `outcome` field of the `session/request_permission` answer.
    pub outcome: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, kind: &str) -> ToolIdentity {
        ToolIdentity { name: Some(name.into()), kind: Some(kind.into()), title: String::new() }
    }

    fn options() -> Vec<Value> {
        ["allow_once", "allow_always", "reject_once", "reject_always"]
            .iter()
            .map(|k| json!({"optionId": format!("{k}_id"), "name": k, "kind": k}))
            .collect()
    }

    #[test]
    fn names_kinds_globs_and_lists() {
        let p = Policy::allow(["edit, web_*", "EXECUTE"]);
        assert!(p.allows(&tool("edit", "edit")));
        assert!(p.allows(&tool("apply_patch", "edit")), "by kind");
        assert!(p.allows(&tool("web_fetch", "fetch")));
        assert!(p.allows(&tool("exec", "execute")));
        assert!(!p.allows(&tool("write_file", "delete")));
        assert!(Policy::allow(["*"]).allows(&tool("anything", "other")));
        assert!(!Policy::default().allows(&tool("read", "read")));
        assert!(glob("a*b*c", "axxbyyc") && !glob("a*b*c", "acb") && glob("*", "") && !glob("ab*ba", "aba"));
    }

    /// Whether `pattern` allows a tool of that name.
    fn glob(pattern: &str, name: &str) -> bool {
        Policy::allow([pattern]).allows(&ToolIdentity { name: Some(name.into()), ..ToolIdentity::default() })
    }

    #[test]
    fn only_the_star_is_special_and_case_does_not_matter() {
        assert!(glob("mcp__*__read", "mcp__fs/x__read"), "a star crosses slashes");
        assert!(glob("**/", "x/") && !glob("**/", "x") && !glob("**/*", "x"), "two stars are one star");
        assert!(glob("Web_*", "WEB_FETCH") && glob("web_fetch", "Web_Fetch"));
        for literal in ["what?", "[ab]", "{ab}", "a\\b", "!x"] {
            assert!(glob(literal, literal), "{literal} matches itself");
        }
        assert!(!glob("what?", "whatx") && !glob("[ab]", "a") && !glob("{ab}", "a") && !glob("a\\b", "ab"));
        assert!(glob("[ab]*", "[ab]cd") && glob("*?", "why?") && !glob("*?", "why"));
    }

    #[test]
    fn answers_pick_once_options_and_fall_back() {
        let p = Policy::allow(["edit"]);
        let d = p.answer(&tool("edit", "edit"), &options());
        assert_eq!(d, Decision { allowed: true, outcome: json!({"outcome": "selected", "optionId": "allow_once_id"}) });
        let d = p.answer(&tool("exec", "execute"), &options());
        assert_eq!(d.outcome["optionId"], "reject_once_id");
        assert!(!d.allowed);
        let only_always = vec![json!({"optionId": "a", "name": "Always", "kind": "allow_always"})];
        assert_eq!(p.answer(&tool("edit", "edit"), &only_always).outcome["optionId"], "a");
        assert_eq!(p.answer(&tool("exec", "execute"), &only_always).outcome, json!({"outcome": "cancelled"}));
    }
}
