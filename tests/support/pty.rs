//! Runs a program in a pseudo-terminal and keeps a screen of what it drew (a VT100 emulator), for
//! driving `acp client` the way a person at a terminal does.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, PtySize, native_pty_system};

pub const ROWS: u16 = 40;
pub const COLS: u16 = 100;

pub struct Pty {
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    pub child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    pub fn spawn(program: &Path, args: &[&str], env: &[(&str, String)], cwd: &Path) -> Self {
        Self::spawn_reporting(program, args, env, cwd, (ROWS, COLS))
    }

    /// As [`Pty::spawn`], with the terminal reporting `size` (rows, columns) to the program — 0×0
    /// as some terminals do — while the screen kept here stays ROWS×COLS.
    pub fn spawn_reporting(
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
        cwd: &Path,
        size: (u16, u16),
    ) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize { rows: size.0, cols: size.1, pixel_width: 0, pixel_height: 0 })
            .expect("open a pty");
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.env_clear();
        cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(cwd);
        let child = pair.slave.spawn_command(cmd).expect("spawn in the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 1000)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().process(&buf[..n]);
                r.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Self { screen, raw, writer, child, _master: pair.master }
    }

    /// Types `keys` (escape sequences and control characters included).
    pub fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// The visible screen, one line per row, trailing spaces cut.
    pub fn screen(&self) -> String {
        let parser = self.screen.lock().unwrap();
        let text = parser.screen().contents();
        text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n").trim_end().to_owned()
    }

    /// Every byte the program wrote.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().unwrap()).into_owned()
    }

    /// Where `needle` first occurs in the output at or after byte `from`.
    #[allow(dead_code, reason = "used by the client benchmark")]
    pub fn find_from(&self, from: usize, needle: &[u8]) -> Option<usize> {
        let raw = self.raw.lock().unwrap();
        let start = from.min(raw.len());
        raw[start..].windows(needle.len()).position(|w| w == needle).map(|i| start + i)
    }

    /// How many bytes the program has written.
    #[allow(dead_code, reason = "used by the client benchmark")]
    pub fn raw_len(&self) -> usize {
        self.raw.lock().unwrap().len()
    }

    /// Waits until the screen shows `text`; fails with the screen if it does not within 15 s.
    pub fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the screen never showed {text:?}:\n{screen}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the line editor waits for input: the screen's last line is the bare prompt.
    /// (Control keys typed before it reads the terminal in raw mode would be lost.)
    pub fn wait_for_prompt(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if screen.lines().last().is_some_and(|l| l.trim_end() == "›") {
                return screen;
            }
            assert!(Instant::now() < deadline, "the prompt never came back:\n{screen}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the screen shows `text` at least `n` times.
    pub fn wait_for_count(&self, text: &str, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if screen.matches(text).count() >= n {
                return screen;
            }
            assert!(Instant::now() < deadline, "the screen never showed {text:?} {n} times:\n{screen}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the program to exit; its exit code.
    pub fn wait_exit(&mut self) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            assert!(Instant::now() < deadline, "did not exit; the screen:\n{}", self.screen());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
