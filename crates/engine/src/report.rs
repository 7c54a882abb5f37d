//! Per-buffer reports assembled from the record rings, as the collector (a control thread) hands
//! them to sinks: CSV rows, statistics, the dashboard.

use crate::rt::records::BufferRecord;
use serde::Serialize;

/// Role of an audio thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadRole {
    /// The device's driver thread.
    Driver,
    /// An engine processing thread.
    Worker,
}

/// One thread's part in one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThreadReport {
    /// 0 = driver, 1.. = workers.
    pub index: usize,
    /// CPU at the start of its work (-1 unknown).
    pub cpu_start: i16,
    /// CPU at the end of its work.
    pub cpu_end: i16,
    /// Active sines it processed.
    pub sines: u32,
    /// Partials it computed, including fading ones.
    pub computed: u32,
    /// Chunks it claimed.
    pub chunks: u32,
    /// Period start to the moment it ran, in ns.
    pub wake_latency_ns: u64,
    /// Its real work, from running to done, in ns.
    pub busy_ns: u64,
    /// Thread CPU time for its real work, in ns.
    pub cpu_ns: u64,
}

/// One buffer with every thread's part: the driver's record of it, and what the collector
/// adds (its epoch, the rate, the server's xruns and load, each thread's part). The record's
/// fields read through the report (`report.seq`, `report.late`), so they are written once, in
/// [`BufferRecord`]. (`Default` is all zeros: a base for fixtures.)
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BufferReport {
    /// Audio start this buffer belongs to (a restart begins a new epoch).
    pub epoch: u32,
    /// The buffer as the driver recorded it.
    #[serde(flatten)]
    pub record: BufferRecord,
    /// Sample rate.
    pub sample_rate: u32,
    /// The device reported an xrun during this buffer.
    pub device_xrun: bool,
    /// Server xruns attributed to this buffer (`device_xrun` is `server_xruns > 0`).
    pub server_xruns: u32,
    /// The server's own DSP load in percent (its smoothed average, sampled
    /// when this buffer was collected), for devices with a server.
    pub server_load_pct: Option<f32>,
    /// Each thread's part (driver first); a thread whose record was dropped is missing.
    pub threads: Vec<ThreadReport>,
}

impl std::ops::Deref for BufferReport {
    type Target = BufferRecord;

    fn deref(&self) -> &BufferRecord {
        &self.record
    }
}

impl std::ops::DerefMut for BufferReport {
    fn deref_mut(&mut self) -> &mut BufferRecord {
        &mut self.record
    }
}

impl BufferReport {
    /// Buffer duration in ns.
    pub fn buffer_ns(&self) -> f64 {
        f64::from(self.frames) * 1e9 / f64::from(self.sample_rate.max(1))
    }

    /// Render duration as a fraction of the buffer duration (1.0 = 100 %).
    pub fn load(&self) -> f64 {
        self.render_end_ns.saturating_sub(self.render_start_ns) as f64 / self.buffer_ns().max(1.0)
    }

    /// Late render, incomplete render or device xrun.
    pub fn dropout(&self) -> bool {
        self.late || self.device_xrun || self.incomplete()
    }

    /// Part of the output is missing: a worker did not finish in time (or
    /// was still busy with an earlier buffer, which makes this one silent).
    pub fn incomplete(&self) -> bool {
        self.unfinished_workers != 0
    }

    /// Thread indexes (as in [`ThreadReport::index`]) of the workers that did not finish.
    pub fn unfinished_threads(&self) -> impl Iterator<Item = usize> {
        let mask = self.unfinished_workers;
        (0..64usize)
            .filter(move |i| mask & (1u64 << i) != 0)
            .map(|i| i + 1)
    }

    /// Period start to driver running, in ns.
    pub fn driver_wake_latency_ns(&self) -> u64 {
        self.driver_wake_ns.saturating_sub(self.period_start_ns)
    }
}
