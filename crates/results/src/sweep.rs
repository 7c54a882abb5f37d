//! The results of `xrunlab sweep threads` ([`THREADS_KIND`]) and `xrunlab sweep buffer`
//! ([`BUFFER_KIND`]) in the experiments' envelope: per point the figures and the distributions
//! measured there, kept whole as HdrHistograms (the time of each unit of work for the thread
//! sweep; load and wake-up latency per buffer for the buffer sweep). Written by the lab crate,
//! read by `compare` and `report`, on the main thread.

use crate::histogram::EncodedHistogram;
use crate::lab::Params;
use crate::run::RunHistograms;
use serde::{Deserialize, Serialize};

/// The thread sweep's kind.
pub const THREADS_KIND: &str = "sweep.threads";
/// The buffer sweep's kind.
pub const BUFFER_KIND: &str = "sweep.buffer";

/// A workload of the thread sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The reference sine kernel; unit: partial-samples.
    Sine,
    /// zstd compression of generated text-like data; unit: input bytes.
    Zstd,
}

impl Workload {
    /// The name in results.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sine => "sine",
            Workload::Zstd => "zstd",
        }
    }

    /// What one unit of work is.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Sine => "partial-samples",
            Workload::Zstd => "bytes",
        }
    }
}

/// One thread count's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadsPoint {
    /// Workload.
    pub workload: Workload,
    /// Class asked for.
    pub class: String,
    /// Threads.
    pub threads: usize,
    /// Units per second, all threads together.
    pub throughput: f64,
    /// Throughput minus the previous count's.
    pub increment: f64,
    /// The increment as a percentage of one thread's throughput.
    pub increment_pct_of_one: f64,
    /// Microjoules per million units, where RAPL exists.
    pub energy_uj_per_munit: Option<f64>,
    /// Threads whose class was refused (they ran with what their warning says).
    pub refused: usize,
    /// Wall time of each step of work (a buffer of sines, or one zstd block) over all the
    /// threads, in µs (1 ns steps; preemption included), as HdrHistogram interchange text.
    pub step_us: EncodedHistogram,
}

impl ThreadsPoint {
    /// The point's settings in words: "sine other-nice0 x2".
    pub fn label(&self) -> String {
        format!("{} {} x{}", self.workload.name(), self.class, self.threads)
    }
}

/// One curve's knee.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Knee {
    /// Workload.
    pub workload: Workload,
    /// Class.
    pub class: String,
    /// The last count whose added thread still brought more than the knee percentage; `None`
    /// if every count did.
    pub knee_threads: Option<usize>,
}

/// The thread sweep's result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadsResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// Online CPUs.
    pub cpus: usize,
    /// Finished points.
    pub points: Vec<ThreadsPoint>,
    /// Per workload and class.
    pub knees: Vec<Knee>,
    /// "RAPL" or why energy is not available.
    pub energy: String,
    /// The zstd data decompressed back to its input before the sweep.
    pub zstd_roundtrip_verified: bool,
    /// Warnings gathered from the threads.
    pub sched_warnings: Vec<String>,
    /// True when stopped before every point ran.
    pub stopped_early: bool,
}

/// One audio thread's share of the CPU over a point, like a `pidstat -t` line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// 0 = driver, 1.. = workers.
    pub index: usize,
    /// "driver" or "worker".
    pub role: String,
    /// Kernel thread id.
    pub tid: i32,
    /// The policy the kernel reports for it, e.g. "SCHED_FIFO 70".
    pub sched: String,
    /// User CPU time as % of the wall time (as pidstat's %usr). The kernel charges each clock
    /// tick to user or system as it finds the thread, so the split is sampled, not exact.
    pub user_pct: f64,
    /// System CPU time as % of the wall time (as pidstat's %system).
    pub system_pct: f64,
    /// Time on a CPU from schedstat as % of the wall time (ns resolution); `None` without
    /// schedstat.
    pub run_pct: Option<f64>,
    /// Voluntary context switches per second (the thread blocked: a wake-up each).
    pub voluntary_per_s: f64,
    /// Involuntary context switches per second (preempted).
    pub involuntary_per_s: f64,
}

/// One buffer size's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferPoint {
    /// Frames per buffer.
    pub buffer: u32,
    /// Sample rate.
    pub sample_rate: u32,
    /// Seconds measured.
    pub seconds: f64,
    /// Buffers rendered per second (the driver's wake-ups).
    pub buffers_per_s: f64,
    /// What the clock asks for: rate / frames.
    pub expected_buffers_per_s: f64,
    /// Buffers with a dropout (late, incomplete or device xrun).
    pub dropouts: u64,
    /// Buffers measured.
    pub buffers: u64,
    /// Sum over the audio threads of user + system CPU %.
    pub cpu_pct: f64,
    /// Sum over the audio threads of user CPU %.
    pub user_pct: f64,
    /// Sum over the audio threads of system CPU %.
    pub system_pct: f64,
    /// CPU time of the audio threads per buffer in µs (`cpu_pct` spread over the buffers):
    /// what one wake-up of the engine costs, work included.
    pub cpu_us_per_buffer: f64,
    /// Sum over the audio threads of schedstat run time %, when schedstat exists.
    pub run_pct: Option<f64>,
    /// Sum over the audio threads of voluntary switches per second.
    pub voluntary_per_s: f64,
    /// Package power in watts from RAPL; `None` when not available.
    pub package_watts: Option<f64>,
    /// Per thread.
    pub threads: Vec<ThreadCpu>,
    /// The measured buffers' load and driver and worker wake-up latency, as `run` keeps them.
    pub histograms: RunHistograms,
}

impl BufferPoint {
    /// The point's settings in words: "256 frames".
    pub fn label(&self) -> String {
        format!("{} frames", self.buffer)
    }
}

/// The buffer sweep's result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// Finished points.
    pub points: Vec<BufferPoint>,
    /// "RAPL" or why energy is not available.
    pub energy: String,
    /// Threads whose real-time class did not take effect, and what they ran with.
    pub sched_warnings: Vec<String>,
    /// True when stopped before every point ran.
    pub stopped_early: bool,
}
