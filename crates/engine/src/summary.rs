//! Run statistics: accumulates per-buffer reports into the figures a run summary shows (load and wake-up percentiles, dropouts, work shares, CPUs visited, migrations); runs on the collector (control) thread.

use crate::report::BufferReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// Percentiles of a sample set (exact: computed from all samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum: the spike a listener hears, which an average hides.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Percentiles of `samples` (nearest-rank). Reorders the slice. Linear
    /// time (selection, not a sort), so that a checkpoint of a long run stays
    /// cheap for the thread that also drains the rings.
    pub fn of(samples: &mut [f64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        let n = samples.len();
        let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        let (i50, i99) = (rank(0.50), rank(0.99));
        let mean = samples.iter().sum::<f64>() / n as f64;
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, |m, v| {
            if v.total_cmp(&m).is_gt() {
                v
            } else {
                m
            }
        });
        let p99 = *samples.select_nth_unstable_by(i99, f64::total_cmp).1;
        // Everything before i99 is now at most p99, so the median is among them.
        let p50 = *samples[..=i99]
            .select_nth_unstable_by(i50, f64::total_cmp)
            .1;
        Percentiles {
            count: n,
            p50,
            p99,
            max,
            mean,
        }
    }
}

/// One audio thread over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadSummary {
    /// 0 = driver, 1.. = workers.
    pub index: usize,
    /// Buffers this thread reported.
    pub buffers: u64,
    /// Share of all active sines processed, in percent.
    pub share_pct: f64,
    /// Active sines processed over the run.
    pub sines: u64,
    /// CPUs it ran on (at start or end of its work), with the number of buffers seen there.
    pub cpus: BTreeMap<i16, u64>,
    /// CPU changes seen between or within its buffers (observed migrations).
    pub observed_migrations: u64,
    /// Period start to running, in microseconds.
    pub wake_latency_us: Percentiles,
    /// Thread CPU time for the real work, in milliseconds over the run.
    pub cpu_time_ms: f64,
    /// Buffers this worker had not finished its part of when the driver
    /// stopped waiting (or was still busy with an earlier one).
    pub unfinished_buffers: u64,
}

/// Everything the run summary shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Buffers rendered.
    pub buffers: u64,
    /// Buffers that were a dropout (late render, incomplete render or device xrun).
    pub dropouts: u64,
    /// Renders that ended after their deadline.
    pub late_renders: u64,
    /// Renders that lack a worker's part: the worker had not finished by the
    /// deadline plus a margin, or was still busy with an earlier buffer (the
    /// buffer is then silent). `threads[].unfinished_buffers` names the workers.
    pub incomplete_renders: u64,
    /// Buffers marked with a device (server) xrun.
    pub buffers_with_device_xrun: u64,
    /// Server xruns attributed to the buffers (several may fall in one buffer).
    pub server_xruns: u64,
    /// Render duration in percent of the buffer duration.
    pub load_pct: Percentiles,
    /// Driver wake-up latency (period start to driver running), microseconds.
    pub driver_wake_latency_us: Percentiles,
    /// Worker wake-up latency over all workers, microseconds.
    pub worker_wake_latency_us: Percentiles,
    /// Per-thread figures, driver first.
    pub threads: Vec<ThreadSummary>,
    /// Buffers whose thread records did not all arrive although every thread
    /// finished (a ring was full); incomplete renders are counted apart.
    pub incomplete_buffers: u64,
    /// Peak input level when input was on.
    pub input_peak: Option<f32>,
    /// The server's own DSP load (percent) over the buffers, for devices with a server.
    pub server_load_pct: Option<Percentiles>,
    /// Average active sines.
    pub mean_active_sines: f64,
    /// Buffers during a burst.
    pub burst_buffers: u64,
    /// Audio time covered, in seconds.
    pub audio_seconds: f64,
}

#[derive(Debug, Default)]
struct ThreadAcc {
    buffers: u64,
    sines: u64,
    cpus: BTreeMap<i16, u64>,
    last_cpu: Option<i16>,
    migrations: u64,
    wake_us: Vec<f64>,
    cpu_ns: u64,
    unfinished: u64,
}

/// Accumulates [`BufferReport`]s.
#[derive(Debug, Default)]
pub struct RunStats {
    buffers: u64,
    dropouts: u64,
    late: u64,
    incomplete_renders: u64,
    device_xruns: u64,
    server_xruns: u64,
    incomplete: u64,
    loads: Vec<f64>,
    driver_wake_us: Vec<f64>,
    worker_wake_us: Vec<f64>,
    server_loads: Vec<f64>,
    threads: BTreeMap<usize, ThreadAcc>,
    total_active: u64,
    expected_threads: usize,
    input_peak: Option<f32>,
    burst_buffers: u64,
    audio_ns: f64,
}

impl RunStats {
    /// Empty statistics; `expected_threads` is the number of audio threads that report per buffer.
    pub fn new(expected_threads: usize) -> Self {
        Self {
            expected_threads,
            ..Self::default()
        }
    }

    /// Adds one buffer.
    pub fn add(&mut self, b: &BufferReport) {
        self.buffers += 1;
        self.dropouts += u64::from(b.dropout());
        self.late += u64::from(b.late);
        self.device_xruns += u64::from(b.device_xrun);
        self.server_xruns += u64::from(b.server_xruns);
        if b.incomplete() {
            self.incomplete_renders += 1;
            for index in b.unfinished_threads() {
                self.threads.entry(index).or_default().unfinished += 1;
            }
        }
        self.burst_buffers += u64::from(b.burst);
        self.audio_ns += b.buffer_ns();
        self.loads.push(b.load() * 100.0);
        self.driver_wake_us
            .push(b.driver_wake_latency_ns() as f64 / 1e3);
        self.total_active += u64::from(b.active_sines);
        if b.threads.len() < self.expected_threads && !b.incomplete() {
            self.incomplete += 1;
        }
        if let Some(l) = b.server_load_pct {
            self.server_loads.push(f64::from(l));
        }
        if let Some(p) = b.input_peak {
            self.input_peak = Some(self.input_peak.map_or(p, |q| q.max(p)));
        }
        for t in &b.threads {
            let acc = self.threads.entry(t.index).or_default();
            acc.buffers += 1;
            acc.sines += u64::from(t.sines);
            acc.cpu_ns += t.cpu_ns;
            for cpu in [t.cpu_start, t.cpu_end] {
                if cpu < 0 {
                    continue;
                }
                if acc.last_cpu.is_some_and(|last| last != cpu) {
                    acc.migrations += 1;
                }
                acc.last_cpu = Some(cpu);
            }
            if t.cpu_start >= 0 {
                *acc.cpus.entry(t.cpu_start).or_default() += 1;
            }
            if t.cpu_end >= 0 && t.cpu_end != t.cpu_start {
                *acc.cpus.entry(t.cpu_end).or_default() += 1;
            }
            let wake_us = t.wake_latency_ns as f64 / 1e3;
            acc.wake_us.push(wake_us);
            if t.index > 0 {
                self.worker_wake_us.push(wake_us);
            }
        }
    }

    /// Buffers so far.
    pub fn buffers(&self) -> u64 {
        self.buffers
    }

    /// Dropouts so far.
    pub fn dropouts(&self) -> u64 {
        self.dropouts
    }

    /// Incomplete renders so far.
    pub fn incomplete_renders(&self) -> u64 {
        self.incomplete_renders
    }

    /// The summary of everything added (the accumulated samples are kept).
    pub fn summary(&self) -> Summary {
        let total_sines: u64 = self.threads.values().map(|t| t.sines).sum();
        let threads = self
            .threads
            .iter()
            .map(|(&index, t)| ThreadSummary {
                index,
                buffers: t.buffers,
                share_pct: if total_sines == 0 {
                    0.0
                } else {
                    t.sines as f64 * 100.0 / total_sines as f64
                },
                sines: t.sines,
                cpus: t.cpus.clone(),
                observed_migrations: t.migrations,
                wake_latency_us: Percentiles::of(&mut t.wake_us.clone()),
                cpu_time_ms: t.cpu_ns as f64 / 1e6,
                unfinished_buffers: t.unfinished,
            })
            .collect();
        Summary {
            buffers: self.buffers,
            dropouts: self.dropouts,
            late_renders: self.late,
            incomplete_renders: self.incomplete_renders,
            buffers_with_device_xrun: self.device_xruns,
            server_xruns: self.server_xruns,
            load_pct: Percentiles::of(&mut self.loads.clone()),
            driver_wake_latency_us: Percentiles::of(&mut self.driver_wake_us.clone()),
            worker_wake_latency_us: Percentiles::of(&mut self.worker_wake_us.clone()),
            threads,
            incomplete_buffers: self.incomplete,
            input_peak: self.input_peak,
            server_load_pct: (!self.server_loads.is_empty())
                .then(|| Percentiles::of(&mut self.server_loads.clone())),
            mean_active_sines: if self.buffers == 0 {
                0.0
            } else {
                self.total_active as f64 / self.buffers as f64
            },
            burst_buffers: self.burst_buffers,
            audio_seconds: self.audio_ns / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p99, p.max, p.count), (50.0, 99.0, 100.0, 100));
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
        // Shuffled input (a fixed permutation: 37 is coprime with 1000) gives the same ranks.
        let mut v: Vec<f64> = (0..1000u32).map(|i| f64::from(i * 37 % 1000)).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p99, p.max, p.mean), (499.0, 989.0, 999.0, 499.5));
        let p = Percentiles::of(&mut [7.0]);
        assert_eq!((p.p50, p.p99, p.max), (7.0, 7.0, 7.0));
    }
}
