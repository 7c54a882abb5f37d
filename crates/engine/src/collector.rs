//! The run collector and the drain loop: holds a run's engine, drains its records into the
//! caller's sink every [`DRAIN_INTERVAL`] for a span ([`drain_loop`], the one loop every headless
//! command drains with), keeps the running totals over restarts and engine replacements (and,
//! when asked, the run's summary), and injects bursts, stalls and worker hangs on absolute
//! schedules; runs on the caller's control thread (the CLI's main thread, the dashboard's
//! engine-owner thread), never on an audio thread.
//!
//! `xrunlab run`, `xrunlab render`, `xrunlab bench soak` and the dashboard all collect
//! through [`RunCollector`], so a buffer is counted, summarised and faulted the same way
//! whichever of them ran it. The headless commands and the lab's experiments all drain through
//! [`drain_loop`] (on a bare [`Engine`] or through [`RunCollector::run_for`]), so the cadence,
//! the cut-short last wait, the stop check and the final drain are written once; what a buffer
//! becomes (CSV row, telemetry column, blame card) and what happens after each drain (checkpoint,
//! sample, progress) is the caller's, through its [`DrainSink`]. The dashboard keeps its own,
//! faster cadence inside its command loop.

use crate::config::EngineConfig;
use crate::engine::{ConfigApplied, Engine, EngineError};
use crate::report::BufferReport;
use crate::summary::{RunStats, Summary};
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// How often a headless run's control thread drains the engine's rings (`run`, the lab's
/// experiments, `ab`, `bench soak`): often enough that a ring never fills at the smallest
/// buffer, seldom enough that draining costs the machine nothing measurable. The dashboard
/// drains faster (10 ms) for its display.
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(20);

/// How long a drain loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// This long from the loop's start: the last wait is cut short so as not to overrun it, and
    /// the drain after it is the loop's final one.
    For(Duration),
    /// Until the sink's hook breaks or the caller's stop check says so (a run that ends on its
    /// device, `render`'s offline one).
    Open,
}

/// How a drain loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainEnd<B> {
    /// Its [`Span::For`] went by; every buffer up to its end was drained.
    Elapsed,
    /// The stop check said so, before a wait: no drain after it (stopping the engine
    /// collects what is left).
    Stopped,
    /// The sink's hook broke with this, right after a drain.
    Broke(B),
}

/// What a drain loop drains: an [`Engine`], a [`RunCollector`] (which counts each buffer on
/// the way), or a caller's wrapper around one that does more with each buffer.
pub trait DrainSource {
    /// Moves every complete buffer to `each`, in order; returns how many.
    fn drain_into(&mut self, each: &mut dyn FnMut(&BufferReport)) -> usize;
}

impl DrainSource for Engine {
    fn drain_into(&mut self, each: &mut dyn FnMut(&BufferReport)) -> usize {
        self.drain(each)
    }
}

impl DrainSource for RunCollector {
    fn drain_into(&mut self, each: &mut dyn FnMut(&BufferReport)) -> usize {
        self.drain(each)
    }
}

/// Where a drain loop puts what it drains from a `D`: every buffer, then a hook after each
/// whole drain. One trait rather than two closures because the two often share mutable state
/// (the explain collector observes each buffer and builds its due cards after each drain).
/// A closure over `&BufferReport` is a sink without a hook; [`hooks`] makes one of two closures
/// that share nothing.
pub trait DrainSink<D: ?Sized> {
    /// What the hook breaks the loop with.
    type Break;

    /// One drained buffer, in order.
    fn buffer(&mut self, b: &BufferReport);

    /// After each whole drain, with the source (to check whether its device ended, read its
    /// totals, inject), the time since the loop began, and whether this was the final drain of
    /// a [`Span::For`] (the loop ends after it whatever the hook says, unless it breaks).
    fn after_drain(&mut self, source: &mut D, t: Duration, last: bool) -> ControlFlow<Self::Break> {
        let _ = (source, t, last);
        ControlFlow::Continue(())
    }
}

impl<D: ?Sized, F: FnMut(&BufferReport)> DrainSink<D> for F {
    type Break = Infallible;

    fn buffer(&mut self, b: &BufferReport) {
        self(b);
    }
}

/// A sink of two closures, each buffer to `buffer` and the hook to `after_drain`, for a caller
/// whose per-buffer and per-drain work share no mutable state; see [`hooks`].
pub struct Hooks<F, G> {
    buffer: F,
    after_drain: G,
}

/// A sink calling `buffer` with each buffer and `after_drain` after each whole drain (see
/// [`DrainSink::after_drain`]). Annotate the hook's source argument (`|e: &mut Engine, t, last|`):
/// nothing else names it.
pub fn hooks<D: ?Sized, B, F, G>(buffer: F, after_drain: G) -> Hooks<F, G>
where
    F: FnMut(&BufferReport),
    G: FnMut(&mut D, Duration, bool) -> ControlFlow<B>,
{
    Hooks {
        buffer,
        after_drain,
    }
}

impl<D: ?Sized, B, F, G> DrainSink<D> for Hooks<F, G>
where
    F: FnMut(&BufferReport),
    G: FnMut(&mut D, Duration, bool) -> ControlFlow<B>,
{
    type Break = B;

    fn buffer(&mut self, b: &BufferReport) {
        (self.buffer)(b);
    }

    fn after_drain(&mut self, source: &mut D, t: Duration, last: bool) -> ControlFlow<B> {
        (self.after_drain)(source, t, last)
    }
}

/// The drain loop of every headless command (`run`, `render`, `bench soak`, `ab`, the lab's
/// experiments): waits [`DRAIN_INTERVAL`], drains `source` into `sink`, calls its hook, and so on
/// for `span`. `stopped` is polled before each wait; when it says so the loop ends at once
/// without another drain. Returns how it ended.
pub fn drain_loop<D: DrainSource + ?Sized, S: DrainSink<D> + ?Sized>(
    source: &mut D,
    span: Span,
    stopped: impl Fn() -> bool,
    sink: &mut S,
) -> DrainEnd<S::Break> {
    drain_every(DRAIN_INTERVAL, source, span, stopped, sink)
}

/// [`drain_loop`] with its interval as a parameter, so tests can tell a cut-short wait from a
/// whole one on a noisy machine (a 1 s interval against a 100 ms span).
fn drain_every<D: DrainSource + ?Sized, S: DrainSink<D> + ?Sized>(
    interval: Duration,
    source: &mut D,
    span: Span,
    stopped: impl Fn() -> bool,
    sink: &mut S,
) -> DrainEnd<S::Break> {
    let t0 = Instant::now();
    loop {
        if stopped() {
            return DrainEnd::Stopped;
        }
        let wait = match span {
            // Cut short so that the final drain comes at the span's end, not up to an
            // interval after it.
            Span::For(d) => interval.min(d.saturating_sub(t0.elapsed())),
            Span::Open => interval,
        };
        std::thread::sleep(wait);
        source.drain_into(&mut |b| sink.buffer(b));
        let t = t0.elapsed();
        let last = matches!(span, Span::For(d) if t >= d);
        if let ControlFlow::Break(b) = sink.after_drain(source, t, last) {
            return DrainEnd::Broke(b);
        }
        if last {
            return DrainEnd::Elapsed;
        }
    }
}

/// The next time on an absolute schedule: `at + every`, so the schedule does not drift by
/// the caller's lateness; after a stall longer than a period it resumes from `now` instead
/// of catching up with a burst of work.
pub fn advance(at: Instant, every: Duration, now: Instant) -> Instant {
    let next = at + every;
    if next < now {
        now + every
    } else {
        next
    }
}

/// Which kind of [`Injection`]; a schedule holds at most one repeat of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectionKind {
    /// [`Injection::Burst`].
    Burst,
    /// [`Injection::Stall`].
    Stall,
    /// [`Injection::WorkerHang`].
    WorkerHang,
}

impl InjectionKind {
    /// The name results use for it (`events[].kind`).
    pub fn name(self) -> &'static str {
        match self {
            InjectionKind::Burst => "burst",
            InjectionKind::Stall => "stall",
            InjectionKind::WorkerHang => "worker_hang",
        }
    }
}

/// Something done to the engine on purpose, to see how it copes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// The burst sines sound for 0.25 s (see [`Engine::trigger_burst`]).
    Burst,
    /// The next render busy-waits this long first (see [`Engine::inject_stall`]).
    Stall(Duration),
    /// Worker `worker` (thread index, 1..) hangs this long inside its next cycle
    /// (see [`Engine::inject_worker_hang`]).
    WorkerHang {
        /// Thread index of the worker.
        worker: usize,
        /// How long it hangs.
        hang: Duration,
    },
}

impl Injection {
    /// Its kind.
    pub fn kind(&self) -> InjectionKind {
        match self {
            Injection::Burst => InjectionKind::Burst,
            Injection::Stall(_) => InjectionKind::Stall,
            Injection::WorkerHang { .. } => InjectionKind::WorkerHang,
        }
    }

    fn apply_to(&self, engine: &Engine) {
        let ns = |d: &Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        match self {
            Injection::Burst => engine.trigger_burst(),
            Injection::Stall(stall) => engine.inject_stall(ns(stall)),
            Injection::WorkerHang { worker, hang } => engine.inject_worker_hang(*worker, ns(hang)),
        }
    }
}

/// An injection repeated every `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    /// What is injected.
    pub injection: Injection,
    /// Time between two injections.
    pub every: Duration,
}

/// Injections on absolute schedules, at most one repeat per kind; pure timekeeping, so its
/// timing is tested without an engine.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// Each repeat and when it is next due.
    repeats: Vec<(Repeat, Instant)>,
}

impl Schedule {
    /// Repeats `repeat` from `first_at` on, in place of any repeat of the same kind.
    pub fn set(&mut self, repeat: Repeat, first_at: Instant) {
        self.cancel(repeat.injection.kind());
        self.repeats.push((repeat, first_at));
    }

    /// Stops repeating injections of `kind`.
    pub fn cancel(&mut self, kind: InjectionKind) {
        self.repeats.retain(|(r, _)| r.injection.kind() != kind);
    }

    /// The repeat of `kind`, if one is set.
    pub fn get(&self, kind: InjectionKind) -> Option<Repeat> {
        self.repeats
            .iter()
            .find(|(r, _)| r.injection.kind() == kind)
            .map(|(r, _)| *r)
    }

    /// The injections due at `now`, each moved on to its next time (see [`advance`]): one per
    /// repeat however late `now` is.
    pub fn due(&mut self, now: Instant) -> Vec<Injection> {
        let mut due = Vec::new();
        for (repeat, next) in &mut self.repeats {
            if now >= *next {
                due.push(repeat.injection);
                *next = advance(*next, repeat.every, now);
            }
        }
        due
    }
}

/// Running totals over every engine a collector ran: never reset by restarts or device
/// switches, so they only go up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    /// Buffers drained.
    pub buffers: u64,
    /// Of those, dropouts (late, incomplete, or reported as an xrun by the device).
    pub dropouts: u64,
    /// Records lost because a ring was full.
    pub ring_drops: u64,
    /// Periods the devices skipped to catch up after late renders.
    pub skipped_periods: u64,
    /// Xruns the devices (servers) reported.
    pub device_xruns: u64,
    /// Audio starts (1 + restarts per engine).
    pub audio_starts: u64,
}

/// What every drained buffer adds to.
#[derive(Debug, Default)]
struct Tally {
    buffers: u64,
    dropouts: u64,
    summary: Option<RunStats>,
}

impl Tally {
    fn add(&mut self, b: &BufferReport) {
        self.buffers += 1;
        self.dropouts += u64::from(b.dropout());
        if let Some(s) = self.summary.as_mut() {
            s.add(b);
        }
    }
}

/// One run's engine and everything counted from it; see the module documentation.
pub struct RunCollector {
    engine: Option<Engine>,
    tally: Tally,
    /// Device and ring counters of the engines stopped so far.
    retired: Totals,
    schedule: Schedule,
}

impl RunCollector {
    /// Collects from `engine`, keeping totals only.
    pub fn new(engine: Engine) -> RunCollector {
        RunCollector {
            engine: Some(engine),
            tally: Tally::default(),
            retired: Totals::default(),
            schedule: Schedule::default(),
        }
    }

    /// Also builds the run's [`Summary`] from every buffer (memory bounded; see [`RunStats`]),
    /// expecting the current engine's real-time threads in each buffer.
    pub fn with_summary(mut self) -> RunCollector {
        let threads = self
            .engine
            .as_ref()
            .map_or(0, |e| e.config().realtime_threads());
        self.tally.summary = Some(RunStats::new(threads));
        self
    }

    /// The engine, while one runs.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    /// The injection schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The injection schedule, to set or cancel repeats.
    pub fn schedule_mut(&mut self) -> &mut Schedule {
        &mut self.schedule
    }

    /// Moves every complete buffer out of the engine into the totals and `sink`, in order;
    /// returns how many (see [`Engine::drain`] for how often to call it).
    pub fn drain(&mut self, mut sink: impl FnMut(&BufferReport)) -> usize {
        let (Some(engine), tally) = (self.engine.as_mut(), &mut self.tally) else {
            return 0;
        };
        engine.drain(|b| {
            tally.add(b);
            sink(b);
        })
    }

    /// Drains for `span` into `sink` through [`drain_loop`], each buffer counted on the way;
    /// see it for the cadence, the stop check and the final drain. Without an engine, the loop
    /// still keeps its time (there is nothing to drain).
    pub fn run_for<S: DrainSink<RunCollector> + ?Sized>(
        &mut self,
        span: Span,
        stopped: impl Fn() -> bool,
        sink: &mut S,
    ) -> DrainEnd<S::Break> {
        drain_loop(self, span, stopped, sink)
    }

    /// Applies `config` to the engine (see [`Engine::apply`]); buffers drained before a
    /// restart go to the totals and `sink`.
    pub fn apply(
        &mut self,
        config: EngineConfig,
        mut sink: impl FnMut(&BufferReport),
    ) -> Result<ConfigApplied, EngineError> {
        let (Some(engine), tally) = (self.engine.as_mut(), &mut self.tally) else {
            return Err(EngineError::NotRunning);
        };
        engine.apply(config, |b| {
            tally.add(b);
            sink(b);
        })
    }

    /// Injects what the schedule has due at `now` and returns it (nothing while no engine
    /// runs: the schedule then waits).
    pub fn inject_due(&mut self, now: Instant) -> Vec<Injection> {
        let Some(engine) = self.engine.as_ref() else {
            return Vec::new();
        };
        let due = self.schedule.due(now);
        for injection in &due {
            injection.apply_to(engine);
        }
        due
    }

    /// Stops the engine, its last buffers going to the totals and `sink`; its counters stay
    /// in the totals.
    pub fn stop(&mut self, mut sink: impl FnMut(&BufferReport)) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        // Read before the stop consumes the engine; its device no longer counts after.
        self.retired = add_counters(self.retired, Self::engine_counters(&engine));
        let tally = &mut self.tally;
        engine.stop(|b| {
            tally.add(b);
            sink(b);
        });
    }

    /// Collects from `engine` from now on, stopping the current one first (its last buffers
    /// to `sink`). The summary, if kept, goes on over both.
    pub fn set_engine(&mut self, engine: Engine, sink: impl FnMut(&BufferReport)) {
        self.stop(sink);
        self.engine = Some(engine);
    }

    /// The totals over every engine so far.
    pub fn totals(&self) -> Totals {
        let current = self
            .engine
            .as_ref()
            .map(Self::engine_counters)
            .unwrap_or_default();
        let mut t = add_counters(self.retired, current);
        t.buffers = self.tally.buffers;
        t.dropouts = self.tally.dropouts;
        t
    }

    /// The summary of every buffer so far, when kept (see [`RunCollector::with_summary`]).
    pub fn summary(&self) -> Option<Summary> {
        self.tally.summary.as_ref().map(RunStats::summary)
    }

    /// The statistics behind [`RunCollector::summary`], with their histograms, when kept.
    pub fn stats(&self) -> Option<&RunStats> {
        self.tally.summary.as_ref()
    }

    fn engine_counters(engine: &Engine) -> Totals {
        let s = engine.signals();
        Totals {
            ring_drops: engine.ring_drops(),
            skipped_periods: s.skipped_periods(),
            device_xruns: s.xruns(),
            audio_starts: u64::from(engine.audio_starts()),
            ..Totals::default()
        }
    }
}

/// Sums the device and ring counters of `a` and `b` (buffers and dropouts are the tally's).
fn add_counters(a: Totals, b: Totals) -> Totals {
    Totals {
        ring_drops: a.ring_drops + b.ring_drops,
        skipped_periods: a.skipped_periods + b.skipped_periods,
        device_xruns: a.device_xruns + b.device_xruns,
        audio_starts: a.audio_starts + b.audio_starts,
        ..Totals::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::offline::OfflineDevice;
    use crate::device::sim::SimDevice;

    const MS: Duration = Duration::from_millis(1);

    fn stalls(every_ms: u32) -> Repeat {
        Repeat {
            injection: Injection::Stall(2 * MS),
            every: every_ms * MS,
        }
    }

    #[test]
    fn advance_keeps_an_absolute_schedule_and_skips_after_stalls() {
        let t0 = Instant::now();
        let p = 10 * MS;
        assert_eq!(
            advance(t0, p, t0 + 3 * MS),
            t0 + p,
            "lateness does not drift it"
        );
        let late = t0 + 95 * MS;
        assert_eq!(
            advance(t0, p, late),
            late + p,
            "no catching up after a stall"
        );
    }

    #[test]
    fn a_schedule_fires_once_per_period_on_absolute_times() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        s.set(stalls(10), t0 + 10 * MS);
        assert!(s.due(t0 + 9 * MS).is_empty(), "not before its first time");
        assert_eq!(s.due(t0 + 13 * MS), vec![Injection::Stall(2 * MS)]);
        assert!(s.due(t0 + 19 * MS).is_empty(), "once per period");
        // Due at 20 ms (10 + 10), not at 23 ms (13 + 10): the schedule is absolute.
        assert_eq!(
            s.due(t0 + 20 * MS).len(),
            1,
            "the caller's lateness is not carried on"
        );
        assert!(s.due(t0 + 29 * MS).is_empty());
        assert_eq!(s.due(t0 + 30 * MS).len(), 1);
    }

    #[test]
    fn a_schedule_skips_what_a_stall_missed_instead_of_catching_up() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        s.set(stalls(10), t0);
        assert_eq!(s.due(t0).len(), 1);
        // The caller was held up for 85 ms: eight periods went by, one injection fires.
        assert_eq!(s.due(t0 + 95 * MS).len(), 1);
        for ms in [96, 100, 104] {
            assert!(s.due(t0 + ms * MS).is_empty(), "no catch-up at {ms} ms");
        }
        assert_eq!(
            s.due(t0 + 105 * MS).len(),
            1,
            "then every 10 ms from the resume"
        );
    }

    #[test]
    fn a_schedule_holds_one_repeat_per_kind() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        s.set(stalls(10), t0);
        let bursts = Repeat {
            injection: Injection::Burst,
            every: 50 * MS,
        };
        s.set(bursts, t0);
        s.set(stalls(20), t0 + 5 * MS);
        assert_eq!(s.get(InjectionKind::Stall), Some(stalls(20)), "replaced");
        assert_eq!(s.get(InjectionKind::Burst), Some(bursts));
        assert_eq!(
            s.due(t0),
            vec![Injection::Burst],
            "the stall starts later now"
        );
        s.cancel(InjectionKind::Stall);
        assert_eq!(s.get(InjectionKind::Stall), None);
        assert!(
            s.due(t0 + 10 * MS).is_empty(),
            "a cancelled repeat no longer fires"
        );
        assert_eq!(Injection::Stall(MS).kind().name(), "stall");
        let hang = Injection::WorkerHang {
            worker: 1,
            hang: MS,
        };
        assert_eq!(hang.kind().name(), "worker_hang");
        assert_eq!(Injection::Burst.kind().name(), "burst");
    }

    /// An engine on the offline device that renders exactly `buffers` buffers of 128 frames.
    fn offline(name: &str, buffers: u64) -> (Engine, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "xrunlab-collector-{name}-{}.wav",
            std::process::id()
        ));
        let config = EngineConfig {
            sines: 50,
            threads: 2,
            buffer_frames: 128,
            ..EngineConfig::default()
        };
        let device = OfflineDevice::new(config.sample_rate, 128, buffers * 128, path.clone());
        let engine = Engine::start(config, Box::new(device)).expect("offline engine starts");
        (engine, path)
    }

    /// Drains until the engine's device ended (bounded), then stops it.
    fn drain_to_end(c: &mut RunCollector, seen: &mut Vec<BufferReport>) {
        let until = Instant::now() + Duration::from_secs(20);
        while c.engine().and_then(Engine::device_ended).is_none() && Instant::now() < until {
            std::thread::sleep(5 * MS);
            c.drain(|b| seen.push(b.clone()));
        }
        assert!(
            c.engine().and_then(Engine::device_ended).is_some(),
            "the offline render ended within 20 s"
        );
    }

    #[test]
    fn totals_and_summary_are_the_sum_of_the_drained_buffers_over_engines() {
        let (engine, first) = offline("first", 100);
        let mut c = RunCollector::new(engine).with_summary();
        let mut seen = Vec::new();
        drain_to_end(&mut c, &mut seen);
        let (second_engine, second) = offline("second", 40);
        c.set_engine(second_engine, |b| seen.push(b.clone()));
        assert_eq!(
            seen.len(),
            100,
            "the first engine's last buffers went to the sink"
        );
        drain_to_end(&mut c, &mut seen);
        c.stop(|b| seen.push(b.clone()));
        assert!(c.engine().is_none());
        let t = c.totals();
        assert_eq!(
            seen.len(),
            140,
            "every buffer of both renders reached the sink"
        );
        assert_eq!(t.buffers, 140);
        assert_eq!(
            t.dropouts,
            seen.iter().filter(|b| b.dropout()).count() as u64
        );
        assert_eq!(
            t.audio_starts, 2,
            "one start per engine, kept after each stopped"
        );
        let summary = c.summary().expect("kept with with_summary");
        assert_eq!(summary.buffers, 140);
        assert_eq!(summary.dropouts, t.dropouts);
        let frames: u64 = seen.iter().map(|b| u64::from(b.frames)).sum();
        assert_eq!(frames, 140 * 128);
        for p in [first, second] {
            let _ = std::fs::remove_file(p);
        }
    }

    /// An engine on the simulated (real-time paced) device, 256-frame buffers.
    fn sim() -> Engine {
        let config = EngineConfig {
            sines: 20,
            threads: 1,
            buffer_frames: 256,
            ..EngineConfig::default()
        };
        let device = SimDevice::new(config.sample_rate, 256, false);
        Engine::start(config, Box::new(device)).expect("sim engine starts")
    }

    /// A sink counting buffers and recording each hook call's (t, last); the hook breaks with
    /// the call's number once it reaches `break_at`.
    #[derive(Default)]
    struct Recorder {
        buffers: usize,
        frames: u64,
        drains: Vec<(Duration, bool)>,
        break_at: Option<usize>,
    }

    impl<D: ?Sized> DrainSink<D> for Recorder {
        type Break = usize;

        fn buffer(&mut self, b: &BufferReport) {
            self.buffers += 1;
            self.frames += u64::from(b.frames);
        }

        fn after_drain(&mut self, _: &mut D, t: Duration, last: bool) -> ControlFlow<usize> {
            self.drains.push((t, last));
            match self.break_at {
                Some(n) if self.drains.len() >= n => ControlFlow::Break(self.drains.len()),
                _ => ControlFlow::Continue(()),
            }
        }
    }

    #[test]
    fn run_for_delivers_every_buffer_of_its_span_and_ends_on_a_final_drain() {
        // The offline device renders its 40 buffers at once, well inside the span: the loop
        // alone (no stop) must hand every one of them over.
        let (engine, path) = offline("span", 40);
        let mut c = RunCollector::new(engine);
        let mut r = Recorder::default();
        let span = Duration::from_millis(400);
        let t0 = Instant::now();
        assert_eq!(
            c.run_for(Span::For(span), || false, &mut r),
            DrainEnd::Elapsed
        );
        assert!(t0.elapsed() >= span, "the whole span");
        assert_eq!(
            r.buffers, 40,
            "every buffer of the render, by the loop itself"
        );
        assert_eq!(r.frames, 40 * 128);
        assert_eq!(c.totals().buffers, 40, "counted on the way");
        let (t_last, last) = *r.drains.last().expect("drained");
        assert!(last && t_last >= span, "the final drain at the span's end");
        assert!(
            r.drains[..r.drains.len() - 1]
                .iter()
                .all(|&(t, l)| !l && t < span),
            "only the final drain is the last, all others inside the span: {:?}",
            r.drains
        );
        assert!(
            r.drains.windows(2).all(|w| w[0].0 <= w[1].0),
            "the hook's times go up"
        );
        // 400 ms at 20 ms is about 20 drains; a loaded machine oversleeps and drains fewer.
        assert!(
            r.drains.len() >= 2,
            "drained every interval: {:?}",
            r.drains
        );
        let mut after = 0;
        c.stop(|_| after += 1);
        assert_eq!(after, 0, "nothing was left for the stop");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_drain_loop_ends_when_its_hook_breaks() {
        let mut engine = sim();
        let mut r = Recorder {
            break_at: Some(3),
            ..Recorder::default()
        };
        let t0 = Instant::now();
        let end = drain_loop(&mut engine, Span::Open, || false, &mut r);
        assert_eq!(
            end,
            DrainEnd::Broke(3),
            "the hook's value, on its third call"
        );
        assert_eq!(r.drains.len(), 3, "no drain after the break");
        assert!(
            r.drains.iter().all(|&(_, last)| !last),
            "an open span has no last"
        );
        assert!(r.buffers > 0, "buffers delivered");
        assert!(
            t0.elapsed() >= 3 * 20 * MS && t0.elapsed() < Duration::from_secs(30),
            "three whole waits, then the end: {:?}",
            t0.elapsed()
        );
        engine.stop(|_| {});
    }

    #[test]
    fn a_drain_loop_ends_at_once_when_stopped_without_another_drain() {
        let mut engine = sim();
        let polls = std::cell::Cell::new(0);
        let mut r = Recorder::default();
        let t0 = Instant::now();
        let stopped = || {
            polls.set(polls.get() + 1);
            polls.get() >= 3
        };
        let end = drain_loop(
            &mut engine,
            Span::For(Duration::from_secs(60)),
            stopped,
            &mut r,
        );
        assert_eq!(end, DrainEnd::Stopped);
        assert_eq!(polls.get(), 3, "polled before each wait");
        assert_eq!(
            r.drains.len(),
            2,
            "the two drains before the stop, none after"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "a stop ends a 60 s span at once"
        );
        let mut none = Recorder::default();
        let t1 = Instant::now();
        let end = drain_loop(&mut engine, Span::Open, || true, &mut none);
        assert_eq!(end, DrainEnd::Stopped);
        assert_eq!(
            (none.buffers, none.drains.len()),
            (0, 0),
            "stopped before anything"
        );
        assert!(t1.elapsed() < Duration::from_secs(10), "without a wait");
        engine.stop(|_| {});
    }

    #[test]
    fn a_drain_loop_cuts_its_last_wait_short() {
        let mut engine = sim();
        let mut seen = 0usize;
        let span = 100 * MS;
        let t0 = Instant::now();
        // A 1 s interval against a 100 ms span: a whole wait would take 1 s.
        let end = drain_every(
            Duration::from_secs(1),
            &mut engine,
            Span::For(span),
            || false,
            &mut |_: &BufferReport| seen += 1,
        );
        let took = t0.elapsed();
        assert_eq!(end, DrainEnd::Elapsed);
        assert!(
            took >= span && took < 900 * MS,
            "the one wait ends with the span: {took:?}"
        );
        assert!(seen > 0, "the final drain delivered what the span rendered");
        // A closure sink has no hook, and a span of nothing still drains once.
        let mut r = Recorder::default();
        assert_eq!(
            drain_loop(&mut engine, Span::For(Duration::ZERO), || false, &mut r),
            DrainEnd::Elapsed
        );
        assert_eq!(r.drains.len(), 1);
        assert!(r.drains[0].1, "and that drain is the last");
        engine.stop(|_| {});
    }

    #[test]
    fn injections_reach_the_engine_and_apply_keeps_counting_across_a_restart() {
        let config = EngineConfig {
            sines: 50,
            threads: 2,
            buffer_frames: 256,
            ..EngineConfig::default()
        };
        let device = SimDevice::new(config.sample_rate, 256, false);
        let engine = Engine::start(config.clone(), Box::new(device)).expect("sim engine starts");
        let mut c = RunCollector::new(engine);
        assert!(c.summary().is_none(), "no summary unless asked");
        let now = Instant::now();
        c.schedule_mut().set(stalls(3_600_000), now);
        assert_eq!(c.inject_due(now), vec![Injection::Stall(2 * MS)]);
        assert!(
            c.inject_due(now + MS).is_empty(),
            "next one is an hour away"
        );
        let mut seen = Vec::new();
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            std::thread::sleep(10 * MS);
            c.drain(|b| seen.push(b.clone()));
        }
        let stalled: Vec<u64> = seen
            .iter()
            .map(|b| b.injected_stall_ns)
            .filter(|&ns| ns > 0)
            .collect();
        assert_eq!(stalled, vec![2_000_000], "one buffer carries the one stall");
        let bigger = EngineConfig {
            buffer_frames: 512,
            ..config
        };
        let applied = c.apply(bigger, |b| seen.push(b.clone())).expect("applies");
        assert!(applied.restarted, "a buffer size change restarts audio");
        std::thread::sleep(50 * MS);
        c.stop(|b| seen.push(b.clone()));
        let t = c.totals();
        assert_eq!(t.audio_starts, 2, "start and restart");
        assert_eq!(
            t.buffers,
            seen.len() as u64,
            "totals count what the sink saw"
        );
        assert_eq!(
            t.dropouts,
            seen.iter().filter(|b| b.dropout()).count() as u64
        );
        assert!(
            seen.iter().any(|b| b.frames == 512),
            "buffers after the restart counted"
        );
        assert!(
            matches!(
                c.apply(EngineConfig::default(), |_| {}),
                Err(EngineError::NotRunning)
            ),
            "nothing to apply to once stopped"
        );
        assert!(c
            .inject_due(Instant::now() + Duration::from_secs(7200))
            .is_empty());
    }
}
