//! What the client asks of the agent, built from the ACP schema's types: `initialize`, opening a
//! session, its settings, a prompt and a cancel. Each comes wrapped in the schema's
//! `ClientRequest` / `ClientNotification`, which names its method.

use std::path::Path;

use acp_protocol::acp::ProtocolVersion;
use acp_protocol::acp::schema::{
    CancelNotification, ClientCapabilities, ClientNotification, ClientRequest, ContentBlock, FileSystemCapabilities,
    Implementation, InitializeRequest, LoadSessionRequest, Meta, NewSessionRequest, PromptRequest,
    SessionConfigOptionValue, SetSessionConfigOptionRequest, SetSessionModeRequest, TextContent,
};
use serde_json::Value;

/// Who the client is and whether it offers the agent its files and terminals.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub name: &'static str,
    pub title: &'static str,
    /// `fs/*` and `terminal/*` are answered.
    pub host: bool,
}

pub fn initialize(client: Client) -> ClientRequest {
    let fs = FileSystemCapabilities::new().read_text_file(client.host).write_text_file(client.host);
    ClientRequest::InitializeRequest(
        InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new().fs(fs).terminal(client.host))
            .client_info(Implementation::new(client.name, env!("CARGO_PKG_VERSION")).title(client.title)),
    )
}

/// `session/new`, with `_meta.sessionKey` (acp's named sessions) when a key is given.
/// A new session (`key`: the one to continue or create under that key; `model`: the model it
/// starts with, checked before anything else, so a wrong name is said as such).
pub fn new_session(cwd: &Path, key: Option<&str>, model: Option<&str>) -> ClientRequest {
    let mut meta = Meta::new();
    if let Some(key) = key {
        meta.insert("sessionKey".to_owned(), Value::from(key));
    }
    if let Some(model) = model {
        meta.insert("model".to_owned(), Value::from(model));
    }
    let mut request = NewSessionRequest::new(cwd);
    if !meta.is_empty() {
        request = request.meta(meta);
    }
    ClientRequest::NewSessionRequest(request)
}

pub fn load_session(session: &str, cwd: &Path) -> ClientRequest {
    ClientRequest::LoadSessionRequest(LoadSessionRequest::new(session.to_owned(), cwd))
}

/// Picks the model (the `model` config option).
pub fn set_model(session: &str, model: &str) -> ClientRequest {
    let value = SessionConfigOptionValue::value_id(model.to_owned());
    ClientRequest::SetSessionConfigOptionRequest(SetSessionConfigOptionRequest::new(session.to_owned(), "model", value))
}

pub fn set_mode(session: &str, mode: &str) -> ClientRequest {
    ClientRequest::SetSessionModeRequest(SetSessionModeRequest::new(session.to_owned(), mode.to_owned()))
}

/// A prompt of one text block.
pub fn prompt(session: &str, text: &str) -> ClientRequest {
    let prompt = vec![ContentBlock::Text(TextContent::new(text))];
    ClientRequest::PromptRequest(PromptRequest::new(session.to_owned(), prompt))
}

pub fn cancel(session: &str) -> ClientNotification {
    ClientNotification::CancelNotification(CancelNotification::new(session.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(request: &ClientRequest, method: &str, params: Value) {
        assert_eq!(request.method(), method);
        assert_eq!(serde_json::to_value(request).unwrap(), params, "{method}");
    }

    #[test]
    fn requests_carry_their_method_and_params() {
        let client = Client { name: "acp-client", title: "acp client", host: true };
        // `auth` is the schema's default: no login through a terminal is offered.
        let mut init = json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
                "auth": {"terminal": false}},
            "clientInfo": {"name": "acp-client", "title": "acp client", "version": env!("CARGO_PKG_VERSION")},
        });
        check(&initialize(client), "initialize", init.clone());
        init["clientCapabilities"]["fs"] = json!({"readTextFile": false, "writeTextFile": false});
        init["clientCapabilities"]["terminal"] = json!(false);
        init["clientInfo"] = json!({"name": "acp-run", "title": "acp run", "version": env!("CARGO_PKG_VERSION")});
        check(&initialize(Client { name: "acp-run", title: "acp run", host: false }), "initialize", init);

        let cwd = Path::new("/w");
        check(&new_session(cwd, None, None), "session/new", json!({"cwd": "/w", "mcpServers": []}));
        check(
            &new_session(cwd, Some("k"), Some("a/b")),
            "session/new",
            json!({"cwd": "/w", "mcpServers": [], "_meta": {"sessionKey": "k", "model": "a/b"}}),
        );
        check(&load_session("s", cwd), "session/load", json!({"sessionId": "s", "cwd": "/w", "mcpServers": []}));
        check(
            &set_model("s", "m"),
            "session/set_config_option",
            json!({"sessionId": "s", "configId": "model", "value": "m"}),
        );
        check(&set_mode("s", "ask"), "session/set_mode", json!({"sessionId": "s", "modeId": "ask"}));
        check(
            &prompt("s", "hi"),
            "session/prompt",
            json!({"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}),
        );
        let cancel = cancel("s");
        assert_eq!(cancel.method(), "session/cancel");
        assert_eq!(serde_json::to_value(&cancel).unwrap(), json!({"sessionId": "s"}));
    }
}
