//! Slash commands: a prompt whose text starts with `/name` naming one of these is a command, not a
//! message to the model. Anything else that starts with `/` (a path, say) goes to the model as
//! typed. Commands answer as agent text and end the prompt with `end_turn`; wrong arguments get
//! the command's usage, never an error and never a hang.
//!
//! `/help`, `/status`, `/usage`, `/context` and `/stop` answer at once, even while a turn runs;
//! the others (`/compact`, `/model`, `/think`, `/new`, `/reset`, `/network`) wait for the running turn, like a
//! prompt, because they change what the next request sends.

use crate::history::input::{UserBlock, plain_text};
use crate::settings::ReasoningEffort;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Status,
    Usage,
    Context {
        detail: bool,
    },
    Stop,
    Compact {
        instructions: Option<String>,
    },
    /// `None`: show the current model and the choices.
    Model(Option<String>),
    /// `None` inside: off (the provider's default).
    Think(Option<ReasoningEffort>),
    /// Clear the context; `/new` may name the model to continue with.
    New {
        model: Option<String>,
    },
    Reset,
    /// Network for sandboxed commands: `None` shows the sandbox's state.
    Network(Option<bool>),
}

impl Command {
    /// Answered at once, even while a turn runs.
    pub fn is_immediate(&self) -> bool {
        matches!(self, Self::Help | Self::Status | Self::Usage | Self::Context { .. } | Self::Stop)
    }
}

/// One command as advertised to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// What the argument is, for commands that take one.
    pub hint: Option<&'static str>,
    pub usage: &'static str,
}

pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo { name: "help", description: "List the slash commands", hint: None, usage: "/help" },
    CommandInfo {
        name: "status",
        description: "Model, mode, context-window fill, tokens and session id",
        hint: None,
        usage: "/status",
    },
    CommandInfo {
        name: "context",
        description: "What the context holds: instruction files, tool schemas, system prompt, history",
        hint: Some("list | detail"),
        usage: "/context [list|detail]",
    },
    CommandInfo {
        name: "compact",
        description: "Summarise the conversation so far to free the context window",
        hint: Some("what the summary should keep (optional)"),
        usage: "/compact [instructions for the summary]",
    },
    CommandInfo {
        name: "model",
        description: "Show or switch the model",
        hint: Some("provider/model"),
        usage: "/model [provider/model]",
    },
    CommandInfo {
        name: "think",
        description: "How much the model reasons before answering",
        hint: Some("off | low | medium | high"),
        usage: "/think off|low|medium|high",
    },
    CommandInfo {
        name: "new",
        description: "Start over with an empty context (optionally with another model)",
        hint: Some("provider/model (optional)"),
        usage: "/new [provider/model]",
    },
    CommandInfo { name: "reset", description: "Clear the conversation's context", hint: None, usage: "/reset" },
    CommandInfo {
        name: "stop",
        description: "Stop the running turn and everything queued",
        hint: None,
        usage: "/stop",
    },
    CommandInfo { name: "usage", description: "Tokens used by this session", hint: None, usage: "/usage" },
    CommandInfo {
        name: "network",
        description: "Let sandboxed commands use the network, or not (this session)",
        hint: Some("on | off"),
        usage: "/network [on|off]",
    },
];

/// A prompt, read as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    NotACommand,
    Command(Command),
    /// A known command with arguments it does not take: the answer is this text.
    BadArgs(String),
}

pub fn parse(blocks: &[UserBlock]) -> Parsed {
    // Only a prompt that is text alone can be a command.
    if blocks.iter().any(|b| !matches!(b, UserBlock::Text { .. })) {
        return Parsed::NotACommand;
    }
    let text = plain_text(blocks);
    let text = text.trim();
    let Some(rest) = text.strip_prefix('/') else { return Parsed::NotACommand };
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let Some(info) = COMMANDS.iter().find(|c| c.name == name) else { return Parsed::NotACommand };
    let bad = |why: &str| Parsed::BadArgs(format!("{why}\n\nUsage: `{}` — {}.", info.usage, info.description));
    let no_args = |command: Command| {
        if args.is_empty() { Parsed::Command(command) } else { bad("This command takes no arguments.") }
    };
    match name {
        "help" => no_args(Command::Help),
        "status" => no_args(Command::Status),
        "usage" => no_args(Command::Usage),
        "stop" => no_args(Command::Stop),
        "reset" => no_args(Command::Reset),
        "context" => match args {
            "" | "list" => Parsed::Command(Command::Context { detail: false }),
            "detail" => Parsed::Command(Command::Context { detail: true }),
            other => bad(&format!("Unknown argument `{other}`: use `list` or `detail`.")),
        },
        "compact" => Parsed::Command(Command::Compact { instructions: (!args.is_empty()).then(|| args.to_owned()) }),
        "model" => match args.split_whitespace().count() {
            0 => Parsed::Command(Command::Model(None)),
            1 => Parsed::Command(Command::Model(Some(args.to_owned()))),
            _ => bad("Give one model, as `provider/model`."),
        },
        "new" => match args.split_whitespace().count() {
            0 => Parsed::Command(Command::New { model: None }),
            1 => Parsed::Command(Command::New { model: Some(args.to_owned()) }),
            _ => bad("Give at most one model, as `provider/model`."),
        },
        "network" => match args {
            "" => Parsed::Command(Command::Network(None)),
            "on" => Parsed::Command(Command::Network(Some(true))),
            "off" => Parsed::Command(Command::Network(Some(false))),
            other => bad(&format!("Unknown argument `{other}`: use `on` or `off`.")),
        },
        "think" => match args {
            "off" | "default" | "none" => Parsed::Command(Command::Think(None)),
            "" => bad("Say how much: `off`, `low`, `medium` or `high`."),
            level => match ReasoningEffort::parse(level) {
                Some(effort) => Parsed::Command(Command::Think(Some(effort))),
                None => bad(&format!("Unknown level `{level}`: use `off`, `low`, `medium` or `high`.")),
            },
        },
        _ => Parsed::NotACommand,
    }
}

pub fn help_text() -> String {
    let mut out = String::from("**Commands**\n\n");
    for c in COMMANDS {
        out.push_str(&format!("- `{}` — {}\n", c.usage, c.description));
    }
    out
}

/// `12345` → `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Parsed {
        parse(&[UserBlock::text(text)])
    }

    #[test]
    fn commands_and_their_arguments() {
        assert_eq!(p("/help"), Parsed::Command(Command::Help));
        assert_eq!(p("  /status \n"), Parsed::Command(Command::Status));
        assert_eq!(p("/context detail"), Parsed::Command(Command::Context { detail: true }));
        assert_eq!(p("/context"), Parsed::Command(Command::Context { detail: false }));
        assert_eq!(
            p("/compact keep the API decisions"),
            Parsed::Command(Command::Compact { instructions: Some("keep the API decisions".into()) })
        );
        assert_eq!(p("/model openai/gpt-5"), Parsed::Command(Command::Model(Some("openai/gpt-5".into()))));
        assert_eq!(p("/think high"), Parsed::Command(Command::Think(Some(ReasoningEffort::High))));
        assert_eq!(p("/think off"), Parsed::Command(Command::Think(None)));
        assert_eq!(p("/new"), Parsed::Command(Command::New { model: None }));
    }

    #[test]
    fn bad_arguments_get_the_usage() {
        for (input, usage) in [
            ("/think hard", "/think off|low|medium|high"),
            ("/think", "/think off|low|medium|high"),
            ("/context everything", "/context [list|detail]"),
            ("/status now", "/status"),
            ("/model a b", "/model [provider/model]"),
        ] {
            let Parsed::BadArgs(text) = p(input) else { panic!("{input}") };
            assert!(text.contains(&format!("Usage: `{usage}`")), "{input}: {text}");
        }
    }

    #[test]
    fn other_slashes_go_to_the_model() {
        assert_eq!(p("/usr/bin/env is missing"), Parsed::NotACommand);
        assert_eq!(p("/unknown"), Parsed::NotACommand);
        assert_eq!(p("please /help"), Parsed::NotACommand);
        let with_link = [
            UserBlock::text("/help"),
            UserBlock::ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                title: None,
                description: None,
                mime_type: None,
            },
        ];
        assert_eq!(parse(&with_link), Parsed::NotACommand);
    }

    #[test]
    fn numbers_get_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
