//! The result file of `xrunlab run` (schema [`SCHEMA`]): provenance, machine fingerprint,
//! settings, summary, the whole distributions, device counters and end reason, written by the
//! binary's `run` and read back by `compare` and `report`. Built and read on the main thread.

use crate::histogram::EncodedHistogram;
use serde::{Deserialize, Serialize};
use xrunlab_engine::{ChordInfo, DeviceInfo, EngineConfig, RunStats, Summary};
use xrunlab_sys::{Fingerprint, Provenance};

/// Version of this file's layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.run/2";

/// What the engine computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The DSP kernel's name.
    pub kernel: String,
    /// Sines played.
    pub sines: usize,
    /// Extra sines during a burst.
    pub burst_sines: usize,
    /// AudioPerfLab's chord, played once per physical core, and xrunlab's own extra copies.
    pub chord: ChordInfo,
}

/// The device's own counters at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceCounters {
    /// Xruns the server reported.
    pub server_xruns: u64,
    /// Periods the device skipped after late renders.
    pub skipped_periods: u64,
    /// The server's own DSP load (percent, smoothed by the server) at the end.
    pub server_dsp_load_pct: Option<f32>,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndOfRun {
    /// Why the run ended (for a checkpoint: that the run was still going).
    pub reason: String,
    /// False when the run ended through a failure.
    pub ok: bool,
    /// True while the file is a checkpoint of a run that had not ended when it was written.
    pub checkpoint: bool,
}

/// Something scripted that happened during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the run started.
    pub t_s: f64,
    /// What was injected, e.g. "burst".
    pub kind: String,
}

/// The run's distributions kept whole, per buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHistograms {
    /// Render load in percent of the buffer.
    pub load_pct: EncodedHistogram,
    /// Driver wake-up latency, microseconds.
    pub driver_wake_latency_us: EncodedHistogram,
    /// Worker wake-up latency over all workers, microseconds.
    pub worker_wake_latency_us: EncodedHistogram,
}

impl RunHistograms {
    /// The histograms of `stats` so far.
    pub fn of(stats: &RunStats) -> RunHistograms {
        RunHistograms {
            load_pct: EncodedHistogram::encode(stats.load_pct()),
            driver_wake_latency_us: EncodedHistogram::encode(stats.driver_wake_latency_us()),
            worker_wake_latency_us: EncodedHistogram::encode(stats.worker_wake_latency_us()),
        }
    }
}

/// A run's result. `D` holds the sections only the writer and the report page read in full
/// (scheduling, system, `--explain`, `--trace`): the binary writes its own type there;
/// readers use [`RunFile`], which skips them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult<D> {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where the result came from.
    pub provenance: Provenance,
    /// What the machine was set up like.
    pub fingerprint: Fingerprint,
    /// The preset the settings started from.
    pub preset: String,
    /// The engine's settings.
    pub config: EngineConfig,
    /// The device as it ran.
    pub device: DeviceInfo,
    /// What was computed.
    pub workload: Workload,
    /// The figures.
    pub summary: Summary,
    /// The distributions behind the summary's percentiles.
    pub histograms: RunHistograms,
    /// The device's counters.
    pub device_counters: DeviceCounters,
    /// Records lost because a ring was full.
    pub ring_drops: u64,
    /// Scripted events.
    pub events: Vec<Event>,
    /// How the run ended.
    pub end: EndOfRun,
    /// The writer's further sections.
    #[serde(flatten)]
    pub details: D,
}

/// A run result as read back: the further sections are skipped.
pub type RunFile = RunResult<Skipped>;

impl<D> RunResult<D> {
    /// The typed core as a reader sees it (the writer's further sections dropped), for a
    /// writer that hands its own results on without reading them back.
    pub fn into_file(self) -> RunFile {
        RunResult {
            schema: self.schema,
            provenance: self.provenance,
            fingerprint: self.fingerprint,
            preset: self.preset,
            config: self.config,
            device: self.device,
            workload: self.workload,
            summary: self.summary,
            histograms: self.histograms,
            device_counters: self.device_counters,
            ring_drops: self.ring_drops,
            events: self.events,
            end: self.end,
            details: Skipped {},
        }
    }
}

/// Sections a reader does not look at; they may hold anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Skipped {}

/// The sections of the run file that `run` writes and only the report page reads in full:
/// the scheduling obtained, the system over the run, `--explain`'s cards and `--trace`'s file.
/// Written by the binary; [`RunFile`] reads a run file without them.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetails {
    /// What each thread obtained.
    pub scheduling: Scheduling,
    /// CPU topology, idle-state entries and sampled frequencies over the run; in the final
    /// file only (checkpoints leave it out).
    pub system: Option<xrunlab_sys::RunSystem>,
    /// `--explain`: the tracer, lost kernel events, card counts and top culprits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<xrunlab_engine::explain::ExplainReport>,
    /// `--explain`: the dropouts kept (the last `explain.max_kept`), each with its blame card.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropouts: Option<Vec<xrunlab_engine::explain::Dropout>>,
    /// `--trace`: what the Perfetto trace file holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceFileReport>,
}

/// The scheduling each thread obtained (see [`RunDetails`]).
#[derive(Debug, Clone, Serialize)]
pub struct Scheduling {
    /// The engine's threads and what each obtained.
    pub threads: Vec<xrunlab_engine::ThreadInfo>,
    /// Busy threads at the end of the run and the priority each obtained.
    pub busy_threads: Vec<xrunlab_engine::busy::BusyThreadInfo>,
    /// Share of time the busy threads spent working, in percent.
    pub busy_achieved_duty_pct: Option<f64>,
    /// The process's real-time settings (mlock, PM QoS...).
    pub process: xrunlab_engine::ProcessRt,
    /// Each thread's kernel counters over the run.
    pub os_stats: Vec<OsThreadStats>,
    /// What did not take effect, and what was used instead.
    pub warnings: Vec<String>,
}

/// Per-thread kernel counters over the run (deltas from /proc).
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // the counters' names say what they are (see /proc/PID/task/TID)
pub struct OsThreadStats {
    pub index: usize,
    pub tid: i32,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub runqueue_wait_ms: f64,
    pub run_ms: f64,
    pub kernel_migrations: Option<u64>,
    pub user_ms: f64,
    pub system_ms: f64,
}

/// What the trace file holds, for the result and the summary.
#[derive(Debug, Clone, Serialize)]
pub struct TraceFileReport {
    /// The trace file (or, when it stopped early, the in-progress file that holds what was written).
    pub path: std::path::PathBuf,
    /// Trace events written.
    pub events_written: u64,
    /// Events left out by `--trace-max-events` (dropout instants are never left out).
    pub events_dropped_by_cap: u64,
    /// Keep the slices of one buffer in this many.
    pub every_nth_buffer: u32,
    /// Kernel events that aged out of the tracer's window before the file got them.
    pub kernel_events_missed: u64,
    /// True when the file was closed as valid JSON and renamed into place.
    pub complete: bool,
    /// Why the trace stopped early (e.g. the disk filled up).
    pub warning: Option<String>,
}
