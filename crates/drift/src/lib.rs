//! Drift: what changed on the machine before the crackles. A [`DriftMonitor`], polled about
//! once a second on the recorder's drift thread, reads the scheduling of the watched real-time
//! threads (`/proc/PID/task/TID/stat`), the cpufreq governors and energy preferences, the
//! platform profile, the online CPUs and the thermal-throttle counters, all under a root path
//! (so tests run on fixture trees), and notices a suspend as a jump between `CLOCK_BOOTTIME`
//! and `CLOCK_MONOTONIC`. The caller feeds in what the audio server says (quantum, rate, nodes
//! coming and going). Each change is a [`DriftEvent`] with its wall-clock time; [`before_card`]
//! says in words which of them are still in effect when an xrun happens.
//!
//! Its state is one entry per watched thread, cpufreq policy and CPU: bounded by the machine.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod clocks;
mod event;
mod monitor;
pub mod sched;
mod sysfs;
mod words;

pub use clocks::{ClockSample, SUSPEND_MIN_NS};
pub use event::{DriftEvent, DriftKind};
pub use monitor::{DriftMonitor, WatchedThread};
pub use sched::{read_sched, Sched};
pub use words::{before_card, clock_time_local, date_time_local, Lookback};
