//! The watchdog: a thread of its own (not real-time) that ends the run when the server stops calling the client without saying so.
//!
//! JACK2 reports its death through the shutdown callback, but PipeWire's
//! libjack (0.3.x) does not: when the PipeWire daemon dies, the process
//! callbacks simply stop. A server that runs always calls its clients (JACK2
//! removes a client it gives up on and says so), so callbacks that stop for
//! many periods mean the server is gone or hung.

use crate::process::Gate;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xrunlab_engine::DeviceSignals;

/// Silence that ends a run: far beyond a buffer-size change's pause (a few
/// periods), short enough for a user waiting on a dead server.
const MIN_SILENCE: Duration = Duration::from_secs(2);
/// Silence limit in periods, for very long buffers.
const SILENCE_PERIODS: u32 = 8;
/// How often the watchdog looks.
const POLL: Duration = Duration::from_millis(50);

/// What the watchdog needs to know.
pub(crate) struct Watch {
    pub gate: Arc<Gate>,
    pub signals: Arc<DeviceSignals>,
    pub server_gone: Arc<AtomicBool>,
    pub server_label: String,
    pub sample_rate: u32,
    pub buffer_frames: u32,
}

/// Starts the watchdog; it ends by itself once the gate closes or the device has ended.
pub(crate) fn spawn(w: Watch) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("xrl-jack-watch".into())
        .spawn(move || run(&w))
}

fn run(w: &Watch) {
    let mut seen = w.gate.callbacks();
    let mut since = Instant::now();
    while !w.gate.is_closed() && w.signals.ended().is_none() {
        std::thread::sleep(POLL);
        let now = w.gate.callbacks();
        if now != seen {
            (seen, since) = (now, Instant::now());
            continue;
        }
        let frames = match w.signals.buffer_frames() {
            0 => w.buffer_frames,
            n => n,
        };
        let period = Duration::from_secs_f64(f64::from(frames) / f64::from(w.sample_rate.max(1)));
        let limit = MIN_SILENCE.max(period * SILENCE_PERIODS);
        if since.elapsed() >= limit {
            w.server_gone.store(true, Ordering::Release);
            w.signals.fail(format!(
                "JACK {} stopped calling the client: no process callback for {:.1} s (the server died or hung)",
                w.server_label,
                since.elapsed().as_secs_f64()
            ));
            return;
        }
    }
}
