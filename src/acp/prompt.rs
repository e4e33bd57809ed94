//! Prompt content blocks → the runtime's user input. Text and images pass through; resource links
//! and embedded resources become text the model can read.

use acp_protocol::acp::schema::{ContentBlock, EmbeddedResourceResource};

use crate::providers::UserPart;

/// Converts a prompt; the error names the offending block.
pub fn to_user_parts(blocks: &[ContentBlock]) -> Result<Vec<UserPart>, String> {
    let mut parts = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => {
                if !t.text.is_empty() {
                    parts.push(UserPart::Text(t.text.clone()));
                }
            }
            ContentBlock::Image(img) => {
                if !img.mime_type.starts_with("image/") {
                    return Err(format!("`prompt[{i}]`: `{}` is not an image type", img.mime_type));
                }
                parts.push(UserPart::Image { mime_type: img.mime_type.clone(), data: img.data.clone() });
            }
            ContentBlock::Audio(_) => {
                return Err(format!("`prompt[{i}]`: audio input is not supported (promptCapabilities.audio is false)"));
            }
            ContentBlock::ResourceLink(link) => {
                let mut text = format!("[Resource: {}]({})", link.title.as_deref().unwrap_or(&link.name), link.uri);
                if let Some(d) = &link.description {
                    text.push_str(" — ");
                    text.push_str(d);
                }
                parts.push(UserPart::Text(text));
            }
            ContentBlock::Resource(res) => match &res.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    parts.push(UserPart::Text(format!("<resource uri=\"{}\">\n{}\n</resource>", t.uri, t.text)));
                }
                EmbeddedResourceResource::BlobResourceContents(b) => match b.mime_type.as_deref() {
                    Some(mime) if mime.starts_with("image/") => {
                        parts.push(UserPart::Image { mime_type: mime.to_owned(), data: b.blob.clone() });
                    }
                    mime => parts.push(UserPart::Text(format!(
                        "[binary resource {} ({}) not included]",
                        b.uri,
                        mime.unwrap_or("unknown type")
                    ))),
                },
                _ => return Err(format!("`prompt[{i}]`: unsupported resource contents")),
            },
            _ => return Err(format!("`prompt[{i}]`: unsupported content block")),
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn converts_every_supported_block() {
        let parts = to_user_parts(&blocks(json!([
            {"type": "text", "text": "fix it"},
            {"type": "resource_link", "name": "main.rs", "uri": "file:///p/main.rs"},
            {"type": "resource", "resource": {"uri": "file:///p/a.rs", "text": "fn a() {}"}},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        ])))
        .unwrap();
        assert_eq!(
            parts,
            vec![
                UserPart::Text("fix it".into()),
                UserPart::Text("[Resource: main.rs](file:///p/main.rs)".into()),
                UserPart::Text("<resource uri=\"file:///p/a.rs\">\nfn a() {}\n</resource>".into()),
                UserPart::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
            ]
        );
    }

    #[test]
    fn audio_is_refused_with_its_index() {
        let err = to_user_parts(&blocks(json!([
            {"type": "text", "text": "hi"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}
        ])))
        .unwrap_err();
        assert!(err.starts_with("`prompt[1]`"), "{err}");
    }
}
