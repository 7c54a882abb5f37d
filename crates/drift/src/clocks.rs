//! The three clocks a poll reads: wall time (for the events' times), and `CLOCK_BOOTTIME` and
//! `CLOCK_MONOTONIC`, whose difference grows only while the machine is suspended; read on the
//! drift thread.

/// The smallest growth of `CLOCK_BOOTTIME − CLOCK_MONOTONIC` taken as a suspend: well above
/// the clocks' read-to-read skew, well below any real suspend.
pub const SUSPEND_MIN_NS: i64 = 500_000_000;

/// The clocks at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Wall time, ns since the Unix epoch.
    pub wall_ns: i64,
    /// `CLOCK_BOOTTIME`, ns.
    pub boot_ns: i64,
    /// `CLOCK_MONOTONIC`, ns.
    pub mono_ns: i64,
}

fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; these clocks exist on every Linux since 2.6.39.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

impl ClockSample {
    /// The clocks now.
    pub fn now() -> ClockSample {
        ClockSample {
            boot_ns: read(libc::CLOCK_BOOTTIME),
            mono_ns: read(libc::CLOCK_MONOTONIC),
            wall_ns: read(libc::CLOCK_REALTIME),
        }
    }

    /// Time spent suspended since boot, as far as these clocks tell.
    pub fn suspended_ns(&self) -> i64 {
        self.boot_ns - self.mono_ns
    }
}
