//! Where `web_fetch` may go: the public internet, not this machine or the networks around it.
//! Loopback, private (RFC 1918, unique-local), link-local (cloud metadata at 169.254.169.254 and
//! fd00:ec2::254), shared (100.64/10, where another cloud keeps its metadata) and other special
//! addresses are refused unless the user listed the host in `[web_fetch] allow_private_hosts`.
//!
//! The check holds after DNS resolution (a resolver that drops such addresses, so a name cannot
//! point at them) and on every redirect (each hop is checked as it is followed; only `http` and
//! `https`). Through an HTTP proxy from the environment, names are resolved by the proxy: then
//! only IP literals and `localhost` names are checked here.

use crate::sync::lock;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Redirects followed, at most (as browsers do).
pub const MAX_REDIRECTS: usize = 10;

/// Whether `ip` is on this machine or a non-public network.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let [o0, o1, o2, _] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || a.is_multicast()
                || o0 == 0
                || (o0 == 100 && (o1 & 0xc0) == 64)
                || (o0 == 192 && o1 == 0 && o2 == 0)
                || (o0 == 198 && (o1 & 0xfe) == 18)
                || o0 >= 240
        }
        IpAddr::V6(a) => {
            if let Some(v4) = a.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = a.segments();
            let embedded = |hi: u16, lo: u16| {
                is_private(IpAddr::V4(std::net::Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)))
            };
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                // IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an
                // IPv4 address that may be private.
                || (s[..6] == [0; 6])
                || (s[0] == 0x64 && s[1] == 0xff9b && embedded(s[6], s[7]))
                || (s[0] == 0x2002 && embedded(s[1], s[2]))
        }
    }
}

/// The hosts the user allows although they are private, lower-cased.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(Vec<String>);

impl Allowed {
    pub fn new(hosts: &[String]) -> Self {
        Self(hosts.iter().map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase()).collect())
    }

    fn contains(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.0.iter().any(|h| h.trim_start_matches('[').trim_end_matches(']') == host)
    }
}

fn refusal(host: &str, what: &str) -> String {
    format!(
        "{host} is {what}: web_fetch reaches only public addresses. If the user wants this host reached, they can add \
         it to `allow_private_hosts` in the `[web_fetch]` section of the agent's config.toml"
    )
}

/// Checks a URL before it is requested (the first one and every redirect).
pub fn check_url(url: &reqwest::Url, allowed: &Allowed) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs can be fetched, not {}:", url.scheme()));
    }
    let Some(name) = url.host_str() else { return Err(format!("{url} names no host")) };
    if allowed.contains(name) {
        return Ok(());
    }
    // The URL parser has already turned every spelling of an IP address into its plain form.
    match name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        Ok(ip) if is_private(ip) => Err(refusal(name, "a private or local address")),
        Ok(_) => Ok(()),
        Err(_) if is_local_name(name) => Err(refusal(name, "this machine")),
        Err(_) => Ok(()),
    }
}

fn is_local_name(domain: &str) -> bool {
    let d = domain.trim_end_matches('.').to_ascii_lowercase();
    d == "localhost" || d.ends_with(".localhost")
}

/// A resolver that drops private addresses (unless the host is allowed); a name left with none is
/// an error that says why.
struct GuardedResolver {
    allowed: Allowed,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let allowed = self.allowed.clone();
        Box::pin(async move {
            let lookup = host.clone();
            let addrs: Vec<SocketAddr> = tokio::task::spawn_blocking(move || (lookup.as_str(), 0).to_socket_addrs())
                .await
                .map_err(|e| {
                    Box::new(std::io::Error::other(e.to_string())) as Box<dyn std::error::Error + Send + Sync>
                })?
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                .collect();
            if allowed.contains(&host) {
                return Ok(Box::new(addrs.into_iter()) as Addrs);
            }
            let public: Vec<SocketAddr> = addrs.iter().copied().filter(|a| !is_private(a.ip())).collect();
            if public.is_empty() {
                let shown = addrs.first().map_or_else(|| "no address".to_owned(), |a| a.ip().to_string());
                let why = refusal(&host, &format!("resolved to {shown}, a private or local address"));
                return Err(Box::new(std::io::Error::other(why)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The client for fetches: redirects left to the caller (each hop checked), names resolved
/// through the guard. Built once per allow-list (building loads the TLS roots).
pub fn client(allowed: &Allowed, connect_timeout: Duration) -> Result<reqwest::Client, String> {
    static CLIENT: Mutex<Option<(Allowed, reqwest::Client)>> = Mutex::new(None);
    let mut cached = lock(&CLIENT);
    if let Some((list, client)) = cached.as_ref()
        && list == allowed
    {
        return Ok(client.clone());
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(GuardedResolver { allowed: allowed.clone() }))
        .user_agent(concat!("acp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| crate::http::error_chain(&e))?;
    *cached = Some((allowed.clone(), client.clone()));
    Ok(client)
}

/// GETs `url`, following redirects itself so each hop is checked before it is requested.
pub async fn get(
    http: &reqwest::Client,
    mut url: reqwest::Url,
    allowed: &Allowed,
) -> Result<reqwest::Response, String> {
    for _ in 0..=MAX_REDIRECTS {
        check_url(&url, allowed)?;
        let response = http.get(url.clone()).send().await.map_err(|e| crate::http::error_chain(&e.without_url()))?;
        let location = response.headers().get(reqwest::header::LOCATION).and_then(|l| l.to_str().ok());
        match location {
            Some(location) if response.status().is_redirection() => {
                url = url.join(location).map_err(|e| format!("{url} redirects to {location:?}, not a URL: {e}"))?;
            }
            _ => return Ok(response),
        }
    }
    Err(format!("more than {} redirects", MAX_REDIRECTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1", "100.128.0.1"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn names_that_resolve_to_private_addresses_are_refused() {
        let name = || "localhost".parse::<Name>().unwrap();
        let guarded = GuardedResolver { allowed: Allowed::default() };
        let err = guarded.resolve(name()).await.err().unwrap().to_string();
        assert!(err.contains("resolved to") && err.contains("private or local"), "{err}");
        let allowed = GuardedResolver { allowed: Allowed::new(&["LocalHost".into()]) };
        let addrs: Vec<SocketAddr> = allowed.resolve(name()).await.ok().unwrap().collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()) && !addrs.is_empty());
    }

    #[test]
    fn urls() {
        let none = Allowed::default();
        let check = |u: &str, a: &Allowed| check_url(&reqwest::Url::parse(u).unwrap(), a);
        for url in [
            "http://127.0.0.1:8080/admin?token=1",
            "http://169.254.169.254/latest/meta-data/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://[::ffff:7f00:1]/",
            "http://localhost:3000/",
            "http://app.localhost/",
            "file:///etc/passwd",
            "ftp://example.org/",
        ] {
            assert!(check(url, &none).is_err(), "{url}");
        }
        assert!(check("https://example.org/", &none).is_ok());
        let allowed = Allowed::new(&["LOCALHOST".into(), "127.0.0.1".into(), "::1".into()]);
        assert!(check("http://localhost:3000/", &allowed).is_ok());
        assert!(check("http://127.0.0.1/", &allowed).is_ok());
        assert!(check("http://[::1]/", &allowed).is_ok());
        assert!(check("http://10.0.0.1/", &allowed).is_err());
    }
}
