//! OpenLang, the compact language agents use with each other (the bundled `openlang` skill
//! teaches it to the model): a parser for L2 (sigil statements) and L3 (period-separated
//! records) with the `~L1:` / `~L2` / `~L3` switches, errors with exact positions, and a
//! printer that reads a message back in plain words for people watching agents talk.
//!
//! A message optionally starts with `~openlang`. Lines are L2 unless switched: `~L1: text`
//! carries free text to the end of its line, `~L3: record` one record, and a line that is only
//! `~L1`, `~L2` or `~L3` switches the lines after it. `--` starts a comment to the end of the line.

mod parse;
mod print;
#[cfg(test)]
mod tests;

pub use parse::parse;
pub use print::explain;

/// A parsed message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// L2 statements.
    Statement(Statement),
    /// `~L1:` free text.
    Plain(String),
    /// An L3 record: its fields.
    Record(Vec<Field>),
}

/// `?fnd @fs {p:"*.rs"} ->$hits`
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// `?`, `!`, `>`, `#`, `~` or `^`.
    pub sigil: char,
    /// The action, status, meta word or control keyword, with its scope (`git:mrg`) or argument
    /// (`frk:name`, `tmo:30`) as written.
    pub head: String,
    pub args: Vec<Value>,
    /// `->$name`: the result is bound to it.
    pub bind: Option<String>,
    /// `-> statement` or `| statement`: what the result flows into.
    pub then: Option<Box<Statement>>,
    /// Where it starts (1-based).
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A bare word: a modifier, a status, `true`, a name.
    Word(String),
    Str(String),
    /// As written (`42`, `-1.5`, `+2.3%`).
    Num(String),
    /// `$name.field.field`.
    Var(Vec<String>),
    /// `@fs`.
    Target(String),
    /// `::type`.
    Type(String),
    /// `{key:value value …}`: entries with or without a key, in order (a key may repeat).
    Map(Vec<(Option<String>, Value)>),
    List(Vec<Value>),
    /// `(a | b c)`: alternatives, each a sequence.
    Group(Vec<Vec<Value>>),
    /// `<< … >>`, or `{…}` holding statements.
    Block(Vec<Statement>),
    /// `a..b`.
    Range(Box<Value>, Box<Value>),
    /// `!~value`.
    Not(Box<Value>),
    /// `a > b`, `a == b`, …
    Compare(Box<Value>, String, Box<Value>),
    /// A statement where a value goes (`^par [!a, !b]`).
    Statement(Box<Statement>),
}

/// An L3 field: text, or a list of `key:value` items.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Text(String),
    List(Vec<(String, Option<String>)>),
}

/// What is wrong with a message, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// 1-based.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Nothing after `~openlang`.
    Empty,
    /// A statement must begin with `? ! > # ~ ^`.
    NoSigil,
    /// A string, bracket, brace, parenthesis or `<<` block left open.
    Unclosed,
    /// A closing bracket that closes nothing, or the wrong one.
    Mismatched,
    /// A character or token that cannot stand here.
    Unexpected,
    /// `$` without a name, `@` without a target, `::` without a type, `->` without a target.
    Dangling,
    /// `^` with a keyword that is not one of the control words.
    UnknownControl,
    /// `~err` without a `code`.
    ErrWithoutCode,
    /// An L3 record whose first field is not `Q C R S E`, or with an empty field.
    BadRecord,
    /// Brackets or statements nested deeper than the parser goes.
    TooDeep,
}

impl ErrorKind {
    /// The name `~err` reports it by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::NoSigil => "no_sigil",
            Self::Unclosed => "unclosed",
            Self::Mismatched => "mismatched",
            Self::Unexpected => "unexpected",
            Self::Dangling => "dangling",
            Self::UnknownControl => "unknown_control",
            Self::ErrWithoutCode => "err_without_code",
            Self::BadRecord => "bad_record",
            Self::TooDeep => "too_deep",
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl Error {
    /// The error as an OpenLang reply for the sending agent, so it can fix its message.
    pub fn to_openlang(&self) -> String {
        format!(
            "~openlang\n~err {{code:E_PARSE lvl:warn kind:{} ln:{} col:{} msg:\"{}\"}}",
            self.kind.name(),
            self.line,
            self.column,
            self.message.replace('\\', "\\\\").replace('"', "\\\"")
        )
    }
}

/// The control words `^` may begin.
pub const CONTROL: &[&str] =
    &["if", "el", "lp", "ea", "par", "seq", "wt", "rt", "br", "ct", "frk", "jn", "lk", "ulk", "ch", "tx", "rx", "tmo"];

/// Whether `text` is meant as OpenLang (its first line is `~openlang`).
pub fn is_openlang(text: &str) -> bool {
    text.trim_start().lines().next().is_some_and(|l| l.trim() == "~openlang")
}
