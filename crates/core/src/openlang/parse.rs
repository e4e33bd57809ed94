//! The OpenLang parser: recursive descent over characters, every error with the line and column
//! where it starts (an unclosed bracket is reported where it opens).

use super::{CONTROL, Error, ErrorKind, Field, Message, Part, Statement, Value};

const SIGILS: &[char] = &['?', '!', '>', '#', '~', '^'];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    L1,
    L2,
    L3,
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    /// Where each line starts (char index).
    lines: Vec<usize>,
    /// How deep in brackets: statements end at a newline only at depth 0.
    depth: usize,
    /// How deep the parse recurses (values in values, statements in statements).
    nesting: usize,
}

/// Deeper than this is refused (a message is text from a model: it must never exhaust the stack).
const MAX_NESTING: usize = 32;

type Result<T> = std::result::Result<T, Error>;

/// Parses a message (with or without its `~openlang` first line).
pub fn parse(text: &str) -> Result<Message> {
    let chars: Vec<char> = text.chars().collect();
    let mut lines = vec![0];
    lines.extend(chars.iter().enumerate().filter(|(_, c)| **c == '\n').map(|(i, _)| i + 1));
    let mut p = Parser { chars, at: 0, lines, depth: 0, nesting: 0 };
    p.message()
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.at + n).copied()
    }

    fn starts(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn position(&self, at: usize) -> (usize, usize) {
        let line = self.lines.partition_point(|&start| start <= at);
        (line, at - self.lines[line - 1] + 1)
    }

    fn error(&self, at: usize, kind: ErrorKind, message: impl Into<String>) -> Error {
        let (line, column) = self.position(at);
        Error { kind, line, column, message: message.into() }
    }

    fn unexpected(&self, expected: &str) -> Error {
        match self.peek() {
            Some(c) => self.error(self.at, ErrorKind::Unexpected, format!("unexpected `{c}`: expected {expected}")),
            None => self.error(self.at, ErrorKind::Unexpected, format!("the message ends where {expected} should be")),
        }
    }

    /// Spaces and tabs (and newlines inside brackets); comments to the end of the line.
    fn skip_blanks(&mut self, newlines: bool) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.at += 1,
                Some('\n') if newlines => self.at += 1,
                // `-- ` (or `--` ending the line) starts a comment; `--flag` is not one.
                Some('-')
                    if self.peek_at(1) == Some('-')
                        && matches!(self.peek_at(2), None | Some(' ' | '\t' | '\r' | '\n')) =>
                {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn rest_of_line(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(|c| c != '\n') {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect::<String>().trim().to_owned()
    }

    fn message(&mut self) -> Result<Message> {
        let mut parts = Vec::new();
        let mut mode = Mode::L2;
        let mut header = false;
        loop {
            self.skip_blanks(true);
            while self.peek() == Some(';') {
                self.at += 1;
                self.skip_blanks(true);
            }
            let Some(c) = self.peek() else { break };
            if self.starts("~openlang") && !self.peek_at(9).is_some_and(is_word) {
                self.at += 9;
                header = true;
                continue;
            }
            if c == '~' && self.peek_at(1) == Some('L') && matches!(self.peek_at(2), Some('1'..='3')) {
                let level = match self.peek_at(2) {
                    Some('1') => Mode::L1,
                    Some('2') => Mode::L2,
                    _ => Mode::L3,
                };
                match self.peek_at(3) {
                    Some(':') => {
                        self.at += 4;
                        match level {
                            Mode::L1 => parts.push(Part::Plain(self.rest_of_line())),
                            Mode::L2 => parts.extend(self.line_of_statements()?),
                            Mode::L3 => parts.push(self.record()?),
                        }
                        continue;
                    }
                    None | Some(' ' | '\t' | '\r' | '\n') => {
                        self.at += 3;
                        mode = level;
                        continue;
                    }
                    _ => {}
                }
            }
            match mode {
                Mode::L1 => parts.push(Part::Plain(self.rest_of_line())),
                Mode::L3 => parts.push(self.record()?),
                Mode::L2 => parts.extend(self.line_of_statements()?),
            }
        }
        if parts.is_empty() {
            let what = if header { "nothing follows `~openlang`" } else { "the message is empty" };
            return Err(self.error(self.chars.len().saturating_sub(1), ErrorKind::Empty, what));
        }
        Ok(Message { parts })
    }

    /// Statements up to the end of the line (`;` separates them).
    fn line_of_statements(&mut self) -> Result<Vec<Part>> {
        let mut out = Vec::new();
        loop {
            self.skip_blanks(false);
            match self.peek() {
                None | Some('\n') => return Ok(out),
                Some(';' | '/') => self.at += 1,
                Some(c @ ('}' | ']' | ')')) => {
                    return Err(self.error(self.at, ErrorKind::Mismatched, format!("`{c}` closes nothing here")));
                }
                Some(_) => out.push(Part::Statement(self.statement()?)),
            }
        }
    }

    fn statement(&mut self) -> Result<Statement> {
        self.enter()?;
        let statement = self.statement_inner();
        self.nesting -= 1;
        statement
    }

    fn enter(&mut self) -> Result<()> {
        if self.nesting >= MAX_NESTING {
            return Err(self.error(self.at, ErrorKind::TooDeep, format!("nested more than {MAX_NESTING} deep")));
        }
        self.nesting += 1;
        Ok(())
    }

    fn statement_inner(&mut self) -> Result<Statement> {
        let start = self.at;
        let (line, column) = self.position(start);
        let sigil = match self.peek() {
            Some(c) if SIGILS.contains(&c) => c,
            _ => {
                return Err(self.error(
                    start,
                    ErrorKind::NoSigil,
                    "a statement begins with `?` (query), `!` (command), `>` (result), `#` (state), `~` (meta) or `^` (control)",
                ));
            }
        };
        self.at += 1;
        if !self.peek().is_some_and(is_word_start) {
            return Err(self.error(self.at, ErrorKind::Dangling, format!("`{sigil}` must be followed by a word")));
        }
        let head = self.head();
        if sigil == '^' {
            let keyword = head.split(':').next().unwrap_or_default();
            if !CONTROL.contains(&keyword) {
                return Err(self.error(
                    start,
                    ErrorKind::UnknownControl,
                    format!("`^{keyword}` is not a control word (use {})", CONTROL.join(" ")),
                ));
            }
        }
        let mut statement = Statement { sigil, head, args: Vec::new(), bind: None, then: None, line, column };
        loop {
            self.skip_blanks(false);
            match self.peek() {
                None | Some('\n' | ';' | '}' | ']' | ')') => break,
                // ` / ` lists another form (`^br / ^ct`): a separate statement.
                Some('/') if self.depth == 0 => break,
                Some('>') if self.peek_at(1) == Some('>') => break,
                Some('|') if self.depth > 0 => break,
                Some('|') => {
                    self.at += 1;
                    self.skip_blanks(false);
                    if !self.peek().is_some_and(|c| SIGILS.contains(&c)) {
                        return Err(self.unexpected("a statement after `|`"));
                    }
                    statement.then = Some(Box::new(self.statement()?));
                    break;
                }
                Some(',') if self.depth > 0 => break,
                Some('-') if self.peek_at(1) == Some('>') => {
                    let arrow = self.at;
                    self.at += 2;
                    self.skip_blanks(false);
                    match self.peek() {
                        Some('$') => {
                            let Value::Var(path) = self.var()? else { unreachable!("var() returns a Var") };
                            if statement.bind.is_some() {
                                return Err(self.error(arrow, ErrorKind::Unexpected, "a statement binds one variable"));
                            }
                            statement.bind = Some(path.join("."));
                        }
                        Some(c) if SIGILS.contains(&c) => {
                            statement.then = Some(Box::new(self.statement()?));
                            break;
                        }
                        _ => {
                            return Err(self.error(
                                arrow,
                                ErrorKind::Dangling,
                                "`->` needs a `$variable` or a statement",
                            ));
                        }
                    }
                }
                Some(_) => {
                    // `buf:4` stands as a one-entry map.
                    let value = match self.key() {
                        Some(key) => Value::Map(vec![(Some(key), self.value()?)]),
                        None => self.value()?,
                    };
                    statement.args.push(value);
                }
            }
        }
        if sigil == '~' && statement.head == "err" {
            let has_code = statement
                .args
                .iter()
                .any(|a| matches!(a, Value::Map(entries) if entries.iter().any(|(k, _)| k.as_deref() == Some("code"))));
            if !has_code {
                return Err(self.error(start, ErrorKind::ErrWithoutCode, "`~err` needs `{code:…}`"));
            }
        }
        Ok(statement)
    }

    /// `word`, `scope:word`, `word:arg`.
    fn head(&mut self) -> String {
        let mut head = self.word();
        while self.peek() == Some(':') && self.peek_at(1).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.at += 1;
            head.push(':');
            while self.peek().is_some_and(|c| is_word(c) || c == '-') {
                head.push(self.chars[self.at]);
                self.at += 1;
            }
        }
        head
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(|c| is_word(c) || (c == '-' && self.peek_at(1).is_some_and(is_word))) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A bare value word: may hold dots between word characters (`Cargo.lock`, `config.toml`).
    fn dotted_word(&mut self) -> String {
        let mut word = self.word();
        while self.peek() == Some('.') && self.peek_at(1).is_some_and(is_word) {
            self.at += 1;
            word.push('.');
            word.push_str(&self.word());
        }
        word
    }

    fn value(&mut self) -> Result<Value> {
        let first = self.primary()?;
        if self.starts("..") && !self.starts("...") {
            self.at += 2;
            let end = self.primary()?;
            return Ok(Value::Range(Box::new(first), Box::new(end)));
        }
        Ok(first)
    }

    fn primary(&mut self) -> Result<Value> {
        self.enter()?;
        let value = self.primary_inner();
        self.nesting -= 1;
        value
    }

    fn primary_inner(&mut self) -> Result<Value> {
        let start = self.at;
        let Some(c) = self.peek() else { return Err(self.unexpected("a value")) };
        match c {
            '"' => self.string(),
            '{' => self.brace(),
            '[' => self.list(),
            '(' => self.group(),
            '<' if self.peek_at(1) == Some('<') => {
                self.at += 2;
                self.depth += 1;
                let body = self.statements_until(">>", start)?;
                self.depth -= 1;
                Ok(Value::Block(body))
            }
            '$' => self.var(),
            // An ellipsis stands for what was left out.
            '.' if self.starts("...") => {
                self.at += 3;
                Ok(Value::Word("...".into()))
            }
            '@' => {
                self.at += 1;
                let name = self.word();
                if name.is_empty() {
                    return Err(self.error(start, ErrorKind::Dangling, "`@` needs a target such as @fs"));
                }
                Ok(Value::Target(name))
            }
            ':' if self.peek_at(1) == Some(':') => {
                self.at += 2;
                let name = self.word();
                if name.is_empty() {
                    return Err(self.error(start, ErrorKind::Dangling, "`::` needs a type such as ::str"));
                }
                Ok(Value::Type(name))
            }
            '!' if self.peek_at(1) == Some('~') => {
                self.at += 2;
                Ok(Value::Not(Box::new(self.primary()?)))
            }
            c if SIGILS.contains(&c) && self.peek_at(1).is_some_and(is_word_start) => {
                Ok(Value::Statement(Box::new(self.statement()?)))
            }
            '+' | '-' if self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) => Ok(self.number()),
            c if c.is_ascii_digit() => Ok(self.number()),
            c if is_word_start(c) => Ok(Value::Word(self.dotted_word())),
            '}' | ']' | ')' => Err(self.error(start, ErrorKind::Mismatched, format!("`{c}` closes nothing here"))),
            _ => Err(self.unexpected("a value")),
        }
    }

    fn number(&mut self) -> Value {
        let start = self.at;
        if matches!(self.peek(), Some('+' | '-')) {
            self.at += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        // `1.5`, and versions `1.47.1`.
        while self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1;
            }
        }
        let digits_end = self.at;
        // A unit or a percent sign (`30s`, `2.3%`) — unless digits follow it: then the whole run
        // is a word (a commit hash such as `46aaf70`).
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic() || c == '%') {
            self.at += 1;
        }
        if self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.at = digits_end;
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                self.at += 1;
            }
            return Value::Word(self.chars[start..self.at].iter().collect());
        }
        Value::Num(self.chars[start..self.at].iter().collect())
    }

    fn string(&mut self) -> Result<Value> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error(start, ErrorKind::Unclosed, "this string is never closed with `\"`")),
                Some('"') => {
                    self.at += 1;
                    return Ok(Value::Str(out));
                }
                Some('\\') => {
                    let escaped = match self.peek_at(1) {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some(c @ ('"' | '\\')) => c,
                        // Anything else is kept as written (regular expressions: `\(`).
                        Some(c) => {
                            out.push('\\');
                            c
                        }
                        None => {
                            return Err(self.error(
                                start,
                                ErrorKind::Unclosed,
                                "this string is never closed with `\"`",
                            ));
                        }
                    };
                    out.push(escaped);
                    self.at += 2;
                }
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
    }

    fn var(&mut self) -> Result<Value> {
        let start = self.at;
        self.at += 1;
        let mut path = Vec::new();
        loop {
            let name = self.word();
            if name.is_empty() {
                return Err(self.error(start, ErrorKind::Dangling, "`$` needs a variable name"));
            }
            path.push(name);
            if self.peek() == Some('.') && self.peek_at(1).is_some_and(is_word_start) {
                self.at += 1;
            } else {
                return Ok(Value::Var(path));
            }
        }
    }

    /// `{ … }`: statements (when it starts with a sigil), else a map.
    fn brace(&mut self) -> Result<Value> {
        let start = self.at;
        self.at += 1;
        self.depth += 1;
        self.skip_blanks(true);
        let statement_first =
            self.peek().is_some_and(|c| SIGILS.contains(&c)) && self.peek_at(1).is_some_and(is_word_start);
        let value = if statement_first {
            Value::Block(self.statements_until("}", start)?)
        } else {
            let mut entries = Vec::new();
            loop {
                self.skip_blanks(true);
                match self.peek() {
                    None => return Err(self.error(start, ErrorKind::Unclosed, "this `{` is never closed")),
                    Some('}') => {
                        self.at += 1;
                        break;
                    }
                    Some(',') => self.at += 1,
                    Some(']' | ')') => {
                        return Err(self.error(self.at, ErrorKind::Mismatched, "expected `}` to close the `{` first"));
                    }
                    Some(_) => {
                        let key = self.key();
                        let mut value = self.value()?;
                        self.skip_blanks(false);
                        if let Some(op) = self.operator() {
                            self.skip_blanks(false);
                            let right = self.value()?;
                            value = Value::Compare(Box::new(value), op, Box::new(right));
                        }
                        entries.push((key, value));
                    }
                }
            }
            Value::Map(entries)
        };
        self.depth -= 1;
        Ok(value)
    }

    /// `key:` before a map value, if there is one.
    fn key(&mut self) -> Option<String> {
        if !self.peek().is_some_and(is_word_start) {
            return None;
        }
        let mut n = 0;
        while self.peek_at(n).is_some_and(is_word) {
            n += 1;
        }
        if self.peek_at(n) != Some(':') || self.peek_at(n + 1) == Some(':') {
            return None;
        }
        let key: String = self.chars[self.at..self.at + n].iter().collect();
        self.at += n + 1;
        Some(key)
    }

    fn operator(&mut self) -> Option<String> {
        for op in [">=", "<=", "==", "!=", ">", "<"] {
            if self.starts(op) && !(op == ">" && self.starts(">>")) && !(op == "<" && self.starts("<<")) {
                self.at += op.len();
                return Some(op.to_owned());
            }
        }
        None
    }

    fn list(&mut self) -> Result<Value> {
        let start = self.at;
        self.at += 1;
        self.depth += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blanks(true);
            match self.peek() {
                None => return Err(self.error(start, ErrorKind::Unclosed, "this `[` is never closed")),
                Some(']') => {
                    self.at += 1;
                    break;
                }
                Some(',') => self.at += 1,
                Some('}' | ')') => {
                    return Err(self.error(self.at, ErrorKind::Mismatched, "expected `]` to close the `[` first"));
                }
                Some(_) => items.push(self.value()?),
            }
        }
        self.depth -= 1;
        Ok(Value::List(items))
    }

    fn group(&mut self) -> Result<Value> {
        let start = self.at;
        self.at += 1;
        self.depth += 1;
        let mut alternatives = vec![Vec::new()];
        loop {
            self.skip_blanks(true);
            match self.peek() {
                None => return Err(self.error(start, ErrorKind::Unclosed, "this `(` is never closed")),
                Some(')') => {
                    self.at += 1;
                    break;
                }
                Some('|') => {
                    self.at += 1;
                    alternatives.push(Vec::new());
                }
                Some(',') => self.at += 1,
                Some('}' | ']') => {
                    return Err(self.error(self.at, ErrorKind::Mismatched, "expected `)` to close the `(` first"));
                }
                Some(_) => {
                    let value = match self.key() {
                        Some(key) => Value::Map(vec![(Some(key), self.value()?)]),
                        None => self.value()?,
                    };
                    if let Some(last) = alternatives.last_mut() {
                        last.push(value);
                    }
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Group(alternatives))
    }

    /// Statements (separated by newlines or `;`) until `end`; `open` is where the body began.
    fn statements_until(&mut self, end: &str, open: usize) -> Result<Vec<Statement>> {
        let mut body = Vec::new();
        let saved = self.depth;
        loop {
            self.skip_blanks(true);
            if self.starts(end) {
                self.at += end.len();
                self.depth = saved;
                return Ok(body);
            }
            match self.peek() {
                None => {
                    let opener: String = self.chars[open..].iter().take(if end == ">>" { 2 } else { 1 }).collect();
                    return Err(self.error(open, ErrorKind::Unclosed, format!("this `{opener}` is never closed")));
                }
                Some(';') => self.at += 1,
                Some(c @ ('}' | ']' | ')')) => {
                    return Err(self.error(
                        self.at,
                        ErrorKind::Mismatched,
                        format!("`{c}` where `{end}` was expected"),
                    ));
                }
                Some(_) => {
                    // Inside a body a newline ends a statement.
                    self.depth = 0;
                    let statement = self.statement();
                    self.depth = saved;
                    body.push(statement?);
                }
            }
        }
    }

    /// One L3 record, to the end of the line.
    fn record(&mut self) -> Result<Part> {
        self.skip_blanks(false);
        let mut fields = Vec::new();
        loop {
            let start = self.at;
            let field = match self.peek() {
                Some('`') => Field::Text(self.backticked()?),
                Some('[') => self.record_list()?,
                _ => {
                    let mut text = String::new();
                    while self.peek().is_some_and(|c| !matches!(c, '.' | '\n' | '[' | ']' | '`') && !c.is_whitespace())
                    {
                        text.push(self.chars[self.at]);
                        self.at += 1;
                    }
                    if text.is_empty() {
                        return Err(self.error(start, ErrorKind::BadRecord, "an L3 field is empty"));
                    }
                    Field::Text(text)
                }
            };
            if fields.is_empty() && !matches!(&field, Field::Text(t) if ["Q", "C", "R", "S", "E"].contains(&t.as_str()))
            {
                return Err(self.error(
                    start,
                    ErrorKind::BadRecord,
                    "an L3 record begins with Q (query), C (command), R (result), S (state) or E (error)",
                ));
            }
            fields.push(field);
            match self.peek() {
                Some('.') => self.at += 1,
                None | Some('\n') => break,
                Some(c) if c.is_whitespace() => {
                    self.skip_blanks(false);
                    if !matches!(self.peek(), None | Some('\n')) {
                        return Err(self.unexpected("`.` or the end of the record"));
                    }
                    break;
                }
                Some(_) => return Err(self.unexpected("`.` between L3 fields")),
            }
        }
        if fields.len() < 2 {
            return Err(self.error(
                self.at.saturating_sub(1),
                ErrorKind::BadRecord,
                "an L3 record has at least two fields",
            ));
        }
        Ok(Part::Record(fields))
    }

    fn backticked(&mut self) -> Result<String> {
        let start = self.at;
        self.at += 1;
        let mut text = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => {
                    return Err(self.error(start, ErrorKind::Unclosed, "this `` ` `` is never closed"));
                }
                Some('`') => {
                    self.at += 1;
                    return Ok(text);
                }
                Some(c) => {
                    text.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// `[key:value,key:value]` in an L3 record.
    fn record_list(&mut self) -> Result<Field> {
        let start = self.at;
        self.at += 1;
        let mut items = Vec::new();
        loop {
            match self.peek() {
                None | Some('\n') => return Err(self.error(start, ErrorKind::Unclosed, "this `[` is never closed")),
                Some(']') => {
                    self.at += 1;
                    return Ok(Field::List(items));
                }
                Some(',' | ' ') => self.at += 1,
                Some(_) => {
                    let key = self.record_atom()?;
                    let value = if self.peek() == Some(':') {
                        self.at += 1;
                        Some(self.record_atom()?)
                    } else {
                        None
                    };
                    items.push((key, value));
                }
            }
        }
    }

    fn record_atom(&mut self) -> Result<String> {
        if self.peek() == Some('`') {
            return self.backticked();
        }
        let start = self.at;
        let mut text = String::new();
        while self.peek().is_some_and(|c| !matches!(c, ',' | ':' | ']' | '\n' | '`' | '[') && !c.is_whitespace()) {
            text.push(self.chars[self.at]);
            self.at += 1;
        }
        if text.is_empty() {
            return Err(self.error(start, ErrorKind::BadRecord, "an empty item in an L3 list"));
        }
        Ok(text)
    }
}
