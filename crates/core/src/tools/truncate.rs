//! Tool output for the model, cut to a budget: the head and the tail are kept (cut at line ends),
//! and a marker in the middle says what was left out and how to get it.

/// The default budget for one tool result, in bytes.
pub const MODEL_BUDGET: usize = 30_000;

/// Cuts `text` to about `max` bytes. `how` completes the marker's sentence "to see it, …".
pub fn for_model(text: &str, max: usize, how: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head_budget = max / 3;
    let tail_budget = max - head_budget;
    let head_end = cut_back(text, head_budget);
    let tail_start = cut_forward(text, text.len() - tail_budget).max(head_end);
    let omitted = &text[head_end..tail_start];
    let lines = omitted.matches('\n').count();
    format!(
        "{}\n[… {} bytes ({} lines) omitted; to see them, {how} …]\n{}",
        text[..head_end].trim_end_matches('\n'),
        omitted.len(),
        lines,
        &text[tail_start..]
    )
}

/// The end of the last whole line within `limit` bytes (or a char boundary if there is none).
fn cut_back(text: &str, limit: usize) -> usize {
    let mut at = limit.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    match text[..at].rfind('\n') {
        Some(nl) if nl > 0 => nl + 1,
        _ => at,
    }
}

/// The start of the first whole line at or after `from`.
fn cut_forward(text: &str, from: usize) -> usize {
    let mut at = from.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    match text[at..].find('\n') {
        Some(nl) if at + nl + 1 < text.len() => at + nl + 1,
        _ => at,
    }
}

/// Cuts one very long line (minified files) to `max` characters.
pub fn line(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}… [line cut at {max} bytes]", &text[..at]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(for_model("a\nb\n", 100, "x"), "a\nb\n");
    }

    #[test]
    fn keeps_head_and_tail_with_a_marker() {
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let out = for_model(&text, 600, "read the file with offset/limit");
        assert!(out.len() < 800, "{}", out.len());
        assert!(out.starts_with("line 1\nline 2\n"));
        assert!(out.ends_with("line 1000\n"));
        assert!(out.contains("omitted; to see them, read the file with offset/limit"));
        // Whole lines only on both sides of the marker.
        for l in out.lines().filter(|l| !l.starts_with('[')) {
            assert!(l.starts_with("line "), "{l:?}");
        }
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é".repeat(10_000);
        let out = for_model(&text, 1001, "x");
        assert!(out.contains("omitted"));
        assert_eq!(line("ééé", 3), "é… [line cut at 3 bytes]");
    }
}
