//! How the client's output looks on a terminal: the few looks it uses, as crossterm's attributes
//! and colours, each written as the escape sequence that turns it on (nothing for plain output).

use std::fmt;

use crossterm::Command;
use crossterm::style::{Attribute, Color, SetAttribute, SetForegroundColor};

/// A look text takes from here on; `Display` writes what turns it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// No look at all: output without a terminal.
    Plain,
    Attribute(Attribute),
    Foreground(Color),
}

impl Look {
    /// Back to the terminal's own look (every attribute and colour off).
    pub(crate) const RESET: Self = Self::Attribute(Attribute::Reset);
    pub(crate) const BOLD: Self = Self::Attribute(Attribute::Bold);
    pub(crate) const DIM: Self = Self::Attribute(Attribute::Dim);
    pub(crate) const ITALIC: Self = Self::Attribute(Attribute::Italic);
    pub(crate) const RED: Self = Self::Foreground(Color::DarkRed);
    pub(crate) const GREEN: Self = Self::Foreground(Color::DarkGreen);
    pub(crate) const YELLOW: Self = Self::Foreground(Color::DarkYellow);
    pub(crate) const CYAN: Self = Self::Foreground(Color::DarkCyan);

    /// This look with colour on, none without.
    pub(crate) fn on(self, color: bool) -> Self {
        if color { self } else { Self::Plain }
    }
}

impl fmt::Display for Look {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Plain => Ok(()),
            Self::Attribute(attribute) => SetAttribute(attribute).write_ansi(f),
            Self::Foreground(color) => match basic(color) {
                // crossterm writes every colour as a 256-colour index (`ESC[38;5;2m`); the eight
                // basic ones keep their own codes (`ESC[32m`), which terminals that draw bold text
                // in bright colours brighten.
                Some(code) => write!(f, "\x1b[{code}m"),
                None => SetForegroundColor(color).write_ansi(f),
            },
        }
    }
}

/// The SGR code of one of the eight basic colours.
fn basic(color: Color) -> Option<u8> {
    let code = match color {
        Color::Black => 30,
        Color::DarkRed => 31,
        Color::DarkGreen => 32,
        Color::DarkYellow => 33,
        Color::DarkBlue => 34,
        Color::DarkMagenta => 35,
        Color::DarkCyan => 36,
        Color::Grey => 37,
        _ => return None,
    };
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_look_is_the_escape_sequence_terminals_have_always_been_sent() {
        let looks = [
            (Look::RESET, "\x1b[0m"),
            (Look::BOLD, "\x1b[1m"),
            (Look::DIM, "\x1b[2m"),
            (Look::ITALIC, "\x1b[3m"),
            (Look::RED, "\x1b[31m"),
            (Look::GREEN, "\x1b[32m"),
            (Look::YELLOW, "\x1b[33m"),
            (Look::CYAN, "\x1b[36m"),
        ];
        for (look, bytes) in looks {
            assert_eq!(look.to_string(), bytes, "{look:?}");
            assert_eq!(look.on(false).to_string(), "", "{look:?} without colour");
        }
    }
}
