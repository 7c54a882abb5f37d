//! The notification handler: runs on libjack's notification thread (not real-time) and forwards
//! xruns, rate changes and shutdown to the engine's signals.

use jack::{Client, ClientStatus, Control, Frames, NotificationHandler};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::DeviceSignals;

/// Server events for the engine.
pub(crate) struct Notifications {
    pub signals: Arc<DeviceSignals>,
    /// Label of the server in messages, e.g. `server "default"`.
    pub server_label: String,
    /// The rate the engine was built for.
    pub sample_rate: u32,
    /// Set when the server shut the client down; shared with the device so
    /// that it never waits on a server that is gone.
    pub server_gone: Arc<AtomicBool>,
}

impl NotificationHandler for Notifications {
    unsafe fn shutdown(&mut self, status: ClientStatus, reason: &str) {
        // libjack calls this from its own client thread once the server
        // connection is lost, not from a POSIX signal handler, so the lock
        // and allocation inside `fail` are safe here; the flag goes first so
        // that the device stops talking to the server even if they were not.
        self.server_gone.store(true, Ordering::Release);
        let reason = if reason.is_empty() {
            format!("status {status:?}")
        } else {
            reason.to_owned()
        };
        self.signals
            .fail(format!("JACK {} shut down: {reason}", self.server_label));
    }

    fn xrun(&mut self, _: &Client) -> Control {
        self.signals.note_xrun(now_ns());
        Control::Continue
    }

    fn sample_rate(&mut self, _: &Client, rate: Frames) -> Control {
        // The engine's oscillators are tuned for one rate; a server that
        // changes rate mid-run would detune every partial, so the run ends.
        if rate != self.sample_rate && rate != 0 {
            self.signals.fail(format!(
                "JACK {} changed its sample rate from {} Hz to {rate} Hz; start the run again",
                self.server_label, self.sample_rate
            ));
        }
        Control::Continue
    }
}
