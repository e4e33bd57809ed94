//! The vocabulary of a session's settings, shared by the configuration, the tools, the providers
//! and the runtime: how much the agent may do without asking ([`Mode`]), the answers the user
//! asked to remember ([`Rule`]), and how much the model reasons ([`ReasoningEffort`]).

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every edit, command and fetch asks.
    Ask,
    /// Reads and edits inside the workspace and sandboxed commands run; fetches ask.
    #[default]
    Code,
    /// As `code`, and fetches of public addresses run too.
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Ask, Mode::Code, Mode::Auto];

    /// This mode, or `cap` if that lets less run (`ask` < `code` < `auto`).
    pub fn at_most(self, cap: Option<Mode>) -> Mode {
        let rank = |m: Mode| Self::ALL.iter().position(|x| *x == m).unwrap_or(0);
        match cap {
            Some(cap) if rank(cap) < rank(self) => cap,
            _ => self,
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Code => "code",
            Self::Auto => "auto",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "Ask",
            Self::Code => "Code",
            Self::Auto => "Auto",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::Ask => "Ask before every edit, command and fetch",
            Self::Code => {
                "Edit the workspace and run sandboxed commands without asking; ask before fetches and before leaving the sandbox"
            }
            Self::Auto => "As Code, and fetch without asking; still ask before leaving the sandbox",
        }
    }

    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }
}

/// A remembered answer: for `exec` it covers one command exactly as shown, for other tools the
/// whole tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub command: Option<String>,
    pub allow: bool,
}

/// How much the model should reason, where the model supports it: `minimal` and `xhigh` go as
/// they are to OpenAI (whose newer models take them) and become `low`/`high` on other
/// Chat Completions servers; on Anthropic each level is a thinking budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
    #[serde(rename = "xhigh")]
    XHigh,
}

impl ReasoningEffort {
    pub const ALL: [ReasoningEffort; 5] = [Self::Minimal, Self::Low, Self::Medium, Self::High, Self::XHigh];

    /// The levels as an error message lists them.
    pub const CHOICES: &str = "minimal, low, medium, high or xhigh";

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::XHigh => "xhigh",
        }
    }

    /// As servers that know only `low`, `medium` and `high` take it.
    pub fn common(self) -> Self {
        match self {
            Self::Minimal => Self::Low,
            Self::XHigh => Self::High,
            other => other,
        }
    }

    /// Anthropic thinking budget for this effort (1,024 is the least Anthropic takes).
    pub fn budget_tokens(self) -> u32 {
        match self {
            Self::Minimal => 1_024,
            Self::Low => 2_048,
            Self::Medium => 8_192,
            Self::High => 24_576,
            Self::XHigh => 32_768,
        }
    }
}
