//! Files sent to chats: a [`ChatFile`] read from a path (the `message` tool's `file`, the
//! gateway's `send` with a path) or downloaded from a public URL (the `send` method's
//! `mediaUrl`, through the same guard as `web_fetch`), at most [`MAX_BYTES`], with its MIME
//! type from its name or the server's `Content-Type`.

use std::path::Path;
use std::time::Duration;

use super::fetch_guard;
use crate::config::Config;

/// The largest file sent to a chat (Telegram takes 50 MB from a bot; Telegram's photos and
/// Discord's servers take less, and say so).
pub const MAX_BYTES: u64 = 50 << 20;

/// How long a download may take.
const DOWNLOAD_LIMIT: Duration = Duration::from_secs(120);

/// A file for a chat: its name there, its MIME type, its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct ChatFile {
    pub name: String,
    pub mime: String,
    pub bytes: bytes::Bytes,
}

impl std::fmt::Debug for ChatFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChatFile({}, {}, {} bytes)", self.name, self.mime, self.bytes.len())
    }
}

impl ChatFile {
    /// A picture chats show as such (JPEG, PNG, GIF, WebP).
    pub fn is_image(&self) -> bool {
        matches!(self.mime.as_str(), "image/jpeg" | "image/png" | "image/gif" | "image/webp")
    }

    /// `chart.png (12 KB, image/png)`.
    pub fn describe(&self) -> String {
        format!("{} ({}, {})", self.name, human_size(self.bytes.len() as u64), self.mime)
    }
}

/// `12 KB`, `1.5 MB`.
pub fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.0} KB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// The MIME type a file's name says it is.
pub fn mime_of(name: &str) -> String {
    mime_guess::from_path(name).first_raw().unwrap_or("application/octet-stream").to_owned()
}

/// A file as it was checked: its size, and which file it is (so the one read is that one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub size: u64,
    dev: u64,
    ino: u64,
}

/// What a file at `path` is before it is read; an error unless it is a regular file of at most
/// [`MAX_BYTES`] (a directory, a device or a pipe is never read).
pub fn check(path: &Path) -> Result<Seen, String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        _ => format!("{}: {e}", path.display()),
    })?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "{} is {}; at most {} can be sent",
            path.display(),
            human_size(meta.len()),
            human_size(MAX_BYTES)
        ));
    }
    if meta.len() == 0 {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Seen { size: meta.len(), dev: meta.dev(), ino: meta.ino() })
}

/// The file at `path` (a real path: no link in it), sent as `name`: opened without following a
/// link and without waiting on a pipe, then checked as the open file it is — a regular file
/// within the limit and, given `seen`, the very file checked then (a file swapped for another,
/// or a directory on the way swapped for a link, since then is not read).
pub async fn read(path: &Path, name: &str, seen: Option<Seen>) -> Result<ChatFile, String> {
    let (path, name) = (path.to_owned(), clean_name(name));
    let bytes = tokio::task::spawn_blocking(move || read_file(&path, seen))
        .await
        .map_err(|e| format!("the file could not be read: {e}"))??;
    Ok(ChatFile { mime: mime_of(&name), name, bytes: bytes.into() })
}

fn read_file(path: &Path, seen: Option<Seen>) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let shown = path.display();
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(
            |e| match e.raw_os_error() {
                Some(libc::ELOOP) => format!("{shown} is a link now, not the file that was checked"),
                _ if e.kind() == std::io::ErrorKind::NotFound => format!("{shown} does not exist"),
                _ => format!("{shown}: {e}"),
            },
        )?;
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a file"));
    }
    if seen.is_some_and(|s| (s.dev, s.ino) != (meta.dev(), meta.ino())) {
        return Err(format!("{shown} was replaced since it was checked; not sent"));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!("{shown} is {}; at most {} can be sent", human_size(meta.len()), human_size(MAX_BYTES)));
    }
    let mut bytes = Vec::new();
    // It may have grown since: still never more than the limit.
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("{shown} is larger than {}", human_size(MAX_BYTES)));
    }
    if bytes.is_empty() {
        return Err(format!("{shown} is empty"));
    }
    Ok(bytes)
}

/// A file's name as a chat may show it: no control characters (they could end a header of a
/// multipart upload), no path separators, at most 200 characters.
pub fn clean_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| if matches!(c, '/' | '\\') { '_' } else { c })
        .take(200)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." { "file".to_owned() } else { cleaned.to_owned() }
}

/// The file at a public `url` (http or https; private and local addresses only as
/// `[web_fetch] allow_private_hosts` allows, every redirect checked).
pub async fn download(url: &str, config: &Config) -> Result<ChatFile, String> {
    use futures_util::StreamExt as _;
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let allowed = fetch_guard::Allowed::new(&config.web_fetch.allow_private_hosts);
    let http = fetch_guard::client(&allowed, config.timeouts.connect)?;
    let fetch = async {
        let response = fetch_guard::get(&http, parsed.clone(), &allowed).await?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        if response.content_length().is_some_and(|n| n > MAX_BYTES) {
            return Err(format!("{url} is larger than {}", human_size(MAX_BYTES)));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .filter(|v| v.contains('/') && v != "application/octet-stream");
        let mut bytes = Vec::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| crate::http::error_chain(&e))?;
            if (bytes.len() + chunk.len()) as u64 > MAX_BYTES {
                return Err(format!("{url} is larger than {}", human_size(MAX_BYTES)));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((content_type, bytes))
    };
    let (content_type, bytes) = tokio::time::timeout(DOWNLOAD_LIMIT, fetch)
        .await
        .map_err(|_| format!("{url} took longer than {} s", DOWNLOAD_LIMIT.as_secs()))?
        .map_err(|e| if e.contains(url) { e } else { format!("{url} could not be fetched: {e}") })?;
    if bytes.is_empty() {
        return Err(format!("{url} is empty"));
    }
    let mut name =
        clean_name(&parsed.path_segments().and_then(|mut s| s.next_back()).map(percent_decoded).unwrap_or_default());
    let mime = content_type.unwrap_or_else(|| mime_of(&name));
    // A name without the extension its type has (`/image?id=7`): given one, as chats show files
    // by it.
    if mime_of(&name) != mime
        && let Some(ext) = mime_guess::get_mime_extensions_str(&mime).and_then(|e| e.first())
    {
        name = format!("{name}.{ext}");
    }
    Ok(ChatFile { name, mime, bytes: bytes.into() })
}

fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_types_and_sizes() {
        assert_eq!(mime_of("chart.PNG"), "image/png");
        assert_eq!(mime_of("report.pdf"), "application/pdf");
        assert_eq!(mime_of("noext"), "application/octet-stream");
        assert_eq!(percent_decoded("a%20b%2Fc%zz%4"), "a b/c%zz%4");
        assert_eq!(human_size(1536), "2 KB");
        let file = ChatFile { name: "a.png".into(), mime: "image/png".into(), bytes: vec![1, 2].into() };
        assert!(file.is_image());
        assert_eq!(file.describe(), "a.png (2 bytes, image/png)");
    }

    #[test]
    fn only_regular_files_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path()).unwrap_err().contains("is not a file"));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(check(&empty).unwrap_err().contains("is empty"));
        let big = dir.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(MAX_BYTES + 1).unwrap();
        assert!(check(&big).unwrap_err().contains("at most 50.0 MB"));
        assert!(check(&dir.path().join("missing")).is_err());
        let ok = dir.path().join("ok.txt");
        std::fs::write(&ok, b"hello").unwrap();
        assert_eq!(check(&ok).map(|s| s.size), Ok(5));
    }

    #[tokio::test]
    async fn the_file_read_is_the_one_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        std::fs::write(&a, b"first").unwrap();
        std::fs::write(&b, b"second").unwrap();
        let seen = check(&a).unwrap();
        assert_eq!(&read(&a, "a.txt", Some(seen)).await.unwrap().bytes[..], b"first");
        // Swapped for another file, or for a link: not read.
        std::fs::rename(&b, &a).unwrap();
        assert!(read(&a, "a.txt", Some(seen)).await.unwrap_err().contains("was replaced"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        assert!(read(&link, "link", None).await.unwrap_err().contains("is a link"));
        // A pipe is never waited on.
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read(&fifo, "fifo", None).await.unwrap_err().contains("is not a file"));
        assert_eq!(clean_name("a\r\nContent-Type: x/y.png"), "aContent-Type: x_y.png");
        assert_eq!(clean_name(".."), "file");
    }
}
