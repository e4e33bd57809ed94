//! The gateway against a hostile web page and a hostile network, on the real binary: a page whose
//! name points at loopback (DNS rebinding), browsers without the token, device tokens used past
//! their scopes, blank and short tokens, unfinished requests, a flood of idle sockets, a webhook
//! caller that never sends its body, and frames over the limit.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::support::agent::TIMEOUT;
use crate::support::gateway::{Client, Device, Gateway, TOKEN, connect_params};
use crate::support::mock_model::MockModel;

/// A WebSocket handshake with these `Host` and `Origin` headers: the client, or the HTTP status
/// it was refused with.
fn socket_as(port: u16, host: &str, origin: Option<&str>) -> Result<(Client, Value), u16> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut request = format!("ws://127.0.0.1:{port}/").into_client_request().unwrap();
    request.headers_mut().insert("host", HeaderValue::from_str(host).unwrap());
    if let Some(origin) = origin {
        request.headers_mut().insert("origin", HeaderValue::from_str(origin).unwrap());
    }
    match tokio_tungstenite::tungstenite::client::client(request, stream) {
        Ok((ws, _)) => {
            let mut client = Client::from_socket(ws);
            let challenge = client.recv();
            Ok((client, challenge))
        }
        Err(tokio_tungstenite::tungstenite::HandshakeError::Failure(tokio_tungstenite::tungstenite::Error::Http(
            response,
        ))) => Err(response.status().as_u16()),
        Err(e) => panic!("handshake: {e}"),
    }
}

/// A plain HTTP GET with this `Host`: the status.
fn get_as(port: u16, host: &str) -> u16 {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(c, "GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    answer.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_page_whose_name_points_at_loopback_is_refused_and_browsers_need_the_token() {
    let mock = MockModel::start();
    let gw = Gateway::start_without_token(&mock.base(), &[]);
    let port = gw.port;
    let evil = format!("evil.test:{port}");
    // The rebinding page: its own name as Host, its own origin — once enough to be admin.
    assert_eq!(socket_as(port, &evil, Some(&format!("http://{evil}"))).err(), Some(421));
    assert_eq!(socket_as(port, &evil, None).err(), Some(421), "whatever the Origin");
    assert_eq!(get_as(port, &evil), 421, "nor is the page served under that name");
    assert_eq!(get_as(port, &format!("127.0.0.1:{port}")), 200);
    assert_eq!(get_as(port, &format!("localhost:{port}")), 200);

    // A local program (no Origin) needs no token on loopback.
    let (mut cli, _) = socket_as(port, &format!("127.0.0.1:{port}"), None).unwrap();
    let hello = cli.request("connect", connect_params(None, &["operator.admin"]));
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["auth"]["scopes"], json!(["operator.admin"]));

    // The gateway's own page in a browser: without the token it is refused.
    let own = format!("127.0.0.1:{port}");
    let (mut browser, _) = socket_as(port, &own, Some(&format!("http://{own}"))).unwrap();
    let refused = browser.request("connect", connect_params(None, &["operator.read"]));
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["details"]["code"], "DEVICE_IDENTITY_REQUIRED", "{refused}");
    let (mut browser, _) = socket_as(port, &own, Some(&format!("http://{own}"))).unwrap();
    let refused = browser.request("connect", connect_params(Some("a-guess-at-the-token"), &["operator.read"]));
    assert_eq!(refused["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH", "{refused}");
    // With the token the printed link carries (also kept, owner-only, in $ACP_HOME).
    let token = gw.web.split("#token=").nth(1).unwrap_or_else(|| panic!("no token in the link: {}", gw.web));
    assert!(token.len() >= 32, "{token}");
    let kept = std::fs::read_to_string(gw.home.path().join("webchat.token")).unwrap();
    assert_eq!(kept.trim(), token);
    let (mut browser, _) = socket_as(port, &own, Some(&format!("http://{own}"))).unwrap();
    let hello = browser.request("connect", connect_params(Some(token), &["operator.read", "operator.write"]));
    assert_eq!(hello["ok"], true, "{hello}");
    let listed = browser.request("sessions.list", json!({}));
    assert_eq!(listed["ok"], true, "{listed}");
}

#[test]
fn a_device_token_covers_only_the_scopes_it_was_issued_for() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    let device = Device::new();
    let (mut first, challenge) = gw.socket();
    let params = device.sign(connect_params(Some(TOKEN), &["operator.read"]), &challenge, Some(TOKEN));
    let hello = first.request("connect", params);
    assert_eq!(hello["ok"], true, "{hello}");
    let device_token = hello["payload"]["auth"]["deviceToken"].as_str().unwrap().to_owned();
    assert_eq!(hello["payload"]["auth"]["deviceTokenScopes"], json!(["operator.read"]));

    let with_device_token = |scopes: &[&str]| {
        let (mut socket, challenge) = gw.socket();
        let mut params = connect_params(None, scopes);
        params["auth"] = json!({"deviceToken": device_token});
        let params = device.sign(params, &challenge, Some(&device_token));
        let answer = socket.request("connect", params);
        (socket, answer)
    };
    // More than it was issued for: refused, saying so.
    for wider in [&["operator.admin"][..], &["operator.write"], &["operator.read", "operator.approvals"]] {
        let (_, refused) = with_device_token(wider);
        assert_eq!(refused["ok"], false, "{wider:?}: {refused}");
        assert_eq!(refused["error"]["details"]["code"], "AUTH_SCOPE_MISMATCH", "{refused}");
    }
    // What it was issued for works, and only that.
    let (mut reader, hello) = with_device_token(&["operator.read"]);
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["auth"]["scopes"], json!(["operator.read"]));
    let denied = reader.request("sessions.delete", json!({"key": "main"}));
    assert_eq!(denied["error"]["details"]["code"], "MISSING_SCOPE", "{denied}");
    let sent = reader.request("chat.send", json!({"sessionKey": "main", "message": "hi", "idempotencyKey": "k1"}));
    assert_eq!(sent["error"]["details"]["code"], "MISSING_SCOPE", "{sent}");
}

#[test]
fn blank_or_short_tokens_stop_the_start() {
    let home = tempfile::tempdir().unwrap();
    let start = |args: &[&str], env: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_acp"));
        command.arg("gateway").args(args).env_clear().env("HOME", home.path()).env("ACP_HOME", home.path());
        if let Some(token) = env {
            command.env("ACP_GATEWAY_TOKEN", token);
        }
        let out = command.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = start(&["--listen", "0.0.0.0:0", "--token", "   "], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--token: the token is blank"), "{err}");
    let (code, err) = start(&["--listen", "127.0.0.1:0", "--token", "short"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("too short") && err.contains("at least 16"), "{err}");
    let (code, err) = start(&["--listen", "0.0.0.0:0"], Some(" \t "));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("ACP_GATEWAY_TOKEN: the token is blank"), "{err}");
    let blank = home.path().join("blank.token");
    std::fs::write(&blank, "  \n").unwrap();
    let (code, err) = start(&["--listen", "0.0.0.0:0", "--token-file", blank.to_str().unwrap()], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the file is empty"), "{err}");
}

/// Reads until the server closes the connection: what it sent, or `None` if it never closed it
/// (within a minute).
fn until_eof(mut c: TcpStream) -> Option<Vec<u8>> {
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).ok().map(|_| all)
}

#[test]
fn unfinished_requests_time_out_and_a_flood_of_idle_sockets_is_capped() {
    let mock = MockModel::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[gateway]\nmax_connections = 64\n").unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let mut admin = gw.client(&["operator.admin"]);
    // Headers that never end: the connection is closed once the header time is up.
    let mut slow = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ").unwrap();
    // A flood of idle sockets fills the slots; what comes after is closed at once, and what is
    // authenticated goes on.
    let flood: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(("127.0.0.1", gw.port)).unwrap()).collect();
    let newcomer = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    assert_eq!(until_eof(newcomer), Some(Vec::new()), "closed at once, nothing said");
    let health = admin.request("health", json!({}));
    assert_eq!(health["ok"], true, "an authenticated client goes on: {health}");
    assert_eq!(until_eof(slow), Some(Vec::new()), "the unfinished request is closed");
    drop(flood);
    // Once they are gone, new clients get in again.
    let mut later = None;
    for _ in 0..500 {
        let stream = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        if let Ok((ws, _)) =
            tokio_tungstenite::tungstenite::client::client(format!("ws://127.0.0.1:{}/", gw.port), stream)
        {
            let mut c = Client::from_socket(ws);
            c.recv();
            if c.request("connect", connect_params(Some(TOKEN), &["operator.read"]))["ok"] == true {
                later = Some(c);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(later.is_some(), "a new client connects once the flood is gone");
    // Refusals are logged now and then, not once per connection.
    let refusals = gw.stderr().matches("the gateway is full").count();
    assert!((1..=3).contains(&refusals), "{refusals} refusal warnings:\n{}", gw.stderr());
}

#[test]
fn a_webhook_call_is_refused_on_its_headers_and_a_body_that_never_comes_times_out() {
    use crate::support::telegram::FakeTelegram;
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\ndm_policy = \"open\"\n\
         webhook_url = \"http://127.0.0.1:{port}/tg-hook\"\nwebhook_secret = \"s3cret_-x\"\nwebhook_path = \"/tg-hook\"\n",
        fake.base
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_on(home, port, &mock.base(), &[]);
    fake.wait_webhook();
    let announce = |secret: &str| {
        let mut c = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        write!(
            c,
            "POST /tg-hook HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             x-telegram-bot-api-secret-token: {secret}\r\ncontent-length: 1000000\r\n\r\n"
        )
        .unwrap();
        c
    };
    // The wrong secret is answered at once, though the body never came.
    let answer = String::from_utf8_lossy(&until_eof(announce("wrong")).expect("answered")).into_owned();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // The right one, and a body that never comes: given up on.
    let answer = String::from_utf8_lossy(&until_eof(announce("s3cret_-x")).expect("answered")).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(mock.requests().is_empty());
}

/// Sends the header of a masked binary frame claiming `len` bytes, and a little of it.
fn frame_header(client: &mut Client, len: u64) {
    let stream = client.ws.get_mut();
    let mut header = vec![0x82u8, 0xFF];
    header.extend_from_slice(&len.to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    header.extend_from_slice(&[0u8; 1024]);
    stream.write_all(&header).unwrap();
}

#[test]
fn frames_over_the_limit_close_with_1009() {
    let mock = MockModel::start();
    let gw = Gateway::start(&mock.base(), &[]);
    // After hello: a 100 MB frame.
    let mut client = gw.client(&["operator.read"]);
    frame_header(&mut client, 100 << 20);
    let (_, close) = client.until_closed();
    assert_eq!(close, Some((1009, "message too big".into())));
    // Before hello: more than a connect takes (a 1 MiB frame, under maxPayload).
    let (mut early, _) = gw.socket();
    frame_header(&mut early, 1 << 20);
    early.ws.get_mut().write_all(&vec![b'x'; 128 << 10]).unwrap();
    let (_, close) = early.until_closed();
    assert_eq!(close, Some((1009, "message too big".into())));
    // Others are not disturbed.
    let mut other = gw.client(&["operator.read"]);
    assert_eq!(other.request("health", json!({}))["ok"], true);
}

/// A gateway started with `--listen` and `--token-file` on the command line is found by `acp
/// pairing` and `acp channels` of the same `$ACP_HOME` with no arguments: it leaves its address
/// and an owner token of this run (never the shared token) in a file only its user reads, gone
/// when it stops. Anyone else needs the token, from a file.
#[test]
fn local_clients_find_the_running_gateway_and_authenticate_as_its_owner() {
    let mock = MockModel::start();
    let mut gw = Gateway::start(&mock.base(), &[]);
    let file = gw.home.path().join("gateway.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let found: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(found["url"], format!("ws://127.0.0.1:{}/", gw.port));
    assert!(!text.contains(TOKEN), "the shared token is not written: {text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let acp = |home: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ACP_HOME", home)
            .env("HOME", home)
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), said)
    };
    let (code, said) = acp(gw.home.path(), &["pairing", "list"]);
    assert_eq!((code, said.as_str()), (Some(0), "No pairing codes are waiting.\n"));
    let (code, said) = acp(gw.home.path(), &["channels", "status"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.starts_with("No channels are configured"), "{said}");
    // A second gateway on the same home leaves the first one found (and says so).
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_acp"))
        .args(["gateway", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(gw.home.path().join("test-gateway.token"))
        .arg("--workspace")
        .arg(gw.workspace.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ACP_HOME", gw.home.path())
        .env("HOME", gw.home.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(second.stderr.take().unwrap()));
    // Up to its start line (the warning comes before it).
    let before: Vec<String> =
        lines.by_ref().map_while(Result::ok).take_while(|l| !l.contains("acp gateway listening on")).collect();
    let warned = before.iter().find(|l| l.contains("another acp gateway serves this"));
    assert!(warned.is_some_and(|l| l.contains(&format!("pid={}", gw.child.id()))), "the second says so: {before:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "the first gateway's file is kept");
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "and not removed by the second");
    // Another home: the token is needed, and a file is how to give it.
    let other = tempfile::tempdir().unwrap();
    let url = format!("ws://127.0.0.1:{}", gw.port);
    let (code, said) = acp(other.path(), &["pairing", "list", "--gateway", &url]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("gateway token missing") && !said.contains("--token "), "{said}");
    let token_file = other.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (code, said) =
        acp(other.path(), &["pairing", "list", "--gateway", &url, "--token-file", token_file.to_str().unwrap()]);
    assert_eq!((code, said.as_str()), (Some(0), "No pairing codes are waiting.\n"));
    // The owner token is this run's: a stale copy is worth nothing once the gateway is gone.
    gw.signal("TERM");
    assert!(gw.wait_exit().success(), "{}", gw.stderr());
    assert!(!file.exists(), "removed as it stopped");
    let home = std::mem::replace(&mut gw.home, tempfile::tempdir().unwrap());
    drop(gw);
    let mut restarted = Gateway::start_in(home, &mock.base(), &[]);
    let stale = found["token"].as_str().unwrap();
    assert!(!std::fs::read_to_string(&file).unwrap().contains(stale), "a new owner token per run");
    let (mut client, _) = restarted.socket();
    let refused = client.request("connect", connect_params(Some(stale), &["operator.admin"]));
    assert_eq!(refused["ok"], false, "{refused}");
    restarted.signal("TERM");
    let _ = restarted.wait_exit();
}
