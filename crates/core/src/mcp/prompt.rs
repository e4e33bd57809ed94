//! MCP prompts as slash commands: `/server:prompt args` names one; the arguments are `key=value`
//! words (a declared argument by name) or plain words (the declared arguments in order); the
//! prompt's messages become the user's message.

use rmcp::model::{ContentBlock, GetPromptResult, Prompt, ResourceContents, Role};
use serde_json::{Map, Value};

use crate::providers::UserPart;

/// `/server:prompt rest` → (server, prompt, rest); `None` for anything else.
pub fn split(text: &str) -> Option<(&str, &str, &str)> {
    let rest = text.trim().strip_prefix('/')?;
    let (head, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let (server, prompt) = head.split_once(':')?;
    (!server.is_empty() && !prompt.is_empty()).then_some((server, prompt, args))
}

/// How to call it, e.g. `/files:review path [focus]`.
pub fn usage(server: &str, prompt: &Prompt) -> String {
    let mut text = format!("/{server}:{}", prompt.name);
    for a in prompt.arguments.iter().flatten() {
        if a.required == Some(true) {
            text.push_str(&format!(" {}", a.name));
        } else {
            text.push_str(&format!(" [{}]", a.name));
        }
    }
    text
}

/// The arguments as the server takes them, from what the user typed.
pub fn arguments(server: &str, prompt: &Prompt, typed: &str) -> Result<Map<String, Value>, String> {
    let declared: Vec<&str> = prompt.arguments.iter().flatten().map(|a| a.name.as_str()).collect();
    let words = shlex::split(typed).ok_or_else(|| format!("cannot read the arguments `{typed}` (an open quote?)"))?;
    let mut out = Map::new();
    let mut positional = declared.iter();
    for word in words {
        if let Some((key, value)) = word.split_once('=')
            && declared.contains(&key)
        {
            out.insert(key.to_owned(), Value::String(value.to_owned()));
            continue;
        }
        let Some(name) = positional.find(|n| !out.contains_key(**n)) else {
            return Err(format!("too many arguments. Usage: `{}`", usage(server, prompt)));
        };
        out.insert((*name).to_owned(), Value::String(word));
    }
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .flatten()
        .filter(|a| a.required == Some(true) && !out.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing {}. Usage: `{}`", missing.join(", "), usage(server, prompt)));
    }
    Ok(out)
}

/// The prompt's messages as one user message: text, images and resources in order (what the
/// prompt gives as the assistant's is marked as such).
pub fn to_user_parts(result: GetPromptResult) -> Vec<UserPart> {
    let mut parts = Vec::new();
    for message in result.messages {
        let assistant = matches!(message.role, Role::Assistant);
        let text = match message.content {
            ContentBlock::Text(t) => Some(t.text),
            ContentBlock::Image(i) => {
                parts.push(UserPart::Image { mime_type: i.mime_type, data: i.data });
                None
            }
            ContentBlock::Resource(r) => Some(match r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => format!("Resource {uri}:\n{text}"),
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => {
                    format!("[resource {uri}: {}, binary]", mime_type.as_deref().unwrap_or("binary"))
                }
                _ => "[a resource of a kind this agent does not read]".into(),
            }),
            ContentBlock::ResourceLink(l) => Some(format!("[resource link: {} <{}>]", l.name, l.uri)),
            _ => None,
        };
        if let Some(text) = text {
            parts.push(UserPart::Text(if assistant { format!("(as the assistant) {text}") } else { text }));
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::PromptArgument;
    use serde_json::json;

    fn prompt() -> Prompt {
        let mut p: Prompt = serde_json::from_value(json!({"name": "args-prompt"})).unwrap();
        let mut city = PromptArgument::new("city");
        city.required = Some(true);
        p.arguments = Some(vec![city, PromptArgument::new("state")]);
        p
    }

    #[test]
    fn names_and_arguments() {
        assert_eq!(split("/everything:args-prompt Paris"), Some(("everything", "args-prompt", "Paris")));
        assert_eq!(split("  /a:b  "), Some(("a", "b", "")));
        assert_eq!(split("/status"), None);
        assert_eq!(split("/usr/bin:x"), Some(("usr/bin", "x", "")), "the server name is checked by the caller");
        assert_eq!(split("hello /a:b"), None);
        let p = prompt();
        assert_eq!(usage("e", &p), "/e:args-prompt city [state]");
        let args = |typed: &str| arguments("e", &p, typed);
        assert_eq!(args("Paris").unwrap(), Map::from_iter([("city".to_owned(), json!("Paris"))]));
        assert_eq!(
            args("state=TX 'San Antonio'").unwrap(),
            Map::from_iter([("state".to_owned(), json!("TX")), ("city".to_owned(), json!("San Antonio"))])
        );
        assert_eq!(args("").unwrap_err(), "missing city. Usage: `/e:args-prompt city [state]`");
        assert_eq!(args("a b c").unwrap_err(), "too many arguments. Usage: `/e:args-prompt city [state]`");
        assert_eq!(args("x=1").unwrap(), Map::from_iter([("city".to_owned(), json!("x=1"))]), "not an argument's name");
    }
}
