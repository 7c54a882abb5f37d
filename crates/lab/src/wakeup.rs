//! `probe wakeup`: cyclictest-grade timer latency. N measuring threads each sleep to absolute
//! CLOCK_MONOTONIC deadlines one interval apart and record how late they woke into a preallocated
//! histogram; the caller's thread shows progress, polls the stop flag and optionally drives the
//! audio engine at a load meanwhile.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, LabError};
use crate::hist::Histogram;
use crate::table::Table;
use crate::timing::{mono_ns, sleep_until, Class};
use serde::Serialize;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Engine, EngineConfig, RunStats};
use xrunlab_results::EncodedHistogram;
use xrunlab_sys::{Fingerprint, Outcome};

/// Threads allowed.
pub const THREADS_RANGE: (usize, usize) = (1, 256);
/// Interval allowed, in µs.
pub const INTERVAL_US_RANGE: (u64, u64) = (10, 10_000_000);
/// Histogram cap allowed, in µs.
pub const HISTOGRAM_US_RANGE: (usize, usize) = (1, 1_000_000);

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct WakeupParams {
    /// Measuring threads.
    pub threads: usize,
    /// Their scheduling class.
    pub class: Class,
    /// Time between deadlines.
    pub interval: Duration,
    /// Deadlines per thread.
    pub loops: u64,
    /// Pin thread i to `cpus[i % len]`, as cyclictest -a does.
    pub cpus: Option<Vec<usize>>,
    /// Hold /dev/cpu_dma_latency at 0 µs (cyclictest does by default).
    pub pm_qos: bool,
    /// mlockall before measuring.
    pub mlock: bool,
    /// Run the audio engine on the simulated device with this many sines meanwhile.
    pub with_load: Option<usize>,
    /// Histogram buckets (1 µs each); later wake-ups count as overflows.
    pub histogram_us: usize,
}

impl WakeupParams {
    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        self.validate_on(xrunlab_sys::default_sys_root())
    }

    /// [`WakeupParams::validate`] with sysfs at `sys_root` (a fixture tree in tests).
    pub fn validate_on(&self, sys_root: &std::path::Path) -> Result<(), LabError> {
        check_range(
            "--threads",
            self.threads,
            THREADS_RANGE.0,
            THREADS_RANGE.1,
            "",
        )?;
        let us = self.interval.as_micros() as u64;
        check_range(
            "--interval",
            us,
            INTERVAL_US_RANGE.0,
            INTERVAL_US_RANGE.1,
            " µs (10us..=10s)",
        )?;
        check_range("--loops", self.loops, 1, u64::MAX / 2, "")?;
        check_range(
            "--histogram",
            self.histogram_us,
            HISTOGRAM_US_RANGE.0,
            HISTOGRAM_US_RANGE.1,
            " µs",
        )?;
        if let Class::Fifo { priority } | Class::Rr { priority } = self.class {
            check_range("--priority", priority, 1, 99, "")?;
        }
        if let Some(cpus) = &self.cpus {
            let usable = xrunlab_sys::usable_cpus(sys_root);
            if let Some(bad) = cpus.iter().find(|c| !usable.cpus.contains(c)) {
                return Err(crate::error::invalid("--cpus", bad, &usable.what));
            }
        }
        if let Some(n) = self.with_load {
            let mut c = EngineConfig {
                sines: n,
                ..EngineConfig::default()
            };
            c.burst_sines = 0;
            c.validate()
                .map_err(|e| crate::error::invalid("--with-load", &e.value, &e.allowed))?;
        }
        Ok(())
    }
}

pub use xrunlab_results::wakeup::{LoadReport, ThreadLatency, KIND};

/// The probe's result, with its parameters.
pub type WakeupResult = xrunlab_results::wakeup::WakeupResult<WakeupParams>;

/// Runs the probe. Each thread's histogram is allocated before the barrier that starts measuring.
pub fn run(p: &WakeupParams, ctx: &Ctx) -> Result<WakeupResult, LabError> {
    p.validate()?;
    let proc_root = xrunlab_sys::default_proc_root();
    let mut fingerprint = Fingerprint::collect(proc_root, xrunlab_sys::default_sys_root());
    let mlock = if p.mlock {
        xrunlab_sys::lock_memory()
    } else {
        Outcome::NotRequested
    };
    let (_qos_guard, pm_qos) = if p.pm_qos {
        xrunlab_sys::hold_cpu_dma_latency(std::path::Path::new("/dev/cpu_dma_latency"), 0)
    } else {
        (None, Outcome::NotRequested)
    };
    let mut engine = match p.with_load {
        Some(sines) => {
            let mut c = EngineConfig {
                sines,
                ..EngineConfig::default()
            };
            c.burst_sines = 0;
            let dev = SimDevice::new(c.sample_rate, c.buffer_frames, false);
            let threads = c.realtime_threads();
            Some((
                Engine::start(c, Box::new(dev)).map_err(LabError::engine_start)?,
                RunStats::new(threads),
            ))
        }
        None => None,
    };

    let interval_ns = p.interval.as_nanos() as u64;
    let stop = AtomicBool::new(false);
    let done: Vec<AtomicU64> = (0..p.threads).map(|_| AtomicU64::new(0)).collect();
    let barrier = Barrier::new(p.threads + 1);
    start_progress(ctx, p.loops * p.threads as u64, "wakeup");
    let mut stopped_early = false;
    let threads = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.threads)
            .map(|i| {
                let cpu = p.cpus.as_ref().map(|c| c[i % c.len()]);
                let (barrier, stop, done) = (&barrier, &stop, &done[i]);
                let (loops, cap, class) = (p.loops, p.histogram_us, p.class);
                s.spawn(move || {
                    let sched = class.apply(cpu.as_ref().map(std::slice::from_ref));
                    let mut hist = Histogram::new(cap);
                    barrier.wait();
                    measure(&mut hist, interval_ns, loops, stop, done);
                    ThreadLatency {
                        index: i,
                        tid: sched.tid,
                        cpu,
                        sched,
                        latency: hist.summary(),
                        histogram: hist.buckets().to_vec(),
                        latency_us: EncodedHistogram::encode(hist.distribution()),
                        overflow_cycles: hist.overflow_cycles().to_vec(),
                    }
                })
            })
            .collect();
        barrier.wait();
        // The background load, drained until every measuring thread is done; a stop asks
        // them to end early, and the loop goes on until they have.
        let mut sink = xrunlab_engine::hooks(
            |_: &xrunlab_engine::BufferReport| {},
            |_: &mut Load<'_>, _t, _last| {
                ctx.progress
                    .set_position(done.iter().map(|d| d.load(Ordering::Relaxed)).sum());
                if !stopped_early && ctx.stopped() {
                    stopped_early = true;
                    stop.store(true, Ordering::Relaxed);
                }
                if handles.iter().all(|h| h.is_finished()) {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        );
        xrunlab_engine::drain_loop(
            &mut Load(&mut engine),
            xrunlab_engine::Span::Open,
            || false,
            &mut sink,
        );
        handles
            .into_iter()
            .map(|h| h.join().expect("a measuring thread panicked"))
            .collect::<Vec<_>>()
    });
    ctx.progress.finish_and_clear();
    let load = engine.map(|(e, mut stats)| {
        let sines = e.config().sines;
        e.stop(|b| stats.add(b));
        let s = stats.summary();
        LoadReport {
            sines,
            buffers: stats.buffers(),
            dropouts: stats.dropouts(),
            load_p50_pct: (s.buffers > 0).then_some(s.load_pct.p50),
        }
    });
    let stopped_early = stopped_early || threads.iter().any(|t| t.latency.count < p.loops);
    fingerprint.finish(proc_root);
    Ok(WakeupResult {
        params: p.clone(),
        fingerprint,
        threads,
        load,
        pm_qos,
        mlock,
        stopped_early,
    })
}

/// The measuring loop: absolute deadlines `interval_ns` apart, latency = wake time - deadline.
/// Allocation-free; a deadline already past when the thread wakes is skipped, as cyclictest does.
fn measure(
    hist: &mut Histogram,
    interval_ns: u64,
    loops: u64,
    stop: &AtomicBool,
    done: &AtomicU64,
) {
    let mut next = mono_ns() + interval_ns;
    for cycle in 0..loops {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        sleep_until(next);
        let now = mono_ns();
        hist.record(now.saturating_sub(next), cycle);
        done.store(cycle + 1, Ordering::Relaxed);
        next += interval_ns;
        while next <= now {
            next += interval_ns;
        }
    }
}

/// cyclictest's `-h` text of `r`: one line per bucket ("%06d %06lu\t%06lu..."), then totals,
/// min/avg/max per thread, overflows and the overflow cycles.
pub fn histogram_text(r: &WakeupResult) -> String {
    let mut out = String::from("# Histogram\n");
    let buckets = r.params.histogram_us;
    for us in 0..buckets {
        let _ = write!(out, "{us:06}");
        for (i, t) in r.threads.iter().enumerate() {
            let sep = if i == 0 { ' ' } else { '\t' };
            let _ = write!(out, "{sep}{:06}", t.histogram.get(us).copied().unwrap_or(0));
        }
        out.push('\n');
    }
    let line = |out: &mut String, title: &str, width: usize, f: &dyn Fn(&ThreadLatency) -> u64| {
        out.push_str(title);
        for t in &r.threads {
            let _ = write!(out, " {:0width$}", f(t));
        }
        out.push('\n');
    };
    line(&mut out, "# Total:", 9, &|t| {
        t.latency.count - t.latency.overflows
    });
    line(&mut out, "# Min Latencies:", 5, &|t| {
        t.latency.min_us as u64
    });
    line(&mut out, "# Avg Latencies:", 5, &|t| {
        t.latency.avg_us.round() as u64
    });
    line(&mut out, "# Max Latencies:", 5, &|t| {
        t.latency.max_us as u64
    });
    line(&mut out, "# Histogram Overflows:", 5, &|t| {
        t.latency.overflows
    });
    out.push_str("# Histogram Overflow at cycle number:\n");
    for t in &r.threads {
        let _ = write!(out, "# Thread {}:", t.index);
        for c in &t.overflow_cycles {
            let _ = write!(out, " {c:05}");
        }
        let others = t
            .latency
            .overflows
            .saturating_sub(t.overflow_cycles.len() as u64);
        if others > 0 {
            let _ = write!(out, " # {others:05} others");
        }
        out.push('\n');
    }
    out
}

impl Experiment for WakeupResult {
    const KIND: &'static str = KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "thread",
            "tid",
            "cpu",
            "sched",
            "loops",
            "min_us",
            "avg_us",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "overflows",
        ]);
        for th in &self.threads {
            let l = &th.latency;
            t.push(vec![
                th.index.to_string(),
                th.tid.to_string(),
                th.cpu.map(|c| c.to_string()).unwrap_or_default(),
                th.sched.requested.clone(),
                l.count.to_string(),
                format!("{:.3}", l.min_us),
                format!("{:.3}", l.avg_us),
                format!("{:.0}", l.p50_us),
                format!("{:.0}", l.p99_us),
                format!("{:.0}", l.p999_us),
                format!("{:.3}", l.max_us),
                l.overflows.to_string(),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = format!(
            "wake-up latency: {} thread(s), {}, interval {:?}, {} loops each\n",
            self.threads.len(),
            self.params.class.label(),
            self.params.interval,
            self.params.loops
        );
        out.push_str(
            "thread  cpu   loops     min     avg     p50     p99   p99.9     max  overflows (µs)\n",
        );
        for t in &self.threads {
            let l = &t.latency;
            let _ = writeln!(
                out,
                "T{:<5} {:>4} {:>7} {:>7.1} {:>7.1} {:>7.0} {:>7.0} {:>7.0} {:>7.1} {:>10}",
                t.index,
                t.cpu.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
                l.count,
                l.min_us,
                l.avg_us,
                l.p50_us,
                l.p99_us,
                l.p999_us,
                l.max_us,
                l.overflows
            );
        }
        if let Some(l) = &self.load {
            let _ = writeln!(
                out,
                "engine beside it: {} sines, {} buffers, {} dropouts, load p50 {}",
                l.sines,
                l.buffers,
                l.dropouts,
                l.load_p50_pct
                    .map(|v| format!("{v:.1} %"))
                    .unwrap_or_else(|| "-".into())
            );
        }
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .threads
            .iter()
            .filter_map(|t| t.sched.warning(&format!("thread {}", t.index)))
            .collect();
        for (what, o) in [
            ("PM QoS (/dev/cpu_dma_latency)", &self.pm_qos),
            ("mlockall", &self.mlock),
        ] {
            match o {
                Outcome::Refused { reason, fallback } => {
                    w.push(format!("{what} refused ({reason}); {fallback}"))
                }
                Outcome::Unsupported { reason } => w.push(format!("{what}: {reason}")),
                _ => {}
            }
        }
        w
    }

    fn incomplete(&self) -> bool {
        self.stopped_early
    }
}

/// The background load of a wakeup run, when it has one: its engine drained into its
/// statistics by the one drain loop ([`xrunlab_engine::drain_loop`]).
struct Load<'a>(&'a mut Option<(Engine, RunStats)>);

impl xrunlab_engine::DrainSource for Load<'_> {
    fn drain_into(&mut self, each: &mut dyn FnMut(&xrunlab_engine::BufferReport)) -> usize {
        match self.0.as_mut() {
            Some((e, stats)) => e.drain(|b| {
                stats.add(b);
                each(b);
            }),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(cpus: Vec<usize>) -> WakeupParams {
        WakeupParams {
            threads: 1,
            class: Class::Other { nice: 0 },
            interval: Duration::from_millis(1),
            loops: 10,
            cpus: Some(cpus),
            pm_qos: false,
            mlock: false,
            with_load: None,
            histogram_us: 1000,
        }
    }

    #[test]
    fn without_a_cpu_list_in_sysfs_cpus_are_checked_against_the_affinity_and_the_error_says_why() {
        // A container's view: no devices/system/cpu at all.
        let sys = tempfile::tempdir().unwrap();
        let allowed = xrunlab_sys::sched::allowed_cpus().expect("sched_getaffinity");
        params(vec![allowed[0]])
            .validate_on(sys.path())
            .expect("a CPU this process may use is accepted");
        let e = params(vec![4095])
            .validate_on(sys.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid value '4095' for --cpus")
                && e.contains(&format!(
                    "the CPUs this process may run on, {}",
                    xrunlab_sys::format_cpu_list(&allowed)
                ))
                && e.contains("lists no online CPU")
                && e.contains("sched_getaffinity"),
            "{e}"
        );

        // With sysfs, its online list decides, as before.
        let cpu = sys.path().join("devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-1\n").unwrap();
        params(vec![1]).validate_on(sys.path()).unwrap();
        let e = params(vec![2])
            .validate_on(sys.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("allowed online CPUs 0-1"), "{e}");
    }
}
