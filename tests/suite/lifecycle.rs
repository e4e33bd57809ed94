//! Process behaviour: end of input finishes what was asked and exits 0 (so NDJSON pipelines get
//! their answers); SIGINT/SIGTERM cancel running turns and exit promptly; stdout carries only
//! protocol lines even with debug logging on.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, Options, TIMEOUT};
use crate::support::expect::{
    ANTHROPIC_MODELS, BLANK, blank, commands_update, config_options, ended, initialize_result, modes, result,
    text_usage, update,
};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;

#[test]
fn a_piped_script_gets_every_answer_then_the_process_exits_zero() {
    let mock = MockModel::start();
    // Slow enough that the prompt is still streaming when input ends.
    mock.push(Reply::fixture("anthropic", "text").delay(Duration::from_millis(40)));
    let home = tempfile::tempdir().unwrap();
    let cwd = home.path().display().to_string();
    let script = [
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":cwd,"mcpServers":[],"_meta":{"sessionKey":"demo"}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"demo","prompt":[{"type":"text","text":"hi"}]}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp"))
        .env_clear()
        .env("ACP_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", mock.base())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap(); // and closes stdin
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let chunk = |text: &str| {
        update(
            "demo",
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}, "messageId": BLANK}),
        )
    };
    // Every request answered, in order, each with all that goes with it.
    assert_eq!(
        blank(&json!(lines), &["messageId", "updatedAt"]),
        json!([
            result(0, initialize_result(home.path())),
            result(
                1,
                json!({
                    "sessionId": "demo",
                    "modes": modes("code"),
                    "configOptions": config_options("anthropic/claude-sonnet-4-5", &ANTHROPIC_MODELS, "code", "default")
                })
            ),
            update("demo", commands_update()),
            update("demo", json!({"sessionUpdate": "usage_update", "used": 0, "size": 200000})),
            update("demo", json!({"sessionUpdate": "session_info_update", "title": "hi", "updatedAt": BLANK})),
            chunk("Hello"),
            chunk(", wörld! 👋"),
            update("demo", json!({"sessionUpdate": "usage_update", "used": 121, "size": 200000})),
            result(2, ended("end_turn", text_usage("anthropic"))),
        ])
    );
    assert_eq!(lines[5]["params"]["update"]["messageId"], lines[6]["params"]["update"]["messageId"], "one message");
}

#[test]
fn idle_end_of_input_exits_at_once() {
    let mut agent = Agent::spawn(Options::default());
    agent.initialize();
    agent.close_stdin();
    // Nothing is running, so nothing is waited for (the figure is in the benchmark).
    let status = agent.wait_exit(TIMEOUT).expect("exits after EOF");
    assert!(status.success());
}

/// `acp` and `acp serve` alone skip the argument parser; anything more still goes through it.
#[test]
fn acp_and_acp_serve_alone_serve_and_other_arguments_are_still_parsed() {
    for args in [&[][..], &["serve"][..]] {
        let mut agent = Agent::spawn(Options::default().args(args));
        agent.initialize();
        agent.close_stdin();
        assert!(agent.wait_exit(TIMEOUT).expect("exits after EOF").success(), "{args:?}");
    }
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_acp")).args(args).stdin(Stdio::null()).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&["serve", "extra"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unexpected argument 'extra'"), "{err}");
    let (code, _, err) = run(&["serve", "--max-line-bytes", "many"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--max-line-bytes"), "{err}");
    let (code, out, _) = run(&["--version"]);
    assert_eq!((code, out.trim()), (Some(0), concat!("acp ", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn end_of_input_during_a_turn_still_answers_it() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("openai-chat", &mock));
    agent.initialize();
    let session = agent.new_session();
    mock.push(Reply::fixture("openai-chat", "text").delay(Duration::from_millis(50)));
    let id =
        agent.send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type":"text","text":"hi"}]}));
    mock.wait_requests(1);
    agent.close_stdin();
    let (_, response) = agent.until_response(id);
    assert_eq!(response, result(id, ended("end_turn", text_usage("openai-chat"))));
    assert!(agent.wait_exit(Duration::from_secs(5)).expect("exits").success());
}

#[test]
fn signals_cancel_running_turns_and_exit_promptly() {
    for sig in ["TERM", "INT"] {
        let mock = MockModel::start();
        let mut agent = Agent::spawn(options_for("anthropic", &mock));
        agent.initialize();
        let session = agent.new_session();
        mock.push(Reply::fixture("anthropic", "text").stall_after(5));
        let id = agent
            .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type":"text","text":"hi"}]}));
        loop {
            if agent.recv()["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                break;
            }
        }
        agent.signal(sig);
        // The stream stalls for good: only the signal can end the turn and the process (the
        // benchmark reports how fast).
        let (_, response) = agent.until_response(id);
        // What the reply had counted by then (its start) comes with the answer.
        let usage = json!({"totalTokens": 113, "inputTokens": 112, "outputTokens": 1, "cachedReadTokens": 100});
        assert_eq!(response, result(id, ended("cancelled", usage)), "SIG{sig}");
        let status = agent.wait_exit(TIMEOUT).unwrap_or_else(|| panic!("SIG{sig}: still running"));
        assert!(status.success(), "SIG{sig}: {status:?}");
        assert!(mock.wait_done(0).client_left, "SIG{sig}: the model connection was closed");
    }
}

/// The signal handlers are installed first thing; the thread that acts on them starts once the
/// first answer is out (or a moment after start-up). A signal that comes before still ends the
/// process cleanly, as soon as the thread starts.
#[test]
fn a_signal_before_anything_is_answered_still_ends_the_process_cleanly() {
    for sig in ["TERM", "INT"] {
        let home = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_acp"))
            .env_clear()
            .env("ACP_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Once the handler is in place (the process catches the signal), before any input.
        let bit = if sig == "TERM" { 1u64 << 14 } else { 1u64 << 1 };
        let status = format!("/proc/{}/status", child.id());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&status).unwrap_or_default();
            let caught = text.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(str::trim);
            if caught.and_then(|c| u64::from_str_radix(c, 16).ok()).is_some_and(|mask| mask & bit != 0) {
                break;
            }
            assert!(Instant::now() < deadline, "SIG{sig}: the handler was never installed");
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = signal_and_wait(&mut child, sig);
        assert!(status.success(), "SIG{sig}: {status:?} (killed by the signal rather than ending cleanly)");
    }
}

#[test]
fn stdout_is_protocol_only_even_with_debug_logs() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock).arg("--verbose").env("RUST_LOG", "trace"));
    agent.initialize();
    let session = agent.new_session();
    mock.push(Reply::fixture("anthropic", "thinking"));
    agent.send_raw(b"not json\n");
    agent.prompt(&session, "hi"); // every stdout line is parsed as JSON by the harness
    assert!(agent.stderr().contains("DEBUG") || agent.stderr().contains("TRACE"), "logs went to stderr");
}

#[test]
fn a_peer_that_stops_reading_cannot_block_shutdown() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp"))
        .env_clear()
        .env("ACP_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped()) // never read: the pipe fills and the agent's writes block
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // ~2,000 error answers of ~100 bytes each: far more than a pipe buffer holds.
    let garbage = "x\n".repeat(2_000);
    stdin.write_all(garbage.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "still running, blocked on its output");
    let status = signal_and_wait(&mut child, "TERM");
    assert!(status.success(), "{status:?}");
    drop(stdin);
}

/// Sends `SIG{sig}` to `child` and waits for it to exit.
fn signal_and_wait(child: &mut std::process::Child, sig: &str) -> std::process::ExitStatus {
    Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "did not exit after SIG{sig}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// On Linux with glibc the binaries are linked as position-dependent executables (build.rs): the
/// loader has none of their pointers to relocate at every start. `ACP_PIE=1` links them as PIEs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_binaries_are_linked_as_build_rs_says() {
    use std::io::Read;
    // ELF `e_type`: 2 is a position-dependent executable, 3 a shared object (a PIE).
    let expected = if option_env!("ACP_PIE") == Some("1") { 3 } else { 2 };
    for exe in [env!("CARGO_BIN_EXE_acp"), env!("CARGO_BIN_EXE_acp-sandbox")] {
        let mut head = [0u8; 18];
        std::fs::File::open(exe).unwrap().read_exact(&mut head).unwrap();
        assert_eq!(&head[..4], b"\x7fELF", "{exe}");
        assert_eq!(u16::from_le_bytes([head[16], head[17]]), expected, "{exe}");
    }
}

/// On Linux with glibc the functions a fresh process runs on its way to its first answer are laid
/// out together before the rest of the text in a release build (build.rs, `link/startup.ld`),
/// unless `ACP_STARTUP_ORDER=0`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_start_up_path_is_laid_out_before_the_rest_of_the_text() {
    let elf = std::fs::read(env!("CARGO_BIN_EXE_acp")).unwrap();
    let sections = elf_sections(&elf);
    let find = |name: &str| sections.iter().find(|s| s.0 == name).map(|s| (s.1, s.2));
    let text = find(".text").expect("a .text section");
    let wanted = !cfg!(debug_assertions) && option_env!("ACP_STARTUP_ORDER") != Some("0");
    match find(".text.startup_path") {
        Some((addr, size)) => {
            assert!(wanted, "a start-up section in a debug build, or with ACP_STARTUP_ORDER=0");
            assert!(addr + size <= text.0, "before the rest of the text");
            // Most of what it names is there (hundreds of functions of acp, its dependencies,
            // the standard library and SQLite), and far less than the whole text.
            assert!(size > (1 << 20) && size < text.1 / 2, "{size} bytes of {}", text.1);
        }
        None => assert!(!wanted, "no start-up section"),
    }
}

/// An ELF64 file's sections: name, address, size.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn elf_sections(elf: &[u8]) -> Vec<(String, u64, u64)> {
    let u16_at = |at: usize| u64::from(u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()));
    let u32_at = |at: usize| u64::from(u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()));
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "an ELF64 file");
    let (table, entry, count, names) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: u64| (table + i * entry) as usize;
    let strings = u64_at(header(names) + 24) as usize;
    (0..count)
        .map(|i| {
            let h = header(i);
            let name = &elf[strings + u32_at(h) as usize..];
            let name = String::from_utf8_lossy(&name[..name.iter().position(|&b| b == 0).unwrap()]).into_owned();
            (name, u64_at(h + 16), u64_at(h + 32))
        })
        .collect()
}
