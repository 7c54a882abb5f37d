//! Live controls: settings the control thread changes while audio runs, read once per buffer by the
//! driver through atomics.

use crate::config::EngineConfig;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use xrunlab_dsp::Kernel;

/// Settings that apply without restarting audio. Written by control threads,
/// read by the driver at the start of each buffer; each field is independent,
/// so relaxed ordering is enough (the injected hang's pair is the exception).
#[derive(Debug, Default)]
pub struct LiveControls {
    sines: AtomicUsize,
    burst_sines: AtomicUsize,
    burst_trigger: AtomicU64,
    min_load_ppm: AtomicU32,
    kernel: AtomicU8,
    chunk_size: AtomicUsize,
    stall_ns: AtomicU64,
    driver_spin_ns: AtomicU64,
    /// Worker (1..) to hang in the next cycle; 0 = none.
    hang_worker: AtomicUsize,
    hang_ns: AtomicU64,
}

/// One buffer's view of the controls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ControlSnapshot {
    pub sines: usize,
    pub burst_sines: usize,
    pub burst_trigger: u64,
    pub min_load: f64,
    pub kernel: Kernel,
    pub chunk_size: usize,
    pub driver_spin_ns: u64,
}

impl LiveControls {
    /// Controls holding `config`'s live settings.
    pub fn new(config: &EngineConfig) -> Self {
        let c = Self::default();
        c.set_from(config);
        c
    }

    /// Publishes `config`'s live settings.
    pub fn set_from(&self, config: &EngineConfig) {
        self.sines.store(config.sines, Relaxed);
        self.burst_sines.store(config.burst_sines, Relaxed);
        self.min_load_ppm.store(
            (f64::from(config.min_load_pct) * 10_000.0).round() as u32,
            Relaxed,
        );
        self.kernel
            .store(matches!(config.kernel, Kernel::Fast) as u8, Relaxed);
        self.chunk_size.store(config.chunk_size.max(1), Relaxed);
        self.driver_spin_ns
            .store(u64::from(config.driver_spin_us) * 1_000, Relaxed);
    }

    /// Starts a burst, or restarts its countdown if one is running.
    pub fn trigger_burst(&self) {
        self.burst_trigger.fetch_add(1, Relaxed);
    }

    /// Fault injection for tests and experiments: the next buffer's render
    /// busy-waits `ns` nanoseconds before it starts working.
    pub fn inject_stall(&self, ns: u64) {
        self.stall_ns.store(ns, Relaxed);
    }

    #[inline]
    pub(crate) fn take_stall(&self) -> u64 {
        if self.stall_ns.load(Relaxed) == 0 {
            0
        } else {
            self.stall_ns.swap(0, Relaxed)
        }
    }

    /// Fault injection for tests and experiments: in the next cycle, worker
    /// `worker` (1 = the first worker thread) hangs for `ns` nanoseconds while
    /// it holds a chunk, as a thread that is descheduled or blocked would. The
    /// driver stops waiting for it at the buffer's deadline plus a margin and
    /// marks the buffers it misses as incomplete. A worker number the engine
    /// does not have is ignored.
    pub fn inject_worker_hang(&self, worker: usize, ns: u64) {
        self.hang_ns.store(ns, Relaxed);
        // Release/Acquire: the driver that takes the worker sees its duration.
        self.hang_worker.store(worker, Release);
    }

    /// The pending worker hang, if any, taken so it happens once.
    #[inline]
    pub(crate) fn take_worker_hang(&self) -> Option<(usize, u64)> {
        if self.hang_worker.load(Relaxed) == 0 {
            return None;
        }
        let worker = self.hang_worker.swap(0, Acquire);
        let ns = self.hang_ns.load(Relaxed);
        (worker > 0 && ns > 0).then_some((worker, ns))
    }

    #[inline]
    pub(crate) fn snapshot(&self) -> ControlSnapshot {
        ControlSnapshot {
            sines: self.sines.load(Relaxed),
            burst_sines: self.burst_sines.load(Relaxed),
            burst_trigger: self.burst_trigger.load(Relaxed),
            min_load: f64::from(self.min_load_ppm.load(Relaxed)) / 1_000_000.0,
            kernel: if self.kernel.load(Relaxed) == 1 {
                Kernel::Fast
            } else {
                Kernel::Reference
            },
            chunk_size: self.chunk_size.load(Relaxed).max(1),
            driver_spin_ns: self.driver_spin_ns.load(Relaxed),
        }
    }
}
