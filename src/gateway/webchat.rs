//! The web chat's files, embedded in the binary (`clients/webchat/`).

/// The file at `path` and its content type.
pub fn file(path: &str) -> Option<(&'static str, &'static [u8])> {
    match path {
        "/" | "/index.html" => Some(("text/html; charset=utf-8", include_bytes!("../../clients/webchat/index.html"))),
        _ => None,
    }
}
