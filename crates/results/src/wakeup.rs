//! The result of `xrunlab probe wakeup` (kind [`KIND`] in the experiments' envelope): per
//! measuring thread the scheduling it obtained, its latency figures, cyclictest's 1 µs buckets
//! and every latency as HdrHistogram text, the engine's load beside it, and the machine
//! fingerprint. Written by the lab crate, read by `compare` and `report`, on the main thread.

use crate::histogram::EncodedHistogram;
use crate::lab::{parse_lab, LabResult, Params, SchedObtained};
use crate::read::ReadError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use xrunlab_sys::{Fingerprint, Outcome};

pub use crate::lab::SCHEMA;
/// The experiment's kind.
pub const KIND: &str = "probe.wakeup";

/// What one thread's latencies say, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Smallest latency (exact).
    pub min_us: f64,
    /// Mean latency (exact).
    pub avg_us: f64,
    /// Median (bucket resolution: 1 µs; the bucket's lower edge).
    pub p50_us: f64,
    /// 99th percentile (1 µs resolution; the cap when it lies in the overflow).
    pub p99_us: f64,
    /// 99.9th percentile (as p99).
    pub p999_us: f64,
    /// Largest latency (exact).
    pub max_us: f64,
    /// Samples at or above the cap.
    pub overflows: u64,
}

/// One thread's latencies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadLatency {
    /// 0-based, as cyclictest numbers them.
    pub index: usize,
    /// Kernel thread id.
    pub tid: i32,
    /// The CPU it was pinned to, if any.
    pub cpu: Option<usize>,
    /// Scheduling obtained.
    pub sched: SchedObtained,
    /// Figures in µs.
    pub latency: LatencySummary,
    /// Counts per 1 µs bucket, from 0 µs up to the cap.
    pub histogram: Vec<u64>,
    /// Every latency in µs (overflows included, 1 ns steps) as HdrHistogram interchange text,
    /// for `compare` and other HdrHistogram readers.
    pub latency_us: EncodedHistogram,
    /// Loop numbers of the first overflows.
    pub overflow_cycles: Vec<u64>,
}

/// What the engine did while it ran beside the probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    /// Sines it rendered.
    pub sines: usize,
    /// Buffers it rendered.
    pub buffers: u64,
    /// Dropouts meanwhile.
    pub dropouts: u64,
    /// Load p50 in percent of the buffer.
    pub load_p50_pct: Option<f64>,
}

/// The probe's result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WakeupResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// The machine as the probe found it (steal time over the probe), as `run` records it.
    pub fingerprint: Fingerprint,
    /// One entry per thread.
    pub threads: Vec<ThreadLatency>,
    /// The engine beside the probe, if it ran.
    pub load: Option<LoadReport>,
    /// PM QoS outcome.
    pub pm_qos: Outcome,
    /// mlockall outcome.
    pub mlock: Outcome,
    /// True when the stop flag ended it before every loop ran.
    pub stopped_early: bool,
}

/// A `probe wakeup` file as read back.
pub type WakeupFile = LabResult<WakeupResult>;

/// Reads `text` (from `path`) as a probe-wakeup result; an experiment of another kind is
/// refused naming the field `kind`.
pub fn parse_wakeup(path: &Path, text: &str) -> Result<WakeupFile, ReadError> {
    parse_lab(path, text, KIND)
}
