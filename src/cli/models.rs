//! `acp models [status]`: the models acp can use — every configured provider's (and why one
//! cannot be used), those of the model servers found on this machine, the aliases and fallbacks —
//! and, with `status`, each credential's and model's state (cool-downs, the last good key).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use serde_json::json;

use crate::config::{Config, ProviderConfig};
use crate::models::{ModelState, discover};

#[derive(clap::Args, Debug)]
pub struct ModelsArgs {
    #[command(subcommand)]
    pub command: Option<ModelsCommand>,
    /// Print JSON (one object) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum ModelsCommand {
    /// Each provider's credentials (auth profiles) and the models cooling down after failures.
    Status,
}

pub fn models(args: ModelsArgs) -> ExitCode {
    let config = Config::load();
    if let Some(e) = &config.load_error {
        let _ = writeln!(std::io::stderr(), "acp: the configuration file is broken: {e}");
        return ExitCode::from(acp_repl::run::exit::CONFIG);
    }
    let said = match args.command {
        Some(ModelsCommand::Status) => Ok(status(&config, args.json)),
        None => list(&config, args.json),
    };
    super::pairing::finish(said)
}

/// The servers on this machine, looked for now (a second and a half at most), and kept as the
/// last seen (what `acp serve` offers before its own search ends).
pub fn look(config: &Config) -> Result<Vec<ProviderConfig>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("could not start: {e}"))?;
    let places = discover::places(&config.models, config.ollama_host.as_deref());
    let http = if places.iter().all(|(_, base, _)| crate::http::is_plain(base)) {
        crate::http::build_plain_http(&config.timeouts)?
    } else {
        crate::http::build_http(&config.timeouts)?
    };
    let found = runtime.block_on(discover::discover(&http, &places));
    let written = ModelState::new(&config.home).set_found(found.iter().map(crate::models::Found::of).collect());
    runtime.block_on(written.written());
    Ok(found)
}

fn list(config: &Config, json: bool) -> Result<String, String> {
    let found = look(config)?;
    let default = config.with_found(&found).default_model_ref().ok().map(|m| m.to_string());
    if json {
        let providers: Vec<_> = config
            .providers
            .iter()
            .chain(found.iter().filter(|f| config.provider(&f.id).is_none()))
            .map(|p| {
                json!({
                    "provider": p.id,
                    "api": p.api.as_str(),
                    "baseUrl": p.base_url,
                    "found": p.discovered,
                    "usable": p.is_usable(),
                    "problem": p.unusable_reason(),
                    "models": p.models.iter().map(|m| format!("{}/{}", p.id, m.id)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let value = json!({
            "default": default,
            "providers": providers,
            "aliases": config.models.all_aliases(),
            "fallbacks": config.fallbacks,
        });
        return Ok(serde_json::to_string_pretty(&value).unwrap_or_default());
    }
    let mut out = String::new();
    let _ = writeln!(out, "Configured:");
    for provider in &config.providers {
        let why = provider.unusable_reason().map(|r| format!("  — cannot be used: {r}")).unwrap_or_default();
        let _ = writeln!(out, "  {} ({}, {}){why}", provider.id, provider.api.as_str(), provider.base_url);
        if provider.is_usable() {
            for profile in &provider.profiles {
                if let Some(missing) = &profile.missing {
                    let _ = writeln!(out, "    (its profile `{}` cannot be used: {missing})", profile.id);
                }
            }
        }
        for model in &provider.models {
            let reference = format!("{}/{}", provider.id, model.id);
            let mark = if default.as_deref() == Some(reference.as_str()) { "  ← default" } else { "" };
            let _ = writeln!(out, "    {reference}{mark}");
        }
    }
    let new: Vec<&ProviderConfig> = found.iter().filter(|f| config.provider(&f.id).is_none()).collect();
    if new.is_empty() {
        let _ = writeln!(out, "\nFound on this machine: none (looked for Ollama, llama.cpp, LM Studio and vLLM).");
    } else {
        let _ = writeln!(out, "\nFound on this machine (used when no provider above has a key):");
        for provider in new {
            let _ = writeln!(out, "  {} ({})", provider.id, provider.base_url);
            for model in &provider.models {
                let reference = format!("{}/{}", provider.id, model.id);
                let mark = if default.as_deref() == Some(reference.as_str()) { "  ← default" } else { "" };
                let _ = writeln!(out, "    {reference}{mark}");
            }
        }
    }
    let aliases: Vec<String> = config.models.all_aliases().iter().map(|(k, v)| format!("{k} → {v}")).collect();
    let _ = writeln!(out, "\nAliases: {}.", aliases.join(", "));
    if !config.fallbacks.is_empty() {
        let _ = writeln!(out, "Fallbacks, in order: {}.", config.fallbacks.join(" → "));
    }
    Ok(out.trim_end().to_owned())
}

fn status(config: &Config, json: bool) -> String {
    let state = ModelState::new(&config.home);
    let now = crate::store::now_ms();
    if json {
        let providers: Vec<_> = config
            .providers
            .iter()
            .filter(|p| !p.profiles.is_empty())
            .map(|p| {
                let profiles: Vec<_> = p
                    .profiles
                    .iter()
                    .map(|profile| {
                        let entry = state.profile(&p.id, &profile.id, &profile.fingerprint);
                        json!({
                            "id": profile.id,
                            "source": profile.source,
                            "problem": profile.missing,
                            "coolingUntil": entry.as_ref().filter(|e| e.cooling(now)).map(|e| e.until_ms),
                            "reason": entry.as_ref().map(|e| e.reason.clone()),
                            "failures": entry.as_ref().map_or(0, |e| e.errors),
                        })
                    })
                    .collect();
                json!({"provider": p.id, "rotation": p.rotation.as_str(), "lastGood": state.last_good(&p.id), "profiles": profiles})
            })
            .collect();
        let models: Vec<_> = state
            .models_cooling(now)
            .into_iter()
            .map(|(model, e)| json!({"model": model, "coolingUntil": e.until_ms, "reason": e.reason, "failures": e.errors}))
            .collect();
        return serde_json::to_string_pretty(&json!({"providers": providers, "coolingModels": models}))
            .unwrap_or_default();
    }
    let report = crate::models::report(config, &state, &|_| None, now, true);
    if report.is_empty() {
        return "No provider has a key or profile, and no model is cooling down.".into();
    }
    report.trim_end().to_owned()
}
