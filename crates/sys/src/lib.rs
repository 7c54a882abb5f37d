//! Linux system interfaces for xrunlab: real-time scheduling setup, per-thread telemetry, CPU
//! topology and frequency, energy, and run provenance. No function here runs on the audio path
//! except [`sched::current_cpu`]; the rest is called at thread start or by non-real-time threads.
//!
//! Everything that reads procfs or sysfs takes its mount point as a parameter
//! ([`DEFAULT_PROC_ROOT`], [`DEFAULT_SYS_ROOT`] on a live system), so the parsers are tested
//! against fixture trees as well as the machine they run on. Whatever the kernel answers — a
//! refusal, a missing file, a line that does not parse — becomes a value ([`Outcome`],
//! `Option`, `Err`), never a panic.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cmdline;
pub mod cpu;
pub mod cpuidle;
pub mod energy;
pub mod fingerprint;
pub mod freq_sampler;
pub mod outcome;
pub mod printable;
pub mod procfs;
pub mod provenance;
pub mod reread;
pub mod run_system;
pub mod sched;
pub mod topology;

pub use cpu::{
    cpu_infos, cpu_set, format_cpu_list, governor_summary, online_cpus, parse_cpu_list,
    read_cur_freqs_khz, usable_cpus, CpuInfo, CpuListError, UsableCpus,
};
pub use cpuidle::{idle_states, idle_usage_delta, IdleState, IdleUsage};
pub use energy::{PowerMeter, PowerSample, RaplError, RaplMeter, DEFAULT_WATTS_PER_BUSY_CORE};
pub use fingerprint::Fingerprint;
pub use freq_sampler::{FreqSample, FreqSampler, FreqSamplerError, FreqTrace};
pub use outcome::Outcome;
pub use printable::printable;
pub use procfs::{read_rss_bytes, read_thread_stat, ThreadStat};
pub use provenance::{now_rfc3339, Provenance};
pub use reread::Reread;
pub use run_system::{RunSystem, RunSystemRecorder};
pub use sched::{
    apply_to_current_thread, current_cpu, gettid, hold_cpu_dma_latency, lock_memory,
    online_cpu_count, DeadlineParams, PmQosGuard, RtPolicy, RtRequest, ThreadSchedReport,
};
pub use topology::{cpu_topology, CpuTopology};

use std::path::Path;

/// Where procfs is mounted on a live system; pass a fixture directory instead in tests.
pub const DEFAULT_PROC_ROOT: &str = "/proc";
/// Where sysfs is mounted on a live system; pass a fixture directory instead in tests.
pub const DEFAULT_SYS_ROOT: &str = "/sys";

/// [`DEFAULT_PROC_ROOT`] as a `Path`.
pub fn default_proc_root() -> &'static Path {
    Path::new(DEFAULT_PROC_ROOT)
}

/// [`DEFAULT_SYS_ROOT`] as a `Path`.
pub fn default_sys_root() -> &'static Path {
    Path::new(DEFAULT_SYS_ROOT)
}

/// Reads a small sysfs/procfs attribute and trims the trailing newline; `None` when it is
/// missing or unreadable, because absent attributes are normal (no cpufreq, no RAPL).
pub(crate) fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Like [`read_trimmed`], parsed; a value that does not parse is treated as absent.
pub(crate) fn read_parsed<T: std::str::FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Fixture trees for tests: the shared test kit's, under the name these tests use.
    pub use xrunlab_testkit::FixtureTree as Fixture;
}
