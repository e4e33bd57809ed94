//! Session modes and config options as ACP shows them: `modes` for older clients and the `mode` and
//! `model` select options (category-tagged) for current ones, kept in sync.

use acp_protocol::acp::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
};

use crate::config::{Config, ModelRef};
use crate::runtime::Mode;
use crate::settings::ReasoningEffort;

pub const MODEL_OPTION: &str = "model";
pub const MODE_OPTION: &str = "mode";
pub const THOUGHT_OPTION: &str = "thought_level";

/// The value of the thought-level option that sends no reasoning settings.
pub const DEFAULT_THOUGHT: &str = "default";

/// Parses a thought-level value: `default` is `None`.
pub fn parse_thought_level(value: &str) -> Option<Option<ReasoningEffort>> {
    if value == DEFAULT_THOUGHT { Some(None) } else { ReasoningEffort::parse(value).map(Some) }
}

pub fn modes(current: Mode) -> SessionModeState {
    let available = Mode::ALL.iter().map(|m| SessionMode::new(m.id(), m.name()).description(m.description())).collect();
    SessionModeState::new(current.id(), available)
}

/// The complete list of config options (ACP replaces its whole state with each list). The model
/// choices are every model of a usable provider, plus the configured default, every model the
/// session has used (`used`) and the current one even if no provider lists them — clients that
/// only offer advertised values must always be able to switch back.
pub fn config_options(
    config: &Config,
    model: &ModelRef,
    used: &[ModelRef],
    mode: Mode,
    reasoning: Option<ReasoningEffort>,
) -> Vec<SessionConfigOption> {
    let mut choices: Vec<SessionConfigSelectOption> = config
        .model_choices()
        .into_iter()
        .map(|(r, name)| SessionConfigSelectOption::new(r.to_string(), name))
        .collect();
    let current = model.to_string();
    let default = config.default_model_ref().ok();
    let mut missing: Vec<String> = Vec::new();
    for r in default.iter().chain(used).chain(std::iter::once(model)) {
        let value = r.to_string();
        if !choices.iter().any(|c| c.value.0.as_ref() == value) && !missing.contains(&value) {
            missing.push(value);
        }
    }
    choices.splice(0..0, missing.into_iter().map(|v| SessionConfigSelectOption::new(v.clone(), v)));
    options_of(choices, current, Some(mode), reasoning)
}

/// The options from the model choices (`provider/model` and a name); `mode` is left out when the
/// agent behind has no modes (a gateway other than acp's).
pub fn options_of(
    choices: Vec<SessionConfigSelectOption>,
    current: String,
    mode: Option<Mode>,
    reasoning: Option<ReasoningEffort>,
) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = Mode::ALL
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.id(), m.name()).description(m.description()))
        .collect();
    let model = SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
        .description("The model that answers, as provider/model")
        .category(SessionConfigOptionCategory::Model);
    let mode = mode.map(|mode| {
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.id(), modes)
            .description("How much the agent may do without asking")
            .category(SessionConfigOptionCategory::Mode)
    });
    let thought = SessionConfigOption::select(
        THOUGHT_OPTION,
        "Thinking",
        reasoning.map_or(DEFAULT_THOUGHT, ReasoningEffort::as_str),
        thought_levels(),
    )
    .description("How much the model reasons before it answers (extended thinking, reasoning effort)")
    .category(SessionConfigOptionCategory::ThoughtLevel);
    std::iter::once(model).chain(mode).chain(std::iter::once(thought)).collect()
}

fn thought_levels() -> Vec<SessionConfigSelectOption> {
    let mut levels = vec![
        SessionConfigSelectOption::new(DEFAULT_THOUGHT, "Default")
            .description("The provider's default (no extended thinking on Anthropic)"),
    ];
    levels.extend(ReasoningEffort::ALL.iter().map(|e| {
        let option = |name| SessionConfigSelectOption::new(e.as_str(), name);
        match e {
            ReasoningEffort::Minimal => option("Minimal").description("OpenAI's least; elsewhere as low"),
            ReasoningEffort::Low => option("Low"),
            ReasoningEffort::Medium => option("Medium"),
            ReasoningEffort::High => option("High"),
            ReasoningEffort::XHigh => option("Extra high").description("OpenAI's most; elsewhere as high"),
        }
    }));
    levels
}
