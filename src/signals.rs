//! Termination signals for `run` and `render`: SIGINT (Ctrl-C), SIGTERM (`kill`, systemd, `timeout`, Docker) and SIGHUP (a closed terminal) end a run cleanly; registered with signal-hook on the main thread, whose handlers only store atomics.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The signals that end a run, with the name results give them.
const STOP_SIGNALS: [(i32, &str); 3] = [
    (SIGINT, "SIGINT (Ctrl-C)"),
    (SIGTERM, "SIGTERM"),
    (SIGHUP, "SIGHUP"),
];

/// Which stop signal arrived, if any.
pub struct StopSignals {
    which: Arc<AtomicUsize>,
}

impl StopSignals {
    /// Installs the handlers. The first stop signal only records itself, so
    /// the run can end and write its files; a second one (any of the three)
    /// exits at once with status 128 + signal, for a run whose ending got
    /// stuck (its last checkpoint and the CSV's rows so far are on disk).
    pub fn install() -> Result<StopSignals, String> {
        let which = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicBool::new(false));
        for (signal, name) in STOP_SIGNALS {
            // Order matters (signal-hook runs actions in registration order):
            // the exit is armed only by an earlier signal.
            signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, seen.clone())
                .and_then(|_| signal_hook::flag::register(signal, seen.clone()))
                .and_then(|_| {
                    signal_hook::flag::register_usize(signal, which.clone(), signal as usize)
                })
                .map_err(|e| format!("cannot install the {name} handler: {e}"))?;
        }
        Ok(StopSignals { which })
    }

    /// The name of the stop signal that arrived, e.g. "SIGTERM".
    pub fn received(&self) -> Option<&'static str> {
        let which = self.which.load(Ordering::SeqCst);
        STOP_SIGNALS
            .iter()
            .find(|(signal, _)| *signal as usize == which)
            .map(|(_, name)| *name)
    }
}
