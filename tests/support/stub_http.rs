//! A plain HTTP/1.1 server on loopback for the chat services' stand-ins (Discord, Slack): each
//! request (method, path, headers, body) goes to a handler that answers it at once.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub struct Request {
    pub method: String,
    /// With its query.
    pub path: String,
    /// Lower-case names.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }

    /// A form (`a=1&b=2`) or JSON body's field, as text.
    pub fn field(&self, name: &str) -> Option<String> {
        let json = self.json();
        if let Some(v) = json.get(name) {
            return Some(v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        }
        let body = String::from_utf8_lossy(&self.body);
        body.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| decode(v))
        })
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    pub fn header(mut self, name: &str, value: impl ToString) -> Self {
        self.headers.push((name.to_owned(), value.to_string()));
        self
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Serves `handler` on a loopback port (on a thread of its own); the port's base URL.
pub fn serve(handler: Handler) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let _ = socket.set_nodelay(true);
                tokio::spawn(connection(socket, handler.clone()));
            }
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

async fn connection(mut socket: tokio::net::TcpStream, handler: Handler) {
    let mut request = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let head_end = loop {
            if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        };
        let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
        let mut lines = head.lines();
        let first: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while request.len() < head_end + 4 + length {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let body = request[head_end + 4..head_end + 4 + length].to_vec();
        request.drain(..head_end + 4 + length);
        let req = Request {
            method: first.first().copied().unwrap_or("GET").to_owned(),
            path: first.get(1).copied().unwrap_or("/").to_owned(),
            headers,
            body,
        };
        let response = handler(&req);
        let mut out = format!("HTTP/1.1 {} X\r\ncontent-length: {}\r\n", response.status, response.body.len());
        for (name, value) in &response.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&response.body);
        if socket.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// A `multipart/form-data` body's parts (RFC 7578), as a server reads them: the boundary from
/// `content_type`, each part's `Content-Disposition` name and filename and its `Content-Type`;
/// `None` if the body is not one (no boundary, a part without a name, no closing delimiter).
pub fn multipart(content_type: &str, body: &[u8]) -> Option<Vec<Part>> {
    let (kind, params) = content_type.split_once(';')?;
    if kind.trim() != "multipart/form-data" {
        return None;
    }
    let boundary = params.split(';').find_map(|p| p.trim().strip_prefix("boundary="))?.trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| at + from)
    };
    let mut at = find(body, &delimiter, 0)? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2)? == b"--" {
            return Some(parts);
        }
        let head_start = at + 2;
        let head_end = find(body, b"\r\n\r\n", head_start)?;
        let head = String::from_utf8_lossy(&body[head_start..head_end]).into_owned();
        let mut next_delimiter = b"\r\n".to_vec();
        next_delimiter.extend_from_slice(&delimiter);
        let end = find(body, &next_delimiter, head_end + 4)?;
        let mut part =
            Part { name: String::new(), filename: None, content_type: None, body: body[head_end + 4..end].to_vec() };
        for line in head.lines() {
            let Some((header, value)) = line.split_once(':') else { continue };
            match header.trim().to_ascii_lowercase().as_str() {
                "content-disposition" => {
                    for param in value.split(';').skip(1) {
                        let Some((k, v)) = param.trim().split_once('=') else { continue };
                        let v = v.trim_matches('"').to_owned();
                        match k {
                            "name" => part.name = v,
                            "filename" => part.filename = Some(v),
                            _ => {}
                        }
                    }
                }
                "content-type" => part.content_type = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        if part.name.is_empty() {
            return None;
        }
        parts.push(part);
        at = end + next_delimiter.len();
    }
}

impl Request {
    /// The body's parts, if it is `multipart/form-data`.
    pub fn parts(&self) -> Option<Vec<Part>> {
        multipart(self.headers.get("content-type")?, &self.body)
    }
}
