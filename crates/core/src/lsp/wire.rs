//! LSP's framing: each message is a header block (`Content-Length: N`, optionally
//! `Content-Type`), a blank line, then N bytes of JSON. Read with a cap on one message's size.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// The largest message a server may send (a workspace's symbols, a big file's diagnostics).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// The longest header line read.
const MAX_HEADER_LINE: usize = 4096;

/// One message framed for the wire.
pub fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Reads the next message; `Ok(None)` at the end of the stream. A frame that is not LSP's (no
/// length, too long, not JSON) is an error: the stream cannot be trusted past it.
pub async fn read(input: &mut (impl AsyncBufRead + Unpin)) -> Result<Option<Value>, String> {
    let mut length = None;
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let n =
            (&mut *input).take(MAX_HEADER_LINE as u64).read_until(b'\n', &mut line).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return if first { Ok(None) } else { Err("the stream ended inside a header".into()) };
        }
        first = false;
        if line.last() != Some(&b'\n') {
            return Err("a header line is too long".into());
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(format!("not an LSP header: {:?}", text.chars().take(80).collect::<String>()));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n: usize = value.trim().parse().map_err(|_| format!("bad Content-Length: {:?}", value.trim()))?;
            length = Some(n);
        }
    }
    let length = length.ok_or("a message without Content-Length")?;
    if length > MAX_MESSAGE_BYTES {
        return Err(format!("a message of {length} bytes (at most {MAX_MESSAGE_BYTES})"));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).await.map_err(|e| format!("the stream ended inside a message: {e}"))?;
    serde_json::from_slice(&body).map(Some).map_err(|e| format!("a message that is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn all(bytes: &[u8]) -> Vec<Result<Option<Value>, String>> {
        let mut input = tokio::io::BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            let next = read(&mut input).await;
            let end = !matches!(next, Ok(Some(_)));
            out.push(next);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn frames_round_trip_with_any_header_spelling() {
        let a = json!({"jsonrpc": "2.0", "id": 1, "result": "é"});
        let mut bytes = frame(&a);
        bytes.extend_from_slice(
            b"content-length:  2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}",
        );
        assert_eq!(all(&bytes).await, vec![Ok(Some(a)), Ok(Some(json!({}))), Ok(None)]);
    }

    #[tokio::test]
    async fn broken_frames_are_errors_not_panics() {
        for (bytes, says) in [
            (&b"Content-Type: x\r\n\r\n{}"[..], "without Content-Length"),
            (b"Content-Length: abc\r\n\r\n", "bad Content-Length"),
            (b"Content-Length: 10\r\n\r\n{}", "ended inside a message"),
            (b"Content-Length: 2\r\n\r\n{x", "not JSON"),
            (b"Content-Length: 99999999999\r\n\r\n", "at most"),
            (b"hello\r\n\r\n", "not an LSP header"),
            (b"Content-Length: 2\r\n", "ended inside a header"),
        ] {
            let got = all(bytes).await;
            let err = got.last().unwrap().clone().unwrap_err();
            assert!(err.contains(says), "{err}");
        }
        let long = vec![b'x'; MAX_HEADER_LINE + 10];
        assert!(all(&long).await[0].clone().unwrap_err().contains("too long"));
    }
}
