//! What of the agent's environment a command gets: nothing that is a credential (those acp knows
//! of, and any variable whose name says token, secret, password, key…, unless `[sandbox]
//! env_allow` lets it through), and nothing that leads to a service outside the sandbox through a
//! socket (`SSH_AUTH_SOCK`, `TMUX`, `DBUS_SESSION_BUS_ADDRESS`, `DISPLAY`, `XDG_RUNTIME_DIR`, …).

/// Variables that lead to a service outside the sandbox (an agent, a terminal multiplexer, a
/// session bus, a display, a container engine, an editor).
pub const SOCKET_VARS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "ZELLIJ",
    "ZELLIJ_SESSION_NAME",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "PULSE_SERVER",
    "KRB5CCNAME",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK_CLI",
    "GNOME_KEYRING_CONTROL",
];

/// Credentials acp itself reads, whatever their names say.
pub const OWN_CREDENTIALS: &[&str] =
    &["ACP_GATEWAY_TOKEN", "ACP_GATEWAY_PASSWORD", "ACP_GATEWAY_STORE", "ACP_GATEWAY_BUS", "TELEGRAM_BOT_TOKEN"];

/// Whether a variable's name says it holds a credential: a `_`-separated part that is (or ends
/// in) TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, APIKEY, or is KEY, AUTH, PAT, COOKIE,
/// CREDENTIAL(S) — `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, `OPENAI_API_KEY`,
/// `NPM_CONFIG__AUTH`; not `KEYMAP`, `PWD` or `MONKEYPATCH`.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.split('_').filter(|p| !p.is_empty()).any(|part| {
        ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY"].iter().any(|s| part.ends_with(s))
            || matches!(part, "KEY" | "AUTH" | "PAT" | "COOKIE" | "CREDENTIAL" | "CREDENTIALS" | "SECRETS" | "TOKENS")
    })
}

/// Whether variable `name` is withheld from a command: a credential (`unset` names those acp
/// knows of; others by their name) or a way out through a socket — unless `keep` lists it.
pub fn withheld(name: &str, unset: &[impl AsRef<str>], keep: &[impl AsRef<str>]) -> bool {
    if keep.iter().any(|k| k.as_ref() == name) {
        return false;
    }
    unset.iter().any(|u| u.as_ref() == name)
        || OWN_CREDENTIALS.contains(&name)
        || SOCKET_VARS.contains(&name)
        || looks_secret(name)
}

/// The names of `vars` a command does not get.
pub fn names_withheld<'a>(
    vars: impl Iterator<Item = &'a std::ffi::OsStr>,
    unset: &[impl AsRef<str>],
    keep: &[impl AsRef<str>],
) -> Vec<std::ffi::OsString> {
    vars.filter(|name| name.to_str().is_none_or(|n| withheld(n, unset, keep))).map(|n| n.to_os_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_sockets_are_withheld_and_the_rest_kept() {
        let none: &[&str] = &[];
        for secret in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "PGPASSWORD",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "NPM_CONFIG__AUTH",
            "GH_PAT",
            "MY_APIKEY",
            "ACP_GATEWAY_TOKEN",
            "TELEGRAM_BOT_TOKEN",
            "ACP_GATEWAY_STORE",
            "SSH_AUTH_SOCK",
            "TMUX",
            "DBUS_SESSION_BUS_ADDRESS",
            "DISPLAY",
            "XDG_RUNTIME_DIR",
            "db_password",
        ] {
            assert!(withheld(secret, none, none), "{secret}");
        }
        for plain in ["PATH", "HOME", "PWD", "LANG", "XKB_DEFAULT_KEYMAP", "KEYBOARD", "TERM", "RUSTUP_HOME", "USER"] {
            assert!(!withheld(plain, none, none), "{plain}");
        }
        assert!(withheld("MY_LLM", &["MY_LLM"], none), "a provider's key variable, whatever its name");
        assert!(!withheld("NPM_TOKEN", none, &["NPM_TOKEN"]), "env_allow lets it through");
        assert!(!withheld("SSH_AUTH_SOCK", none, &["SSH_AUTH_SOCK"]));
    }
}
