//! `probe sleep`: what a sleeping thread costs. For each interval, sleep call, timer slack and
//! scheduling class, one measuring thread sleeps repeatedly for a fixed wall time and reports its
//! CPU use, its achieved wake-up rate and how much it overslept; the caller's thread runs the
//! points one after another, shows progress and polls the stop flag.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, invalid, LabError};
use crate::table::Table;
use crate::timing::{mono_ns, sleep_until, thread_cpu_ns, timespec, Class};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::{Condvar, Mutex};
use std::time::Duration;
use xrunlab_engine::{Distribution, Scale};
use xrunlab_results::EncodedHistogram;
use xrunlab_stats::percentile_nearest_rank_sorted;

/// What to sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SleepParams {
    /// Sleep intervals.
    pub intervals: Vec<Duration>,
    /// Sleep calls.
    pub calls: Vec<SleepCall>,
    /// Timer slack values (PR_SET_TIMERSLACK), in ns; the kernel's default is 50000.
    pub slacks_ns: Vec<u64>,
    /// Scheduling classes.
    pub classes: Vec<Class>,
    /// Wall time each combination runs.
    pub per_point: Duration,
    /// The verdict's accuracy bound: oversleep p99 at most this percentage of the interval...
    pub max_oversleep_pct: f64,
    /// ...or this many µs, whichever is larger.
    pub max_oversleep_floor_us: f64,
}

impl SleepParams {
    /// The full sweep: 10 µs to 10 ms, every call, slack 50 µs and 1 ns, nice 0, nice 19 and FIFO 80.
    pub fn full() -> SleepParams {
        SleepParams {
            intervals: [10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000]
                .map(Duration::from_micros)
                .to_vec(),
            calls: SleepCall::ALL.to_vec(),
            slacks_ns: vec![50_000, 1],
            classes: vec![
                Class::Other { nice: 0 },
                Class::Other { nice: 19 },
                Class::Fifo { priority: 80 },
            ],
            per_point: Duration::from_millis(500),
            max_oversleep_pct: 10.0,
            max_oversleep_floor_us: 20.0,
        }
    }

    /// The quick sweep: three intervals, every call, both slacks, nice 0, 150 ms per point.
    pub fn quick() -> SleepParams {
        SleepParams {
            intervals: [100, 1_000, 10_000].map(Duration::from_micros).to_vec(),
            classes: vec![Class::Other { nice: 0 }],
            per_point: Duration::from_millis(150),
            ..SleepParams::full()
        }
    }

    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        for i in &self.intervals {
            check_range(
                "--intervals",
                i.as_micros() as u64,
                10,
                10_000,
                " µs (10us..=10ms)",
            )?;
        }
        for s in &self.slacks_ns {
            check_range("--slack", *s, 1, 10_000_000, " ns")?;
        }
        let ms = self.per_point.as_millis() as u64;
        check_range("--per-point", ms, 20, 60_000, " ms (20ms..=60s)")?;
        if self.intervals.is_empty() {
            return Err(invalid(
                "--intervals",
                "",
                "one or more durations, 10us..=10ms",
            ));
        }
        Ok(())
    }
}

pub use xrunlab_results::sleep::{SleepCall, SleepPoint, Verdict, KIND};

/// The sweep's result, with its parameters.
pub type SleepResult = xrunlab_results::sleep::SleepResult<SleepParams>;

/// Runs every combination in turn, each on a fresh thread.
pub fn run(p: &SleepParams, ctx: &Ctx) -> Result<SleepResult, LabError> {
    p.validate()?;
    let total = p.intervals.len() * p.calls.len() * p.slacks_ns.len() * p.classes.len();
    start_progress(ctx, total as u64, "sleep");
    let mut points = Vec::with_capacity(total);
    let mut stopped_early = false;
    'all: for &class in &p.classes {
        for &interval in &p.intervals {
            for &call in &p.calls {
                for &slack in &p.slacks_ns {
                    if ctx.stopped() {
                        stopped_early = true;
                        break 'all;
                    }
                    ctx.progress.set_message(format!(
                        "{} {:?} {} slack {slack} ns",
                        class.label(),
                        interval,
                        call.name()
                    ));
                    let per_point = p.per_point;
                    let point = std::thread::spawn(move || {
                        measure_point(interval, call, slack, class, per_point)
                    })
                    .join()
                    .map_err(|_| LabError::Runtime("a measuring thread panicked".into()))?;
                    points.push(point);
                    ctx.progress.inc(1);
                }
            }
        }
    }
    ctx.progress.finish_and_clear();
    let verdicts = verdicts(p, &points);
    Ok(SleepResult {
        params: p.clone(),
        points,
        verdicts,
        stopped_early,
    })
}

/// Sets the calling thread's timer slack; returns the value in force afterwards.
fn set_timer_slack(ns: u64) -> Option<u64> {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    // SAFETY: PR_GET_TIMERSLACK returns the value; no memory is passed.
    let now = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    u64::try_from(now).ok()
}

/// Waits the way `call` does; the measuring thread's state that a call needs.
struct Waiter {
    epoll: libc::c_int,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Waiter {
    fn new() -> Waiter {
        // SAFETY: epoll_create1 takes a flag and returns a descriptor (or -1).
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        Waiter {
            epoll,
            lock: Mutex::new(()),
            cond: Condvar::new(),
        }
    }

    /// Waits `interval_ns` from `start_ns` (relative calls) or until `deadline_ns` (absolute).
    fn wait(&self, call: SleepCall, interval_ns: u64, deadline_ns: u64) {
        match call {
            SleepCall::Nanosleep => {
                let ts = timespec(interval_ns);
                // SAFETY: `ts` is a valid timespec; the remainder pointer may be null.
                unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
            }
            SleepCall::ClockNanosleepAbs => sleep_until(deadline_ns),
            SleepCall::CondvarWait => {
                if let Ok(guard) = self.lock.lock() {
                    let _ = self
                        .cond
                        .wait_timeout(guard, Duration::from_nanos(interval_ns));
                }
            }
            SleepCall::EpollWait => {
                let ts = timespec(interval_ns);
                let mut ev = libc::epoll_event { events: 0, u64: 0 };
                // SAFETY: `ev` has room for the one event asked for; `ts` is valid; a null
                // sigmask leaves the signal mask alone.
                unsafe { libc::epoll_pwait2(self.epoll, &mut ev, 1, &ts, std::ptr::null()) };
            }
            SleepCall::BusyPoll => while mono_ns() < deadline_ns {},
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.epoll >= 0 {
            // SAFETY: the descriptor is ours and closed once.
            unsafe { libc::close(self.epoll) };
        }
    }
}

/// One combination on the calling (fresh) thread. The oversleep buffer is allocated first;
/// the loop itself does not allocate.
fn measure_point(
    interval: Duration,
    call: SleepCall,
    slack_ns: u64,
    class: Class,
    per_point: Duration,
) -> SleepPoint {
    let sched = class.apply(None);
    let slack_obtained_ns = set_timer_slack(slack_ns);
    let waiter = Waiter::new();
    let interval_ns = interval.as_nanos() as u64;
    let wall_ns = per_point.as_nanos() as u64;
    let capacity = (wall_ns / interval_ns + 16).min(4_000_000) as usize;
    let mut over: Vec<f64> = Vec::with_capacity(capacity);
    // Every wake-up, past the exact buffer's cap too: fixed bounds, so recording never allocates.
    let mut kept = Distribution::new(Scale::Micros);
    let (cpu0, t0) = (thread_cpu_ns(), mono_ns());
    let end = t0 + wall_ns;
    let mut next = t0 + interval_ns;
    let mut wakes = 0u64;
    loop {
        let start = mono_ns();
        if start >= end {
            break;
        }
        // Relative calls aim at start + interval; absolute ones at the next deadline.
        let intended = match call {
            SleepCall::ClockNanosleepAbs => next,
            _ => start + interval_ns,
        };
        waiter.wait(call, interval_ns, intended);
        let now = mono_ns();
        wakes += 1;
        let us = now.saturating_sub(intended) as f64 / 1000.0;
        kept.record(us);
        if over.len() < over.capacity() {
            over.push(us);
        }
        next += interval_ns;
        while next <= now {
            next += interval_ns;
        }
    }
    let (cpu1, t1) = (thread_cpu_ns(), mono_ns());
    let wall = (t1 - t0).max(1) as f64;
    over.sort_by(f64::total_cmp);
    SleepPoint {
        interval_us: interval_ns as f64 / 1000.0,
        call,
        slack_ns,
        slack_obtained_ns,
        sched,
        cpu_pct: (cpu1 - cpu0) as f64 / wall * 100.0,
        wakeups_per_s: wakes as f64 / (wall / 1e9),
        target_per_s: 1e9 / interval_ns as f64,
        oversleep_p50_us: percentile_nearest_rank_sorted(&over, 0.5).unwrap_or(0.0),
        oversleep_p99_us: percentile_nearest_rank_sorted(&over, 0.99).unwrap_or(0.0),
        oversleep_max_us: over.last().copied().unwrap_or(0.0),
        oversleep_us: EncodedHistogram::encode(&kept),
    }
}

/// For each interval: among the combinations whose oversleep p99 stays within the bound
/// (max of the percentage of the interval and the floor), the one with the lowest CPU %.
fn verdicts(p: &SleepParams, points: &[SleepPoint]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for interval in &p.intervals {
        let us = interval.as_nanos() as f64 / 1000.0;
        let bound = (us * p.max_oversleep_pct / 100.0).max(p.max_oversleep_floor_us);
        let here: Vec<&SleepPoint> = points.iter().filter(|q| q.interval_us == us).collect();
        if here.is_empty() {
            continue;
        }
        let within = here
            .iter()
            .filter(|q| q.oversleep_p99_us <= bound)
            .min_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct));
        let describe = |q: &SleepPoint| {
            format!(
                "{}, slack {} ns, {}",
                q.call.name(),
                q.slack_ns,
                q.sched.requested
            )
        };
        let v = match within {
            Some(q) => Verdict {
                interval_us: us,
                bound_us: bound,
                cheapest: Some(describe(q)),
                cpu_pct: Some(q.cpu_pct),
                oversleep_p99_us: Some(q.oversleep_p99_us),
                why: format!(
                    "lowest CPU % among the combinations whose oversleep p99 is within {bound:.0} µs (max of {} % of the interval and {} µs)",
                    p.max_oversleep_pct, p.max_oversleep_floor_us
                ),
            },
            None => {
                let best = here
                    .iter()
                    .min_by(|a, b| a.oversleep_p99_us.total_cmp(&b.oversleep_p99_us))
                    .expect("not empty");
                Verdict {
                    interval_us: us,
                    bound_us: bound,
                    cheapest: None,
                    cpu_pct: Some(best.cpu_pct),
                    oversleep_p99_us: Some(best.oversleep_p99_us),
                    why: format!(
                        "no combination kept oversleep p99 within {bound:.0} µs; the most accurate was {}",
                        describe(best)
                    ),
                }
            }
        };
        out.push(v);
    }
    out
}

impl Experiment for SleepResult {
    const KIND: &'static str = KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "interval_us",
            "call",
            "slack_ns",
            "class",
            "cpu_pct",
            "wakeups_per_s",
            "target_per_s",
            "oversleep_p50_us",
            "oversleep_p99_us",
            "oversleep_max_us",
        ]);
        for q in &self.points {
            t.push(vec![
                format!("{}", q.interval_us),
                q.call.name().into(),
                q.slack_ns.to_string(),
                q.sched.requested.clone(),
                format!("{:.3}", q.cpu_pct),
                format!("{:.1}", q.wakeups_per_s),
                format!("{:.1}", q.target_per_s),
                format!("{:.1}", q.oversleep_p50_us),
                format!("{:.1}", q.oversleep_p99_us),
                format!("{:.1}", q.oversleep_max_us),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = String::from(
            "interval  call                 slack     class          CPU %   wakes/s  oversleep p50/p99/max µs\n",
        );
        for q in &self.points {
            let _ = writeln!(
                out,
                "{:>7.0}µs {:<20} {:>8} {:<13} {:>6.2} {:>9.0}  {:.1}/{:.1}/{:.1}",
                q.interval_us,
                q.call.name(),
                q.slack_ns,
                q.sched.requested,
                q.cpu_pct,
                q.wakeups_per_s,
                q.oversleep_p50_us,
                q.oversleep_p99_us,
                q.oversleep_max_us
            );
        }
        out.push_str("\ncheapest way to wait:\n");
        for v in &self.verdicts {
            let _ = writeln!(
                out,
                "{:>7.0}µs  {}  (CPU {:.2} %, oversleep p99 {:.1} µs; bound {:.0} µs)",
                v.interval_us,
                v.cheapest.as_deref().unwrap_or("none within the bound"),
                v.cpu_pct.unwrap_or(0.0),
                v.oversleep_p99_us.unwrap_or(0.0),
                v.bound_us
            );
        }
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = Vec::new();
        for q in &self.points {
            if let Some(line) =
                q.sched
                    .warning(&format!("{} at {} µs", q.call.name(), q.interval_us))
            {
                if !w.contains(&line) {
                    w.push(line);
                }
            }
        }
        if self.points.iter().any(|q| {
            matches!(q.sched.class, xrunlab_sys::Outcome::Applied { .. })
                && q.sched.requested.starts_with("fifo")
        }) {
            w.push("timer slack does not apply to SCHED_FIFO/RR threads: the kernel gives real-time threads zero slack".into());
        }
        w
    }

    fn incomplete(&self) -> bool {
        self.stopped_early
    }
}
