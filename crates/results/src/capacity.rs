//! The result of `xrunlab capacity` (kind [`KIND`] in the experiments' envelope): VoiceMark
//! per buffer size and preset (the largest dropout-free sine count, with the confirmation
//! repeats' load and wake-up distributions kept whole as HdrHistograms), LatencyMark per
//! preset and the burst response. Written by the lab crate, read by `compare` and `report`, on
//! the main thread.

use crate::lab::Params;
use crate::run::RunHistograms;
use serde::{Deserialize, Serialize};
use xrunlab_engine::Preset;

/// The experiment's kind.
pub const KIND: &str = "capacity";

/// One engine run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Sustained sines.
    pub sines: usize,
    /// Burst sines (burst trials).
    pub burst_sines: usize,
    /// Frames per buffer (as the device ran it).
    pub buffer: u32,
    /// Sample rate (as the device ran it).
    pub sample_rate: u32,
    /// Buffers judged (after the settling time).
    pub buffers: u64,
    /// Of which dropouts (late, incomplete or device xrun).
    pub dropouts: u64,
    /// Highest render time as % of the buffer duration.
    pub max_load_pct: f64,
}

impl Trial {
    /// Ran and had no dropout.
    pub fn clean(&self) -> bool {
        self.buffers > 0 && self.dropouts == 0
    }
}

/// Min, median and max of some repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Largest.
    pub max: f64,
}

/// Burst response at one buffer size and preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstFigure {
    /// Steady sines (the --burst-load share of the capacity).
    pub steady_sines: usize,
    /// The largest burst (extra sines for 0.25 s) that caused no dropout.
    pub largest_burst_sines: usize,
    /// Trials of the search.
    pub trials: Vec<Trial>,
}

/// VoiceMark at one buffer size and preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityPoint {
    /// Preset.
    pub preset: Preset,
    /// Frames per buffer.
    pub buffer: u32,
    /// Sample rate the device ran.
    pub sample_rate: u32,
    /// Real-time threads of the preset.
    pub realtime_threads: usize,
    /// The largest sine count that stayed dropout-free in the search and in every repeat.
    pub sines: usize,
    /// `sines` as a percentage of one core's single-thread capacity (`core_sines`).
    pub pct_of_one_core: f64,
    /// Highest count the search tried (the chord's maximum or 1.25x the threads' kernel
    /// capacity).
    pub search_ceiling: usize,
    /// The bracket width at which the search stopped.
    pub tolerance: usize,
    /// How often the confirmation saw a dropout and stepped down by `tolerance` (after a few
    /// it gives up and `sines` is 0).
    pub step_downs: usize,
    /// The repeats at `sines`.
    pub repeats: Vec<Trial>,
    /// Spread of the repeats' highest load (% of the buffer duration).
    pub max_load_pct_spread: Option<Spread>,
    /// Search trials, in order.
    pub trials: Vec<Trial>,
    /// Burst response at this point.
    pub burst: Option<BurstFigure>,
    /// The repeats' buffers at `sines` together: load and driver and worker wake-up latency,
    /// as `run` keeps them; `None` when no count was confirmed.
    pub histograms: Option<RunHistograms>,
}

impl CapacityPoint {
    /// No search trial had a dropout: the count is the search ceiling's (less one bracket at
    /// most), and the capacity may be higher.
    pub fn limited_by_ceiling(&self) -> bool {
        self.sines > 0 && self.trials.iter().all(Trial::clean)
    }

    /// The point's settings in words: "standard 256 frames".
    pub fn label(&self) -> String {
        format!("{} {} frames", self.preset.name(), self.buffer)
    }
}

/// LatencyMark for one preset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// Preset.
    pub preset: Preset,
    /// Load carried.
    pub sines: usize,
    /// The smallest buffer without a dropout; `None` when even 4096 frames dropped out.
    pub smallest_buffer: Option<u32>,
    /// Its latency in ms at the rate.
    pub latency_ms: Option<f64>,
    /// Trials, in order.
    pub trials: Vec<Trial>,
}

/// The result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// Sines one core renders in real time with the engine's kernel at each buffer size,
    /// measured before the trials on the caller's thread: (buffer, sines).
    pub core_sines: Vec<(u32, f64)>,
    /// VoiceMark per buffer and preset.
    pub points: Vec<CapacityPoint>,
    /// LatencyMark per preset.
    pub latency: Vec<LatencyPoint>,
    /// True when stopped before everything ran.
    pub stopped_early: bool,
}
