//! The result of the `probe explain-cost` experiment (also `bench explain`'s JSON): what
//! `--explain` costs, measured side by side, as the lab crate writes it inside the experiments'
//! envelope (schema [`SCHEMA`], kind [`KIND`]) and as it is read back ([`parse_explain_cost`]).
//! Written and read on the main thread.

use crate::capacity::CapacityPoint;
use crate::read::ReadError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use xrunlab_engine::explain::trace::TraceInfo;
use xrunlab_engine::{EngineConfig, Preset};

/// The experiments' envelope schema (the same for every experiment; [`KIND`] tells them apart).
pub use crate::wakeup::SCHEMA;
/// The experiment's kind in the envelope.
pub const KIND: &str = "probe.explain-cost";

/// The kernel tracer's figures of one run with `--explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFigures {
    /// Kernel events decoded over the run (settling included).
    pub events: u64,
    /// Events per second of the tracer's life.
    pub events_per_s: f64,
    /// Events the kernel lost because a ring was full.
    pub lost: u64,
    /// CPU time of the tracer's reader thread, ms.
    pub reader_cpu_ms: f64,
    /// The same as a share of one CPU over the tracer's life, %.
    pub reader_cpu_pct: f64,
    /// Events by type.
    pub events_by_type: BTreeMap<String, u64>,
    /// Dropouts the collector saw.
    pub dropouts: u64,
    /// Blame cards it built.
    pub cards: u64,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// 1-based round.
    pub round: u32,
    /// Whether the explain collector ran.
    pub explain: bool,
    /// Buffers counted (after settling).
    pub buffers: u64,
    /// Of which dropouts.
    pub dropouts: u64,
    /// Load percentiles and mean, % of the buffer duration.
    pub load_p50_pct: f64,
    /// See `load_p50_pct`.
    pub load_p99_pct: f64,
    /// See `load_p50_pct`.
    pub load_mean_pct: f64,
    /// The tracer's figures, with `--explain`.
    pub kernel: Option<KernelFigures>,
}

/// The runs of one mode together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeFigures {
    /// Which mode.
    pub explain: bool,
    /// Runs in it.
    pub runs: usize,
    /// Mean of the runs' p50 load, %.
    pub load_p50_mean_pct: f64,
    /// Median of the runs' p50 load, %.
    pub load_p50_median_pct: f64,
    /// Median of the runs' p99 load, %.
    pub load_p99_median_pct: f64,
    /// Dropouts over its runs.
    pub dropouts: u64,
    /// Mean kernel events per second, with `--explain`.
    pub events_per_s: Option<f64>,
    /// Events lost over the runs, with `--explain`.
    pub lost: Option<u64>,
    /// Mean share of one CPU the reader took, with `--explain`.
    pub reader_cpu_pct: Option<f64>,
}

/// What one recorded event costs the CPU it happens on: two threads pinned to one traced CPU
/// wake each other in turn (each round trip is 2 `sched_waking` and 2 `sched_switch` records),
/// timed with and without the tracer, interleaved. Less noisy than the load runs: it isolates
/// the kernel's per-event work from the rest of the machine's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCost {
    /// The CPU both threads ran on.
    pub cpu: usize,
    /// Round trips timed per sample.
    pub round_trips_per_sample: u32,
    /// Samples per mode.
    pub samples: usize,
    /// Median µs per round trip without the tracer.
    pub off_us_per_round_trip: f64,
    /// Median µs per round trip with it.
    pub on_us_per_round_trip: f64,
    /// Records the tracer counted per round trip (should be about 4).
    pub events_per_round_trip: f64,
    /// (on - off) / events per round trip, µs.
    pub us_per_event: f64,
    /// `us_per_event` times the load runs' events per second: the share of one CPU the kernel
    /// spends writing events, %. An estimate: only the events inside a render add to its load.
    pub cpu_pct_at_run_rate: Option<f64>,
}

/// The capacity search of one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityFigures {
    /// Which mode.
    pub explain: bool,
    /// The largest dropout-free sine count confirmed (0: none confirmed).
    pub sines: Option<usize>,
    /// The search, trial by trial.
    pub point: Option<CapacityPoint>,
    /// Why there is no figure (stopped, or a trial failed).
    pub error: Option<String>,
}

/// How it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainCostSettings {
    /// Load of the interleaved runs.
    pub sines: usize,
    /// Rounds (each one run per mode).
    pub rounds: u32,
    /// Counted length of each run.
    pub run_seconds: f64,
    /// Settling before counting.
    pub settle_seconds: f64,
    /// Frames per buffer.
    pub buffer_frames: u32,
    /// Thread layout.
    pub preset: Preset,
    /// Whether the capacity searches were asked for.
    pub capacity: bool,
    /// How long a capacity trial must stay dropout-free, s.
    pub capacity_trial_seconds: f64,
    /// Confirmation runs at the found count.
    pub capacity_repeats: usize,
    /// The search stops at 1/this of its ceiling.
    pub capacity_resolution: usize,
    /// Whether `--quick` settings were used.
    pub quick: bool,
}

/// The experiment's figures; rewritten after every run by `bench explain`, so an interrupted
/// bench keeps what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainCost {
    /// How it was measured.
    pub settings: ExplainCostSettings,
    /// The engine settings of every run (the capacity trials vary only the sine count).
    pub config: EngineConfig,
    /// What the tracer set up (from the first run with `--explain`).
    pub tracer: Option<TraceInfo>,
    /// Every run, in order.
    pub runs: Vec<RunFigures>,
    /// The runs without the collector together.
    pub without_explain: Option<ModeFigures>,
    /// The runs with it together.
    pub with_explain: Option<ModeFigures>,
    /// Relative increase of the mean p50 load with `--explain`, %.
    pub p50_increase_pct: Option<f64>,
    /// The same in load points (percent of the buffer duration).
    pub p50_increase_points: Option<f64>,
    /// Median over rounds of each round's relative p50 increase, %.
    pub p50_increase_paired_median_pct: Option<f64>,
    /// Standard error of the mean of the rounds' relative p50 increases, % (two rounds or
    /// more): how far the noise alone moves the comparison.
    pub p50_increase_paired_stderr_pct: Option<f64>,
    /// The target: at most this relative p50 increase, %.
    pub target_p50_increase_pct: f64,
    /// Whether the mean increase is within the target.
    pub target_met: Option<bool>,
    /// The kernel's cost per recorded event (see [`EventCost`]).
    pub event_cost: Option<EventCost>,
    /// Why the cost per event was not measured, when it was not.
    pub event_cost_error: Option<String>,
    /// The capacity searches, without then with the collector.
    pub capacity: Vec<CapacityFigures>,
    /// Relative change of the capacity with `--explain`, %.
    pub capacity_change_pct: Option<f64>,
    /// Whether every planned part ran.
    pub complete: bool,
}

/// The experiment's file as read back: the experiments' envelope around [`ExplainCost`].
pub type ExplainCostFile = crate::lab::LabResult<ExplainCost>;

/// Reads `text` (from `path`) as an explain-cost result; an experiment of another kind is
/// refused naming the field `kind`.
pub fn parse_explain_cost(path: &Path, text: &str) -> Result<ExplainCostFile, ReadError> {
    crate::lab::parse_lab(path, text, KIND)
}
