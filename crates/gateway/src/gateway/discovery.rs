//! How local clients find the running gateway: it leaves `$ACP_HOME/gateway.json` (readable by its
//! owner only) with its address, its process id and an owner token made for this run — never the
//! shared token — and removes it as it stops. `acp pairing`, `acp channels` and the bridge read it
//! when they are not told where the gateway is; the owner token authenticates them as the local
//! owner, so a gateway started with `--token-file` or `--listen` needs nothing more on its own host.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

const FILE: &str = "gateway.json";

/// What the file holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Found {
    /// Where local clients connect (`ws://127.0.0.1:PORT` for a gateway on every address).
    pub url: String,
    pub pid: u32,
    /// Accepted as the shared token is, for this run of the gateway only.
    pub token: String,
}

/// The file, written while the gateway runs; removed when dropped (unless another gateway has
/// written its own since).
#[derive(Debug)]
pub struct Beacon {
    path: PathBuf,
}

impl Beacon {
    pub fn write(home: &Path, found: &Found) -> Result<Self, String> {
        let path = home.join(FILE);
        // A new $ACP_HOME (a gateway with a shared token writes nothing else there at start).
        std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
        let tmp = home.join(format!("{FILE}.{}.tmp", found.pid));
        let text = serde_json::to_string_pretty(found).map_err(|e| e.to_string())?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&tmp).and_then(|mut f| {
            use std::io::Write as _;
            f.write_all(format!("{text}\n").as_bytes())
        });
        written.and_then(|()| std::fs::rename(&tmp, &path)).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self { path })
    }
}

impl Drop for Beacon {
    fn drop(&mut self) {
        if read(&self.path).is_some_and(|f| f.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn read(path: &Path) -> Option<Found> {
    // A small file of ours; anything large is not it.
    if std::fs::metadata(path).ok()?.len() > 64 << 10 {
        return None;
    }
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The gateway running for `home`, if its file names a process that is still there.
pub fn find(home: &Path) -> Option<Found> {
    let found = read(&home.join(FILE))?;
    let pid = rustix::process::Pid::from_raw(i32::try_from(found.pid).ok()?)?;
    rustix::process::test_kill_process(pid).ok()?;
    Some(found)
}

/// The URL local clients use for a gateway listening on `addr`.
pub fn local_url(addr: std::net::SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("ws://{}/", std::net::SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_private_found_while_its_process_lives_and_removed_by_its_writer() {
        let home = tempfile::tempdir().unwrap();
        let mine = Found { url: "ws://127.0.0.1:1/".into(), pid: std::process::id(), token: "t".repeat(20) };
        let beacon = Beacon::write(home.path(), &mine).unwrap();
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(home.path().join(FILE)).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(find(home.path()), Some(mine.clone()));
        drop(beacon);
        assert_eq!(find(home.path()), None);
        // A file left by a process that is gone is not a gateway.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let stale = Found { pid: gone, ..mine };
        std::mem::forget(Beacon::write(home.path(), &stale).unwrap());
        assert_eq!(find(home.path()), None);
        // A home not made yet is made.
        let new = home.path().join("new-home");
        let beacon = Beacon::write(&new, &Found { pid: std::process::id(), ..stale }).unwrap();
        assert_eq!(find(&new).map(|f| f.pid), Some(std::process::id()));
        drop(beacon);
    }

    #[test]
    fn a_gateway_on_every_address_is_reached_on_loopback() {
        assert_eq!(local_url("0.0.0.0:18789".parse().unwrap()), "ws://127.0.0.1:18789/");
        assert_eq!(local_url("[::]:5".parse().unwrap()), "ws://[::1]:5/");
        assert_eq!(local_url("10.0.0.2:5".parse().unwrap()), "ws://10.0.0.2:5/");
    }
}
