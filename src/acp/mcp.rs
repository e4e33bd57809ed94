//! The editor's MCP servers (`mcpServers` of `session/new|load|resume`) as the runtime describes
//! them.

use acp_protocol::acp::schema::McpServer as AcpServer;

use crate::config::mcp::{McpServer, McpTransport};

/// The servers the editor gave; kinds this agent does not know are logged and left out.
pub(super) fn servers(given: Vec<AcpServer>) -> Vec<McpServer> {
    given
        .into_iter()
        .filter_map(|server| {
            let (name, transport) = match server {
                AcpServer::Stdio(s) => (
                    s.name,
                    McpTransport::Stdio {
                        command: s.command.to_string_lossy().into_owned(),
                        args: s.args,
                        env: s.env.into_iter().map(|v| (v.name, v.value)).collect(),
                        cwd: None,
                    },
                ),
                AcpServer::Http(s) => (
                    s.name,
                    McpTransport::Http {
                        url: s.url,
                        headers: s.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                    },
                ),
                AcpServer::Sse(s) => (
                    s.name,
                    McpTransport::Sse {
                        url: s.url,
                        headers: s.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                    },
                ),
                other => {
                    tracing::warn!(server = ?other, "an MCP server of a kind this agent does not support; left out");
                    return None;
                }
            };
            Some(McpServer::new(name, transport))
        })
        .collect()
}
