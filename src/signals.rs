//! Termination signals: SIGINT (Ctrl-C), SIGTERM (`kill`, systemd, `timeout`, Docker) and SIGHUP (a
//! closed terminal) end a run, or the dashboard, cleanly; registered with signal-hook on the main
//! thread, whose handlers only store atomics or wake the `xrl-signals` thread. The binary owns the
//! process's signals; the libraries take a stop flag or future.

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

/// Installs handlers for the three stop signals that only set the returned flag and never exit,
/// however many arrive: for a command that must finish something first, whatever happens
/// (doctor undoes the settings it applied; bench soak writes the samples it took). The command
/// polls the flag.
pub fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let flag = Arc::new(AtomicBool::new(false));
    for (signal, name) in STOP_SIGNALS {
        signal_hook::flag::register(signal, flag.clone())
            .map_err(|e| format!("cannot install the {name} handler: {e}"))?;
    }
    Ok(flag)
}

/// Installs handlers for the three stop signals and returns a future that completes when the
/// first one arrives, after saying which on stderr: the dashboard's stop ([`xrunlab_dash::serve`]
/// takes it). Installed before the dashboard starts, so a signal sent right after its URL is
/// printed is caught; later signals are caught too and do nothing (the dashboard is stopping).
/// A thread named `xrl-signals` waits for them.
pub fn dashboard_stop() -> Result<impl std::future::Future<Output = ()>, String> {
    let mut signals =
        signal_hook::iterator::Signals::new(STOP_SIGNALS.map(|(signal, _)| signal))
            .map_err(|e| format!("cannot install the SIGINT, SIGTERM and SIGHUP handlers: {e}"))?;
    let (arrived, stop) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("xrl-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let name = STOP_SIGNALS
                    .iter()
                    .find(|(s, _)| *s == signal)
                    .map_or("a stop signal", |(_, name)| *name);
                eprintln!("xrunlab dashboard: {name} received, stopping");
                let _ = arrived.send(());
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(async move {
        // An error means the thread ended without a signal: then nothing can stop the
        // dashboard but the device.
        if stop.await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}
