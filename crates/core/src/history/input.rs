//! What a user sends, as they sent it ([`UserBlock`]: text, images, links to resources, embedded
//! resources), and how it reaches the model ([`to_model`]). Transcripts keep the blocks, so a
//! reloaded session shows the prompt as it was typed.

use serde::{Deserialize, Serialize};

use crate::providers::UserPart;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserBlock {
    Text {
        text: String,
    },
    /// Base64 image data.
    Image {
        mime_type: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
    /// A link to something the client can open (usually a file the user @-mentioned).
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A resource's contents, embedded in the prompt: text, or a base64 blob.
    Resource {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
}

impl UserBlock {
    /// Bytes it holds (its text, data and names), as memory it takes while it waits.
    pub fn size(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        match self {
            Self::Text { text } => text.len(),
            Self::Image { mime_type, data, uri } => mime_type.len() + data.len() + opt(uri),
            Self::ResourceLink { uri, name, title, description, mime_type } => {
                uri.len() + name.len() + opt(title) + opt(description) + opt(mime_type)
            }
            Self::Resource { uri, mime_type, text, blob } => uri.len() + opt(mime_type) + opt(text) + opt(blob),
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// The prompt as the model reads it: text and images pass through; links and embedded resources
/// become text the model can read.
pub fn to_model(blocks: &[UserBlock]) -> Vec<UserPart> {
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            UserBlock::Text { text } => {
                if !text.is_empty() {
                    parts.push(UserPart::Text(text.clone()));
                }
            }
            UserBlock::Image { mime_type, data, .. } => {
                parts.push(UserPart::Image { mime_type: mime_type.clone(), data: data.clone() });
            }
            UserBlock::ResourceLink { uri, name, title, description, .. } => {
                let mut text = format!("[Resource: {}]({uri})", title.as_deref().unwrap_or(name));
                if let Some(d) = description {
                    text.push_str(" — ");
                    text.push_str(d);
                }
                parts.push(UserPart::Text(text));
            }
            UserBlock::Resource { uri, mime_type, text, blob } => match (text, blob, mime_type.as_deref()) {
                (Some(text), _, _) => {
                    parts.push(UserPart::Text(format!("<resource uri=\"{uri}\">\n{text}\n</resource>")))
                }
                (None, Some(data), Some(mime)) if mime.starts_with("image/") => {
                    parts.push(UserPart::Image { mime_type: mime.to_owned(), data: data.clone() });
                }
                (None, _, mime) => parts.push(UserPart::Text(format!(
                    "[binary resource {uri} ({}) not included]",
                    mime.unwrap_or("unknown type")
                ))),
            },
        }
    }
    parts
}

/// The prompt's text, for titles and slash commands: the text blocks, joined.
pub fn plain_text(blocks: &[UserBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let UserBlock::Text { text } = block {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// A session title from its first prompt: the first non-empty line, at most 80 characters (a
/// `[Working directory: …]` line that gateway bridges put first is not the user's).
pub fn title_of(blocks: &[UserBlock]) -> Option<String> {
    let text = plain_text(blocks);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !(l.is_empty() || l.starts_with("[Working directory: ") && l.ends_with(']')))?;
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.pop();
        title.push('…');
    }
    Some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_skips_the_working_directory_line() {
        let blocks = vec![UserBlock::text("[Working directory: ~/p]\n\nFix the build")];
        assert_eq!(title_of(&blocks).as_deref(), Some("Fix the build"));
        assert_eq!(title_of(&[UserBlock::text("[Working directory: ~/p]")]), None);
    }

    #[test]
    fn every_block_reaches_the_model() {
        let blocks = vec![
            UserBlock::text("fix it"),
            UserBlock::ResourceLink {
                uri: "file:///p/main.rs".into(),
                name: "main.rs".into(),
                title: None,
                description: None,
                mime_type: None,
            },
            UserBlock::Resource {
                uri: "file:///p/a.rs".into(),
                mime_type: None,
                text: Some("fn a() {}".into()),
                blob: None,
            },
            UserBlock::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into(), uri: None },
            UserBlock::Resource {
                uri: "file:///p/x.bin".into(),
                mime_type: Some("application/octet-stream".into()),
                text: None,
                blob: Some("AAAA".into()),
            },
        ];
        assert_eq!(
            to_model(&blocks),
            vec![
                UserPart::Text("fix it".into()),
                UserPart::Text("[Resource: main.rs](file:///p/main.rs)".into()),
                UserPart::Text("<resource uri=\"file:///p/a.rs\">\nfn a() {}\n</resource>".into()),
                UserPart::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                UserPart::Text("[binary resource file:///p/x.bin (application/octet-stream) not included]".into()),
            ]
        );
    }

    #[test]
    fn titles_take_the_first_line() {
        assert_eq!(title_of(&[UserBlock::text("\n  Fix the bug  \nin calc")]).as_deref(), Some("Fix the bug"));
        let long = "x".repeat(100);
        let t = title_of(&[UserBlock::text(long)]).unwrap();
        assert_eq!(t.chars().count(), 80);
        assert!(t.ends_with('…'));
        assert_eq!(title_of(&[UserBlock::text("  ")]), None);
    }
}
