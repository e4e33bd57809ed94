//! What the session commands do with the user's hooks: `/hooks` (and `/hooks allow`), the
//! ending conversation's gist `/new` and `/reset` save to the memory, and the hooks they tell.

use crate::hooks::workspace::Workspace;
use crate::runtime::hooks::Place;
use crate::runtime::session::state::Session;

/// `/hooks`: config.toml's hooks and the workspace's, each with how it last went; `allow` first
/// allows the workspace's hooks file as it is now (the user's own prompt only: another agent's
/// words are never a command).
pub(in crate::runtime) fn report(session: &Session, allow: bool) -> String {
    let config = session.shared.config_for(&session.id);
    let cwd = &session.settings.cwd;
    let mut out = String::new();
    if allow {
        match crate::hooks::workspace::allow(&config.home, cwd) {
            Ok(said) => out.push_str(&format!("{said}\n\n")),
            Err(e) => out.push_str(&format!("Could not allow the workspace's hooks: {e}\n\n")),
        }
        session.live.set_workspace_hooks(crate::hooks::workspace::load(&config.home, cwd));
    }
    out.push_str("**Hooks** (config.toml)\n\n");
    if config.hooks.is_empty() {
        out.push_str("None (`[[hooks]]` in config.toml adds one; see docs/hooks.md).\n");
    }
    for hook in &config.hooks {
        out.push_str(&format!("- {}\n", crate::hooks::describe(hook)));
    }
    let workspace = session.live.workspace_hooks();
    out.push_str(&format!("\n**This workspace** ({})\n\n", crate::hooks::workspace::FILE));
    match &*workspace {
        Workspace::None => out.push_str("None.\n"),
        Workspace::Allowed(hooks) => {
            out.push_str("Allowed; they run in the sandbox.\n");
            for hook in hooks {
                out.push_str(&format!("- {}\n", crate::hooks::describe(hook)));
            }
        }
        other => out.push_str(&format!("{}\n", other.notice().unwrap_or_default())),
    }
    out
}

/// The most messages of an ending conversation [`save_gist`] keeps, and of each message.
const GIST_MESSAGES: usize = 15;
const GIST_CHARS: usize = 2_000;

/// Before `/new` or `/reset` clears a session that reads the memory (`[memory] save_on_new`): its
/// last messages (the user's and the model's words) go to a file of their own under `memory/`,
/// where `memory_search` finds them. Where it went, relative to the agent workspace; `None` when
/// nothing was saved (why is logged).
pub(in crate::runtime) fn save_gist(session: &Session) -> Option<String> {
    use crate::providers::Message;
    let config = session.shared.config_for(&session.id);
    if !config.memory.save_on_new
        || crate::runtime::turn::memory_use(&config, &session.id) != crate::runtime::context::MemoryUse::Private
    {
        return None;
    }
    let said: Vec<(&str, String)> = session
        .conversation
        .messages()
        .iter()
        .filter_map(|m| {
            let who = if matches!(m, Message::User(_)) { "User" } else { "Assistant" };
            let text = m.text();
            let text = text.trim();
            (!text.is_empty()).then(|| (who, text.chars().take(GIST_CHARS).collect()))
        })
        .collect();
    if !said.iter().any(|(who, _)| *who == "Assistant") {
        return None;
    }
    let now = jiff::Timestamp::now().to_zoned(crate::runtime::context::local_zone().clone());
    // Titled by the user's first words in it (not a compaction's summary, nor a hook's note).
    let first = said.iter().find(|(who, text)| *who == "User" && !text.starts_with('[')).unwrap_or(&said[0]);
    let title: String = first.1.lines().next().unwrap_or_default().chars().take(80).collect();
    let mut slug: String = title
        .chars()
        .map(|c| if c.is_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|w| !w.is_empty())
        .take(6)
        .collect::<Vec<_>>()
        .join("-");
    // File names are bytes, and few systems take more than 255 of them.
    while slug.len() > 60 {
        slug.pop();
    }
    let dir = config.home.join("workspace").join(crate::memory::MEMORY_DIR);
    let stem = format!("{}-{}", now.strftime("%Y-%m-%d-%H%M"), if slug.is_empty() { "session" } else { &slug });
    // Never over another conversation saved the same minute under the same words.
    let name = (1..)
        .map(|n| if n == 1 { format!("{stem}.md") } else { format!("{stem}-{n}.md") })
        .find(|name| !dir.join(name).exists())
        .unwrap_or_default();
    let relative = format!("{}/{name}", crate::memory::MEMORY_DIR);
    let mut text =
        format!("# {title}\n\n- Saved: {}\n- Session: {}\n\n", now.strftime("%Y-%m-%d %H:%M %Z"), session.id);
    for (who, words) in &said[said.len().saturating_sub(GIST_MESSAGES)..] {
        text.push_str(&format!("**{who}:** {words}\n\n"));
    }
    let written =
        std::fs::create_dir_all(&dir).and_then(|()| crate::files::write_atomic(&dir.join(&name), text.as_bytes()));
    match written {
        Ok(()) => {
            crate::memory::Memory::of(&config).changing();
            Some(relative)
        }
        Err(e) => {
            tracing::warn!(session = %session.id, error = %e, "could not save the conversation's gist to the memory");
            None
        }
    }
}

/// `/new` or `/reset` cleared a session: its `SessionEnd` hooks (`clear`) run now, in the
/// background, and its `SessionStart` hooks (`clear`) after them, for its next model turn.
pub(in crate::runtime) fn cleared(session: &mut Session) {
    if !session.ends {
        return;
    }
    let place = Place::new(session.shared.config_for(&session.id), &session.live, session.settings.cwd.clone());
    session.started = crate::runtime::hooks::start_later(place, &session.id, "clear", true);
}
