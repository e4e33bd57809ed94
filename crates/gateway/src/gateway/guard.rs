//! Who may ask, before anything is read of what they ask: the `Host` a request names (a gateway
//! without a token answers only its own loopback names, so a web page whose name resolves to
//! 127.0.0.1 — DNS rebinding — is refused), the `Origin` a browser sends, the token browsers need
//! even on loopback, and the slots connections take (a total and a share for those not yet
//! authenticated), so a flood of idle sockets cannot hold the gateway.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::sync::lock;

/// Shortest shared token accepted: a token is the whole of a gateway's authentication.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Checks a shared token as given (a flag, a file, the environment or config.toml).
pub fn check_token(token: &str, from: &str) -> Result<(), String> {
    if token.trim().is_empty() {
        return Err(format!("{from}: the token is blank"));
    }
    if token.trim() != token {
        return Err(format!("{from}: the token begins or ends with white space"));
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "{from}: the token is too short ({} characters; at least {MIN_TOKEN_CHARS}) — a random one: \
             `head -c 24 /dev/urandom | base64`",
            token.chars().count()
        ));
    }
    Ok(())
}

/// Who may connect: the tokens a client may present, the `Host` names requests may carry, and
/// the connection slots.
pub struct Access {
    /// The shared token clients must present.
    pub token: Option<String>,
    /// What browsers present when there is no shared token (see [`browser_token`]).
    pub browser_token: Option<String>,
    /// This run's owner token, for local clients (see `discovery`): as good as the shared token.
    pub owner_token: Option<String>,
    pub hosts: Hosts,
    pub slots: Slots,
}

impl Access {
    /// `token`: the shared one; `allowed_hosts`: `Host` names besides loopback ones.
    pub fn new(
        token: Option<String>,
        browser_token: Option<String>,
        owner_token: Option<String>,
        allowed_hosts: &[String],
        connections: ConnLimits,
    ) -> Self {
        Self {
            hosts: Hosts {
                any: token.is_some(),
                extra: allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            },
            token,
            browser_token,
            owner_token,
            slots: Slots::new(connections),
        }
    }

    /// `token` or `none`, as `hello-ok` and `config.get` say it.
    pub fn mode(&self) -> &'static str {
        if self.token.is_some() { "token" } else { "none" }
    }
}

/// The names a gateway answers to.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// Any `Host` is answered: a token guards everything (a reverse proxy may name the gateway
    /// anything).
    pub any: bool,
    /// Besides loopback names: the listen address and `[gateway] allowed_hosts`, lowercase.
    pub extra: Vec<String>,
}

impl Hosts {
    /// Whether a request naming `host` (the `Host` header, port and all) is for this gateway.
    /// Without the header (not a browser: browsers always send it) it is.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return true };
        if self.any {
            return true;
        }
        let name = host_name(host).to_ascii_lowercase();
        is_loopback_name(&name) || self.extra.contains(&name)
    }
}

/// `host` of `host:port`, `[v6]:port`, `host` or `[v6]`.
pub fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// `localhost`, `*.localhost` (browsers resolve them to loopback themselves), and loopback IPs.
fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a browser's `Origin` is this gateway's own page (the same scheme-less host and port as
/// the request's `Host`).
pub fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o.eq_ignore_ascii_case(host))
}

/// The token browsers present to a gateway that has no shared token: made once, kept in
/// `$ACP_HOME/webchat.token` (readable by its owner only), so a restart keeps the web chat logged
/// in; the URL printed at start carries it.
pub fn browser_token(home: &Path) -> Result<String, String> {
    let path = home.join("webchat.token");
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Some(token) = text.lines().next().map(str::trim).filter(|t| t.len() >= MIN_TOKEN_CHARS)
    {
        return Ok(token.to_owned());
    }
    let token = random_token();
    std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    let tmp = path.with_extension("token.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| {
        use std::io::Write as _;
        f.write_all(format!("{token}\n").as_bytes())?;
        f.sync_all()
    });
    written.and_then(|()| std::fs::rename(&tmp, &path)).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(token)
}

/// 32 random bytes, base64url.
pub fn random_token() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// How many connections the gateway holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Every connection, HTTP or WebSocket.
    pub total: usize,
    /// Those not yet authenticated (HTTP requests, WebSockets before `hello-ok`).
    pub unauthenticated: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self { total: 4096, unauthenticated: 1024 }
    }
}

/// The slots connections take.
pub struct Slots {
    total: Arc<Semaphore>,
    unauthenticated: Arc<Semaphore>,
    pub limits: ConnLimits,
}

impl Slots {
    pub fn new(limits: ConnLimits) -> Self {
        Self {
            total: Arc::new(Semaphore::new(limits.total)),
            unauthenticated: Arc::new(Semaphore::new(limits.unauthenticated)),
            limits,
        }
    }

    /// A slot for a new connection, or `None` when the gateway is full (the connection is then
    /// closed at once).
    pub fn take(&self) -> Option<Arc<Slot>> {
        let total = self.total.clone().try_acquire_owned().ok()?;
        let pending = self.unauthenticated.clone().try_acquire_owned().ok()?;
        Some(Arc::new(Slot { _total: total, pending: std::sync::Mutex::new(Some(pending)) }))
    }

    /// Connections held now.
    pub fn used(&self) -> usize {
        self.limits.total - self.total.available_permits()
    }
}

/// One connection's slot: given back when the connection ends; its unauthenticated share as soon
/// as it authenticates.
pub struct Slot {
    _total: OwnedSemaphorePermit,
    pending: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
}

impl Slot {
    pub fn authenticated(&self) {
        lock(&self.pending).take();
    }
}

/// The connection cap that fits the process's open-file limit, which is first raised to its
/// hard limit (as most servers do: the soft default of 1,024 is for programs that never hold many
/// files); `reserve` descriptors stay for sessions, stores, MCP servers and commands.
pub fn fit_to_open_files(wanted: ConnLimits, reserve: u64) -> ConnLimits {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum
        && limit.current.is_some_and(|soft| soft < hard)
    {
        limit.current = Some(hard);
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::debug!(error = %e, "could not raise the open-file limit");
        }
        limit = getrlimit(Resource::Nofile);
    }
    let Some(soft) = limit.current else { return wanted };
    let room = usize::try_from(soft.saturating_sub(reserve)).unwrap_or(usize::MAX).max(16);
    let total = wanted.total.min(room);
    ConnLimits { total, unauthenticated: wanted.unauthenticated.min(total) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_without_a_token() {
        let hosts = Hosts { any: false, extra: vec!["gw.lan".into()] };
        for ok in
            ["127.0.0.1:18789", "localhost:1", "LOCALHOST", "[::1]:80", "127.3.4.5", "app.localhost:8", "gw.lan:9"]
        {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for bad in ["evil.test:18789", "evil.test", "10.0.0.1:18789", "[::2]:1", "localhost.evil.test", "gw.lan.evil"] {
            assert!(!hosts.allows(Some(bad)), "{bad}");
        }
        assert!(hosts.allows(None), "no Host: not a browser");
        assert!(Hosts { any: true, extra: Vec::new() }.allows(Some("evil.test")));
    }

    #[test]
    fn origins_and_tokens() {
        assert!(same_origin("http://127.0.0.1:1", Some("127.0.0.1:1")));
        assert!(!same_origin("http://127.0.0.1:2", Some("127.0.0.1:1")));
        assert!(!same_origin("null", Some("127.0.0.1:1")));
        assert!(check_token("   ", "--token").unwrap_err().contains("blank"));
        assert!(check_token("short", "--token").unwrap_err().contains("too short"));
        assert!(check_token(" 0123456789abcdefgh", "--token").unwrap_err().contains("white space"));
        assert!(check_token("0123456789abcdef", "--token").is_ok());
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 43);
    }

    #[test]
    fn a_browser_token_is_made_once_and_private() {
        let home = tempfile::tempdir().unwrap();
        let first = browser_token(home.path()).unwrap();
        assert_eq!(browser_token(home.path()).unwrap(), first);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(home.path().join("webchat.token")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn slots_run_out_and_come_back() {
        let slots = Slots::new(ConnLimits { total: 3, unauthenticated: 2 });
        let a = slots.take().unwrap();
        let b = slots.take().unwrap();
        assert!(slots.take().is_none(), "two waiting to authenticate fill their share");
        a.authenticated();
        let c = slots.take().unwrap();
        assert!(slots.take().is_none(), "three in all");
        drop((b, c));
        assert_eq!(slots.used(), 1);
        drop(a);
        assert_eq!(slots.used(), 0);
    }
}
