//! The watchdog: a thread of its own (not real-time) that ends a run, or a watch, when the server
//! stops running cycles without saying so.
//!
//! JACK2 reports its death through the shutdown callback, but PipeWire's
//! libjack (0.3.x) does not: when the PipeWire daemon dies, the process
//! callbacks simply stop. A server that runs always runs cycles (JACK2
//! removes a client it gives up on and says so), so a count of cycles that
//! stops for many periods means the server is gone or hung. The engine's
//! device counts its process callbacks; `watch`'s passive client, which has
//! none, reads the server's frame clock.

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

/// What a watchdog watches.
pub(crate) trait Watched: Send + 'static {
    /// A count that moves on while the server runs cycles.
    fn progress(&self) -> u64;
    /// The server's period now.
    fn period(&self) -> Duration;
    /// Whether the watching should end (the client is closing, the run ended).
    fn finished(&self) -> bool;
    /// The count has not moved for `silence`: report the server gone (called once, then the
    /// watchdog ends).
    fn silent(&self, silence: Duration);
}

/// Starts a watchdog thread called `name`; it ends by itself once `w` is finished or silent.
pub(crate) fn spawn(name: &str, w: impl Watched) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || run(&w))
}

fn run(w: &impl Watched) {
    let mut seen = w.progress();
    let mut since = Instant::now();
    while !w.finished() {
        std::thread::sleep(POLL);
        let now = w.progress();
        if now != seen {
            (seen, since) = (now, Instant::now());
            continue;
        }
        let limit = MIN_SILENCE.max(w.period() * SILENCE_PERIODS);
        if since.elapsed() >= limit {
            w.silent(since.elapsed());
            return;
        }
    }
}

/// A period of `frames` at `rate` Hz.
pub(crate) fn period(frames: u32, rate: u32) -> Duration {
    Duration::from_secs_f64(f64::from(frames) / f64::from(rate.max(1)))
}

/// The engine device's side: its process callbacks, and the run's signals to fail.
pub(crate) struct Watch {
    pub gate: Arc<Gate>,
    pub signals: Arc<DeviceSignals>,
    pub server_gone: Arc<AtomicBool>,
    pub server_label: String,
    pub sample_rate: u32,
    pub buffer_frames: u32,
}

impl Watched for Watch {
    fn progress(&self) -> u64 {
        self.gate.callbacks()
    }

    fn period(&self) -> Duration {
        let frames = match self.signals.buffer_frames() {
            0 => self.buffer_frames,
            n => n,
        };
        period(frames, self.sample_rate)
    }

    fn finished(&self) -> bool {
        self.gate.is_closed() || self.signals.ended().is_some()
    }

    fn silent(&self, silence: Duration) {
        self.server_gone.store(true, Ordering::Release);
        self.signals.fail(format!(
            "JACK {} stopped calling the client: no process callback for {:.1} s (the server died or hung)",
            self.server_label,
            silence.as_secs_f64()
        ));
    }
}
