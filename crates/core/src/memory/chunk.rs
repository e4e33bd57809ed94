//! Markdown cut into the pieces the index holds: a new piece at each heading, and a long section
//! cut at line ends into pieces of about [`TARGET_CHARS`], each beginning with the last lines of
//! the one before (about [`OVERLAP_CHARS`]), so a fact on a cut is whole in one of them. Each
//! piece knows its lines (1-based, inclusive), for `memory_get` and the results' citations.

/// About 400 tokens of English.
pub const TARGET_CHARS: usize = 1600;
/// About 80 tokens.
pub const OVERLAP_CHARS: usize = 320;

/// One piece of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
}

/// Cuts `text` into pieces (blank pieces are left out).
pub fn chunks(text: &str) -> Vec<Chunk> {
    chunks_sized(text, TARGET_CHARS, OVERLAP_CHARS)
}

fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with([' ', '\t'])
}

pub(crate) fn chunks_sized(text: &str, target: usize, overlap: usize) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // The lines of the piece being built: (line number, text).
    let mut piece: Vec<(usize, &str)> = Vec::new();
    let mut size = 0;
    let mut in_fence = false;
    for (i, line) in lines.iter().enumerate() {
        let number = i + 1;
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        let heading = !in_fence && is_heading(line);
        if fence {
            in_fence = !in_fence;
        }
        if heading && !piece.is_empty() {
            emit(&mut out, &piece);
            piece.clear();
            size = 0;
        } else if size + line.len() + 1 > target && !piece.is_empty() {
            emit(&mut out, &piece);
            // Carry the last lines over, up to `overlap` characters (never the whole piece).
            let mut kept = 0;
            let mut from = piece.len();
            while from > 1 && kept + piece[from - 1].1.len() < overlap {
                from -= 1;
                kept += piece[from].1.len() + 1;
            }
            piece.drain(..from);
            size = kept;
        }
        piece.push((number, line));
        size += line.len() + 1;
    }
    if !piece.is_empty() {
        emit(&mut out, &piece);
    }
    out
}

fn emit(out: &mut Vec<Chunk>, piece: &[(usize, &str)]) {
    let text = piece.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
    if text.trim().is_empty() {
        return;
    }
    let (first, last) = (piece[0].0, piece[piece.len() - 1].0);
    out.push(Chunk { start_line: first, end_line: last, text });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heading_starts_a_piece_outside_code_fences() {
        let text = "intro\n# One\na\n## Two\nb\n```\n# not a heading\n```\n#hashtag\n";
        let got = chunks(text);
        let lines: Vec<(usize, usize)> = got.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(lines, [(1, 1), (2, 3), (4, 9)]);
        assert_eq!(got[1].text, "# One\na");
    }

    #[test]
    fn long_sections_are_cut_at_line_ends_with_overlap_and_every_line_is_kept() {
        let text: String = (1..=100).map(|i| format!("line {i:03} {}\n", "x".repeat(20))).collect();
        let got = chunks_sized(&text, 300, 60);
        assert!(got.len() > 5, "{}", got.len());
        for pair in got.windows(2) {
            // Each piece begins before the last one ended (the overlap), and they move on.
            assert!(pair[1].start_line <= pair[0].end_line && pair[1].start_line > pair[0].start_line, "{pair:?}");
        }
        for c in &got {
            assert!(c.text.len() <= 300, "{}", c.text.len());
            let expect: Vec<&str> = text.lines().skip(c.start_line - 1).take(c.end_line - c.start_line + 1).collect();
            assert_eq!(c.text, expect.join("\n"));
        }
        assert_eq!((got[0].start_line, got.last().unwrap().end_line), (1, 100));
    }

    #[test]
    fn blank_text_gives_nothing_and_a_line_longer_than_the_target_is_one_piece() {
        assert!(chunks("\n\n  \n").is_empty());
        let long = "y".repeat(5000);
        let got = chunks_sized(&format!("{long}\nshort\n"), 300, 60);
        assert_eq!(got[0], Chunk { start_line: 1, end_line: 1, text: long });
        assert_eq!((got[1].start_line, got[1].end_line), (2, 2));
    }
}
