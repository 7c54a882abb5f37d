//! `sweep threads`: throughput against thread count (1 to 2x the CPUs) and scheduling class for two
//! workloads, the sine kernel and zstd compression, with the increment each added thread brings,
//! energy per unit of work where RAPL exists, and the knee; the measuring threads run the work, the
//! caller's thread runs the points in turn, shows progress and polls the stop flag.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, LabError};
use crate::table::Table;
use crate::timing::{mono_ns, Class};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Barrier;
use std::time::Duration;
use xrunlab_dsp::{render, smoothing_coeff, Chord, ChordLayout, ChordNotes, Kernel, PartialBank};
use xrunlab_engine::{Distribution, Scale};
use xrunlab_results::histogram::merged;
use xrunlab_results::EncodedHistogram;

/// Bytes of generated data one zstd unit compresses.
pub const ZSTD_BLOCK: usize = 256 * 1024;
/// zstd level used.
pub const ZSTD_LEVEL: i32 = 3;

pub use xrunlab_results::sweep::{Knee, ThreadsPoint, Workload, THREADS_KIND};

/// What to sweep.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsParams {
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Classes.
    pub classes: Vec<Class>,
    /// Largest thread count (counts go 1..=max).
    pub max_threads: usize,
    /// Wall time per point.
    pub per_point: Duration,
    /// The knee: the first count whose added thread brings less than this percentage of one thread's throughput.
    pub knee_pct: f64,
}

impl ThreadsParams {
    /// Every class, both workloads, 1..=2x CPUs, 1 s per point.
    pub fn full() -> ThreadsParams {
        ThreadsParams {
            workloads: vec![Workload::Sine, Workload::Zstd],
            classes: vec![
                Class::Other { nice: 0 },
                Class::Other { nice: 19 },
                Class::Batch,
                Class::Idle,
                Class::Fifo { priority: 10 },
            ],
            max_threads: 2 * xrunlab_sys::online_cpu_count(),
            per_point: Duration::from_secs(1),
            knee_pct: 10.0,
        }
    }

    /// Both workloads at SCHED_OTHER nice 0 and SCHED_IDLE, 200 ms per point.
    pub fn quick() -> ThreadsParams {
        ThreadsParams {
            classes: vec![Class::Other { nice: 0 }, Class::Idle],
            per_point: Duration::from_millis(200),
            ..ThreadsParams::full()
        }
    }

    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        check_range("--max-threads", self.max_threads, 1, 256, "")?;
        check_range(
            "--per-point",
            self.per_point.as_millis() as u64,
            50,
            60_000,
            " ms (50ms..=60s)",
        )?;
        check_range("--knee-pct", self.knee_pct, 0.0, 100.0, " %")?;
        Ok(())
    }
}

/// The sweep's result, with its parameters.
pub type ThreadsResult = xrunlab_results::sweep::ThreadsResult<ThreadsParams>;

/// Generated, moderately compressible data: words picked by a fixed xorshift sequence.
pub fn generated_data(len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "sine ", "buffer ", "dropout ", "wake ", "latency ", "core ", "thread ", "energy ",
        "0.25 ", "48000 ", "128\n", "partial ",
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

/// Compresses `data` and decompresses it again; true when it comes back unchanged. The error
/// is zstd's (through `std::io`, as the zstd crate reports it).
pub fn zstd_roundtrip(data: &[u8]) -> std::io::Result<bool> {
    let packed = zstd::bulk::compress(data, ZSTD_LEVEL)?;
    let unpacked = zstd::bulk::decompress(&packed, data.len())?;
    Ok(unpacked == data)
}

/// Runs the sweep.
pub fn run(p: &ThreadsParams, ctx: &Ctx) -> Result<ThreadsResult, LabError> {
    p.validate()?;
    let data = generated_data(ZSTD_BLOCK);
    let verified = zstd_roundtrip(&data).map_err(|source| LabError::Io {
        context: "zstd failed".into(),
        source,
    })?;
    let mut rapl = xrunlab_sys::RaplMeter::open(xrunlab_sys::default_sys_root());
    let energy = match &rapl {
        Ok(_) => "RAPL".to_string(),
        Err(e) => e.to_string(),
    };
    let total = p.workloads.len() * p.classes.len() * p.max_threads;
    start_progress(ctx, total as u64, "threads");
    let mut points: Vec<ThreadsPoint> = Vec::new();
    let mut sched_warnings = Vec::new();
    let mut stopped_early = false;
    'all: for &w in &p.workloads {
        for &class in &p.classes {
            let mut one = 0.0;
            let mut previous = 0.0;
            for n in 1..=p.max_threads {
                if ctx.stopped() {
                    stopped_early = true;
                    break 'all;
                }
                ctx.progress
                    .set_message(format!("{} {} x{n}", w.name(), class.label()));
                let e0 = rapl.as_mut().ok().and_then(|m| m.read_uj().ok());
                let (units, secs, warnings, step_us) = point(w, class, n, p.per_point, &data);
                let e1 = rapl.as_mut().ok().and_then(|m| m.read_uj().ok());
                let refused = warnings.len();
                for line in warnings {
                    if !sched_warnings.contains(&line) {
                        sched_warnings.push(line);
                    }
                }
                let throughput = units as f64 / secs;
                if n == 1 {
                    one = throughput;
                }
                let increment = throughput - previous;
                previous = throughput;
                points.push(ThreadsPoint {
                    workload: w,
                    class: class.label(),
                    threads: n,
                    throughput,
                    increment,
                    increment_pct_of_one: if one > 0.0 {
                        increment / one * 100.0
                    } else {
                        0.0
                    },
                    energy_uj_per_munit: e0
                        .zip(e1)
                        .filter(|_| units > 0)
                        .map(|(a, b)| b.saturating_sub(a) as f64 / units as f64 * 1e6),
                    refused,
                    step_us,
                });
                ctx.progress.inc(1);
            }
        }
    }
    ctx.progress.finish_and_clear();
    let knees = knees(p, &points);
    Ok(ThreadsResult {
        params: p.clone(),
        cpus: xrunlab_sys::online_cpu_count(),
        points,
        knees,
        energy,
        zstd_roundtrip_verified: verified,
        sched_warnings,
        stopped_early,
    })
}

/// `n` threads of workload `w` at `class` for `wall`: total units, seconds, class warnings,
/// and the time of each step of work over all the threads.
fn point(
    w: Workload,
    class: Class,
    n: usize,
    wall: Duration,
    data: &[u8],
) -> (u64, f64, Vec<String>, EncodedHistogram) {
    let barrier = Barrier::new(n);
    let wall_ns = wall.as_nanos() as u64;
    type Finished = (u64, u64, u64, Option<String>, Distribution);
    let results: Vec<Finished> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let applied = class.apply(None);
                    let warning = applied.warning(&format!("thread {i}"));
                    let mut job = Job::new(w, data);
                    // Fixed bounds: recording never allocates.
                    let mut steps = Distribution::new(Scale::Micros);
                    barrier.wait();
                    let start = mono_ns();
                    let end = start + wall_ns;
                    let (mut units, mut t) = (0, start);
                    while t < end {
                        units += job.step();
                        let now = mono_ns();
                        steps.record(now.saturating_sub(t) as f64 / 1000.0);
                        t = now;
                    }
                    (units, start, t, warning, steps)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sweep thread panicked"))
            .collect()
    });
    let start = results.iter().map(|r| r.1).min().unwrap_or(0);
    let end = results.iter().map(|r| r.2).max().unwrap_or(start + 1);
    let units = results.iter().map(|r| r.0).sum();
    // Distributions of one scale have one set of bounds, so they always add.
    let steps = match merged(results.iter().map(|r| r.4.histogram())) {
        Ok(Some(h)) => EncodedHistogram::of(&h, Scale::Micros),
        _ => EncodedHistogram::encode(&Distribution::new(Scale::Micros)),
    };
    let warnings = results.into_iter().filter_map(|r| r.3).collect();
    (units, (end - start).max(1) as f64 / 1e9, warnings, steps)
}

/// One thread's workload state.
enum Job<'a> {
    Sine {
        bank: PartialBank,
        coeff: f32,
        l: Vec<f32>,
        r: Vec<f32>,
    },
    Zstd {
        data: &'a [u8],
        out: Vec<u8>,
        compressor: zstd::bulk::Compressor<'static>,
    },
}

impl<'a> Job<'a> {
    fn new(w: Workload, data: &'a [u8]) -> Job<'a> {
        match w {
            Workload::Sine => {
                let chord =
                    Chord::with_capacity_for(48_000, ChordLayout::single(ChordNotes::Apl), 64);
                let mut bank = PartialBank::new(&chord);
                let n = 64.min(bank.len());
                bank.amp[..n].copy_from_slice(&bank.full_amp[..n]);
                bank.set_active(0, n);
                Job::Sine {
                    bank,
                    coeff: smoothing_coeff(48_000),
                    l: vec![0.0; 128],
                    r: vec![0.0; 128],
                }
            }
            Workload::Zstd => Job::Zstd {
                data,
                out: Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len())),
                compressor: zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("zstd level 3 is valid"),
            },
        }
    }

    /// One unit batch; returns the units done.
    fn step(&mut self) -> u64 {
        match self {
            Job::Sine { bank, coeff, l, r } => {
                let n = bank.len().min(64);
                let stats = render(Kernel::Reference, bank.view_mut(0, n), *coeff, l, r);
                stats.computed as u64 * l.len() as u64
            }
            Job::Zstd {
                data,
                out,
                compressor,
            } => {
                out.clear();
                match compressor.compress_to_buffer(data, out) {
                    Ok(_) => data.len() as u64,
                    Err(_) => 0,
                }
            }
        }
    }
}

fn knees(p: &ThreadsParams, points: &[ThreadsPoint]) -> Vec<Knee> {
    let mut out = Vec::new();
    for &w in &p.workloads {
        for class in &p.classes {
            let label = class.label();
            let curve: Vec<&ThreadsPoint> = points
                .iter()
                .filter(|q| q.workload == w && q.class == label)
                .collect();
            if curve.is_empty() {
                continue;
            }
            let knee_threads = curve
                .iter()
                .find(|q| q.threads > 1 && q.increment_pct_of_one < p.knee_pct)
                .map(|q| q.threads - 1);
            out.push(Knee {
                workload: w,
                class: label,
                knee_threads,
            });
        }
    }
    out
}

impl Experiment for ThreadsResult {
    const KIND: &'static str = THREADS_KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "workload",
            "unit",
            "class",
            "threads",
            "throughput_per_s",
            "increment_per_s",
            "increment_pct_of_one",
            "energy_uj_per_munit",
        ]);
        for q in &self.points {
            t.push(vec![
                q.workload.name().into(),
                q.workload.unit().into(),
                q.class.clone(),
                q.threads.to_string(),
                format!("{:.0}", q.throughput),
                format!("{:.0}", q.increment),
                format!("{:.1}", q.increment_pct_of_one),
                crate::table::cell(q.energy_uj_per_munit),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = format!(
            "throughput against threads ({} CPUs online); energy: {}\n",
            self.cpus, self.energy
        );
        out.push_str(
            "workload class         threads   throughput/s   increment  (% of one thread)\n",
        );
        for q in &self.points {
            let _ = writeln!(
                out,
                "{:<8} {:<13} {:>7} {:>14.4e} {:>11.3e}  ({:+.0} %)",
                q.workload.name(),
                q.class,
                q.threads,
                q.throughput,
                q.increment,
                q.increment_pct_of_one
            );
        }
        for k in &self.knees {
            let _ = writeln!(
                out,
                "knee {} {}: {}",
                k.workload.name(),
                k.class,
                match k.knee_threads {
                    Some(n) => format!(
                        "{n} thread(s); the next added less than {} % of one thread",
                        self.params.knee_pct
                    ),
                    None => "none: every added thread still helped".into(),
                }
            );
        }
        let _ = writeln!(
            out,
            "zstd round trip verified: {}",
            self.zstd_roundtrip_verified
        );
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.sched_warnings.clone();
        if !self.energy.starts_with("RAPL") {
            w.push(format!("energy per unit of work: {}", self.energy));
        }
        w
    }

    fn incomplete(&self) -> bool {
        self.stopped_early
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zstd_workload_output_decompresses_to_its_input() {
        let data = generated_data(ZSTD_BLOCK);
        assert_eq!(data.len(), ZSTD_BLOCK);
        let mut job = Job::new(Workload::Zstd, &data);
        assert_eq!(job.step(), ZSTD_BLOCK as u64);
        let Job::Zstd { out, .. } = &job else {
            unreachable!()
        };
        assert!(
            out.len() < data.len() / 2,
            "generated data compresses: {} bytes",
            out.len()
        );
        let back = zstd::bulk::decompress(out, data.len()).unwrap();
        assert_eq!(back, data, "the compressed unit decompresses to its input");
        assert!(zstd_roundtrip(&data).unwrap());
    }
}
