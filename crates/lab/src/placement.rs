//! `probe placement`: N equal threads start together (a barrier), each renders the same fixed
//! amount of sine-kernel work, and each records when it finished, which CPUs it ran on over time,
//! its migrations and its run-queue delay; threads finishing well after the median are flagged as
//! stragglers. The measuring threads run the work; the caller's thread waits, shows progress and
//! polls the stop flag.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, LabError};
use crate::table::Table;
use crate::timing::{mono_ns, Class, SchedObtained};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;
use xrunlab_dsp::{render, smoothing_coeff, Chord, ChordLayout, ChordNotes, Kernel, PartialBank};
use xrunlab_engine::{Distribution, Scale};
use xrunlab_results::EncodedHistogram;

/// Sines each thread renders per buffer.
const SINES: usize = 64;
/// Frames per buffer.
const FRAMES: usize = 128;
/// The rate the chord is laid out for.
const RATE: u32 = 48_000;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementParams {
    /// Equal threads.
    pub threads: usize,
    /// Partial-samples (one sine, one frame) each thread renders with the reference kernel.
    pub work_partial_samples: u64,
    /// A thread finishing more than this percentage after the median is a straggler.
    pub straggler_pct: f64,
    /// The threads' scheduling class.
    pub class: Class,
    /// Test hook: this thread (0-based) stalls after its work for as long as the work took.
    pub inject_straggler: Option<usize>,
}

impl PlacementParams {
    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        check_range("--threads", self.threads, 1, 256, "")?;
        check_range(
            "--work",
            self.work_partial_samples,
            (SINES * FRAMES) as u64,
            1_000_000_000_000,
            " partial-samples",
        )?;
        check_range("--straggler-pct", self.straggler_pct, 0.0, 1000.0, " %")?;
        if let Some(i) = self.inject_straggler {
            check_range(
                "--inject-straggler",
                i,
                0,
                self.threads - 1,
                " (a thread index)",
            )?;
        }
        Ok(())
    }
}

pub use xrunlab_results::placement::{CpuVisit, PlacedThread, KIND};

/// The probe's result, with its parameters.
pub type PlacementResult = xrunlab_results::placement::PlacementResult<PlacementParams>;

struct Raw {
    sched: SchedObtained,
    start_ns: u64,
    end_ns: u64,
    visits: Vec<(u64, usize)>,
    before: Option<xrunlab_sys::ThreadStat>,
    after: Option<xrunlab_sys::ThreadStat>,
    /// Wall time of each buffer of work, µs.
    buffer_us: Distribution,
}

/// Runs the probe.
pub fn run(p: &PlacementParams, ctx: &Ctx) -> Result<PlacementResult, LabError> {
    p.validate()?;
    let buffers = p.work_partial_samples / (SINES * FRAMES) as u64;
    let barrier = Barrier::new(p.threads);
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    start_progress(ctx, buffers * p.threads as u64, "placement");
    let mut stopped_early = false;
    let raws: Vec<Raw> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.threads)
            .map(|i| {
                let (barrier, stop, done) = (&barrier, &stop, &done);
                let (class, inject) = (p.class, p.inject_straggler == Some(i));
                s.spawn(move || work(class, buffers, inject, barrier, stop, done))
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            ctx.progress.set_position(done.load(Ordering::Relaxed));
            if !stopped_early && ctx.stopped() {
                stopped_early = true;
                stop.store(true, Ordering::Relaxed);
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("a placement thread panicked"))
            .collect()
    });
    ctx.progress.finish_and_clear();
    Ok(summarize(p, raws, stopped_early))
}

/// One thread: set up (allocations, /proc read), wait at the barrier, render `buffers`
/// buffers sampling the CPU after each into the preallocated visit list.
fn work(
    class: Class,
    buffers: u64,
    inject: bool,
    barrier: &Barrier,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> Raw {
    let sched = class.apply(None);
    let pid = std::process::id() as i32;
    let proc_root = xrunlab_sys::default_proc_root();
    let chord = Chord::with_capacity_for(RATE, ChordLayout::single(ChordNotes::Apl), SINES);
    let mut bank = PartialBank::new(&chord);
    let sines = SINES.min(bank.len());
    bank.amp[..sines].copy_from_slice(&bank.full_amp[..sines]);
    bank.set_active(0, sines);
    let coeff = smoothing_coeff(RATE);
    let (mut l, mut r) = (vec![0f32; FRAMES], vec![0f32; FRAMES]);
    let mut visits = Vec::with_capacity(buffers as usize + 1);
    // Fixed bounds: recording never allocates.
    let mut buffer_us = Distribution::new(Scale::Micros);
    let before = xrunlab_sys::read_thread_stat(proc_root, pid, sched.tid).ok();
    barrier.wait();
    let start_ns = mono_ns();
    let mut last = usize::MAX;
    for _ in 0..buffers {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t = mono_ns();
        render(
            Kernel::Reference,
            bank.view_mut(0, sines),
            coeff,
            &mut l,
            &mut r,
        );
        let now = mono_ns();
        buffer_us.record(now.saturating_sub(t) as f64 / 1000.0);
        let cpu = xrunlab_sys::current_cpu().unwrap_or(usize::MAX);
        if cpu != last {
            visits.push((now, cpu));
            last = cpu;
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    std::hint::black_box(&l);
    if inject {
        // The test hook: a stall as long as the work, so this thread finishes about twice as late.
        std::thread::sleep(Duration::from_nanos(mono_ns() - start_ns));
    }
    let end_ns = mono_ns();
    let after = xrunlab_sys::read_thread_stat(proc_root, pid, sched.tid).ok();
    Raw {
        sched,
        start_ns,
        end_ns,
        visits,
        before,
        after,
        buffer_us,
    }
}

fn summarize(p: &PlacementParams, raws: Vec<Raw>, stopped_early: bool) -> PlacementResult {
    let t0 = raws.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let ms = |ns: u64| ns.saturating_sub(t0) as f64 / 1e6;
    let completions: Vec<f64> = raws.iter().map(|r| ms(r.end_ns)).collect();
    let median_ms = xrunlab_stats::median_lower(&completions).unwrap_or(0.0);
    let limit = median_ms * (1.0 + p.straggler_pct / 100.0);
    let threads: Vec<PlacedThread> = raws
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let completion_ms = ms(r.end_ns);
            let mut cpus: Vec<usize> = r.visits.iter().map(|v| v.1).collect();
            cpus.sort_unstable();
            cpus.dedup();
            let (kernel_migrations, runqueue_delay_ms) = match (r.before, r.after) {
                (Some(a), Some(b)) => (
                    b.migrations
                        .zip(a.migrations)
                        .map(|(b, a)| b.saturating_sub(a)),
                    b.has_schedstat.then(|| {
                        b.runqueue_wait_ns.saturating_sub(a.runqueue_wait_ns) as f64 / 1e6
                    }),
                ),
                _ => (None, None),
            };
            PlacedThread {
                index: i,
                tid: r.sched.tid,
                completion_ms,
                behind_median_pct: if median_ms > 0.0 {
                    (completion_ms / median_ms - 1.0) * 100.0
                } else {
                    0.0
                },
                observed_migrations: r.visits.len().saturating_sub(1),
                visits: r
                    .visits
                    .iter()
                    .map(|&(t, cpu)| CpuVisit { t_ms: ms(t), cpu })
                    .collect(),
                cpus,
                kernel_migrations,
                runqueue_delay_ms,
                straggler: completion_ms > limit,
                injected: p.inject_straggler == Some(i),
                buffer_us: EncodedHistogram::encode(&r.buffer_us),
                sched: r.sched,
            }
        })
        .collect();
    let last = completions.iter().copied().fold(0.0, f64::max);
    PlacementResult {
        params: p.clone(),
        stragglers: threads
            .iter()
            .filter(|t| t.straggler)
            .map(|t| t.index)
            .collect(),
        spread_pct: if median_ms > 0.0 {
            (last / median_ms - 1.0) * 100.0
        } else {
            0.0
        },
        median_ms,
        threads,
        stopped_early,
    }
}

impl Experiment for PlacementResult {
    const KIND: &'static str = KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "thread",
            "tid",
            "completion_ms",
            "behind_median_pct",
            "cpus",
            "observed_migrations",
            "kernel_migrations",
            "runqueue_delay_ms",
            "straggler",
        ]);
        for th in &self.threads {
            t.push(vec![
                th.index.to_string(),
                th.tid.to_string(),
                format!("{:.3}", th.completion_ms),
                format!("{:.1}", th.behind_median_pct),
                xrunlab_sys::format_cpu_list(&th.cpus),
                th.observed_migrations.to_string(),
                th.kernel_migrations
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
                crate::table::cell(th.runqueue_delay_ms),
                th.straggler.to_string(),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = format!(
            "{} equal threads, {} partial-samples each; median completion {:.1} ms, last {:.0} % later\n",
            self.threads.len(),
            self.params.work_partial_samples,
            self.median_ms,
            self.spread_pct
        );
        out.push_str("thread  done ms  vs median  CPUs     migrations  run-queue ms\n");
        for t in &self.threads {
            let _ = writeln!(
                out,
                "T{:<5} {:>8.1} {:>+8.1} %  {:<8} {:>10}  {:>10}{}",
                t.index,
                t.completion_ms,
                t.behind_median_pct,
                xrunlab_sys::format_cpu_list(&t.cpus),
                t.observed_migrations,
                t.runqueue_delay_ms
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "-".into()),
                if t.straggler { "  STRAGGLER" } else { "" }
            );
        }
        for t in self.threads.iter().filter(|t| t.straggler) {
            let _ =
                writeln!(
                out,
                "straggler: thread {} finished {:.0} % after the median, having run on CPUs {}{}",
                t.index,
                t.behind_median_pct,
                xrunlab_sys::format_cpu_list(&t.cpus),
                if t.injected { " (injected on purpose)" } else { "" }
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
        if self.threads.iter().any(|t| t.runqueue_delay_ms.is_none()) {
            w.push("run-queue delay unknown: /proc/<pid>/task/<tid>/schedstat is missing (CONFIG_SCHEDSTATS)".into());
        }
        w
    }

    fn incomplete(&self) -> bool {
        self.stopped_early
    }
}
