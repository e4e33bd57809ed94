//! A real Matrix homeserver for the tests: Synapse (installed by tests/run into the test cache,
//! linked as tests/matrix/venv), started per test on a loopback port with a generated config —
//! SQLite in a temporary directory, no federation listener, registration open to the tests,
//! rate limits out of the way — and stopped when dropped. Users are registered through the
//! Client-Server API and act as people would: create rooms, invite, write, reply, read.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct Synapse {
    pub base: String,
    child: Child,
    dir: tempfile::TempDir,
    http: Http,
}

/// A blocking HTTP client on a runtime of its own.
#[derive(Clone)]
struct Http {
    rt: std::sync::Arc<tokio::runtime::Runtime>,
    client: reqwest::Client,
}

impl Http {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = acp::http::build_plain_http(&acp::config::Timeouts::default()).unwrap();
        Self { rt: std::sync::Arc::new(rt), client }
    }

    fn call(&self, method: &str, url: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
        self.rt.block_on(async {
            let mut request = self.client.request(method.parse().unwrap(), url).timeout(Duration::from_secs(30));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            if let Some(body) = body {
                request = request.header("content-type", "application/json").body(body.to_string());
            }
            match request.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let bytes = r.bytes().await.unwrap_or_default();
                    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
                }
                Err(e) => (0, json!({"error": e.to_string()})),
            }
        })
    }

    fn download(&self, url: &str, token: &str) -> (u16, Vec<u8>) {
        self.rt.block_on(async {
            let r = self.client.get(url).bearer_auth(token).send().await.unwrap();
            (r.status().as_u16(), r.bytes().await.unwrap_or_default().to_vec())
        })
    }

    fn upload(&self, url: &str, token: &str, mime: &str, bytes: &[u8]) -> Value {
        self.rt.block_on(async {
            let r = self
                .client
                .post(url)
                .bearer_auth(token)
                .header("content-type", mime)
                .body(bytes.to_vec())
                .send()
                .await
                .unwrap();
            serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
        })
    }
}

fn python() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/matrix/venv/bin/python");
    assert!(venv.exists(), "Synapse is not installed: run tests/run (it installs it into the test cache)");
    venv
}

impl Synapse {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let d = dir.path().display();
        let limit = "{per_second: 10000, burst_count: 10000}";
        let config = format!(
            "server_name: \"localhost\"\n\
             pid_file: {d}/pid\n\
             listeners:\n  - port: {port}\n    bind_addresses: ['127.0.0.1']\n    type: http\n    tls: false\n    x_forwarded: false\n    resources: [{{names: [client], compress: false}}]\n\
             database: {{name: sqlite3, args: {{database: {d}/homeserver.db}}}}\n\
             media_store_path: {d}/media\n\
             signing_key_path: {d}/signing.key\n\
             report_stats: false\n\
             enable_registration: true\n\
             enable_registration_without_verification: true\n\
             trusted_key_servers: []\n\
             suppress_key_server_warning: true\n\
             federation_domain_whitelist: []\n\
             macaroon_secret_key: \"acp-test-macaroon-secret\"\n\
             form_secret: \"acp-test-form-secret\"\n\
             rc_message: {limit}\n\
             rc_registration: {limit}\n\
             rc_joins: {{local: {limit}, remote: {limit}}}\n\
             rc_invites: {{per_room: {limit}, per_user: {limit}, per_issuer: {limit}}}\n\
             rc_login: {{address: {limit}, account: {limit}, failed_attempts: {limit}}}\n"
        );
        let path = dir.path().join("homeserver.yaml");
        std::fs::write(&path, config).unwrap();
        let keys = Command::new(python())
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&path)
            .arg("--generate-keys")
            .output()
            .unwrap();
        assert!(keys.status.success(), "{}", String::from_utf8_lossy(&keys.stderr));
        let child = Command::new(python())
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let http = Http::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if http.call("GET", &format!("{base}/_matrix/client/versions"), None, None).0 == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Synapse did not start: {}",
                std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self { base, child, dir, http }
    }

    /// A new user `name`.
    pub fn register(&self, name: &str) -> User {
        let body = json!({"username": name, "password": "a-test-password-1", "auth": {"type": "m.login.dummy"}});
        let (status, r) =
            self.http.call("POST", &format!("{}/_matrix/client/v3/register", self.base), None, Some(&body));
        assert_eq!(status, 200, "{r}");
        User {
            id: r["user_id"].as_str().unwrap().to_owned(),
            token: r["access_token"].as_str().unwrap().to_owned(),
            base: self.base.clone(),
            http: self.http.clone(),
        }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct User {
    pub id: String,
    pub token: String,
    base: String,
    http: Http,
}

fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl User {
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, r) = self.http.call(method, &format!("{}{path}", self.base), Some(&self.token), body);
        assert_eq!(status, 200, "{method} {path}: {r}");
        r
    }

    /// A direct chat with `other`, invited.
    pub fn dm(&self, other: &str) -> String {
        let body = json!({"preset": "trusted_private_chat", "is_direct": true, "invite": [other]});
        self.call("POST", "/_matrix/client/v3/createRoom", Some(&body))["room_id"].as_str().unwrap().to_owned()
    }

    /// A room with `others` invited.
    pub fn room(&self, name: &str, others: &[&str]) -> String {
        let body = json!({"preset": "private_chat", "name": name, "invite": others});
        self.call("POST", "/_matrix/client/v3/createRoom", Some(&body))["room_id"].as_str().unwrap().to_owned()
    }

    pub fn join(&self, room: &str) {
        self.call("POST", &format!("/_matrix/client/v3/join/{}", seg(room)), Some(&json!({})));
    }

    /// Sends `content` with transaction id `txn`; the event id.
    pub fn send_with_txn(&self, room: &str, txn: &str, content: &Value) -> String {
        let path = format!("/_matrix/client/v3/rooms/{}/send/m.room.message/{}", seg(room), seg(txn));
        self.call("PUT", &path, Some(content))["event_id"].as_str().unwrap().to_owned()
    }

    pub fn send(&self, room: &str, content: &Value) -> String {
        self.send_with_txn(room, &format!("t{}", fastrand::u64(..)), content)
    }

    pub fn say(&self, room: &str, text: &str) -> String {
        self.send(room, &json!({"msgtype": "m.text", "body": text}))
    }

    /// Uploads `bytes`; the `mxc://` URI.
    pub fn upload(&self, mime: &str, bytes: &[u8]) -> String {
        let r = self.http.upload(&format!("{}/_matrix/media/v3/upload", self.base), &self.token, mime, bytes);
        r["content_uri"].as_str().unwrap().to_owned()
    }

    /// An `mxc://` file's bytes, from the authenticated media API.
    pub fn download(&self, mxc: &str) -> Vec<u8> {
        let rest = mxc.strip_prefix("mxc://").unwrap();
        let url = format!("{}/_matrix/client/v1/media/download/{rest}", self.base);
        let (status, bytes) = self.http.download(&url, &self.token);
        assert_eq!(status, 200, "{mxc}: {}", String::from_utf8_lossy(&bytes));
        bytes
    }

    /// The room's messages, oldest first.
    pub fn messages(&self, room: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v3/rooms/{}/messages?dir=b&limit=200", seg(room));
        let mut events: Vec<Value> = self.call("GET", &path, None)["chunk"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "m.room.message")
            .cloned()
            .collect();
        events.reverse();
        events
    }

    /// The bodies `from` sent in `room`, once there are at least `n`.
    pub fn wait_texts(&self, room: &str, from: &str, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let texts: Vec<String> = self
                .messages(room)
                .iter()
                .filter(|e| e["sender"] == from)
                .map(|e| e["content"]["body"].as_str().unwrap_or_default().to_owned())
                .collect();
            if texts.len() >= n {
                return texts;
            }
            assert!(Instant::now() < deadline, "{n} messages from {from} did not come: {texts:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The events `from` sent in `room` (whole).
    pub fn events_from(&self, room: &str, from: &str) -> Vec<Value> {
        self.messages(room).into_iter().filter(|e| e["sender"] == from).collect()
    }

    /// One `/sync` from `since`, held up to `timeout_ms` for something new.
    pub fn sync(&self, since: Option<&str>, timeout_ms: u64) -> Value {
        let mut path = format!("/_matrix/client/v3/sync?timeout={timeout_ms}");
        if let Some(since) = since {
            path.push_str(&format!("&since={}", seg(since)));
        }
        self.call("GET", &path, None)
    }

    /// Waits until `user` has joined `room`.
    pub fn wait_joined(&self, room: &str, user: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let path = format!("/_matrix/client/v3/rooms/{}/joined_members", seg(room));
            let members = self.call("GET", &path, None);
            if members["joined"].get(user).is_some() {
                return;
            }
            assert!(Instant::now() < deadline, "{user} did not join {room}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
