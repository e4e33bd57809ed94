//! SIGINT and SIGTERM, caught on a thread of their own. A write can block when the peer stops
//! reading, so the async runtime cannot be relied on to act on a signal: after enough signals the
//! process exits on its own, a moment later, whatever it was doing.

use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};

/// How long the process may take to finish after the signal that ends it.
pub const GRACE: Duration = Duration::from_millis(450);

/// Calls `on_signal` with the count of signals so far (1, 2, …) for each one; from signal
/// `exit_after` on, exits with `code` if the process is still here [`GRACE`] later.
pub fn watch(on_signal: impl Fn(usize) + Send + 'static, exit_after: usize, code: i32) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
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
    })?;
    Ok(())
}
