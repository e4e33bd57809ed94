//! Words for the full-text index, the same for what is indexed and what is asked: Latin, Cyrillic,
//! Greek… words as SQLite's `unicode61` tokenizer splits them (lower-cased, diacritics folded), and
//! runs of Chinese, Japanese or Korean characters — which put no spaces between words — as their
//! overlapping two-character pieces (`记忆搜索` → `记忆 忆搜 搜索`; one character alone stays
//! one), the way CJK search engines index text without a dictionary. A query of two or more
//! characters then finds a text that holds it, whatever the words around it.

/// Whether `c` is written without spaces between words: Han (CJK ideographs and their
/// extensions), kana, Hangul, and their punctuation-free symbols.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // Hiragana, Katakana
        | 0x31F0..=0x31FF      // Katakana phonetic extensions
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0x1100..=0x11FF      // Hangul jamo
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0xFF66..=0xFF9F      // half-width Katakana
        | 0x20000..=0x2FA1F) // extensions B–F, compatibility supplement
}

/// `text` as the index stores it: unchanged but for each CJK run, replaced by its pieces
/// separated by spaces.
pub fn for_index(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut run: Vec<char> = Vec::new();
    for c in text.chars() {
        if is_cjk(c) {
            run.push(c);
            continue;
        }
        flush(&mut run, &mut out);
        out.push(c);
    }
    flush(&mut run, &mut out);
    out
}

fn flush(run: &mut Vec<char>, out: &mut String) {
    if run.is_empty() {
        return;
    }
    out.push(' ');
    if run.len() == 1 {
        out.push(run[0]);
    } else {
        for pair in run.windows(2) {
            out.push(pair[0]);
            out.push(pair[1]);
            out.push(' ');
        }
    }
    out.push(' ');
    run.clear();
}

/// The words of a query: what `unicode61` would index, each at most once, in order. A word is a
/// run of letters, digits (or the pieces of a CJK run); everything else separates.
pub fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in for_index(query).split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// An FTS5 query matching a chunk that holds any of `words` (BM25 ranks those holding more, and
/// rarer, words first); each word quoted, so nothing in it is read as query syntax. `None`
/// without words.
pub fn fts_query(words: &[String]) -> Option<String> {
    joined(words, " OR ")
}

/// The FTS5 query matching pieces that hold every one of `words`.
pub fn fts_query_all(words: &[String]) -> Option<String> {
    joined(words, " AND ")
}

fn joined(words: &[String], by: &str) -> Option<String> {
    if words.is_empty() {
        return None;
    }
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{}\"", w.replace('"', "\"\""))).collect();
    Some(quoted.join(by))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_runs_become_overlapping_pairs_and_the_rest_is_kept() {
        assert_eq!(for_index("记忆搜索"), " 记忆 忆搜 搜索  ");
        assert_eq!(for_index("用 Rust 写"), " 用  Rust  写 ");
        assert_eq!(for_index("plain text, kept."), "plain text, kept.");
        assert_eq!(query_words("我喜欢用 Rust 写服务器"), ["我喜", "喜欢", "欢用", "rust", "写服", "服务", "务器"]);
        assert_eq!(query_words("カタカナ"), ["カタ", "タカ", "カナ"]);
        assert_eq!(query_words("한국어"), ["한국", "국어"]);
    }

    #[test]
    fn query_words_are_lower_cased_deduplicated_and_quoted() {
        let words = query_words("Tabs, tabs AND \"spaces\" (NOT) a*");
        assert_eq!(words, ["tabs", "and", "spaces", "not", "a"]);
        assert_eq!(fts_query(&words).unwrap(), "\"tabs\" OR \"and\" OR \"spaces\" OR \"not\" OR \"a\"");
        assert_eq!(fts_query(&query_words("  ,;  ")), None);
    }
}
