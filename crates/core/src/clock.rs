//! Wall-clock time as the wire, the store and the transcripts write it: milliseconds since the
//! Unix epoch (0 before it; saturating far after it).

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
