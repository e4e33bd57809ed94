//! A private NATS server for the tests: Debian's `nats-server` (installed by tests/run) on a
//! free loopback port, with JetStream in a throwaway directory — never a system instance — and
//! stopped when dropped. It can be stopped and started again on the same port (a restart the
//! gateways live through).

#![allow(dead_code)]

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

pub struct Nats {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Nats {
    pub fn start() -> Self {
        assert!(
            Command::new("nats-server").arg("--version").output().is_ok_and(|o| o.status.success()),
            "nats-server is not installed: run tests/run (or apt-get install nats-server)"
        );
        let dir = tempfile::Builder::new().prefix("acp-nats-").tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut nats = Self { port, dir, child: None };
        nats.run();
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on its port, and waits until it takes connections.
    pub fn run(&mut self) {
        assert!(self.child.is_none(), "the NATS server runs already");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("log")).unwrap();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.dir.path().join("js"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("nats-server exited ({status}):\n{}", self.log());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops the server (its clients see the connection drop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}
