//! A private PostgreSQL server for the tests: Debian's binaries (installed by tests/run), a
//! throwaway cluster in a temporary directory (`initdb`, trust authentication, no fsync) served
//! on a free loopback port and its own socket directory — never the system's instances — and
//! stopped when dropped. PostgreSQL refuses to run as root, so as root it runs as the `postgres`
//! user Debian's package creates.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Postgres {
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
}

/// The directory of the newest PostgreSQL installed (`/usr/lib/postgresql/<version>/bin`).
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("initdb").exists())
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!("PostgreSQL is not installed: run tests/run (or apt-get install postgresql)"),
    }
}

fn as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `program args…`, as the `postgres` user when this runs as root.
fn command(bin: &Path, program: &str) -> Command {
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

impl Postgres {
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("acp-pg-").tempdir().unwrap();
        if as_root() {
            // The server's user must own the cluster, and reach it.
            let status = Command::new("chown").args(["postgres:postgres"]).arg(dir.path()).status().unwrap();
            assert!(status.success(), "chown postgres {}", dir.path().display());
            std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        let data = dir.path().join("data");
        let out = command(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        // A free port now; another process taking it first makes `pg_ctl` fail, and we try again.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let options = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} -c fsync=off \
                 -c synchronous_commit=on -c full_page_writes=off -c max_connections=200",
                dir.path().display()
            );
            let out = command(&bin, "pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.path().join("log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            if out.status.success() {
                return Self { port, dir, bin };
            }
        }
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        panic!("PostgreSQL would not start:\n{log}");
    }

    /// The URL of database `db` (created by [`create_db`](Self::create_db), or `postgres`).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates an empty database `name`.
    pub fn create_db(&self, name: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
            ])
            .arg(format!("CREATE DATABASE \"{name}\""))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "CREATE DATABASE: {}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    /// Runs `sql` in database `db`; what it printed (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                db,
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server (fast shutdown: sessions are cut, as a crash of the database host would).
    pub fn stop(&self) {
        let _ = command(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Postgres {
    /// Session `id`'s transcript in database `db`, checked: its cut turn closed as interrupted
    /// exactly once, and its records numbered without a gap or a double.
    pub fn assert_cut_once_and_gapless(&self, db: &str, id: &str) {
        let ends = self.psql(
            db,
            &format!(
                "SELECT count(*) FROM acp_records WHERE session_id = '{id}' AND record LIKE '{{\"t\":\"end\"%' \
                 AND record LIKE '%\"interrupted\":true%'"
            ),
        );
        assert_eq!(ends, "1", "the cut turn of {id} closed as interrupted once");
        let gapless =
            self.psql(db, &format!("SELECT count(*) = max(seq) + 1 FROM acp_records WHERE session_id = '{id}'"));
        assert_eq!(gapless, "t", "the records of {id} are gapless");
    }
}
