//! Asking the user to pick a permission option: arrow keys (or j/k) and Enter, or the option's
//! number; Esc refuses, Ctrl-C cancels the turn. Without a terminal the options are numbered and a
//! line is read.

use std::io::{self, BufRead, Write};

use crossterm::cursor::MoveUp;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::queue;
use crossterm::style::Print;
use crossterm::terminal::{Clear, ClearType};
use serde_json::Value;

use crate::look::Look;

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Option(String),
    /// Esc / Ctrl-C / end of input: refuse, and for Ctrl-C also cancel the turn.
    Refused {
        cancel_turn: bool,
    },
}

fn label(option: &Value) -> String {
    option["name"].as_str().or_else(|| option["optionId"].as_str()).unwrap_or("?").to_owned()
}

/// The id of the first option of one of `kinds`, in that order of preference.
pub fn option_of(options: &[Value], kinds: &[&str]) -> Option<String> {
    kinds.iter().find_map(|kind| {
        options.iter().find(|o| o["kind"] == *kind).and_then(|o| o["optionId"].as_str()).map(str::to_owned)
    })
}

/// Restores cooked mode however the prompt ends.
struct RawMode;

impl RawMode {
    fn enable() -> io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Asks on the terminal: the options as a menu with a highlighted choice. Once answered the menu
/// is erased (the caller says in one line what was chosen).
pub fn choose_interactive(out: &mut impl Write, options: &[Value]) -> io::Result<Choice> {
    if options.is_empty() {
        return Ok(Choice::Refused { cancel_turn: false });
    }
    let choice = menu(out, options);
    // Up over the menu's lines, and clear from there down.
    queue!(out, MoveUp(rows(options)), Print('\r'), Clear(ClearType::FromCursorDown))?;
    out.flush()?;
    choice
}

/// The lines the menu takes.
fn rows(options: &[Value]) -> u16 {
    u16::try_from(options.len()).unwrap_or(u16::MAX)
}

/// What the user picked, in words: the option's name, or why nothing was.
pub fn describe(choice: &Choice, options: &[Value]) -> String {
    match choice {
        Choice::Option(id) => options.iter().find(|o| o["optionId"] == id.as_str()).map_or_else(|| id.clone(), label),
        Choice::Refused { cancel_turn: true } => "Cancelled (Ctrl-C)".into(),
        Choice::Refused { cancel_turn: false } => "Refused".into(),
    }
}

/// (Re)draws the menu with `selected` highlighted, over its last drawing unless this is the first.
fn draw(out: &mut impl Write, options: &[Value], selected: usize, first: bool) -> io::Result<()> {
    if !first {
        queue!(out, MoveUp(rows(options)))?;
    }
    for (i, option) in options.iter().enumerate() {
        queue!(out, Print('\r'), Clear(ClearType::CurrentLine))?;
        let kind = option["kind"].as_str().unwrap_or_default();
        let colour = if kind.starts_with("allow") { Look::GREEN } else { Look::RED };
        if i == selected {
            write!(out, "{}❯ {}. {colour}{}{}\r\n", Look::BOLD, i + 1, label(option), Look::RESET)?;
        } else {
            write!(out, "  {}. {}\r\n", i + 1, label(option))?;
        }
    }
    out.flush()
}

fn menu(out: &mut impl Write, options: &[Value]) -> io::Result<Choice> {
    let mut selected = 0usize;
    let _raw = RawMode::enable()?;
    draw(out, options, selected, true)?;
    loop {
        let Event::Key(KeyEvent { code, modifiers, kind, .. }) = crossterm::event::read()? else { continue };
        if kind == KeyEventKind::Release {
            continue;
        }
        match code {
            KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => {
                return Ok(Choice::Refused { cancel_turn: true });
            }
            KeyCode::Esc | KeyCode::Char('q') => return Ok(Choice::Refused { cancel_turn: false }),
            KeyCode::Up | KeyCode::Char('k') => {
                selected = (selected + options.len() - 1) % options.len();
                draw(out, options, selected, false)?;
            }
            KeyCode::Down | KeyCode::Char('j') | KeyCode::Tab => {
                selected = (selected + 1) % options.len();
                draw(out, options, selected, false)?;
            }
            KeyCode::Enter => return Ok(pick(options, selected)),
            KeyCode::Char(c) if c.is_ascii_digit() => {
                let n = c.to_digit(10).unwrap_or(0) as usize;
                if (1..=options.len()).contains(&n) {
                    draw(out, options, n - 1, false)?;
                    return Ok(pick(options, n - 1));
                }
            }
            _ => {}
        }
    }
}

fn pick(options: &[Value], i: usize) -> Choice {
    match options[i]["optionId"].as_str() {
        Some(id) => Choice::Option(id.to_owned()),
        None => Choice::Refused { cancel_turn: false },
    }
}

/// Asks without a terminal: numbered options, one line read from `input`.
pub fn choose_line(out: &mut impl Write, input: &mut impl BufRead, options: &[Value]) -> io::Result<Choice> {
    for (i, option) in options.iter().enumerate() {
        writeln!(out, "  {}. {}", i + 1, label(option))?;
    }
    loop {
        write!(out, "Choose 1-{}: ", options.len())?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(Choice::Refused { cancel_turn: false });
        }
        if let Ok(n) = line.trim().parse::<usize>()
            && (1..=options.len()).contains(&n)
        {
            return Ok(pick(options, n - 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_line_picks_by_number_and_end_of_input_refuses() {
        let options = vec![
            json!({"optionId": "allow", "name": "Allow once", "kind": "allow_once"}),
            json!({"optionId": "no", "name": "Reject", "kind": "reject_once"}),
        ];
        let mut out = Vec::new();
        let choice = choose_line(&mut out, &mut io::Cursor::new("x\n2\n"), &options).unwrap();
        assert_eq!(choice, Choice::Option("no".into()));
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.starts_with("  1. Allow once\n  2. Reject\nChoose 1-2: Choose 1-2: "), "{shown}");
        let choice = choose_line(&mut Vec::new(), &mut io::Cursor::new(""), &options).unwrap();
        assert_eq!(choice, Choice::Refused { cancel_turn: false });
        assert_eq!(option_of(&options, &["allow_always", "allow_once"]), Some("allow".into()));
    }

    #[test]
    fn the_menu_highlights_the_choice_and_redraws_over_itself() {
        let options = vec![
            json!({"optionId": "allow", "name": "Allow once", "kind": "allow_once"}),
            json!({"optionId": "no", "name": "Reject", "kind": "reject_once"}),
        ];
        let mut out = Vec::new();
        draw(&mut out, &options, 1, true).unwrap();
        draw(&mut out, &options, 0, false).unwrap();
        let first = "\r\x1b[2K  1. Allow once\r\n\r\x1b[2K\x1b[1m❯ 2. \x1b[31mReject\x1b[0m\r\n";
        let again = "\x1b[2A\r\x1b[2K\x1b[1m❯ 1. \x1b[32mAllow once\x1b[0m\r\n\r\x1b[2K  2. Reject\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), format!("{first}{again}"));
    }
}
