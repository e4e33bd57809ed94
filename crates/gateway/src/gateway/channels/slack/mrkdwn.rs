//! Markdown as Slack's mrkdwn writes it: `**bold**` → `*bold*`, `~~struck~~` → `~struck~`,
//! `[text](url)` → `<url|text>`, headings as bold lines, `- ` bullets as `• `; `&`, `<` and `>`
//! escaped everywhere (so no text from the model becomes a mention such as `<!channel>`), code
//! left as written.

/// `markdown` in mrkdwn.
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 16);
    let mut fenced = false;
    for (i, line) in markdown.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push_str(&escape(line));
            continue;
        }
        if fenced {
            out.push_str(&escape(line));
            continue;
        }
        let trimmed = line.trim_start();
        let heading = trimmed.trim_start_matches('#');
        if trimmed.starts_with('#') && heading.starts_with(' ') && trimmed.len() - heading.len() <= 6 {
            out.push('*');
            out.push_str(&inline(heading.trim()));
            out.push('*');
        } else if let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) {
            out.push_str(&line[..line.len() - trimmed.len()]);
            out.push_str("• ");
            out.push_str(&inline(item));
        } else {
            out.push_str(&inline(line));
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// One line's spans: code as written, the rest converted.
fn inline(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(&escape(part));
        } else {
            out.push_str(&links(&escape(part).replace("**", "*").replace("~~", "~")));
        }
    }
    out
}

/// `[text](url)` → `<url|text>` (an http(s) URL only; anything else stays as written).
fn links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let found = after.find("](").and_then(|mid| {
            let url_part = &after[mid + 2..];
            let close = url_part.find(')')?;
            let url = &url_part[..close];
            let ok =
                (url.starts_with("https://") || url.starts_with("http://")) && !url.contains(' ') && !url.contains('|');
            ok.then(|| (&after[..mid], url, open + 1 + mid + 2 + close + 1))
        });
        match found {
            Some((label, url, end)) => {
                out.push_str(&rest[..open]);
                out.push_str(&format!("<{url}|{}>", label.replace('|', "¦")));
                rest = &rest[end..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Text from Slack as people wrote it: `&amp;`, `&lt;`, `&gt;` undone.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn_and_nothing_becomes_a_mention() {
        assert_eq!(to_mrkdwn("**bold** and ~~gone~~"), "*bold* and ~gone~");
        assert_eq!(to_mrkdwn("see [the docs](https://x.org/a?b=1&c=2)"), "see <https://x.org/a?b=1&amp;c=2|the docs>");
        assert_eq!(to_mrkdwn("## Plan\n- one\n  - two"), "*Plan*\n• one\n  • two");
        assert_eq!(to_mrkdwn("`a **b** <c>`"), "`a **b** &lt;c&gt;`");
        assert_eq!(to_mrkdwn("```\nx = **y**\n```"), "```\nx = **y**\n```");
        assert_eq!(to_mrkdwn("hey <!channel> & <@U1>"), "hey &lt;!channel&gt; &amp; &lt;@U1&gt;");
        assert_eq!(to_mrkdwn("[x](javascript:alert(1))"), "[x](javascript:alert(1))");
        assert_eq!(unescape("a &lt;b&gt; &amp;amp;"), "a <b> &amp;");
    }
}
