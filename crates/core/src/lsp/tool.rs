//! `lsp`: one read-only tool for what language servers know — a file's or the workspace's
//! diagnostics, where a symbol is defined, where it is used, what it is (hover), and the symbols
//! of a file or of the workspace — answered as compact `path:line` text.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::{
    DocumentSymbol, DocumentSymbolResponse, GotoDefinitionResponse, Hover, HoverContents, Location, MarkedString,
    SymbolInformation,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::pool::Servers;
use super::server::Server;
use super::text;
use crate::tools::{Access, Action, Prepared, Tool, ToolContext, ToolKind, ToolOutput, truncate};

/// How long a question may wait for its server (a first start included).
const ANSWER_LIMIT: Duration = Duration::from_secs(30);
/// Locations listed at most.
const MAX_LOCATIONS: usize = 100;

pub struct Lsp(pub Arc<Servers>);

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Question {
    Diagnostics,
    Definition,
    References,
    Hover,
    Symbols,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LspArgs {
    action: Question,
    /// File (diagnostics and symbols: leave out for the whole workspace)
    path: Option<String>,
    /// 1-based line of the symbol (definition, references, hover)
    line: Option<u32>,
    /// The symbol's name on that line
    symbol: Option<String>,
    /// Workspace symbols: the name to look for
    query: Option<String>,
}

impl Tool for Lsp {
    const NAME: &'static str = "lsp";
    type Args = LspArgs;

    fn description(&self) -> String {
        "Ask the language server: `diagnostics` (a file, or the workspace), `definition`, `references` or \
         `hover` of `symbol` on `line` of `path`, `symbols` of `path` (or of the workspace matching `query`)."
            .into()
    }

    async fn prepare(&self, args: LspArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let path = args.path.as_deref().map(|p| ctx.resolve(p));
        let needs_place = matches!(args.action, Question::Definition | Question::References | Question::Hover);
        if needs_place && (path.is_none() || args.line.is_none()) {
            return Err(format!("`{}` needs `path` and `line` (and `symbol`)", name(args.action)));
        }
        if args.action == Question::Symbols && path.is_none() && args.query.as_deref().is_none_or(str::is_empty) {
            return Err("`symbols` needs `path`, or `query` for the workspace".into());
        }
        let at = match (&path, args.line) {
            (Some(p), Some(line)) => format!(" {}:{line}", ctx.display(p)),
            (Some(p), None) => format!(" {}", ctx.display(p)),
            (None, _) => args.query.as_deref().map(|q| format!(" `{q}`")).unwrap_or_default(),
        };
        let symbol = args.symbol.as_deref().map(|s| format!(" `{s}`")).unwrap_or_default();
        let kind = if matches!(args.action, Question::References | Question::Symbols) && path.is_none()
            || args.action == Question::References
        {
            ToolKind::Search
        } else {
            ToolKind::Read
        };
        Ok(Prepared {
            title: format!("LSP {}{at}{symbol}", name(args.action)),
            kind,
            locations: path.iter().map(|p| crate::tools::Location { path: p.clone(), line: args.line }).collect(),
            preview: Vec::new(),
            access: Access { reads: path.iter().cloned().collect(), ..Access::default() },
            action: Box::new(Ask { servers: self.0.clone(), args, path }),
        })
    }
}

fn name(q: Question) -> &'static str {
    match q {
        Question::Diagnostics => "diagnostics",
        Question::Definition => "definition",
        Question::References => "references",
        Question::Hover => "hover",
        Question::Symbols => "symbols",
    }
}

struct Ask {
    servers: Arc<Servers>,
    args: LspArgs,
    path: Option<PathBuf>,
}

impl Action for Ask {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let answer = match &self.path {
            Some(path) => self.about_file(ctx, path).await,
            None => self.about_workspace(ctx).await,
        };
        match answer {
            Ok(text) => {
                let text = truncate::for_model(&text, truncate::MODEL_BUDGET, "narrow the question");
                ToolOutput::ok(text.clone(), vec![crate::tools::ToolContent::Text(text)])
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}

impl Ask {
    async fn about_file(&self, ctx: &ToolContext, path: &Path) -> Result<String, String> {
        let shown = ctx.display(path);
        let server = self
            .servers
            .for_file(path)
            .ok_or_else(|| format!("no language server here serves {shown} (`/lsp` shows which are)"))?;
        let content = match ctx.host.read_text_file(&ctx.session, path, None, &ctx.cancel).await {
            Ok(text) => text,
            Err(e) => return Err(format!("{shown}: {e}")),
        };
        let version = server.sync(path, &content);
        if !server.ready(ANSWER_LIMIT, &ctx.cancel).await {
            return Err(format!("`{}` is not available: {}", server.spec.name, describe(&server)));
        }
        let document = json!({"uri": text::uri(path)});
        let at = || -> Result<Value, String> {
            let line = self.args.line.unwrap_or(1);
            let position = text::position(&content, line, self.args.symbol.as_deref())?;
            Ok(json!({"textDocument": document, "position": position}))
        };
        let ask = |method: &'static str, params: Value| server.request(method, params, ANSWER_LIMIT, &ctx.cancel);
        match self.args.action {
            Question::Diagnostics => {
                let deadline = tokio::time::Instant::now() + ANSWER_LIMIT;
                let found = server
                    .wait_diagnostics(path, version, deadline, &ctx.cancel)
                    .await
                    .ok_or_else(|| format!("`{}` published no diagnostics for {shown} in time", server.spec.name))?;
                let mut found: Vec<&lsp_types::Diagnostic> =
                    found.iter().filter(|d| text::severity(d) != "hint").collect();
                found.sort_by_key(|d| (d.range.start.line, d.range.start.character));
                let lines: Vec<String> =
                    found.into_iter().map(|d| text::diagnostic(&shown, d, Some(&content))).collect();
                Ok(if lines.is_empty() { format!("No problems in {shown}.") } else { lines.join("\n") })
            }
            Question::Definition => {
                let answer = ask("textDocument/definition", at()?).await?;
                let locations = match serde_json::from_value::<Option<GotoDefinitionResponse>>(answer) {
                    Ok(Some(GotoDefinitionResponse::Scalar(l))) => vec![l],
                    Ok(Some(GotoDefinitionResponse::Array(ls))) => ls,
                    Ok(Some(GotoDefinitionResponse::Link(links))) => links
                        .into_iter()
                        .map(|l| Location { uri: l.target_uri, range: l.target_selection_range })
                        .collect(),
                    Ok(None) => Vec::new(),
                    Err(e) => return Err(format!("an answer not understood: {e}")),
                };
                Ok(listed(ctx, &self.servers, &locations, "No definition found.").await)
            }
            Question::References => {
                let mut params = at()?;
                params["context"] = json!({"includeDeclaration": true});
                let answer = ask("textDocument/references", params).await?;
                let locations: Vec<Location> = serde_json::from_value::<Option<Vec<Location>>>(answer)
                    .map_err(|e| format!("an answer not understood: {e}"))?
                    .unwrap_or_default();
                Ok(listed(ctx, &self.servers, &locations, "No references found.").await)
            }
            Question::Hover => {
                let answer = ask("textDocument/hover", at()?).await?;
                let hover = serde_json::from_value::<Option<Hover>>(answer)
                    .map_err(|e| format!("an answer not understood: {e}"))?;
                Ok(hover
                    .map(|h| hover_text(h.contents))
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_else(|| "Nothing known there.".into()))
            }
            Question::Symbols => {
                let answer = ask("textDocument/documentSymbol", json!({"textDocument": document})).await?;
                let symbols = serde_json::from_value::<Option<DocumentSymbolResponse>>(answer)
                    .map_err(|e| format!("an answer not understood: {e}"))?;
                let mut out = String::new();
                match symbols {
                    Some(DocumentSymbolResponse::Nested(symbols)) => nested(&mut out, &symbols, 0),
                    Some(DocumentSymbolResponse::Flat(symbols)) => flat(&mut out, ctx, &symbols),
                    None => {}
                }
                Ok(if out.is_empty() { format!("No symbols in {shown}.") } else { out })
            }
        }
    }

    async fn about_workspace(&self, ctx: &ToolContext) -> Result<String, String> {
        let servers = self.servers.for_workspace();
        if servers.is_empty() {
            return Err("no language server runs for this workspace (`/lsp` shows which are found)".into());
        }
        let ready = futures_util::future::join_all(servers.iter().map(|s| s.ready(ANSWER_LIMIT, &ctx.cancel))).await;
        let running: Vec<&Arc<Server>> = servers.iter().zip(ready).filter(|(_, r)| *r).map(|(s, _)| s).collect();
        if running.is_empty() {
            let why: Vec<String> = servers.iter().map(|s| format!("`{}`: {}", s.spec.name, describe(s))).collect();
            return Err(format!("no language server is available: {}", why.join("; ")));
        }
        match self.args.action {
            Question::Symbols => {
                let query = self.args.query.clone().unwrap_or_default();
                let mut out = String::new();
                for server in running.iter().filter(|s| s.offers("workspaceSymbolProvider")) {
                    let answer =
                        server.request("workspace/symbol", json!({"query": query}), ANSWER_LIMIT, &ctx.cancel).await?;
                    if let Ok(Some(symbols)) = serde_json::from_value::<Option<Vec<SymbolInformation>>>(answer) {
                        flat(&mut out, ctx, &symbols);
                    }
                }
                Ok(if out.is_empty() { format!("No symbols match `{query}`.") } else { out })
            }
            _ => {
                let mut lines = Vec::new();
                for server in running {
                    for (path, diagnostics) in server.all_diagnostics() {
                        let shown = ctx.display(&path);
                        let content = server.content(&path);
                        lines.extend(
                            diagnostics
                                .iter()
                                .filter(|d| text::serious(d))
                                .map(|d| text::diagnostic(&shown, d, content.as_deref())),
                        );
                    }
                }
                Ok(if lines.is_empty() {
                    "No errors or warnings in the files the language servers have checked (the files opened so far)."
                        .into()
                } else {
                    lines.join("\n")
                })
            }
        }
    }
}

fn describe(server: &Server) -> String {
    match server.state() {
        super::server::State::Failed { error, .. } => error,
        _ => "it did not start in time".into(),
    }
}

/// Locations as `path:line: text of the line`.
async fn listed(ctx: &ToolContext, servers: &Servers, locations: &[Location], none: &str) -> String {
    if locations.is_empty() {
        return none.into();
    }
    // What the sandbox hides ($ACP_HOME, `[sandbox] deny_read`) is not quoted, wherever a server
    // points.
    let hidden: Vec<PathBuf> = crate::sandbox::Policy::new(servers.config(), &[], false)
        .hidden
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let mut out = String::new();
    for location in locations.iter().take(MAX_LOCATIONS) {
        let Some(path) = text::path(&location.uri) else { continue };
        let line = location.range.start.line as usize;
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let source = match servers.held().iter().find_map(|s| s.content(&path)) {
            _ if hidden.iter().any(|h| real.starts_with(h)) => None,
            Some(text) => Some(text.to_string()),
            None => crate::files::read_capped(&path, 8 << 20).ok().map(|b| String::from_utf8_lossy(&b).into_owned()),
        };
        let line_text = source.as_deref().and_then(|t| t.lines().nth(line)).unwrap_or("");
        let col = text::column(line_text, location.range.start.character);
        let _ = writeln!(out, "{}:{}:{col}: {}", ctx.display(&path), line + 1, truncate::line(line_text.trim(), 200));
    }
    if locations.len() > MAX_LOCATIONS {
        let _ = writeln!(out, "… and {} more", locations.len() - MAX_LOCATIONS);
    }
    out.trim_end().to_owned()
}

fn hover_text(contents: HoverContents) -> String {
    let marked = |m: MarkedString| match m {
        MarkedString::String(s) => s,
        MarkedString::LanguageString(l) => format!("```{}\n{}\n```", l.language, l.value),
    };
    match contents {
        HoverContents::Scalar(m) => marked(m),
        HoverContents::Array(ms) => ms.into_iter().map(marked).collect::<Vec<_>>().join("\n\n"),
        HoverContents::Markup(m) => m.value,
    }
}

fn nested(out: &mut String, symbols: &[DocumentSymbol], depth: usize) {
    for s in symbols {
        let _ = writeln!(
            out,
            "{}{} {} (line {})",
            "  ".repeat(depth),
            kind(s.kind),
            s.name,
            s.selection_range.start.line + 1
        );
        if let Some(children) = &s.children {
            nested(out, children, depth + 1);
        }
    }
}

fn flat(out: &mut String, ctx: &ToolContext, symbols: &[SymbolInformation]) {
    for s in symbols.iter().take(MAX_LOCATIONS) {
        let at = text::path(&s.location.uri).map(|p| ctx.display(&p)).unwrap_or_default();
        let container = s.container_name.as_deref().map(|c| format!(" in {c}")).unwrap_or_default();
        let _ = writeln!(out, "{} {}{container} — {at}:{}", kind(s.kind), s.name, s.location.range.start.line + 1);
    }
}

fn kind(kind: lsp_types::SymbolKind) -> String {
    let text = format!("{kind:?}").to_lowercase();
    text.trim_start_matches("symbolkind(").trim_end_matches(')').to_owned()
}

#[cfg(test)]
mod tests {
    use crate::tools::AnyTool;

    #[test]
    fn one_compact_schema() {
        let home = |name: &str| (name == "ACP_HOME").then(|| "/nonexistent/acp-home".into());
        let config = std::sync::Arc::new(crate::config::Config::load_with(&home));
        let servers = super::Servers::new(std::sync::Arc::default(), config, Vec::new());
        let spec = super::Lsp(std::sync::Arc::new(servers)).spec();
        let bytes = spec.description.len() + spec.parameters.to_string().len();
        // About a quarter of that in tokens: the model is sent it on every turn it is offered.
        assert!(bytes < 900, "{bytes} bytes: {}", spec.parameters);
    }
}
