//! Reading files that come from outside without trusting them: regular files only, and no more
//! than a given size, counted as it is read.

use std::path::Path;

/// Reads a whole regular file of at most `max` bytes. What is not a regular file (a FIFO would
/// block the read forever) is refused, and the size is counted as it is read, not taken from the
/// file system (some files, like those under `/proc`, say 0 and never end).
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file (a directory, FIFO, socket or device)",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    std::fs::File::open(path)?.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "{} is larger than the {} MiB read whole",
            path.display(),
            max >> 20
        )));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` whole or not at all: to a new file beside it, then renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
