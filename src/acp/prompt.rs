//! Prompt content blocks ↔ the runtime's [`UserBlock`]s: checked on the way in (what we do not
//! accept is refused, naming the block), restored on the way out when a session is replayed.

use acp_protocol::acp::schema::{
    BlobResourceContents, ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent, ResourceLink,
    TextResourceContents,
};

use crate::runtime::UserBlock;

/// Converts a prompt; the error names the offending block.
pub fn to_user_blocks(blocks: &[ContentBlock]) -> Result<Vec<UserBlock>, String> {
    let mut out = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => {
                if !t.text.is_empty() {
                    out.push(UserBlock::text(t.text.clone()));
                }
            }
            ContentBlock::Image(img) => {
                if !img.mime_type.starts_with("image/") {
                    return Err(format!("`prompt[{i}]`: `{}` is not an image type", img.mime_type));
                }
                out.push(UserBlock::Image {
                    mime_type: img.mime_type.clone(),
                    data: img.data.clone(),
                    uri: img.uri.clone(),
                });
            }
            ContentBlock::Audio(_) => {
                return Err(format!("`prompt[{i}]`: audio input is not supported (promptCapabilities.audio is false)"));
            }
            ContentBlock::ResourceLink(link) => out.push(UserBlock::ResourceLink {
                uri: link.uri.clone(),
                name: link.name.clone(),
                title: link.title.clone(),
                description: link.description.clone(),
                mime_type: link.mime_type.clone(),
            }),
            ContentBlock::Resource(res) => match &res.resource {
                EmbeddedResourceResource::TextResourceContents(t) => out.push(UserBlock::Resource {
                    uri: t.uri.clone(),
                    mime_type: t.mime_type.clone(),
                    text: Some(t.text.clone()),
                    blob: None,
                }),
                EmbeddedResourceResource::BlobResourceContents(b) => out.push(UserBlock::Resource {
                    uri: b.uri.clone(),
                    mime_type: b.mime_type.clone(),
                    text: None,
                    blob: Some(b.blob.clone()),
                }),
                _ => return Err(format!("`prompt[{i}]`: unsupported resource contents")),
            },
            _ => return Err(format!("`prompt[{i}]`: unsupported content block")),
        }
    }
    Ok(out)
}

/// A stored block as the client showed it.
pub fn to_content_block(block: &UserBlock) -> ContentBlock {
    match block {
        UserBlock::Text { text } => ContentBlock::from(text.clone()),
        UserBlock::Image { mime_type, data, uri } => {
            ContentBlock::Image(ImageContent::new(data.clone(), mime_type.clone()).uri(uri.clone()))
        }
        UserBlock::ResourceLink { uri, name, title, description, mime_type } => ContentBlock::ResourceLink(
            ResourceLink::new(name.clone(), uri.clone())
                .title(title.clone())
                .description(description.clone())
                .mime_type(mime_type.clone()),
        ),
        UserBlock::Resource { uri, mime_type, text, blob } => {
            let resource = match (text, blob) {
                (Some(text), _) => EmbeddedResourceResource::TextResourceContents(
                    TextResourceContents::new(text.clone(), uri.clone()).mime_type(mime_type.clone()),
                ),
                (None, blob) => EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new(blob.clone().unwrap_or_default(), uri.clone())
                        .mime_type(mime_type.clone()),
                ),
            };
            ContentBlock::Resource(EmbeddedResource::new(resource))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_supported_block_survives_the_round_trip() {
        let original = json!([
            {"type": "text", "text": "fix it"},
            {"type": "resource_link", "name": "main.rs", "uri": "file:///p/main.rs", "title": "Main"},
            {"type": "resource", "resource": {"uri": "file:///p/a.rs", "text": "fn a() {}", "mimeType": "text/x-rust"}},
            {"type": "resource", "resource": {"uri": "file:///p/b.png", "blob": "iVBORw0KGgo=", "mimeType": "image/png"}},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        ]);
        let user = to_user_blocks(&blocks(original.clone())).unwrap();
        assert_eq!(user.len(), 5);
        let back: Vec<ContentBlock> = user.iter().map(to_content_block).collect();
        assert_eq!(serde_json::to_value(back).unwrap(), original);
    }

    #[test]
    fn audio_is_refused_with_its_index() {
        let err = to_user_blocks(&blocks(json!([
            {"type": "text", "text": "hi"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}
        ])))
        .unwrap_err();
        assert!(err.starts_with("`prompt[1]`"), "{err}");
    }

    #[test]
    fn an_image_must_have_an_image_type() {
        let err =
            to_user_blocks(&blocks(json!([{"type": "image", "mimeType": "text/plain", "data": "AAAA"}]))).unwrap_err();
        assert!(err.contains("not an image type"), "{err}");
    }
}
