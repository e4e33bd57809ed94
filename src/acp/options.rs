//! Session modes and config options as ACP shows them: `modes` for older clients and the `mode` and
//! `model` select options (category-tagged) for current ones, kept in sync.

use acp_protocol::acp::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
};

use crate::config::{Config, ModelRef};
use crate::runtime::Mode;

pub const MODEL_OPTION: &str = "model";
pub const MODE_OPTION: &str = "mode";

pub fn modes(current: Mode) -> SessionModeState {
    let available = Mode::ALL.iter().map(|m| SessionMode::new(m.id(), m.name()).description(m.description())).collect();
    SessionModeState::new(current.id(), available)
}

/// The complete list of config options (ACP replaces its whole state with each list).
pub fn config_options(config: &Config, model: &ModelRef, mode: Mode) -> Vec<SessionConfigOption> {
    let mut choices: Vec<SessionConfigSelectOption> = config
        .model_choices()
        .into_iter()
        .map(|(r, name)| SessionConfigSelectOption::new(r.to_string(), name))
        .collect();
    let current = model.to_string();
    if !choices.iter().any(|c| c.value.0.as_ref() == current) {
        choices.insert(0, SessionConfigSelectOption::new(current.clone(), current.clone()));
    }
    let modes: Vec<SessionConfigSelectOption> = Mode::ALL
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.id(), m.name()).description(m.description()))
        .collect();
    vec![
        SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
            .description("The model that answers, as provider/model")
            .category(SessionConfigOptionCategory::Model),
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.id(), modes)
            .description("How much the agent may do without asking")
            .category(SessionConfigOptionCategory::Mode),
    ]
}
