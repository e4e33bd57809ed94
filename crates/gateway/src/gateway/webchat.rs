//! The web chat's files (`clients/webchat/`), embedded in the binary: a page, its scripts and its
//! style — no framework, no build step.

/// The file at `path` and its content type.
pub fn file(path: &str) -> Option<(&'static str, &'static [u8])> {
    const JS: &str = "text/javascript; charset=utf-8";
    match path {
        "/" | "/index.html" => {
            Some(("text/html; charset=utf-8", include_bytes!("../../../../clients/webchat/index.html")))
        }
        "/app.js" => Some((JS, include_bytes!("../../../../clients/webchat/app.js"))),
        "/render.js" => Some((JS, include_bytes!("../../../../clients/webchat/render.js"))),
        "/style.css" => Some(("text/css; charset=utf-8", include_bytes!("../../../../clients/webchat/style.css"))),
        _ => None,
    }
}
