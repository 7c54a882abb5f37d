//! JACK's clock against the engine's CLOCK_MONOTONIC: measured once on a control thread, applied on JACK's process thread.
//!
//! JACK2 on Linux reads CLOCK_MONOTONIC (its "system" clock source) in
//! microseconds, so its cycle times compare directly with
//! [`xrunlab_engine::rt::clock::now_ns`]. A server built with another clock
//! source (cycle counter, HPET, or PipeWire's JACK library) may not; the
//! offset is measured rather than assumed, and applied when it is not zero.

use jack::Client;
use xrunlab_engine::rt::clock::now_ns;

/// Offsets below this are read as "the same clock": `jack_get_time` has
/// microsecond resolution and the bracketing reads take a few hundred ns.
const SAME_CLOCK_TOLERANCE_NS: i64 = 20_000;

/// How JACK time maps to CLOCK_MONOTONIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JackClock {
    /// Add to JACK's time (in ns) to get CLOCK_MONOTONIC ns; 0 when they are the same clock.
    pub offset_ns: i64,
}

impl JackClock {
    /// Compares `jack_get_time` with CLOCK_MONOTONIC, keeping the tightest of
    /// a few bracketing reads so that a preemption between reads does not skew it.
    pub(crate) fn measure(client: &Client) -> JackClock {
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..32 {
            let before = now_ns();
            let jack_ns = client.time().saturating_mul(1_000);
            let after = now_ns();
            let width = after.saturating_sub(before);
            let mid = before + width / 2;
            let offset = mid as i64 - jack_ns as i64;
            if best.map_or(true, |(w, _)| width < w) {
                best = Some((width, offset));
            }
        }
        let offset = best.map_or(0, |(_, o)| o);
        // jack_get_time truncates to whole microseconds, so the same clock reads up to 1 us ahead.
        JackClock {
            offset_ns: if offset.abs() < SAME_CLOCK_TOLERANCE_NS {
                0
            } else {
                offset
            },
        }
    }

    /// JACK microseconds as CLOCK_MONOTONIC nanoseconds. Real-time safe.
    #[inline]
    pub(crate) fn to_monotonic_ns(self, jack_usecs: u64) -> u64 {
        let ns = jack_usecs.saturating_mul(1_000);
        if self.offset_ns >= 0 {
            ns.saturating_add(self.offset_ns as u64)
        } else {
            ns.saturating_sub(self.offset_ns.unsigned_abs())
        }
    }

    /// A line for the device notes.
    pub(crate) fn describe(self) -> String {
        if self.offset_ns == 0 {
            "clock: JACK's cycle times are CLOCK_MONOTONIC (checked against the engine's clock at connect)".into()
        } else {
            format!(
                "clock: JACK's clock differs from CLOCK_MONOTONIC by {:.3} ms; cycle times are converted with that offset",
                self.offset_ns as f64 / 1e6
            )
        }
    }
}
