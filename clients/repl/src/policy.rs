//! Answers to `session/request_permission` without a person: allow what the user listed, refuse
//! the rest. Tools are matched by the name the agent gives them (`_meta.toolName`, as acp sends)
//! or by their ACP kind (`edit`, `execute`, `fetch`, …), so a policy also works with other agents.

use serde_json::{Value, json};

/// Which tools may run when the agent asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    allow: Vec<String>,
}

impl Policy {
    /// Patterns: tool names or kinds, `*` as a wildcard, comma-separated lists allowed.
    pub fn allow<I: IntoIterator<Item = S>, S: AsRef<str>>(patterns: I) -> Self {
        let allow = patterns
            .into_iter()
            .flat_map(|p| p.as_ref().split(',').map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>())
            .filter(|p| !p.is_empty())
            .collect();
        Self { allow }
    }

    pub fn allows(&self, tool: &ToolIdentity) -> bool {
        self.allow.iter().any(|p| {
            [tool.name.as_deref(), tool.kind.as_deref()].into_iter().flatten().any(|n| glob(p, &n.to_ascii_lowercase()))
        })
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

/// `*` matches any run of characters; everything else literally.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
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
