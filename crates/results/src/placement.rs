//! The result of `xrunlab probe placement` (kind [`KIND`] in the experiments' envelope): per
//! equal thread, when it finished, the CPUs it ran on, its migrations and run-queue delay, and
//! how long each buffer of its work took, kept whole as an HdrHistogram. Written by the lab
//! crate, read by `compare` and `report`, on the main thread.

use crate::histogram::EncodedHistogram;
use crate::lab::{Params, SchedObtained};
use serde::{Deserialize, Serialize};

/// The experiment's kind.
pub const KIND: &str = "probe.placement";

/// The CPU a thread was on from a moment on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CpuVisit {
    /// Milliseconds since the common start.
    pub t_ms: f64,
    /// The CPU.
    pub cpu: usize,
}

/// One thread's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlacedThread {
    /// 0-based index.
    pub index: usize,
    /// Kernel thread id.
    pub tid: i32,
    /// Scheduling obtained.
    pub sched: SchedObtained,
    /// Milliseconds from the common start to the end of its work (and of the injected stall).
    pub completion_ms: f64,
    /// Percent later than the median completion.
    pub behind_median_pct: f64,
    /// The CPUs it ran on, each change with its time (sampled once per buffer of work).
    pub visits: Vec<CpuVisit>,
    /// Distinct CPUs visited.
    pub cpus: Vec<usize>,
    /// CPU changes seen by sampling.
    pub observed_migrations: usize,
    /// Migrations the kernel counted (needs CONFIG_SCHED_DEBUG).
    pub kernel_migrations: Option<u64>,
    /// Time runnable but waiting for a CPU, ms (schedstat; `None` without it).
    pub runqueue_delay_ms: Option<f64>,
    /// Whether it is a straggler.
    pub straggler: bool,
    /// Whether it was the injected straggler.
    pub injected: bool,
    /// Wall time of each buffer of its work in µs (1 ns steps; preemption and migration
    /// included) as HdrHistogram interchange text.
    pub buffer_us: EncodedHistogram,
}

/// The probe's result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlacementResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// Per thread.
    pub threads: Vec<PlacedThread>,
    /// Median completion, ms.
    pub median_ms: f64,
    /// Last completion over the median, in percent (the story's "70 % later").
    pub spread_pct: f64,
    /// Indices of the stragglers.
    pub stragglers: Vec<usize>,
    /// True when stopped before the threads finished.
    pub stopped_early: bool,
}
