//! A session's MCP servers: started (or shared) when the session opens, waited for when a turn
//! first needs their tools, reported to the user when one is not available, and listed by `/mcp`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::event::{Emitter, EventKind};
use super::turn::new_message_id;
use super::{SessionSettings, Shared};
use crate::mcp::tool::{McpTool, names};
use crate::mcp::{HttpSource, Server, State, describe_transport};
use crate::sync::lock;
use crate::tools::{AnyTool, Registry};

/// The servers one session uses.
pub(crate) struct McpSet {
    servers: Vec<Arc<Server>>,
    /// The start of each server whose failure the user was told about.
    reported: Mutex<HashMap<String, u64>>,
}

impl McpSet {
    /// The servers of a session with these settings (the configured ones, and the editor's, which
    /// win by name), starting in the background. Never waits.
    pub(crate) fn start(shared: &Arc<Shared>, settings: &SessionSettings) -> Arc<Self> {
        let config = shared.config();
        let all = crate::config::mcp::merge(&config.mcp_servers, settings.mcp_servers.clone());
        let servers =
            if all.is_empty() { Vec::new() } else { shared.mcp.acquire(&all, &settings.roots(), &http(shared)) };
        Arc::new(Self { servers, reported: Mutex::default() })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// Adds the tools of every server to `registry`, waiting for servers still starting (each at
    /// most its startup timeout) and restarting ones that stopped. A server that is not available
    /// is said once per start, in the reply.
    pub(crate) async fn add_tools(&self, registry: &mut Registry, events: &Emitter, cancel: &CancellationToken) {
        if self.servers.is_empty() {
            return;
        }
        for server in &self.servers {
            server.revive();
        }
        let states = futures_util::future::join_all(self.servers.iter().map(|s| s.settled(cancel))).await;
        let taken: HashSet<String> = registry.specs().into_iter().map(|s| s.name).collect();
        let mut offered = Vec::new();
        for (server, state) in self.servers.iter().zip(states) {
            match state {
                State::Ready(lists) => {
                    for tool in &lists.tools {
                        offered.push((server.clone(), tool.clone()));
                    }
                }
                State::Failed { error, .. } => self.tell_once(server, &error, events),
                State::Connecting => {}
            }
        }
        let named = names(offered.iter().map(|(s, t)| (s.name(), t.name.as_ref())), &taken);
        for (name, (server, tool)) in named.into_iter().zip(offered) {
            let tool: Arc<dyn AnyTool> = Arc::new(McpTool::new(name, server.name().to_owned(), server, tool));
            registry.add(tool);
        }
    }

    fn tell_once(&self, server: &Arc<Server>, error: &str, events: &Emitter) {
        let generation = server.generation();
        if lock(&self.reported).insert(server.name().to_owned(), generation) == Some(generation) {
            return;
        }
        let text = format!(
            "MCP server `{}` is not available: {error}. Its tools are left out; `/mcp` shows its state.\n\n",
            server.name()
        );
        events.emit(EventKind::TextDelta { message_id: new_message_id(), text });
    }

    /// What `/mcp` shows: each server, its state, tools, prompts and resources.
    pub(crate) fn report(&self) -> String {
        if self.servers.is_empty() {
            return "No MCP servers. Add them in config.toml (`[mcp_servers.NAME]`) or in the editor.".into();
        }
        let mut out = String::from("MCP servers:\n");
        for server in &self.servers {
            let transport = describe_transport(&server.config.transport);
            match server.state() {
                State::Connecting => {
                    let _ = writeln!(out, "\n- `{}` — starting ({transport})", server.name());
                }
                State::Failed { error, stopped } => {
                    let what = if stopped { "stopped" } else { "failed" };
                    let _ = writeln!(out, "\n- `{}` — {what} ({transport})\n  last error: {error}", server.name());
                }
                State::Ready(lists) => {
                    let _ = writeln!(out, "\n- `{}` — ready, {} ({transport})", server.name(), lists.server_info);
                    let tools: Vec<String> = lists.tools.iter().map(|t| format!("`{}`", t.name)).collect();
                    let _ = writeln!(out, "  tools ({}): {}", tools.len(), list_or_none(&tools));
                    let prompts: Vec<String> =
                        lists.prompts.iter().map(|p| format!("`/{}:{}`", server.name(), p.name)).collect();
                    let _ = writeln!(out, "  prompts ({}): {}", prompts.len(), list_or_none(&prompts));
                    let resources: Vec<String> = lists.resources.iter().map(|r| format!("`{}`", r.uri)).collect();
                    let _ = writeln!(out, "  resources ({}): {}", resources.len(), list_or_none(&resources));
                }
            }
        }
        out.push_str("\n`/mcp restart NAME` starts a server again.");
        out
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".into() } else { items.join(", ") }
}

/// The agent's HTTP client, for HTTP servers.
fn http(shared: &Arc<Shared>) -> HttpSource {
    let weak = Arc::downgrade(shared);
    Arc::new(move || {
        let weak = weak.clone();
        Box::pin(async move {
            match weak.upgrade() {
                Some(shared) => shared.http().await.map_err(|e| e.message),
                None => Err("the agent is stopping".into()),
            }
        })
    })
}
