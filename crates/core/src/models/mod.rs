//! The models behind the configuration: what each credential and model went through
//! (`state.rs`: cool-downs, the last good credential, kept across restarts), the model servers
//! found on this machine (`discover.rs`), and the report of both (`/model`, `acp models status`).

pub mod discover;
pub mod state;

use std::fmt::Write as _;

use crate::config::Config;
pub use discover::Found;
pub use state::{Blame, Entry, ModelState};

/// How long ago, in words: `4 min`, `2 h`.
pub fn span(ms: i64) -> String {
    let secs = (ms.max(0) + 999) / 1000;
    match secs {
        0..=59 => format!("{secs} s"),
        60..=5_399 => format!("{} min", (secs + 30) / 60),
        _ => format!("{:.1} h", secs as f64 / 3_600.0),
    }
}

/// What a session may ask about its models and their credentials: the providers' credentials
/// with their state (`sticky`: the one the session holds, by provider; `every`: each provider with
/// a key, else only those with several keys or a key in trouble), the models cooling down, and
/// the fallbacks.
pub fn report(
    config: &Config,
    state: &ModelState,
    sticky: &dyn Fn(&str) -> Option<String>,
    now: i64,
    every: bool,
) -> String {
    let mut out = String::new();
    if !config.fallbacks.is_empty() {
        let _ = writeln!(out, "Fallbacks, in order: {}.", config.fallbacks.join(" → "));
    }
    for provider in &config.providers {
        // One healthy key says nothing worth reading.
        let cooling = |p: &crate::config::models::AuthProfile| {
            state.profile(&provider.id, &p.id, &p.fingerprint).is_some_and(|e| e.cooling(now))
        };
        if !every && provider.profiles.len() < 2 && !provider.profiles.iter().any(|p| p.missing.is_some() || cooling(p))
        {
            continue;
        }
        let _ = writeln!(out, "Credentials of `{}` ({}):", provider.id, provider.rotation.as_str());
        let held = sticky(&provider.id);
        for profile in &provider.profiles {
            let mut line = format!("- {} ({})", profile.id, profile.source);
            match &profile.missing {
                Some(why) => {
                    let _ = write!(line, " — unusable: {why}");
                }
                None => {
                    if let Some(entry) = state.profile(&provider.id, &profile.id, &profile.fingerprint)
                        && entry.cooling(now)
                    {
                        let _ = write!(
                            line,
                            " — cooling down {} more ({}, {} in a row)",
                            span(entry.until_ms - now),
                            entry.reason,
                            entry.errors
                        );
                    }
                }
            }
            if held.as_deref() == Some(profile.id.as_str()) {
                line.push_str(" ← this session");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    let cooling: Vec<String> = state
        .models_cooling(now)
        .into_iter()
        .map(|(model, entry)| {
            format!("- `{model}` — {} more ({}, {} in a row)", span(entry.until_ms - now), entry.reason, entry.errors)
        })
        .collect();
    if !cooling.is_empty() {
        let _ = writeln!(out, "Cooling down (tried last, while others answer):\n{}", cooling.join("\n"));
    }
    out
}
