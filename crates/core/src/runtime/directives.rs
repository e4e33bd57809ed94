//! Directives written in a message: `/think LEVEL` and `/model REF` (the session's), and a chat's
//! `/verbose` and `/reasoning`. A message of directives alone sets them for the session (it is a
//! command); in a message with other words they hold for that message only and are taken out of
//! the text the model reads.
//!
//! A directive counts only at the start of a word, outside code (fenced blocks and `inline`
//! spans), with an argument its reader takes (`/think:high` is the same as `/think high`);
//! anything else is the user's text, left as written — "the /model endpoint" is prose.

/// A directive found: its name (as the table spells it) and its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub name: &'static str,
    pub arg: String,
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Found {
    /// The directives taken, in the order written.
    pub directives: Vec<Directive>,
    /// The text without them.
    pub rest: String,
    /// The message's first word named a directive whose argument was not taken: its name and
    /// argument (the user meant it, so a bad argument is an error, not prose).
    pub refused_first: Option<Directive>,
}

/// A directive's name and the spellings that mean it.
pub type Names = &'static [(&'static str, &'static [&'static str])];

/// The session's directives.
pub const SESSION: Names = &[("think", &["think", "thinking"]), ("model", &["model"])];
/// A chat's.
pub const CHAT: Names = &[("verbose", &["verbose"]), ("reasoning", &["reasoning", "reason"])];

/// Finds the directives of `names` in `text` whose argument `accepts(name, arg)`.
pub fn scan(text: &str, names: Names, accepts: impl Fn(&str, &str) -> bool) -> Found {
    let mut found = Found::default();
    // Byte ranges to leave out of the rest.
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut in_fence = false;
    let mut first_word = true;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            first_word = false;
            continue;
        }
        if in_fence {
            continue;
        }
        let words = words_of(line);
        let mut i = 0;
        while i < words.len() {
            let (from, to, in_code) = words[i];
            let word = &line[from..to];
            let leading = std::mem::take(&mut first_word);
            i += 1;
            let Some(body) = word.strip_prefix('/').filter(|_| !in_code) else { continue };
            let (spelled, glued) = match body.split_once(':') {
                Some((name, arg)) => (name, Some(arg)),
                None => (body, None),
            };
            let spelled = spelled.to_lowercase();
            let Some((name, _)) = names.iter().find(|(_, spellings)| spellings.contains(&spelled.as_str())) else {
                continue;
            };
            let (arg, end, next) = match glued.filter(|a| !a.is_empty()) {
                Some(arg) => (arg, to, i),
                None => match words.get(i) {
                    Some(&(f, t, false)) => (&line[f..t], t, i + 1),
                    _ => ("", to, i),
                },
            };
            if arg.is_empty() || !accepts(name, arg) {
                if leading {
                    found.refused_first = Some(Directive { name, arg: arg.to_owned() });
                }
                continue;
            }
            found.directives.push(Directive { name, arg: arg.to_owned() });
            // The spaces after it go too.
            let gap = line[end..].len() - line[end..].trim_start_matches([' ', '\t']).len();
            cut.push((start + from, start + end + gap));
            i = next;
        }
    }
    let mut rest = String::with_capacity(text.len());
    let mut from = 0;
    for (a, b) in cut {
        rest.push_str(&text[from..a]);
        from = b;
    }
    rest.push_str(&text[from..]);
    found.rest = rest.trim().to_owned();
    found
}

/// The words of a line: byte ranges, and whether each is inside an `inline code` span.
fn words_of(line: &str) -> Vec<(usize, usize, bool)> {
    let mut words = Vec::new();
    let mut ticks = 0usize;
    let mut start: Option<(usize, bool)> = None;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            if let Some((s, code)) = start.take() {
                words.push((s, i, code));
            }
        } else if start.is_none() {
            start = Some((i, ticks % 2 == 1 || c == '`'));
        }
        if c == '`' {
            ticks += 1;
        }
    }
    if let Some((s, code)) = start {
        words.push((s, line.len(), code));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(name: &str, arg: &str) -> bool {
        name == "think" && matches!(arg, "high" | "low") || name == "model" && arg.contains('/')
    }

    fn scanned(text: &str) -> (Vec<(&'static str, String)>, String, Option<Directive>) {
        let f = scan(text, SESSION, levels);
        (f.directives.into_iter().map(|d| (d.name, d.arg)).collect(), f.rest, f.refused_first)
    }

    #[test]
    fn directives_anywhere_in_prose_are_taken_out_with_their_argument() {
        let (found, rest, refused) = scanned("/think high why is the sky blue?");
        assert_eq!(found, vec![("think", "high".into())]);
        assert_eq!(rest, "why is the sky blue?");
        assert_eq!(refused, None);
        let (found, rest, _) = scanned("compare these /model openai/gpt-5 and be brief /thinking:low");
        assert_eq!(found, vec![("model", "openai/gpt-5".into()), ("think", "low".into())]);
        assert_eq!(rest, "compare these and be brief");
        let (found, rest, _) = scanned("/think high /model a/b");
        assert_eq!(found.len(), 2);
        assert_eq!(rest, "");
    }

    #[test]
    fn prose_code_and_paths_are_left_as_written() {
        for text in [
            "the /model endpoint returns 404",
            "run `/think high` in the chat",
            "```\n/think high\n```\nwhat does that do?",
            "open /think/high.txt",
            "a/think high",
        ] {
            let (found, rest, _) = scanned(text);
            assert!(found.is_empty(), "{text}: {found:?}");
            assert_eq!(rest, text.trim());
        }
    }

    #[test]
    fn a_first_word_directive_with_a_bad_argument_is_reported() {
        let (found, rest, refused) = scanned("/think hard about this");
        assert!(found.is_empty());
        assert_eq!(rest, "/think hard about this");
        assert_eq!(refused, Some(Directive { name: "think", arg: "hard".into() }));
        assert_eq!(scanned("tell me /think hard").2, None);
    }

    #[test]
    fn spellings_map_to_one_name_and_lines_keep_their_breaks() {
        let f = scan("/VERBOSE on\n/reason stream\nhello", CHAT, |_, a| matches!(a, "on" | "stream"));
        let names: Vec<_> = f.directives.iter().map(|d| d.name).collect();
        assert_eq!(names, ["verbose", "reasoning"]);
        assert_eq!(f.rest, "hello");
    }
}
