//! The JSON-RPC 2.0 envelope: classifies one decoded line into a request, notification or response
//! (or says exactly why it is none of them), and writes messages back as single compact lines.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request id: a number or a string (`null` is tolerated on input and used to answer lines whose
/// id could not be read).
pub use agent_client_protocol_schema::v1::RequestId;

/// Error codes used on the wire.
pub mod code {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const INTERNAL_ERROR: i32 = -32603;
    pub const REQUEST_CANCELLED: i32 = -32800;
    /// ACP: authentication required.
    pub const AUTH_REQUIRED: i32 = -32000;
    /// ACP: resource (e.g. session) not found.
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i32,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("parse error: {detail}"))
    }

    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(code::INVALID_REQUEST, format!("invalid request: {detail}"))
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(code::METHOD_NOT_FOUND, format!("method not found: {method}"))
            .with_data(serde_json::json!({ "method": method }))
    }

    pub fn invalid_params(detail: impl std::fmt::Display) -> Self {
        Self::new(code::INVALID_PARAMS, format!("invalid params: {detail}"))
    }

    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(code::INTERNAL_ERROR, format!("internal error: {detail}"))
    }

    pub fn cancelled() -> Self {
        Self::new(code::REQUEST_CANCELLED, "request cancelled")
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

/// One valid JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request { id: RequestId, method: String, params: Option<Value> },
    Notification { method: String, params: Option<Value> },
    Response { id: RequestId, result: Result<Value, ErrorObject> },
}

/// A line that is not a valid message: the error to answer with, and the id to answer to
/// (`Null` when the id itself could not be read). `respond` is false for broken *responses*,
/// which must not be answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub id: RequestId,
    pub error: ErrorObject,
    pub respond: bool,
}

impl Invalid {
    fn new(id: RequestId, error: ErrorObject) -> Box<Self> {
        Box::new(Self { id, error, respond: true })
    }

    fn unanswerable(id: RequestId, error: ErrorObject) -> Box<Self> {
        Box::new(Self { id, error, respond: false })
    }
}

/// Parses one NDJSON line (without its newline) into a message.
pub fn parse_line(line: &[u8]) -> Result<Message, Box<Invalid>> {
    if let Err(e) = std::str::from_utf8(line) {
        let detail = format!("line is not valid UTF-8 (invalid byte at offset {})", e.valid_up_to());
        return Err(Invalid::new(RequestId::Null, ErrorObject::parse_error(detail)));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        // JavaScript's JSON.stringify writes a broken emoji as a lone surrogate escape
        // (`"\ud83d"`), which is not Unicode: read it as U+FFFD rather than lose the message.
        Err(e) => match std::str::from_utf8(line).ok().and_then(replace_lone_surrogates) {
            Some(fixed) => {
                serde_json::from_str(&fixed).map_err(|_| Invalid::new(RequestId::Null, ErrorObject::parse_error(e)))?
            }
            None => return Err(Invalid::new(RequestId::Null, ErrorObject::parse_error(e))),
        },
    };
    classify(value)
}

/// The line with every `\uXXXX` escape of an unpaired UTF-16 surrogate replaced by `\ufffd`;
/// `None` if it has none.
fn replace_lone_surrogates(line: &str) -> Option<String> {
    let unit = |s: &str, at: usize| -> Option<u16> {
        let hex = s.get(at..at + 6)?.strip_prefix("\\u")?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut out = String::with_capacity(line.len());
    let mut changed = false;
    let mut i = 0;
    while let Some(off) = line[i..].find('\\') {
        let at = i + off;
        out.push_str(&line[i..at]);
        match unit(line, at) {
            Some(0xD800..=0xDBFF) if unit(line, at + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) => {
                out.push_str(&line[at..at + 12]);
                i = at + 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.push_str("\\ufffd");
                changed = true;
                i = at + 6;
            }
            _ => {
                // Any other escape (a `\\` included) is copied with the character it escapes.
                let next = line[at + 1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&line[at..at + 1 + next]);
                i = at + 1 + next;
            }
        }
    }
    out.push_str(&line[i..]);
    changed.then_some(out)
}

/// Classifies an already-parsed JSON value.
pub fn classify(value: Value) -> Result<Message, Box<Invalid>> {
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Err(Invalid::new(
                RequestId::Null,
                ErrorObject::invalid_request("batches are not supported; send one message per line"),
            ));
        }
        other => {
            return Err(Invalid::new(
                RequestId::Null,
                ErrorObject::invalid_request(format!("expected a JSON object, got {}", kind_of(&other))),
            ));
        }
    };

    let id = match obj.remove("id") {
        None => None,
        Some(raw) => match read_id(raw) {
            Ok(id) => Some(id),
            Err(detail) => {
                return Err(Invalid::new(RequestId::Null, ErrorObject::invalid_request(detail)));
            }
        },
    };
    let answer_id = id.clone().unwrap_or(RequestId::Null);

    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(_) => {
            return Err(Invalid::new(answer_id, ErrorObject::invalid_request("`jsonrpc` must be \"2.0\"")));
        }
        None => {
            return Err(Invalid::new(answer_id, ErrorObject::invalid_request("missing `jsonrpc: \"2.0\"`")));
        }
    }

    if let Some(method) = obj.remove("method") {
        let Value::String(method) = method else {
            return Err(Invalid::new(answer_id, ErrorObject::invalid_request("`method` must be a string")));
        };
        let params = match obj.remove("params") {
            None | Some(Value::Null) => None,
            Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
            Some(other) => {
                return Err(Invalid::new(
                    answer_id,
                    ErrorObject::invalid_request(format!(
                        "`params` must be an object or an array, got {}",
                        kind_of(&other)
                    )),
                ));
            }
        };
        return Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        });
    }

    let has_result = obj.contains_key("result");
    let has_error = obj.contains_key("error");
    match (id, has_result, has_error) {
        (Some(id), true, false) => {
            let result = obj.remove("result").unwrap_or(Value::Null);
            Ok(Message::Response { id, result: Ok(result) })
        }
        (Some(id), false, true) => {
            let raw = obj.remove("error").unwrap_or(Value::Null);
            match serde_json::from_value::<ErrorObject>(raw) {
                Ok(error) => Ok(Message::Response { id, result: Err(error) }),
                Err(e) => Err(Invalid::unanswerable(
                    id,
                    ErrorObject::invalid_request(format!("malformed `error` object: {e}")),
                )),
            }
        }
        (id, true, true) => Err(Invalid::unanswerable(
            id.unwrap_or(RequestId::Null),
            ErrorObject::invalid_request("a response cannot carry both `result` and `error`"),
        )),
        (None, true, false) | (None, false, true) => {
            Err(Invalid::unanswerable(RequestId::Null, ErrorObject::invalid_request("a response needs an `id`")))
        }
        (id, false, false) => Err(Invalid::new(
            id.unwrap_or(RequestId::Null),
            ErrorObject::invalid_request("expected `method` (request or notification) or `result`/`error` (response)"),
        )),
    }
}

fn read_id(raw: Value) -> Result<RequestId, String> {
    match raw {
        Value::Null => Ok(RequestId::Null),
        Value::String(s) => Ok(RequestId::Str(s)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(RequestId::Number(i)),
            None => Err(format!("`id` must be an integer or a string, got {n}")),
        },
        other => Err(format!("`id` must be an integer or a string, got {}", kind_of(&other))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Serialize)]
struct RequestOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct NotificationOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct ResultOut<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a R,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    error: &'a ErrorObject,
}

/// Serializes a request as one compact line (no trailing newline).
pub fn request_line<P: Serialize>(id: &RequestId, method: &str, params: &P) -> serde_json::Result<String> {
    serde_json::to_string(&RequestOut { jsonrpc: "2.0", id, method, params })
}

/// Serializes a notification as one compact line (no trailing newline).
pub fn notification_line<P: Serialize>(method: &str, params: &P) -> serde_json::Result<String> {
    serde_json::to_string(&NotificationOut { jsonrpc: "2.0", method, params })
}

/// Serializes a successful response as one compact line (no trailing newline).
pub fn result_line<R: Serialize>(id: &RequestId, result: &R) -> serde_json::Result<String> {
    serde_json::to_string(&ResultOut { jsonrpc: "2.0", id, result })
}

/// Serializes an error response as one compact line (no trailing newline).
pub fn error_line(id: &RequestId, error: &ErrorObject) -> String {
    // An ErrorObject holds only strings, numbers and JSON values: serialization cannot fail.
    serde_json::to_string(&ErrorOut { jsonrpc: "2.0", id, error }).unwrap_or_else(|_| {
        format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{},"message":"unserializable error"}}}}"#, error.code)
    })
}

/// Reads the `_meta` object of a params value, if there is one.
pub fn meta_of(params: &Value) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"t":"a\ud83d b \udc00 \ud83d\ude00 \\ud83d"}}"#;
        let Ok(Message::Request { id, params, .. }) = parse_line(line) else { panic!("not accepted") };
        assert_eq!(id, RequestId::Number(7));
        assert_eq!(params.unwrap()["t"], "a\u{fffd} b \u{fffd} \u{1f600} \\ud83d");
        // Other broken JSON is still a parse error.
        assert!(parse_line(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"t":"\ud83d}"#).is_err());
        assert_eq!(replace_lone_surrogates(r#""\\ud83d""#), None, "an escaped backslash is not an escape");
        assert_eq!(replace_lone_surrogates("no escapes"), None);
        assert_eq!(replace_lone_surrogates(r#""\ud83d" é \"#).as_deref(), Some(r#""\ufffd" é \"#));
    }
    use serde_json::json;

    fn check_invalid(line: &str, code: i32, id: RequestId, message_part: &str) {
        let err = parse_line(line.as_bytes()).expect_err(line);
        assert_eq!(err.error.code, code, "{line}: {err:?}");
        assert_eq!(err.id, id, "{line}");
        assert!(err.error.message.contains(message_part), "{line}: {}", err.error.message);
    }

    #[test]
    fn requests_accept_number_and_string_ids() {
        let m = parse_line(br#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"a":1}}"#).unwrap();
        assert_eq!(
            m,
            Message::Request { id: RequestId::Number(7), method: "initialize".into(), params: Some(json!({"a":1})) }
        );
        let m = parse_line(br#"{"jsonrpc":"2.0","id":"abc","method":"x"}"#).unwrap();
        assert_eq!(m, Message::Request { id: RequestId::Str("abc".into()), method: "x".into(), params: None });
    }

    #[test]
    fn notifications_have_no_id() {
        let m = parse_line(br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#).unwrap();
        assert!(matches!(m, Message::Notification { ref method, .. } if method == "session/cancel"));
    }

    #[test]
    fn responses_carry_result_or_error() {
        let m = parse_line(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).unwrap();
        assert_eq!(m, Message::Response { id: RequestId::Number(3), result: Ok(json!({})) });
        let m = parse_line(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"cancelled"}}"#).unwrap();
        assert_eq!(
            m,
            Message::Response { id: RequestId::Number(3), result: Err(ErrorObject::new(-32800, "cancelled")) }
        );
    }

    #[test]
    fn bad_lines_get_the_right_codes() {
        check_invalid("{not json", code::PARSE_ERROR, RequestId::Null, "parse error");
        check_invalid("[]", code::INVALID_REQUEST, RequestId::Null, "batches");
        check_invalid(r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#, code::INVALID_REQUEST, RequestId::Null, "batches");
        check_invalid("42", code::INVALID_REQUEST, RequestId::Null, "a number");
        check_invalid(r#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST, RequestId::Number(1), "jsonrpc");
        check_invalid(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, code::INVALID_REQUEST, RequestId::Number(1), "2.0");
        check_invalid(r#"{"jsonrpc":"2.0","id":1,"method":5}"#, code::INVALID_REQUEST, RequestId::Number(1), "method");
        check_invalid(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, code::INVALID_REQUEST, RequestId::Null, "id");
        check_invalid(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, code::INVALID_REQUEST, RequestId::Null, "id");
        check_invalid(
            r#"{"jsonrpc":"2.0","id":2,"method":"x","params":3}"#,
            code::INVALID_REQUEST,
            RequestId::Number(2),
            "params",
        );
        check_invalid(r#"{"jsonrpc":"2.0","id":2}"#, code::INVALID_REQUEST, RequestId::Number(2), "expected `method`");
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let err = parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}").unwrap_err();
        assert_eq!(err.error.code, code::PARSE_ERROR);
        assert!(err.error.message.contains("UTF-8"), "{}", err.error.message);
    }

    #[test]
    fn broken_responses_are_not_answered() {
        let err = parse_line(br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#).unwrap_err();
        assert!(!err.respond);
        let err = parse_line(br#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#).unwrap_err();
        assert!(!err.respond);
    }

    #[test]
    fn lines_round_trip() {
        let line = request_line(&RequestId::Number(1), "fs/read_text_file", &json!({"path":"/a"})).unwrap();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"path":"/a"}}"#);
        let line = error_line(&RequestId::Null, &ErrorObject::new(-32700, "parse error: x"));
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: x"}}"#);
        let line = result_line(&RequestId::Str("a".into()), &json!({"ok":true})).unwrap();
        assert_eq!(
            parse_line(line.as_bytes()).unwrap(),
            Message::Response { id: RequestId::Str("a".into()), result: Ok(json!({"ok":true})) }
        );
    }
}
