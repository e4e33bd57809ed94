//! Where LSP and the model's words meet: file paths and `file://` URIs, 1-based lines with a
//! symbol's name and LSP's 0-based UTF-16 positions, and diagnostics and locations as the compact
//! `path:line:col` text the model reads.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString, Position, Uri};

/// `file://` URI of an absolute path, percent-encoded.
pub fn uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The path of a `file://` URI.
pub fn path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    // `file://host/path`: only the local host's are files here.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) =
                bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

/// The position of `symbol` on 1-based `line` of `text` (its first occurrence; the line's first
/// non-blank character without one), or why there is none.
pub fn position(text: &str, line: u32, symbol: Option<&str>) -> Result<Position, String> {
    let index = line.checked_sub(1).ok_or("lines count from 1")?;
    let Some(content) = text.lines().nth(index as usize) else {
        return Err(format!("the file has {} lines", text.lines().count()));
    };
    let byte = match symbol.map(str::trim).filter(|s| !s.is_empty()) {
        Some(symbol) => content
            .match_indices(symbol)
            .find(|(at, _)| !word_char_before(content, *at))
            .or_else(|| content.match_indices(symbol).next())
            .map(|(at, _)| at)
            .ok_or_else(|| format!("`{symbol}` is not on line {line}: {}", content.trim()))?,
        None => content.len() - content.trim_start().len(),
    };
    Ok(Position { line: index, character: utf16(&content[..byte]) })
}

fn word_char_before(line: &str, at: usize) -> bool {
    line[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

fn utf16(s: &str) -> u32 {
    s.encode_utf16().count() as u32
}

/// 1-based column (in characters) of an LSP position on `line_text`.
pub fn column(line_text: &str, character: u32) -> usize {
    let mut units = 0;
    for (i, c) in line_text.chars().enumerate() {
        if units >= character {
            return i + 1;
        }
        units += c.len_utf16() as u32;
    }
    line_text.chars().count() + 1
}

pub fn severity(d: &Diagnostic) -> &'static str {
    match d.severity {
        Some(DiagnosticSeverity::ERROR) | None => "error",
        Some(DiagnosticSeverity::WARNING) => "warning",
        Some(DiagnosticSeverity::INFORMATION) => "info",
        _ => "hint",
    }
}

/// Errors and warnings: what a change is judged by (hints such as "unused" are not).
pub fn serious(d: &Diagnostic) -> bool {
    matches!(d.severity, Some(DiagnosticSeverity::ERROR | DiagnosticSeverity::WARNING) | None)
}

/// What makes two diagnostics the same problem, wherever a change moved it.
pub fn identity(d: &Diagnostic) -> (&'static str, String, String) {
    let code = match &d.code {
        Some(NumberOrString::Number(n)) => n.to_string(),
        Some(NumberOrString::String(s)) => s.clone(),
        None => String::new(),
    };
    (severity(d), code, d.message.clone())
}

/// `shown:line:col: severity: message [code]`, one line.
pub fn diagnostic(shown: &str, d: &Diagnostic, text: Option<&str>) -> String {
    let line = d.range.start.line as usize;
    let col = match text.and_then(|t| t.lines().nth(line)) {
        Some(l) => column(l, d.range.start.character),
        None => d.range.start.character as usize + 1,
    };
    // One line: a message's own lines (pyright explains on the next ones) joined by "; ".
    let message = d
        .message
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let code = match &d.code {
        Some(NumberOrString::Number(n)) => format!(" [{n}]"),
        Some(NumberOrString::String(s)) => format!(" [{s}]"),
        None => String::new(),
    };
    format!("{shown}:{}:{col}: {}: {}{code}", line + 1, severity(d), crate::tools::truncate::line(&message, 400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_uris_round_trip() {
        for p in ["/w/a.py", "/w/with space/ü.ts", "/w/100%/#x?.rs"] {
            let u = uri(Path::new(p));
            assert!(u.as_str().starts_with("file:///w/"), "{}", u.as_str());
            assert_eq!(path(&u.parse().unwrap()).unwrap(), PathBuf::from(p));
        }
        assert_eq!(path(&"file:///C%3A/x".parse().unwrap()).unwrap(), PathBuf::from("/C:/x"));
        assert_eq!(path(&"http://x/y".parse().unwrap()), None);
    }

    #[test]
    fn positions_are_utf16_and_find_whole_words() {
        let text = "def f():\n    n = fn(1)  # é\n    ü = n\n";
        assert_eq!(position(text, 2, Some("n")).unwrap(), Position { line: 1, character: 4 });
        assert_eq!(position(text, 2, Some("fn")).unwrap(), Position { line: 1, character: 8 });
        assert_eq!(position(text, 3, Some("n")).unwrap(), Position { line: 2, character: 8 });
        assert_eq!(position(text, 2, None).unwrap(), Position { line: 1, character: 4 });
        assert!(position(text, 2, Some("zz")).unwrap_err().contains("not on line 2"));
        assert!(position(text, 9, None).unwrap_err().contains("has 3 lines"));
        assert!(position(text, 0, None).is_err());
        assert_eq!(column("𝄞x", 2), 2);
        assert_eq!(column("ab", 9), 3);
    }
}
