//! Run statistics: accumulates per-buffer reports into the figures a run summary shows (load and
//! wake-up percentiles, dropouts, work shares, CPUs visited, migrations); runs on the collector
//! (control) thread.

use crate::report::BufferReport;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Significant decimal digits the percentile histograms keep. With 3, every recorded value
/// lands in a bucket no wider than 1/1024 of it, so a percentile is within 0.1 % of the exact one.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Figures of a sample set: count, p50, p99, p99.9, max and mean.
///
/// From a run ([`RunStats`], [`Distribution`]) the percentiles come from a bounded
/// HdrHistogram with [`SIGNIFICANT_DIGITS`] = 3: each is the exact nearest-rank percentile
/// to within 0.1 % of it plus half a recording step above, and half a step below (steps:
/// 0.001 % for load, 1 ns for wake-ups); never above `max`; values past a [`Scale`]'s range
/// count at its bound. `count`, `max` and `mean` are exact.
/// [`Percentiles::of`] computes exact nearest-rank percentiles from a slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum: the spike a listener hears, which an average hides. Exact.
    pub max: f64,
    /// Mean. Exact (a running sum).
    pub mean: f64,
}

impl Percentiles {
    /// Exact percentiles of `samples` (nearest-rank). Sorts the slice.
    pub fn of(samples: &mut [f64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_by(f64::total_cmp);
        let rank = |p: f64| samples[nearest_rank(p, samples.len() as u64) as usize - 1];
        Percentiles {
            count: samples.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            p999: rank(0.999),
            max: samples[samples.len() - 1],
            mean: samples.iter().sum::<f64>() / samples.len() as f64,
        }
    }
}

/// The 1-based nearest rank of quantile `p` among `n` samples.
fn nearest_rank(p: f64, n: u64) -> u64 {
    ((p * n as f64).ceil() as u64).clamp(1, n)
}

/// What a [`Distribution`] records and in which steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Percent, recorded in 0.001 % steps; percentiles track up to 100,000 % (a render a
    /// thousand buffers long), beyond which samples count at that bound (max stays exact).
    Percent,
    /// Microseconds, recorded in 1 ns steps; percentiles track up to 10 s, beyond which samples
    /// count at that bound (max stays exact).
    Micros,
}

impl Scale {
    /// Histogram units per reported unit.
    pub const fn units_per_value(self) -> f64 {
        match self {
            Scale::Percent | Scale::Micros => 1000.0,
        }
    }

    /// Highest value the histogram tracks, in its units.
    const fn highest_units(self) -> u64 {
        match self {
            Scale::Percent => 100_000_000,
            Scale::Micros => 10_000_000_000,
        }
    }
}

/// A stream of samples kept in fixed memory: an HdrHistogram (allocated once, never resized:
/// about 150 kB on the percent scale, 200 kB on the microsecond scale, of which only the pages
/// holding recorded values become resident) for the percentiles, and an exact count, sum and
/// maximum. See [`Percentiles`] for the precision.
#[derive(Clone)]
pub struct Distribution {
    scale: Scale,
    hist: Histogram<u64>,
    count: u64,
    sum: f64,
    max: f64,
}

impl fmt::Debug for Distribution {
    // The histogram's thousands of counters say nothing in a debug print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distribution")
            .field("scale", &self.scale)
            .field("count", &self.count)
            .field("max", &self.max)
            .field("sum", &self.sum)
            .finish()
    }
}

impl Distribution {
    /// An empty distribution of values on `scale`.
    pub fn new(scale: Scale) -> Distribution {
        // Both scales' bounds are constants that the tests construct, so this cannot fail at run time.
        let hist = Histogram::new_with_bounds(1, scale.highest_units(), SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        Distribution {
            scale,
            hist,
            count: 0,
            sum: 0.0,
            max: f64::NEG_INFINITY,
        }
    }

    /// Adds one sample (percent or microseconds, as the scale says). A value that is not
    /// finite is not a measurement and is skipped; a negative one counts as 0 in percentiles.
    pub fn record(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += value;
        self.max = self.max.max(value);
        // `as` saturates: negatives become 0, anything past u64 the bound.
        let units = (value * self.scale.units_per_value()).round() as u64;
        self.hist.saturating_record(units);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The scale its values are on.
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// The histogram behind the percentiles, in the scale's units ([`Scale::units_per_value`]
    /// per reported unit), for result files that keep the whole distribution.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Counters the histogram holds: fixed when it is made, whatever is recorded.
    pub fn histogram_slots(&self) -> usize {
        self.hist.distinct_values()
    }

    /// The figures so far (all zero when empty).
    pub fn percentiles(&self) -> Percentiles {
        if self.count == 0 {
            return Percentiles::default();
        }
        let at = |q: f64| {
            // The bucket's highest value can lie above the exact maximum; the maximum is exact.
            (self.hist.value_at_quantile(q) as f64 / self.scale.units_per_value()).min(self.max)
        };
        Percentiles {
            count: usize::try_from(self.count).unwrap_or(usize::MAX),
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
            max: self.max,
            mean: self.sum / self.count as f64,
        }
    }
}

/// One audio thread over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[derive(Debug)]
struct ThreadAcc {
    buffers: u64,
    sines: u64,
    /// One entry per CPU the thread was seen on: bounded by the machine's CPUs.
    cpus: BTreeMap<i16, u64>,
    last_cpu: Option<i16>,
    migrations: u64,
    wake_us: Distribution,
    cpu_ns: u64,
    unfinished: u64,
}

impl ThreadAcc {
    fn new() -> ThreadAcc {
        ThreadAcc {
            buffers: 0,
            sines: 0,
            cpus: BTreeMap::new(),
            last_cpu: None,
            migrations: 0,
            wake_us: Distribution::new(Scale::Micros),
            cpu_ns: 0,
            unfinished: 0,
        }
    }
}

/// Accumulates [`BufferReport`]s in memory that does not grow with the number of buffers
/// (histograms, counters and one entry per audio thread), so a run can go on for days; what
/// is kept per buffer goes to the CSV file, not here.
#[derive(Debug)]
pub struct RunStats {
    buffers: u64,
    dropouts: u64,
    late: u64,
    incomplete_renders: u64,
    device_xruns: u64,
    server_xruns: u64,
    incomplete: u64,
    loads: Distribution,
    driver_wake_us: Distribution,
    worker_wake_us: Distribution,
    server_loads: Distribution,
    /// One entry per audio thread index.
    threads: BTreeMap<usize, ThreadAcc>,
    total_active: u64,
    expected_threads: usize,
    input_peak: Option<f32>,
    burst_buffers: u64,
    audio_ns: f64,
}

impl Default for RunStats {
    /// Empty statistics expecting no particular number of threads per buffer.
    fn default() -> Self {
        Self::new(0)
    }
}

impl RunStats {
    /// Empty statistics; `expected_threads` is the number of audio threads that report per buffer.
    pub fn new(expected_threads: usize) -> Self {
        Self {
            buffers: 0,
            dropouts: 0,
            late: 0,
            incomplete_renders: 0,
            device_xruns: 0,
            server_xruns: 0,
            incomplete: 0,
            loads: Distribution::new(Scale::Percent),
            driver_wake_us: Distribution::new(Scale::Micros),
            worker_wake_us: Distribution::new(Scale::Micros),
            server_loads: Distribution::new(Scale::Percent),
            threads: BTreeMap::new(),
            total_active: 0,
            expected_threads,
            input_peak: None,
            burst_buffers: 0,
            audio_ns: 0.0,
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
                self.threads
                    .entry(index)
                    .or_insert_with(ThreadAcc::new)
                    .unfinished += 1;
            }
        }
        self.burst_buffers += u64::from(b.burst);
        self.audio_ns += b.buffer_ns();
        self.loads.record(b.load() * 100.0);
        self.driver_wake_us
            .record(b.driver_wake_latency_ns() as f64 / 1e3);
        self.total_active += u64::from(b.active_sines);
        if b.threads.len() < self.expected_threads && !b.incomplete() {
            self.incomplete += 1;
        }
        if let Some(l) = b.server_load_pct {
            self.server_loads.record(f64::from(l));
        }
        if let Some(p) = b.input_peak {
            self.input_peak = Some(self.input_peak.map_or(p, |q| q.max(p)));
        }
        for t in &b.threads {
            let acc = self.threads.entry(t.index).or_insert_with(ThreadAcc::new);
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
            acc.wake_us.record(wake_us);
            if t.index > 0 {
                self.worker_wake_us.record(wake_us);
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

    /// Render load in percent of the buffer, per buffer.
    pub fn load_pct(&self) -> &Distribution {
        &self.loads
    }

    /// Driver wake-up latency in microseconds, per buffer.
    pub fn driver_wake_latency_us(&self) -> &Distribution {
        &self.driver_wake_us
    }

    /// Worker wake-up latency in microseconds, per worker and buffer.
    pub fn worker_wake_latency_us(&self) -> &Distribution {
        &self.worker_wake_us
    }

    /// The summary of everything added so far; adding can go on after it.
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
                wake_latency_us: t.wake_us.percentiles(),
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
            load_pct: self.loads.percentiles(),
            driver_wake_latency_us: self.driver_wake_us.percentiles(),
            worker_wake_latency_us: self.worker_wake_us.percentiles(),
            threads,
            incomplete_buffers: self.incomplete,
            input_peak: self.input_peak,
            server_load_pct: (self.server_loads.count() > 0)
                .then(|| self.server_loads.percentiles()),
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
    use crate::report::ThreadReport;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!(
            (p.p50, p.p99, p.p999, p.max, p.count),
            (500.0, 990.0, 999.0, 1000.0, 1000)
        );
        assert_eq!(p.mean, 500.5);
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
        // Shuffled input (a fixed permutation: 37 is coprime with 1000) gives the same ranks.
        let mut v: Vec<f64> = (0..1000u32).map(|i| f64::from(i * 37 % 1000)).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p99, p.max, p.mean), (499.0, 989.0, 999.0, 499.5));
        let p = Percentiles::of(&mut [7.0]);
        assert_eq!((p.p50, p.p99, p.max), (7.0, 7.0, 7.0));
    }

    /// `n` samples of a log-uniform distribution over [lo, hi], in a scrambled order (a fixed
    /// stride through the ranks), so percentiles over five decades are known exactly.
    fn log_uniform(n: u64, lo: f64, hi: f64) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let rank = (i * 7919) % n;
                let u = (rank as f64 + 0.5) / n as f64;
                lo * (hi / lo).powf(u)
            })
            .collect()
    }

    /// The stated precision: above the exact value by at most 1/1024 (< 0.1 %) of it plus half
    /// a recording step (1/1000 of the reported unit), below it by at most half a step.
    fn assert_within_precision(what: &str, got: f64, exact: f64) {
        let half_step = 0.5 / 1000.0;
        let slack = 1e-9 * exact.abs().max(1.0);
        let above = (exact + half_step) * (1.0 + 1.0 / 1024.0);
        assert!(
            got >= exact - half_step - slack && got <= above + slack,
            "{what}: histogram {got} vs exact {exact}"
        );
    }

    #[test]
    fn histogram_percentiles_agree_with_exact_ones_within_the_stated_precision() {
        for (scale, lo, hi) in [
            (Scale::Percent, 0.01, 5_000.0),
            (Scale::Micros, 0.5, 2_000_000.0),
        ] {
            let samples = log_uniform(200_003, lo, hi);
            let mut d = Distribution::new(scale);
            for &x in &samples {
                d.record(x);
            }
            let exact = Percentiles::of(&mut samples.clone());
            let got = d.percentiles();
            assert_eq!(got.count, exact.count, "{scale:?} count");
            assert_eq!(got.max, exact.max, "{scale:?}: the maximum is exact");
            assert!(
                (got.mean - exact.mean).abs() <= 1e-9 * exact.mean,
                "{scale:?}: mean {} vs exact {}",
                got.mean,
                exact.mean
            );
            assert_within_precision("p50", got.p50, exact.p50);
            assert_within_precision("p99", got.p99, exact.p99);
            assert_within_precision("p99.9", got.p999, exact.p999);
            // Not trivially equal: the histogram really quantizes.
            assert_ne!(got.p50, exact.p50, "{scale:?}: p50 is quantized");
        }
    }

    #[test]
    fn histograms_have_the_documented_size() {
        // 8-byte counters: about 150 kB on the percent scale, 200 kB on the microsecond scale.
        let bytes = |scale| Distribution::new(scale).histogram_slots() * 8;
        assert!(
            (140_000..=160_000).contains(&bytes(Scale::Percent)),
            "{}",
            bytes(Scale::Percent)
        );
        assert!(
            (190_000..=210_000).contains(&bytes(Scale::Micros)),
            "{}",
            bytes(Scale::Micros)
        );
    }

    #[test]
    fn small_sets_and_spikes_keep_exact_maxima() {
        let mut d = Distribution::new(Scale::Micros);
        assert_eq!(d.percentiles(), Percentiles::default());
        for x in [1.25, 2.0, 0.75] {
            d.record(x);
        }
        // Below 2048 steps (2.048 us) the histogram is exact.
        let p = d.percentiles();
        assert_eq!((p.p50, p.p99, p.max, p.count), (1.25, 2.0, 2.0, 3));
        // A spike past the tracked range (10 s) counts at the bound in percentiles; max is exact.
        d.record(25e6);
        let p = d.percentiles();
        assert_eq!(p.max, 25e6);
        assert!(p.p999 >= 10e6 && p.p999 <= 25e6, "{p:?}");
        // Not a number is not a sample; a negative one does not panic and percentiles stay
        // at or below the exact maximum.
        d.record(f64::NAN);
        d.record(f64::INFINITY);
        assert_eq!(d.count(), 4);
        let mut neg = Distribution::new(Scale::Percent);
        neg.record(-1.0);
        assert_eq!((neg.percentiles().p50, neg.percentiles().max), (-1.0, -1.0));
    }

    fn report(seq: u64, threads: usize) -> BufferReport {
        BufferReport {
            record: crate::rt::records::BufferRecord {
                seq,
                frames: 32,
                period_start_ns: 1_000_000,
                deadline_ns: 1_666_666,
                driver_wake_ns: 1_010_000,
                render_start_ns: 1_010_000,
                render_end_ns: 1_300_000,
                active_sines: 100,
                ..Default::default()
            },
            sample_rate: 48_000,
            server_load_pct: Some(12.5),
            threads: (0..threads)
                .map(|index| ThreadReport {
                    index,
                    cpu_start: index as i16,
                    cpu_end: index as i16,
                    sines: 50,
                    computed: 50,
                    chunks: 2,
                    wake_latency_ns: 10_000,
                    busy_ns: 200_000,
                    cpu_ns: 190_000,
                })
                .collect(),
            ..BufferReport::default()
        }
    }

    impl RunStats {
        /// Everything RunStats holds that could grow: histogram counters, thread and CPU entries.
        fn footprint(&self) -> usize {
            let dists = [
                &self.loads,
                &self.driver_wake_us,
                &self.worker_wake_us,
                &self.server_loads,
            ];
            dists.iter().map(|d| d.histogram_slots()).sum::<usize>()
                + self
                    .threads
                    .values()
                    .map(|t| 1 + t.wake_us.histogram_slots() + t.cpus.len())
                    .sum::<usize>()
        }
    }

    #[test]
    fn run_stats_memory_does_not_grow_with_buffers() {
        let mut stats = RunStats::new(3);
        let mut b = report(0, 3);
        let mut warmed_up = 0;
        let mut longest_render_ns = 0;
        for seq in 0..1_000_000u64 {
            // By then every thread has been seen on both CPUs it will use.
            if seq == 2 {
                warmed_up = stats.footprint();
            }
            // Varied values over the whole tracked range, including spikes past it.
            b.seq = seq;
            let render_ns = (seq * 7919) % 40_000_000;
            longest_render_ns = longest_render_ns.max(render_ns);
            b.render_end_ns = b.render_start_ns + render_ns;
            b.driver_wake_ns = b.period_start_ns + (seq * 104_729) % 20_000_000_000;
            b.server_load_pct = Some((seq % 1000) as f32 / 10.0);
            for t in &mut b.threads {
                t.wake_latency_ns = (seq * 31 + t.index as u64) % 5_000_000;
                t.cpu_start = (seq % 2) as i16;
            }
            stats.add(&b);
        }
        assert_eq!(stats.buffers(), 1_000_000);
        assert_eq!(
            stats.footprint(),
            warmed_up,
            "histograms and entries are the same size after 1e6 buffers as after two"
        );
        let s = stats.summary();
        assert_eq!(s.load_pct.count, 1_000_000);
        assert_eq!(s.worker_wake_latency_us.count, 2_000_000);
        assert_eq!(s.threads.len(), 3);
        assert_eq!(s.threads[1].wake_latency_us.count, 1_000_000);
        // The maximum is exact: the longest render over a 32-frame buffer at 48 kHz.
        let longest_load_pct = longest_render_ns as f64 / b.buffer_ns().max(1.0) * 100.0;
        assert_eq!(s.load_pct.max, longest_load_pct);
        assert_eq!(s.server_load_pct.map(|p| p.max), Some(99.9f32 as f64));
    }
}
