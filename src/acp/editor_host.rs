//! Calls to the editor: `fs/read_text_file` and `fs/write_text_file` when the client offers them
//! (so unsaved buffers are read and edits show up for review), `terminal/*` when it offers
//! terminals, and `session/request_permission`. Without a capability, files go to local disk.
//! Never calls a method the client did not advertise.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acp_protocol::acp::client_methods as m;
use acp_protocol::acp::schema::{
    CreateTerminalResponse, PermissionOption, PermissionOptionKind, ReadTextFileResponse, RequestPermissionOutcome,
    RequestPermissionResponse, TerminalOutputResponse, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitResponse,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::state::State;
use super::updates;
use crate::rpc::RequestError;
use crate::runtime::host::{
    self, ElicitAnswer, ElicitRequest, ExitStatus, FsError, Host, LineRange, OptionKind, PermissionAnswer,
    PermissionRequest, TerminalOutput, TerminalSpec,
};

/// The runtime's [`Host`] for an ACP connection.
pub struct AcpHost {
    state: std::sync::Arc<State>,
}

impl AcpHost {
    pub(super) fn new(state: std::sync::Arc<State>) -> Self {
        Self { state }
    }

    /// Calls the editor and waits — until the answer, `cancel`, or `limit`, whichever comes
    /// first (an editor that never answers cannot hold a turn, or its cancellation).
    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
        limit: Duration,
    ) -> Result<T, String> {
        let value =
            self.state.conn.request_within(method, &params, cancel, Some(limit)).await.map_err(|e| match e {
                RequestError::Remote(e) => remote_reason(&e.message, e.data.as_ref()),
                RequestError::TimedOut(limit) => {
                    format!("the editor did not answer {method} within {} s", limit.as_secs())
                }
                other => other.to_string(),
            })?;
        serde_json::from_value(value).map_err(|e| format!("unexpected answer to {method}: {e}"))
    }

    /// A call made after the turn's end or cancellation (kill, output, release): not cancelled,
    /// but short.
    async fn cleanup<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, String> {
        self.call(method, params, &CancellationToken::new(), CLEANUP_LIMIT).await
    }
}

/// How long the editor may take to answer, by call. Reads and terminal starts are quick; a write
/// may wait for the user to review it; cleanup after a cancel must not hold the cancel up.
const READ_LIMIT: Duration = Duration::from_secs(60);
const WRITE_LIMIT: Duration = Duration::from_secs(600);
const TERMINAL_LIMIT: Duration = Duration::from_secs(30);
const CLEANUP_LIMIT: Duration = Duration::from_secs(2);
/// A command runs as long as the exec tool lets it (its own timeout ends it first).
const COMMAND_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// What an editor's error says: its message, and the reason it put in `data` (`details`, or
/// `message`, or the data itself as text) — "Internal error" alone helps nobody.
fn remote_reason(message: &str, data: Option<&Value>) -> String {
    let detail = match data {
        None | Some(Value::Null) => return message.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(d) => match d.get("details").or_else(|| d.get("message")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => d.to_string(),
        },
    };
    let detail = detail.trim();
    if detail.is_empty() || message.contains(detail) {
        message.to_owned()
    } else if detail.contains(message) {
        detail.to_owned()
    } else {
        format!("{message}: {detail}")
    }
}

impl Host for AcpHost {
    async fn read_text_file(
        &self,
        session: &str,
        path: &Path,
        range: Option<LineRange>,
        cancel: &CancellationToken,
    ) -> Result<String, FsError> {
        if !self.state.caps.read_text_file.load(Ordering::Relaxed) {
            return Host::read_text_file(&host::LocalHost, session, path, range, cancel).await;
        }
        // A FIFO or device on disk is refused before the editor is asked to open it.
        host::ensure_regular(path).await?;
        let mut params = json!({ "sessionId": session, "path": path });
        if let Some(r) = range {
            params["line"] = json!(r.line);
            params["limit"] = json!(r.limit);
        }
        match self.call::<ReadTextFileResponse>(m::FS_READ_TEXT_FILE, params, cancel, READ_LIMIT).await {
            Ok(r) => Ok(r.content),
            // Clients answer a missing file with some error; any error for a file that is not
            // on disk means "new file".
            Err(e) => match tokio::fs::try_exists(path).await {
                Ok(false) => Err(FsError::NotFound),
                _ => Err(FsError::Other(format!("the editor could not read it: {e}"))),
            },
        }
    }

    async fn write_text_file(
        &self,
        session: &str,
        path: &Path,
        content: &str,
        cancel: &CancellationToken,
    ) -> Result<(), FsError> {
        if !self.state.caps.write_text_file.load(Ordering::Relaxed) {
            return Host::write_text_file(&host::LocalHost, session, path, content, cancel).await;
        }
        host::ensure_regular(path).await?;
        let params = json!({ "sessionId": session, "path": path, "content": content });
        self.call::<Value>(m::FS_WRITE_TEXT_FILE, params, cancel, WRITE_LIMIT)
            .await
            .map(|_| ())
            .map_err(|e| FsError::Other(format!("the editor could not write it: {e}")))
    }

    async fn request_permission(
        &self,
        session: &str,
        request: &PermissionRequest,
        cancel: &CancellationToken,
    ) -> PermissionAnswer {
        let options: Vec<PermissionOption> = request
            .options
            .iter()
            .map(|o| {
                let kind = match o.kind {
                    OptionKind::AllowOnce => PermissionOptionKind::AllowOnce,
                    OptionKind::AllowAlways => PermissionOptionKind::AllowAlways,
                    OptionKind::RejectOnce => PermissionOptionKind::RejectOnce,
                    OptionKind::RejectAlways => PermissionOptionKind::RejectAlways,
                };
                PermissionOption::new(o.id.clone(), o.label.clone(), kind)
            })
            .collect();
        // Everything known of the call, so that clients deciding by kind or policy (and people
        // reading the question) see what will run.
        let call = &request.call;
        let fields = ToolCallUpdateFields::new()
            .title(call.title.clone())
            .kind(updates::kind(call.kind))
            .raw_input(call.raw_input.clone())
            .locations(call.locations.iter().map(updates::location).collect::<Vec<_>>())
            .content(call.content.iter().map(updates::content).collect::<Vec<_>>());
        let tool_call = ToolCallUpdate::new(call.id.clone(), fields)
            .meta(serde_json::Map::from_iter([("toolName".to_owned(), json!(call.name))]));
        let params = json!({ "sessionId": session, "toolCall": tool_call, "options": options });
        match self.state.conn.request(m::SESSION_REQUEST_PERMISSION, &params, cancel).await {
            Ok(value) => match serde_json::from_value::<RequestPermissionResponse>(value) {
                Ok(r) => match r.outcome {
                    RequestPermissionOutcome::Selected(s) => PermissionAnswer::Selected(s.option_id.0.to_string()),
                    // ACP: the client answers `cancelled` when the user cancelled the turn.
                    _ => PermissionAnswer::Cancelled,
                },
                Err(e) => {
                    tracing::warn!(error = %e, "unexpected answer to session/request_permission");
                    PermissionAnswer::NoAnswer
                }
            },
            Err(_) if cancel.is_cancelled() => PermissionAnswer::Cancelled,
            Err(e) => {
                tracing::debug!(error = %e, "permission request ended without a choice");
                PermissionAnswer::NoAnswer
            }
        }
    }

    async fn elicit(
        &self,
        session: &str,
        call_id: &str,
        request: &ElicitRequest,
        cancel: &CancellationToken,
    ) -> ElicitAnswer {
        if self.state.caps.elicitation_form.load(Ordering::Relaxed) {
            return self.elicit_form(session, call_id, request, cancel).await;
        }
        self.elicit_by_question(session, call_id, request, cancel).await
    }

    fn has_terminals(&self) -> bool {
        self.state.caps.terminal()
    }

    async fn create_terminal(
        &self,
        session: &str,
        spec: &TerminalSpec,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let env: Vec<Value> = spec.env.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect();
        let mut params = json!({
            "sessionId": session,
            "command": spec.command,
            "args": spec.args,
            "env": env,
            "cwd": spec.cwd,
        });
        if let Some(limit) = spec.output_byte_limit {
            params["outputByteLimit"] = json!(limit);
        }
        self.call::<CreateTerminalResponse>(m::TERMINAL_CREATE, params, cancel, TERMINAL_LIMIT)
            .await
            .map(|r| r.terminal_id.0.to_string())
    }

    async fn wait_for_terminal_exit(
        &self,
        session: &str,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<ExitStatus, String> {
        let params = json!({ "sessionId": session, "terminalId": id });
        let r =
            self.call::<WaitForTerminalExitResponse>(m::TERMINAL_WAIT_FOR_EXIT, params, cancel, COMMAND_LIMIT).await?;
        Ok(ExitStatus { code: r.exit_status.exit_code.map(i64::from), signal: r.exit_status.signal })
    }

    async fn terminal_output(&self, session: &str, id: &str) -> Result<TerminalOutput, String> {
        let params = json!({ "sessionId": session, "terminalId": id });
        let r = self.cleanup::<TerminalOutputResponse>(m::TERMINAL_OUTPUT, params).await?;
        Ok(TerminalOutput {
            output: r.output,
            truncated: r.truncated,
            exit: r.exit_status.map(|s| ExitStatus { code: s.exit_code.map(i64::from), signal: s.signal }),
        })
    }

    async fn kill_terminal(&self, session: &str, id: &str) -> Result<(), String> {
        self.cleanup::<Value>(m::TERMINAL_KILL, json!({ "sessionId": session, "terminalId": id })).await.map(|_| ())
    }

    async fn release_terminal(&self, session: &str, id: &str) -> Result<(), String> {
        self.cleanup::<Value>(m::TERMINAL_RELEASE, json!({ "sessionId": session, "terminalId": id })).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::remote_reason;

    #[test]
    fn an_editors_error_shows_the_reason_in_its_data() {
        let ts = json!({"details": "Permission denied for fs/write_text_file"});
        assert_eq!(
            remote_reason("Internal error", Some(&ts)),
            "Internal error: Permission denied for fs/write_text_file"
        );
        assert_eq!(
            remote_reason("Internal error", Some(&json!({"message": "disk full"}))),
            "Internal error: disk full"
        );
        assert_eq!(
            remote_reason("Internal error", Some(&json!("read-only buffer"))),
            "Internal error: read-only buffer"
        );
        assert_eq!(remote_reason("Internal error", Some(&json!({"errno": 13}))), "Internal error: {\"errno\":13}");
        assert_eq!(remote_reason("No such file", None), "No such file");
        assert_eq!(remote_reason("No such file", Some(&json!({"details": "No such file"}))), "No such file");
    }
}

/// How long a form may wait for the user.
const FORM_LIMIT: Duration = Duration::from_secs(600);

impl AcpHost {
    /// `elicitation/create` in form mode, scoped to the running call.
    async fn elicit_form(
        &self,
        session: &str,
        call_id: &str,
        request: &ElicitRequest,
        cancel: &CancellationToken,
    ) -> ElicitAnswer {
        let params = json!({
            "sessionId": session,
            "toolCallId": call_id,
            "mode": "form",
            "message": format!("{} asks: {}", request.server, request.message),
            "requestedSchema": elicitation::acp_schema(&request.schema),
        });
        match self.call::<Value>(m::ELICITATION_CREATE, params, cancel, FORM_LIMIT).await {
            Ok(answer) => elicitation::answer(&answer),
            Err(_) if cancel.is_cancelled() => ElicitAnswer::Cancel,
            Err(e) => {
                tracing::warn!(error = %e, "elicitation/create failed; declined");
                ElicitAnswer::Decline
            }
        }
    }

    /// Without forms: a permission question — accept the form's defaults, or decline. A form
    /// with a required field that has no default cannot be accepted this way.
    async fn elicit_by_question(
        &self,
        session: &str,
        call_id: &str,
        request: &ElicitRequest,
        cancel: &CancellationToken,
    ) -> ElicitAnswer {
        let Some(defaults) = elicitation::defaults(&request.schema) else {
            tracing::info!(server = %request.server, "a form with required fields and no way to fill it; declined");
            return ElicitAnswer::Decline;
        };
        let shown = serde_json::to_string_pretty(&defaults).unwrap_or_default();
        let call = crate::runtime::ToolCallState {
            id: call_id.to_owned(),
            name: request.server.clone(),
            title: format!("{} asks: {}", request.server, request.message),
            kind: crate::runtime::ToolKind::Other,
            status: crate::runtime::ToolStatus::InProgress,
            locations: Vec::new(),
            raw_input: Value::Object(defaults.clone()),
            content: vec![crate::runtime::ToolContent::Text(format!(
                "{}\n\nAnswer with these values:\n{shown}",
                request.message
            ))],
            raw_output: None,
            streams_output: false,
        };
        let options = vec![
            host::PermissionOption { id: "accept".into(), label: "Accept".into(), kind: OptionKind::AllowOnce },
            host::PermissionOption { id: "decline".into(), label: "Decline".into(), kind: OptionKind::RejectOnce },
        ];
        let question = PermissionRequest { call, options };
        match Host::request_permission(self, session, &question, cancel).await {
            PermissionAnswer::Selected(id) if id == "accept" => ElicitAnswer::Accept(defaults),
            PermissionAnswer::Cancelled => ElicitAnswer::Cancel,
            _ => ElicitAnswer::Decline,
        }
    }
}

/// MCP forms as ACP forms, and the answers back.
pub(super) mod elicitation {
    use serde_json::{Map, Value};

    use crate::runtime::host::ElicitAnswer;

    /// The MCP schema in ACP's terms: the legacy `enum` + `enumNames` becomes `oneOf` with titles
    /// (ACP has no `enumNames`); the rest is the same shape.
    pub fn acp_schema(schema: &Value) -> Value {
        let mut schema = schema.clone();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            for prop in props.values_mut() {
                let Some(p) = prop.as_object_mut() else { continue };
                let Some(Value::Array(names)) = p.remove("enumNames") else { continue };
                let Some(Value::Array(values)) = p.remove("enum") else { continue };
                let options: Vec<Value> = values
                    .iter()
                    .enumerate()
                    .map(
                        |(i, v)| serde_json::json!({ "const": v, "title": names.get(i).cloned().unwrap_or(v.clone()) }),
                    )
                    .collect();
                p.insert("oneOf".into(), Value::Array(options));
            }
        }
        schema
    }

    /// The ACP answer as an MCP one; anything unexpected declines.
    pub fn answer(answer: &Value) -> ElicitAnswer {
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {
                ElicitAnswer::Accept(answer.get("content").and_then(Value::as_object).cloned().unwrap_or_default())
            }
            Some("cancel") => ElicitAnswer::Cancel,
            _ => ElicitAnswer::Decline,
        }
    }

    /// The form filled with its defaults; `None` when a required field has none.
    pub fn defaults(schema: &Value) -> Option<Map<String, Value>> {
        let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, prop) in &props {
            match prop.get("default") {
                Some(v) => {
                    out.insert(name.clone(), v.clone());
                }
                None if required.contains(&name.as_str()) => return None,
                None => {}
            }
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn legacy_enum_names_become_titled_options() {
            let schema = json!({"type": "object", "properties": {
                "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
                "n": {"type": "integer", "default": 3}
            }, "required": ["color"]});
            let acp = acp_schema(&schema);
            assert_eq!(
                acp["properties"]["color"],
                json!({"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]})
            );
            assert_eq!(acp["properties"]["n"], schema["properties"]["n"]);
            assert_eq!(defaults(&schema), None, "a required field without a default");
            let optional = json!({"properties": {"n": {"type": "integer", "default": 3}, "s": {"type": "string"}}});
            assert_eq!(defaults(&optional), Some(Map::from_iter([("n".to_owned(), json!(3))])));
        }

        #[test]
        fn answers() {
            assert_eq!(
                answer(&json!({"action": "accept", "content": {"a": 1}})),
                ElicitAnswer::Accept(Map::from_iter([("a".to_owned(), json!(1))]))
            );
            assert_eq!(answer(&json!({"action": "cancel"})), ElicitAnswer::Cancel);
            assert_eq!(answer(&json!({"action": "decline"})), ElicitAnswer::Decline);
            assert_eq!(answer(&json!({"action": 7})), ElicitAnswer::Decline);
        }
    }
}
