//! JACK's clock against the engine's CLOCK_MONOTONIC: identified once on a control thread,
//! converted every cycle on JACK's process thread.
//!
//! JACK2 on Linux stamps its cycles with CLOCK_MONOTONIC_RAW, PipeWire's
//! libjack with CLOCK_MONOTONIC, and other builds may use other sources. The
//! engine's timestamps are CLOCK_MONOTONIC, which NTP slews against the raw
//! clock (by 144 ms on the machine this was written on, and by up to 500 us
//! per second while slewing), so a fixed offset measured once would drift
//! during a run: the offset is read again every cycle.

use jack::Client;
use xrunlab_engine::rt::clock::now_ns;

/// Two clocks closer than this read as the same: `jack_get_time` has
/// microsecond resolution and the bracketing reads take a few hundred ns.
const SAME_CLOCK_TOLERANCE_NS: i64 = 20_000;

/// Which clock JACK's times are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JackClock {
    /// CLOCK_MONOTONIC itself: no conversion.
    Monotonic,
    /// CLOCK_MONOTONIC_RAW: the offset is read every cycle with ns precision.
    MonotonicRaw,
    /// Unknown, or indistinguishable right now (the two clocks agree at the
    /// moment, but may drift apart): the offset is taken from `jack_get_time`
    /// every cycle, to within its microsecond resolution.
    JackTime,
}

/// Nanoseconds on `clock`, signed for offset arithmetic.
fn read(clock: libc::clockid_t) -> i64 {
    xrunlab_engine::rt::clock::clock_ns(clock) as i64
}

/// `jack_get_time` minus `clock`, in ns, from the tightest of a few bracketing reads.
fn offset_to(client: &Client, clock: libc::clockid_t) -> i64 {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..32 {
        let before = read(clock);
        let jack_ns = client.time().saturating_mul(1_000) as i64;
        let after = read(clock);
        let width = after - before;
        // jack_get_time truncates to whole microseconds: its true value lies half a microsecond later on average.
        let offset = jack_ns + 500 - (before + width / 2);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    best.map_or(i64::MAX, |(_, o)| o)
}

impl JackClock {
    /// Finds out which clock JACK's times are on.
    pub(crate) fn identify(client: &Client) -> JackClock {
        let mono = offset_to(client, libc::CLOCK_MONOTONIC).abs() < SAME_CLOCK_TOLERANCE_NS;
        let raw = offset_to(client, libc::CLOCK_MONOTONIC_RAW).abs() < SAME_CLOCK_TOLERANCE_NS;
        match (mono, raw) {
            (true, false) => JackClock::Monotonic,
            (false, true) => JackClock::MonotonicRaw,
            _ => JackClock::JackTime,
        }
    }

    /// What to add to JACK's times (in ns) to get CLOCK_MONOTONIC, read now.
    /// Real-time safe: vDSO clock reads only.
    #[inline]
    pub(crate) fn offset_now_ns(self, client: &Client) -> i64 {
        match self {
            JackClock::Monotonic => 0,
            JackClock::MonotonicRaw => now_ns() as i64 - read(libc::CLOCK_MONOTONIC_RAW),
            JackClock::JackTime => {
                let jack_ns = client.time().saturating_mul(1_000) as i64 + 500;
                now_ns() as i64 - jack_ns
            }
        }
    }

    /// JACK microseconds as CLOCK_MONOTONIC nanoseconds, with this cycle's offset.
    #[inline]
    pub(crate) fn to_monotonic_ns(jack_usecs: u64, offset_ns: i64) -> u64 {
        (jack_usecs.saturating_mul(1_000) as i64)
            .saturating_add(offset_ns)
            .max(0) as u64
    }

    /// A line for the device notes.
    pub(crate) fn describe(self) -> String {
        let drift = (read(libc::CLOCK_MONOTONIC) - read(libc::CLOCK_MONOTONIC_RAW)) as f64 / 1e6;
        match self {
            JackClock::Monotonic => "clock: JACK's cycle times are CLOCK_MONOTONIC, the engine's clock".into(),
            JackClock::MonotonicRaw => format!(
                "clock: JACK's cycle times are CLOCK_MONOTONIC_RAW, converted to CLOCK_MONOTONIC every cycle \
                 (the clocks differ by {drift:.3} ms now, and NTP slewing changes that)"
            ),
            JackClock::JackTime => "clock: JACK's cycle times are converted to CLOCK_MONOTONIC every cycle through \
                 jack_get_time (to within 1 us)"
                .into(),
        }
    }
}
