//! An MCP server's tools as the model sees them: named `mcp__<server>__<tool>` within what every
//! provider accepts, with the server's own JSON schema, a kind and title from the server's
//! annotations and the name, and results (text, images, resources, structured content, errors)
//! turned into what the user sees and what the model reads.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::Value;

use super::pool::{Asker, Server};
use crate::tools::host::{AnyHost, ElicitAnswer, ElicitRequest};
use crate::tools::{
    Access, Action, AnyTool, McpAccess, Prepared, Progress, ToolContent, ToolContext, ToolKind, ToolOutput, ToolSpec,
    kind, truncate,
};

/// The longest tool name every provider accepts (OpenAI's limit; Anthropic's is 128).
pub const MAX_NAME: usize = 64;

/// A name part made of what tool names may hold (`[A-Za-z0-9_-]`).
fn sanitize(part: &str) -> String {
    let cleaned: String =
        part.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if cleaned.is_empty() { "_".into() } else { cleaned }
}

/// Names for the tools of a session's servers, in order: `mcp__<server>__<tool>`, cut to
/// [`MAX_NAME`], numbered when two would be the same (or would shadow a name in `taken`).
pub fn names<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>, taken: &HashSet<String>) -> Vec<String> {
    let mut used = taken.clone();
    tools
        .into_iter()
        .map(|(server, tool)| {
            let full = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
            let mut name: String = full.chars().take(MAX_NAME).collect();
            let mut n = 2;
            while used.contains(&name) {
                let suffix = format!("_{n}");
                name = full.chars().take(MAX_NAME - suffix.len()).collect::<String>() + &suffix;
                n += 1;
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// One tool of one server, under the name the session gives it.
pub struct McpTool {
    name: String,
    /// The server as the session names it.
    server_name: String,
    server: Arc<Server>,
    tool: Tool,
}

impl McpTool {
    pub fn new(name: String, server_name: String, server: Arc<Server>, tool: Tool) -> Self {
        Self { name, server_name, server, tool }
    }

    fn read_only(&self) -> bool {
        self.tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
    }

    /// What it is called where people read it.
    fn label(&self) -> &str {
        self.tool
            .title
            .as_deref()
            .or_else(|| self.tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or(&self.tool.name)
    }

    fn kind(&self) -> ToolKind {
        kind_of(&self.tool)
    }
}

/// The kind of an MCP tool: its annotations first, the name where they leave it open.
pub fn kind_of(tool: &Tool) -> ToolKind {
    let by_name = kind::kind_for_name(&tool.name);
    let hints = tool.annotations.clone().unwrap_or_default();
    let open_world = hints.open_world_hint == Some(true);
    if hints.read_only_hint == Some(true) {
        return match by_name {
            ToolKind::Read | ToolKind::Search | ToolKind::Fetch | ToolKind::Think => by_name,
            _ if open_world => ToolKind::Fetch,
            _ => ToolKind::Read,
        };
    }
    if hints.destructive_hint == Some(true) {
        return match by_name {
            ToolKind::Edit | ToolKind::Delete | ToolKind::Move | ToolKind::Execute => by_name,
            _ => ToolKind::Edit,
        };
    }
    match by_name {
        ToolKind::Other if open_world => ToolKind::Fetch,
        other => other,
    }
}

impl AnyTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> ToolSpec {
        let mut parameters = Value::Object((*self.tool.input_schema).clone());
        if let Some(o) = parameters.as_object_mut() {
            o.remove("$schema");
            // Some providers insist on `properties` for an object schema.
            if o.get("type").and_then(Value::as_str) == Some("object") && !o.contains_key("properties") {
                o.insert("properties".into(), Value::Object(Default::default()));
            }
        }
        let description = self.tool.description.as_deref().unwrap_or(self.label());
        ToolSpec {
            name: self.name.clone(),
            description: format!("{description} (from the MCP server `{}`)", self.server_name),
            parameters: Arc::new(parameters),
        }
    }

    fn prepare<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            let arguments = args.as_object().cloned().unwrap_or_default();
            let (_, _, locations) = kind::describe_foreign(&self.tool.name, args, &ctx.cwd);
            Ok(Prepared {
                title: kind::title_for(&format!("{} ({})", self.label(), self.server_name), args),
                kind: self.kind(),
                locations,
                preview: Vec::new(),
                access: Access {
                    mcp: Some(McpAccess {
                        server: self.server_name.clone(),
                        every_tool: format!("mcp__{}__*", sanitize(&self.server_name)),
                        read_only: self.read_only(),
                    }),
                    ..Access::default()
                },
                action: Box::new(Call { server: self.server.clone(), tool: self.tool.name.to_string(), arguments }),
            })
        })
    }
}

struct Call {
    server: Arc<Server>,
    tool: String,
    arguments: serde_json::Map<String, Value>,
}

/// Passes a server's question to the user, as part of the call that is running.
struct CallAsker {
    host: Arc<dyn AnyHost>,
    session: Arc<str>,
    call_id: String,
    cancel: tokio_util::sync::CancellationToken,
}

impl Asker for CallAsker {
    fn ask(&self, request: ElicitRequest) -> BoxFuture<'static, ElicitAnswer> {
        let (host, session, call_id, cancel) =
            (self.host.clone(), self.session.clone(), self.call_id.clone(), self.cancel.clone());
        Box::pin(async move { host.elicit(&session, &call_id, &request, &cancel).await })
    }
}

impl Action for Call {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        // The server's progress comes on its connection's task; it is shown from here, where
        // the call's reporter lives.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let asker = CallAsker {
            host: ctx.host.clone(),
            session: ctx.session.clone(),
            call_id: ctx.call_id.clone(),
            cancel: ctx.cancel.clone(),
        };
        let call = self.server.call(
            &self.tool,
            self.arguments,
            &ctx.cancel,
            Arc::new(move |text| {
                let _ = tx.send(text);
            }),
            Arc::new(asker),
        );
        tokio::pin!(call);
        let result = loop {
            tokio::select! {
                r = &mut call => break r,
                Some(text) = rx.recv() => (ctx.progress)(Progress::Content(vec![ToolContent::Text(text)])),
            }
        };
        match result {
            Ok(result) => output(result),
            Err(e) => ToolOutput::error(format!("`{}` failed: {e}", self.tool)),
        }
    }
}

/// Text of a result shown to the user (and sent to every client and saved): as exec's output.
const SHOWN_TEXT: usize = 16 * 1024;
/// Base64 of the images a result shows, in all; past it they are named, not shown.
const SHOWN_IMAGES: usize = 4 << 20;
/// A result's structured content is kept whole (for clients) up to this size.
const SHOWN_STRUCTURED: usize = 16 * 1024;

/// What a result shows the user and tells the model: the model's text cut to its budget, and
/// what is shown (to every client, and saved) cut to what exec's output gets — a server that
/// answers 30 MB fills neither the transcript nor the clients' sockets.
pub fn output(result: CallToolResult) -> ToolOutput {
    let output = output_whole(result);
    cap_shown(output)
}

/// Cuts what a result shows: its text to [`SHOWN_TEXT`] in all (head and tail kept), its images
/// to [`SHOWN_IMAGES`], its structured content to [`SHOWN_STRUCTURED`].
fn cap_shown(mut output: ToolOutput) -> ToolOutput {
    let mut text_left = SHOWN_TEXT;
    let mut images_left = SHOWN_IMAGES;
    for block in &mut output.content {
        match block {
            ToolContent::Text(text) => {
                let cut = truncate::for_model(text, text_left.max(256), "the model was given more of it");
                text_left = text_left.saturating_sub(cut.len());
                *text = cut;
            }
            ToolContent::Image { mime_type, data } if data.len() > images_left => {
                *block =
                    ToolContent::Text(format!("[image: {mime_type}, {} bytes base64, too large to show]", data.len()));
            }
            ToolContent::Image { data, .. } => images_left -= data.len(),
            _ => {}
        }
    }
    if output.raw_output.as_ref().is_some_and(|v| v.to_string().len() > SHOWN_STRUCTURED) {
        output.raw_output = None;
    }
    output
}

fn output_whole(result: CallToolResult) -> ToolOutput {
    let mut model = Vec::new();
    let mut content = Vec::new();
    let mut text_seen = false;
    for block in result.content {
        match block {
            ContentBlock::Text(t) => {
                text_seen = true;
                model.push(t.text.clone());
                content.push(ToolContent::Text(t.text));
            }
            ContentBlock::Image(i) => {
                model.push(format!("[image: {}]", i.mime_type));
                content.push(ToolContent::Image { mime_type: i.mime_type, data: i.data });
            }
            ContentBlock::Audio(a) => {
                let note = format!("[audio: {}, {} bytes base64, not shown]", a.mime_type, a.data.len());
                model.push(note.clone());
                content.push(ToolContent::Text(note));
            }
            ContentBlock::Resource(r) => {
                let text = match r.resource {
                    ResourceContents::TextResourceContents { uri, text, .. } => format!("Resource {uri}:\n{text}"),
                    ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                        "[resource {uri}: {}, {} bytes base64 of binary data]",
                        mime_type.as_deref().unwrap_or("binary"),
                        blob.len()
                    ),
                    _ => "[a resource of a kind this agent does not read]".into(),
                };
                model.push(text.clone());
                content.push(ToolContent::Text(text));
            }
            ContentBlock::ResourceLink(l) => {
                let mut text = format!("[resource link: {} <{}>", l.name, l.uri);
                if let Some(mime) = &l.mime_type {
                    text.push_str(&format!(", {mime}"));
                }
                if let Some(d) = &l.description {
                    text.push_str(&format!(": {d}"));
                }
                text.push(']');
                model.push(text.clone());
                content.push(ToolContent::Text(text));
            }
            _ => {
                let note = "[content of a kind this agent does not read]".to_owned();
                model.push(note.clone());
                content.push(ToolContent::Text(note));
            }
        }
    }
    if let Some(structured) = &result.structured_content
        && !text_seen
    {
        let text = serde_json::to_string_pretty(structured).unwrap_or_default();
        model.push(text.clone());
        content.push(ToolContent::Text(text));
    }
    let is_error = result.is_error == Some(true);
    let mut for_model = model.join("\n");
    if for_model.is_empty() {
        for_model = if is_error { "The tool failed and said nothing." } else { "(no output)" }.into();
    }
    let for_model = truncate::for_model(&for_model, truncate::MODEL_BUDGET, "the output was cut");
    ToolOutput { for_model, content, is_error, raw_output: result.structured_content }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: Value) -> Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn names_fit_every_provider_and_never_collide() {
        let taken = HashSet::from(["read".to_owned()]);
        let long = "x".repeat(80);
        let got = names(
            [
                ("files", "read_file"),
                ("my server", "get.thing/v2"),
                ("files", "read_file"),
                ("a", long.as_str()),
                ("a", long.as_str()),
                ("", ""),
            ],
            &taken,
        );
        assert_eq!(got[0], "mcp__files__read_file");
        assert_eq!(got[1], "mcp__my_server__get_thing_v2");
        assert_eq!(got[2], "mcp__files__read_file_2");
        assert_eq!(got[3], format!("mcp__a__{}", "x".repeat(MAX_NAME - 8)));
        assert_eq!(got[4], format!("mcp__a__{}_2", "x".repeat(MAX_NAME - 10)));
        assert_eq!(got[5], "mcp______", "empty names are `_`");
        for name in &got {
            assert!(name.len() <= MAX_NAME && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        }
    }

    #[test]
    fn kinds_from_annotations_then_the_name() {
        let schema = json!({"type": "object"});
        let kind = |name: &str, hints: Value| {
            kind_of(&tool(json!({"name": name, "inputSchema": schema, "annotations": hints})))
        };
        assert_eq!(kind("echo", json!({"readOnlyHint": true})), ToolKind::Read);
        assert_eq!(kind("search_files", json!({"readOnlyHint": true})), ToolKind::Search);
        assert_eq!(kind("lookup", json!({"readOnlyHint": true, "openWorldHint": true})), ToolKind::Search);
        assert_eq!(kind("weather", json!({"readOnlyHint": true, "openWorldHint": true})), ToolKind::Fetch);
        assert_eq!(kind("write_file", json!({"destructiveHint": true})), ToolKind::Edit);
        assert_eq!(kind("move_file", json!({"destructiveHint": true})), ToolKind::Move);
        assert_eq!(kind("drop_table", json!({"destructiveHint": true})), ToolKind::Edit);
        assert_eq!(kind("post_message", json!({"openWorldHint": true})), ToolKind::Fetch);
        assert_eq!(kind("delete_branch", json!({})), ToolKind::Delete);
        assert_eq!(kind("frobnicate", json!({})), ToolKind::Other);
    }

    #[test]
    fn results_for_the_user_and_the_model() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "two files"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA", "mimeType": "application/zip"}},
                {"type": "resource_link", "uri": "file:///c.md", "name": "c.md", "mimeType": "text/markdown"}
            ],
            "structuredContent": {"n": 2}
        }))
        .unwrap();
        let out = output(result);
        assert!(!out.is_error);
        assert_eq!(
            out.for_model,
            "two files\n[image: image/png]\nResource file:///a.txt:\nhello\n\
             [resource file:///b.bin: application/zip, 4 bytes base64 of binary data]\n\
             [resource link: c.md <file:///c.md>, text/markdown]"
        );
        assert_eq!(out.content[1], ToolContent::Image { mime_type: "image/png".into(), data: "AAAA".into() });
        assert_eq!(out.raw_output, Some(json!({"n": 2})));
        // Structured content alone is what the model reads.
        let only: CallToolResult =
            serde_json::from_value(json!({"content": [], "structuredContent": {"t": 1}})).unwrap();
        assert_eq!(output(only).for_model, "{\n  \"t\": 1\n}");
        let failed: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}))
                .unwrap();
        let failed = output(failed);
        assert!(failed.is_error);
        assert_eq!(failed.for_model, "no such file");
        let empty: CallToolResult = serde_json::from_value(json!({"content": []})).unwrap();
        assert_eq!(output(empty).for_model, "(no output)");
    }

    #[test]
    fn a_huge_result_is_cut_for_the_user_as_exec_output_is() {
        let big = "line of output\n".repeat(2_000_000);
        let image = "A".repeat(5 << 20);
        let result: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "text", "text": big},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ], "structuredContent": {"rows": vec!["x"; 100_000]}}))
        .unwrap();
        let out = output(result);
        let ToolContent::Text(shown) = &out.content[0] else { panic!() };
        assert!(shown.len() < 17 << 10 && shown.contains("omitted"), "{}", shown.len());
        assert!(out.for_model.len() < 31_000);
        let ToolContent::Text(named) = &out.content[1] else { panic!("a 5 MB image is named, not shown") };
        assert!(named.contains("too large to show"));
        assert_eq!(out.content[2], ToolContent::Image { mime_type: "image/png".into(), data: "AAAA".into() });
        assert_eq!(out.raw_output, None, "structured content too big to pass on whole");
    }
}
