//! SIGINT and SIGTERM, caught on a thread of their own. A write can block when the peer stops
//! reading, so the async runtime cannot be relied on to act on a signal: after enough signals the
//! process exits on its own, a moment later, whatever it was doing.
//!
//! The handlers are installed at once, before anything else runs; the thread that acts on what
//! they catch may start a moment later ([`Installed::start_on_first_input`]), off the path to the
//! first answer. A signal caught meanwhile is kept and acted on as the thread starts.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long the process may take to finish after the signal that ends it.
pub const GRACE: Duration = Duration::from_millis(450);

/// How long after start-up [`Installed::start_soon`] starts the thread.
const START_AFTER: Duration = Duration::from_millis(10);

/// Calls `on_signal` with the count of signals so far (1, 2, …) for each one; from signal
/// `exit_after` on, exits with `code` if the process is still here [`GRACE`] later.
pub fn watch(on_signal: impl Fn(usize) + Send + 'static, exit_after: usize, code: i32) -> std::io::Result<()> {
    let installed = install(on_signal, exit_after, code)?;
    installed.start();
    Ok(())
}

/// Installs the handlers for [`watch`], without starting its thread yet.
pub fn install(on_signal: impl Fn(usize) + Send + 'static, exit_after: usize, code: i32) -> std::io::Result<Installed> {
    let signals = Signals::new([SIGINT, SIGTERM])?;
    let watcher = Watcher { signals, on_signal: Box::new(on_signal), exit_after, code };
    Ok(Installed(Arc::new(Mutex::new(Some(watcher)))))
}

/// Handlers installed: what they catch waits for the thread [`Installed::start`] starts. A
/// cheap handle; the thread starts once, whichever handle starts it first.
#[derive(Clone)]
pub struct Installed(Arc<Mutex<Option<Watcher>>>);

struct Watcher {
    signals: Signals,
    on_signal: Box<dyn Fn(usize) + Send>,
    exit_after: usize,
    code: i32,
}

impl Installed {
    /// Starts the thread that acts on the signals, unless it runs already.
    pub fn start(&self) {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some(Watcher { mut signals, on_signal, exit_after, code }) = taken else { return };
        let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for (seen, signal) in (1..).zip(signals.forever()) {
                tracing::info!(signal, seen, "signal");
                on_signal(seen);
                if seen == exit_after {
                    std::thread::spawn(move || {
                        std::thread::sleep(GRACE);
                        tracing::info!("still running {} ms after the signal; exiting now", GRACE.as_millis());
                        std::process::exit(code);
                    });
                }
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the signal thread");
        }
    }

    /// Starts the thread as soon as `conn`'s first input arrives (from its reader thread, which
    /// no blocked write can hold up, and not from the thread about to answer it), or
    /// [`START_AFTER`] from now if none comes by then. Call it from within the async runtime.
    pub fn start_on_first_input(&self, conn: &crate::rpc::Connection) {
        let first = self.clone();
        conn.after_first_input(move || first.start());
        self.start_soon();
    }

    /// Starts the thread [`START_AFTER`] from now, from the async runtime this is called in (for a
    /// process whose writes cannot block: `acp run` reads its agent's output as it comes).
    pub fn start_soon(&self) {
        let later = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(START_AFTER).await;
            later.start();
        });
    }
}
