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

/// The most words a query is read for (a longer one is cut: search time grows with them).
pub const MAX_QUERY_WORDS: usize = 64;

/// The words of a query: what `unicode61` would index, each at most once, in order, at most
/// [`MAX_QUERY_WORDS`]. A word is a run of letters, digits (or the pieces of a CJK run);
/// everything else separates.
pub fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in words_of(query) {
        if !words.contains(&word) {
            words.push(word);
            if words.len() == MAX_QUERY_WORDS {
                break;
            }
        }
    }
    words
}

/// Every word of `text`, as [`query_words`] reads them (for telling which a piece holds).
pub fn text_words(text: &str) -> std::collections::HashSet<String> {
    words_of(text).collect()
}

fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    let indexed = for_index(text);
    let words: Vec<String> =
        indexed.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(fold).collect();
    words.into_iter()
}

/// A word lower-cased with its diacritics removed, as `unicode61` (`remove_diacritics 2`) does:
/// `Café` → `cafe`. Only letters that decompose into a base and combining marks change (Hangul
/// syllables, which decompose into letters, stay whole).
pub fn fold(word: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    use unicode_normalization::char::is_combining_mark;
    let mut out = String::with_capacity(word.len());
    for c in word.chars().flat_map(char::to_lowercase) {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let parts: Vec<char> = std::iter::once(c).nfd().collect();
        if parts.iter().any(|p| is_combining_mark(*p)) {
            out.extend(parts.into_iter().filter(|p| !is_combining_mark(*p)));
        } else {
            out.push(c);
        }
    }
    out
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
        assert_eq!(query_words("Café RÉSUMÉ naïve"), ["cafe", "resume", "naive"]);
        let long: String = (0..1_000).map(|n| format!("w{n} ")).collect();
        assert_eq!(query_words(&long).len(), MAX_QUERY_WORDS);
    }

    #[test]
    fn query_words_are_lower_cased_deduplicated_and_quoted() {
        let words = query_words("Tabs, tabs AND \"spaces\" (NOT) a*");
        assert_eq!(words, ["tabs", "and", "spaces", "not", "a"]);
        assert_eq!(fts_query(&words).unwrap(), "\"tabs\" OR \"and\" OR \"spaces\" OR \"not\" OR \"a\"");
        assert_eq!(fts_query(&query_words("  ,;  ")), None);
    }
}
