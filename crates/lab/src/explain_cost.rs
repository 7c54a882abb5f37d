//! `probe explain-cost` (and `bench explain`): what `--explain` costs, measured side by side in one
//! invocation: runs with and without the kernel tracer interleaved at one sine count (load p50/p99,
//! dropouts, kernel events/s, lost events, the reader thread's CPU), the kernel's cost per recorded
//! event, then the dropout-free capacity with and without it (the capacity search, its trials run
//! with the explain collector on); the engine's threads render, the tracer has its own reader
//! thread, the caller's thread runs the runs in turn and polls the stop flag.

use crate::capacity::{self as cap, CapacityParams};
use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{invalid, LabError};
use crate::table::{cell, Table};
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use xrunlab_engine::config::limit;
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::explain::trace::TraceInfo;
use xrunlab_engine::explain::{audio_cpus, ExplainOptions, Explainer};
use xrunlab_engine::{Engine, EngineConfig, Preset, RunStats};
use xrunlab_results::explain_cost as r;
pub use xrunlab_results::explain_cost::{
    CapacityFigures, EventCost, ExplainCost, ExplainCostSettings, KernelFigures, ModeFigures,
    RunFigures,
};
use xrunlab_stats::{mean, median_interpolated};

/// Time each run renders before its buffers count, so start-up is not judged.
pub const SETTLE: Duration = Duration::from_millis(500);
/// What `--explain` may cost (docs/src/explain.md, "What it costs"): at most this much more p50
/// load, relative; `bench explain` says whether a machine meets it.
pub const TARGET_P50_INCREASE_PCT: f64 = 2.0;

/// What to measure.
#[derive(Debug, Clone)]
pub struct ExplainCostParams {
    /// Load of the interleaved runs, in sines.
    pub sines: usize,
    /// Rounds, 1..=100; each runs once without and once with the collector.
    pub rounds: u32,
    /// Counted length of each run (after [`SETTLE`]).
    pub run: Duration,
    /// Frames per buffer, in the engine's range (16..=8192).
    pub buffer: u32,
    /// Thread layout of the runs and the capacity trials.
    pub preset: Preset,
    /// The capacity searches' settings (`buffers` and `presets` are the runs').
    pub capacity: CapacityParams,
    /// Run the capacity searches.
    pub search_capacity: bool,
    /// Round trips per ping-pong sample of the cost per event.
    pub round_trips: u32,
    /// Ping-pong samples per mode.
    pub samples: usize,
    /// Short settings.
    pub quick: bool,
}

impl ExplainCostParams {
    /// The defaults: 4 rounds of 10 s runs, 3 s capacity trials with 2 repeats at 1/32 of the
    /// ceiling; `quick`: 1 round of 1 s runs, 0.5 s trials, 1 repeat, 1/8.
    pub fn new(quick: bool, sines: usize, buffer: u32, preset: Preset) -> ExplainCostParams {
        let mut c = if quick {
            CapacityParams::quick()
        } else {
            CapacityParams::full()
        };
        c.buffers = vec![buffer];
        c.presets = vec![preset];
        c.seconds = if quick {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(3)
        };
        c.repeats = if quick { 1 } else { 2 };
        c.resolution = if quick { 8 } else { 32 };
        c.burst_load_pct = 0.0;
        ExplainCostParams {
            sines,
            rounds: if quick { 1 } else { 4 },
            run: if quick {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            },
            buffer,
            preset,
            capacity: c,
            search_capacity: true,
            round_trips: if quick { 2_000 } else { 20_000 },
            samples: if quick { 2 } else { 5 },
            quick,
        }
    }

    /// The engine settings of every run.
    pub fn config(&self) -> EngineConfig {
        self.capacity.config(self.preset, self.buffer, self.sines)
    }

    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        if !limit::BUFFER_FRAMES.contains(self.buffer) {
            let allowed = limit::BUFFER_FRAMES.to_string();
            return Err(invalid("--buffer", self.buffer, &allowed));
        }
        if !(200..=3_600_000).contains(&self.capacity.seconds.as_millis()) {
            return Err(invalid(
                "--capacity-seconds",
                humantime::format_duration(self.capacity.seconds),
                "200ms..=1h",
            ));
        }
        if !(1..=100).contains(&self.rounds) {
            return Err(invalid("--rounds", self.rounds, "1..=100"));
        }
        self.capacity.validate()?;
        self.config()
            .validate()
            .map_err(|e| invalid("--sines", self.sines, &e.allowed))
    }

    fn settings(&self) -> ExplainCostSettings {
        ExplainCostSettings {
            sines: self.sines,
            rounds: self.rounds,
            run_seconds: self.run.as_secs_f64(),
            settle_seconds: SETTLE.as_secs_f64(),
            buffer_frames: self.buffer,
            preset: self.preset,
            capacity: self.search_capacity,
            capacity_trial_seconds: self.capacity.seconds.as_secs_f64(),
            capacity_repeats: self.capacity.repeats,
            capacity_resolution: self.capacity.resolution,
            quick: self.quick,
        }
    }
}

/// Where the experiment is, for a caller that prints or saves as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Kernel tracing works and the runs start (no figures yet).
    Started,
    /// A run finished (the last of `runs`).
    Run,
    /// The runs are done and compared.
    Compared,
    /// The cost per event was measured (or said why not).
    EventCost,
    /// A capacity search starts (with the collector: true).
    CapacityStarts(bool),
    /// A capacity search ended (the last of `capacity`).
    Capacity,
    /// Both searches ended.
    CapacityDone,
}

/// The standard error of the mean of `v` (sample standard deviation / sqrt(n)); None for
/// fewer than two values.
fn stderr(v: &[f64]) -> Option<f64> {
    let n = v.len();
    if n < 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((var / n as f64).sqrt())
}

/// Whether the target is met, said with the noise: a mean within twice the rounds' standard
/// error of the target does not decide it, nor does a single round.
pub fn verdict(increase_pct: f64, target_pct: f64, stderr_pct: Option<f64>) -> String {
    let side = if increase_pct <= target_pct {
        "met"
    } else {
        "NOT met"
    };
    match stderr_pct {
        None => format!("{side} in this one round (one round cannot tell the tracer from noise; use --rounds 8)"),
        Some(se) if (increase_pct - target_pct).abs() <= 2.0 * se => format!(
            "{side} on average, but within twice the rounds' standard error ({se:.1} points) of the target: not resolved by this noise"
        ),
        Some(se) => format!("{side} (the rounds' standard error: {se:.1} points)"),
    }
}

/// Checks kernel tracing once before anything runs: without it there is nothing to compare.
fn check_tracing(config: &EngineConfig) -> Result<(), LabError> {
    let mut probe = Explainer::start(&audio_cpus(config), ExplainOptions::default());
    if let Some(why) = probe.unavailable() {
        return Err(LabError::Runtime(format!(
            "bench explain compares runs with and without --explain and needs kernel tracing: {why}"
        )));
    }
    probe.finish();
    Ok(())
}

/// One run of `config` for `d` after settling, with or without the explain collector (started
/// before the engine and fed every buffer, its cards built after each drain, as `run
/// --explain` does). `None` when stopped.
fn one_run(
    config: &EngineConfig,
    d: Duration,
    round: u32,
    explain: bool,
    ctx: &Ctx,
    tracer_info: &mut Option<TraceInfo>,
) -> Result<Option<RunFigures>, LabError> {
    let mut explainer =
        explain.then(|| Explainer::start(&audio_cpus(config), ExplainOptions::default()));
    if let Some(why) = explainer.as_ref().and_then(|e| e.unavailable()) {
        return Err(LabError::Runtime(format!(
            "kernel tracing stopped working: {why}"
        )));
    }
    let device = SimDevice::new(config.sample_rate, config.buffer_frames, config.input);
    let mut engine =
        Engine::start(config.clone(), Box::new(device)).map_err(LabError::engine_start)?;
    if let Some(e) = explainer.as_mut() {
        e.set_threads(&engine.threads());
    }
    let mut stats = RunStats::new(config.realtime_threads());
    // Settle, then measure: the explain collector sees both, the statistics only the second.
    let stopped = !cap::wait(&mut engine, SETTLE, ctx, &mut explainer, |_| {})
        || !cap::wait(&mut engine, d, ctx, &mut explainer, |b| stats.add(b));
    let ended = engine.device_ended();
    engine.stop(|b| {
        if let Some(e) = explainer.as_mut() {
            e.observe(b);
        }
        stats.add(b);
    });
    if let Some(why) = ended {
        return Err(LabError::Runtime(format!("the device stopped: {why}")));
    }
    let kernel = explainer.as_mut().map(|e| {
        e.finish();
        let r = e.report(0);
        if tracer_info.is_none() {
            tracer_info.clone_from(&r.tracer);
        }
        let s = r.stats.unwrap_or_default();
        let secs = (s.elapsed_ms / 1e3).max(1e-9);
        KernelFigures {
            events: s.events_total,
            events_per_s: s.events_total as f64 / secs,
            lost: s.lost_total,
            reader_cpu_ms: s.reader_cpu_ms,
            reader_cpu_pct: s.reader_cpu_ms / s.elapsed_ms.max(1e-9) * 100.0,
            events_by_type: s.events_by_type,
            dropouts: r.dropouts,
            cards: r.cards,
        }
    });
    if stopped {
        return Ok(None);
    }
    let summary = stats.summary();
    Ok(Some(RunFigures {
        round,
        explain,
        buffers: summary.buffers,
        dropouts: summary.dropouts,
        load_p50_pct: summary.load_pct.p50,
        load_p99_pct: summary.load_pct.p99,
        load_mean_pct: summary.load_pct.mean,
        kernel,
    }))
}

fn mode_figures(runs: &[RunFigures], explain: bool) -> Option<ModeFigures> {
    let mine: Vec<&RunFigures> = runs.iter().filter(|r| r.explain == explain).collect();
    let p50: Vec<f64> = mine.iter().map(|r| r.load_p50_pct).collect();
    let p99: Vec<f64> = mine.iter().map(|r| r.load_p99_pct).collect();
    let kernel: Vec<&KernelFigures> = mine.iter().filter_map(|r| r.kernel.as_ref()).collect();
    let events: Vec<f64> = kernel.iter().map(|k| k.events_per_s).collect();
    let reader: Vec<f64> = kernel.iter().map(|k| k.reader_cpu_pct).collect();
    Some(ModeFigures {
        explain,
        runs: mine.len(),
        load_p50_mean_pct: mean(&p50)?,
        load_p50_median_pct: median_interpolated(&p50)?,
        load_p99_median_pct: median_interpolated(&p99)?,
        dropouts: mine.iter().map(|r| r.dropouts).sum(),
        events_per_s: mean(&events),
        lost: (!kernel.is_empty()).then(|| kernel.iter().map(|k| k.lost).sum()),
        reader_cpu_pct: mean(&reader),
    })
}

/// Recomputes the comparison from the runs and capacity searches so far.
pub fn compare(b: &mut ExplainCost) {
    b.without_explain = mode_figures(&b.runs, false);
    b.with_explain = mode_figures(&b.runs, true);
    if let (Some(off), Some(on)) = (&b.without_explain, &b.with_explain) {
        let base = off.load_p50_mean_pct.max(f64::MIN_POSITIVE);
        let pct = (on.load_p50_mean_pct - off.load_p50_mean_pct) / base * 100.0;
        b.p50_increase_pct = Some(pct);
        b.p50_increase_points = Some(on.load_p50_mean_pct - off.load_p50_mean_pct);
        b.target_met = Some(pct <= b.target_p50_increase_pct);
    }
    let paired: Vec<f64> = (1..=b.settings.rounds)
        .filter_map(|round| {
            let of = |explain: bool| {
                b.runs
                    .iter()
                    .find(|r| r.round == round && r.explain == explain)
                    .map(|r| r.load_p50_pct)
            };
            let (off, on) = (of(false)?, of(true)?);
            Some((on - off) / off.max(f64::MIN_POSITIVE) * 100.0)
        })
        .collect();
    b.p50_increase_paired_stderr_pct = stderr(&paired);
    b.p50_increase_paired_median_pct = median_interpolated(&paired);
    let sines = |explain: bool| {
        b.capacity
            .iter()
            .find(|c| c.explain == explain)
            .and_then(|c| c.sines)
    };
    b.capacity_change_pct = match (sines(false), sines(true)) {
        (Some(off), Some(on)) if off > 0 && on > 0 => {
            Some((on as f64 - off as f64) / off as f64 * 100.0)
        }
        _ => None,
    };
}

/// Median µs per round trip of two threads on `cpu` waking each other `trips` times.
fn ping_pong(cpu: usize, trips: u32) -> Result<f64, String> {
    use std::sync::mpsc::channel;
    let pin = move || {
        let r = xrunlab_sys::apply_to_current_thread(&xrunlab_sys::RtRequest {
            cpus: Some(vec![cpu]),
            ..xrunlab_sys::RtRequest::default()
        });
        r.affinity.took_effect()
    };
    let (to_b, from_a) = channel::<u32>();
    let (to_a, from_b) = channel::<u32>();
    let b = std::thread::spawn(move || {
        let pinned = pin();
        while let Ok(n) = from_a.recv() {
            if to_a.send(n).is_err() {
                break;
            }
        }
        pinned
    });
    let pinned = pin();
    let t0 = Instant::now();
    for n in 0..trips {
        to_b.send(n).map_err(|_| "the partner thread stopped")?;
        from_b.recv().map_err(|_| "the partner thread stopped")?;
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(trips);
    drop(to_b);
    let b_pinned = b.join().map_err(|_| "the partner thread panicked")?;
    if !(pinned && b_pinned) {
        return Err(format!("could not pin both threads to CPU {cpu}"));
    }
    Ok(us)
}

/// See [`EventCost`]; `None` when stopped.
fn event_cost(
    cpu: usize,
    trips: u32,
    samples: usize,
    run_events_per_s: Option<f64>,
    ctx: &Ctx,
) -> Result<Option<EventCost>, String> {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let mut per_trip = Vec::new();
    for i in 0..samples * 2 {
        if ctx.stopped() {
            return Ok(None);
        }
        let tracing = i % 4 == 1 || i % 4 == 2;
        if tracing {
            let tracer = xrunlab_engine::explain::trace::Tracer::start(
                &[cpu],
                &xrunlab_engine::explain::trace::TraceOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            let us = ping_pong(cpu, trips)?;
            let stats = tracer.stop();
            per_trip.push(stats.events_total as f64 / f64::from(trips));
            on.push(us);
        } else {
            off.push(ping_pong(cpu, trips)?);
        }
    }
    let off = median_interpolated(&off).ok_or("no samples")?;
    let on = median_interpolated(&on).ok_or("no samples")?;
    let events = median_interpolated(&per_trip).ok_or("no samples")?.max(1.0);
    let us_per_event = (on - off) / events;
    Ok(Some(EventCost {
        cpu,
        round_trips_per_sample: trips,
        samples,
        off_us_per_round_trip: off,
        on_us_per_round_trip: on,
        events_per_round_trip: events,
        us_per_event,
        cpu_pct_at_run_rate: run_events_per_s.map(|r| r * us_per_event / 1e6 * 100.0),
    }))
}

/// Runs the whole measurement: the interleaved runs, the cost per event, the capacity
/// searches. `step` is called after each part with the figures so far (compared), so that a
/// caller can print or save them as they come; a stop keeps what was measured
/// (`complete` false). The capacity searches show no progress of their own.
pub fn run(
    p: &ExplainCostParams,
    ctx: &Ctx,
    step: &mut dyn FnMut(Step, &ExplainCost),
) -> Result<ExplainCost, LabError> {
    p.validate()?;
    let config = p.config();
    check_tracing(&config)?;
    let mut b = ExplainCost {
        settings: p.settings(),
        config: config.clone(),
        tracer: None,
        runs: Vec::new(),
        without_explain: None,
        with_explain: None,
        p50_increase_pct: None,
        p50_increase_points: None,
        p50_increase_paired_median_pct: None,
        p50_increase_paired_stderr_pct: None,
        target_p50_increase_pct: TARGET_P50_INCREASE_PCT,
        target_met: None,
        event_cost: None,
        event_cost_error: None,
        capacity: Vec::new(),
        capacity_change_pct: None,
        complete: false,
    };
    let parts = u64::from(p.rounds) * 2 + 1 + if p.search_capacity { 2 } else { 0 };
    start_progress(ctx, parts, "explain cost");
    let mut step = |s: Step, b: &ExplainCost| {
        if matches!(s, Step::Run | Step::EventCost | Step::Capacity) {
            ctx.progress.inc(1);
        }
        step(s, b);
    };
    step(Step::Started, &b);
    let mut stopped = false;
    'rounds: for round in 1..=p.rounds {
        // Alternate the order so that a drift in the machine's other load hits both modes.
        let order = if round % 2 == 1 {
            [false, true]
        } else {
            [true, false]
        };
        for explain in order {
            match one_run(&config, p.run, round, explain, ctx, &mut b.tracer)? {
                Some(r) => {
                    b.runs.push(r);
                    compare(&mut b);
                    step(Step::Run, &b);
                }
                None => {
                    stopped = true;
                    break 'rounds;
                }
            }
        }
    }
    compare(&mut b);
    step(Step::Compared, &b);
    if !stopped {
        let rate = b.with_explain.as_ref().and_then(|m| m.events_per_s);
        let cpu = *audio_cpus(&config).last().unwrap_or(&0);
        match event_cost(cpu, p.round_trips, p.samples, rate, ctx) {
            Ok(Some(c)) => b.event_cost = Some(c),
            Ok(None) => stopped = true,
            Err(e) => b.event_cost_error = Some(e),
        }
        step(Step::EventCost, &b);
    }
    if !stopped && p.search_capacity {
        let silent = Ctx::silent(ctx.stop);
        // One ceiling for both searches, so they try the same counts.
        let core = cap::core_sines(config.kernel, p.buffer, p.capacity.sample_rate);
        for explain in [false, true] {
            step(Step::CapacityStarts(explain), &b);
            let mut c = p.capacity.clone();
            c.explain = explain;
            let mut open = |c: &mut EngineConfig| -> Result<
                Box<dyn xrunlab_engine::Device>,
                xrunlab_engine::DeviceError,
            > {
                Ok(Box::new(SimDevice::new(
                    c.sample_rate,
                    c.buffer_frames,
                    c.input,
                )))
            };
            let figures = match cap::voicemark_at(&c, p.preset, p.buffer, core, &mut open, &silent)
            {
                Ok(Some(point)) => CapacityFigures {
                    explain,
                    sines: Some(point.sines),
                    point: Some(point),
                    error: None,
                },
                Ok(None) => CapacityFigures {
                    explain,
                    sines: None,
                    point: None,
                    error: Some("stopped by a signal".into()),
                },
                Err(e) => CapacityFigures {
                    explain,
                    sines: None,
                    point: None,
                    error: Some(e.to_string()),
                },
            };
            b.capacity.push(figures);
            compare(&mut b);
            step(Step::Capacity, &b);
            if ctx.stopped() {
                stopped = true;
                break;
            }
        }
        step(Step::CapacityDone, &b);
    }
    b.complete = !stopped;
    ctx.progress.finish_and_clear();
    Ok(b)
}

fn mode_name(explain: bool) -> &'static str {
    if explain {
        "on"
    } else {
        "off"
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// The first lines: what runs, and the runs' column header; `name` is the command.
pub fn header_text(name: &str, b: &ExplainCost) -> String {
    let s = &b.settings;
    let c = &b.config;
    format!(
        "{name}: {} sines, {} frames at {} Hz, {} preset ({} real-time threads), {} round(s) of {} runs (after {} of settling), each round off-on or on-off in turn\n\
         round  --explain load p50 % load p99 %  dropouts  kernel events/s   lost reader CPU %\n",
        s.sines,
        c.buffer_frames,
        c.sample_rate,
        s.preset.name(),
        c.realtime_threads(),
        s.rounds,
        seconds(s.run_seconds),
        seconds(s.settle_seconds),
    )
}

/// Seconds as the command line's durations print (`1s`, `500ms`, `10s`).
fn seconds(s: f64) -> String {
    humantime::format_duration(Duration::from_secs_f64(s)).to_string()
}

/// One run's row.
pub fn run_text(r: &RunFigures) -> String {
    let kernel = r.kernel.as_ref().map_or(String::new(), |k| {
        format!(
            "{:>16.0} {:>6} {:>12.2}",
            k.events_per_s, k.lost, k.reader_cpu_pct
        )
    });
    format!(
        "{:>5}  {:<9} {:>10.2} {:>10.2} {:>9} {kernel}\n",
        r.round,
        mode_name(r.explain),
        r.load_p50_pct,
        r.load_p99_pct,
        r.dropouts
    )
}

/// The two modes side by side and the verdict on the target.
pub fn comparison_text(b: &ExplainCost) -> String {
    let mut out = String::from("\nmode       runs  load p50 % mean  median  load p99 % median  dropouts  kernel events/s  lost  reader CPU %\n");
    for m in [&b.without_explain, &b.with_explain].into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<9} {:>5} {:>16.2} {:>7.2} {:>18.2} {:>9} {:>16} {:>5} {:>13}",
            mode_name(m.explain),
            m.runs,
            m.load_p50_mean_pct,
            m.load_p50_median_pct,
            m.load_p99_median_pct,
            m.dropouts,
            opt(m.events_per_s, 0),
            m.lost.map_or("-".into(), |l| l.to_string()),
            opt(m.reader_cpu_pct, 2)
        );
    }
    if let (Some(pct), Some(points)) = (b.p50_increase_pct, b.p50_increase_points) {
        let _ = writeln!(
            out,
            "p50 load with --explain: {pct:+.1} % relative ({points:+.2} points); paired by round, median {} %; target at most +{:.0} %: {}",
            opt(b.p50_increase_paired_median_pct, 1),
            b.target_p50_increase_pct,
            verdict(
                pct,
                b.target_p50_increase_pct,
                b.p50_increase_paired_stderr_pct
            )
        );
    }
    out
}

/// The cost per recorded event, or why it was not measured; empty when neither.
pub fn event_cost_text(b: &ExplainCost) -> String {
    match (&b.event_cost, &b.event_cost_error) {
        (Some(c), _) => format!(
            "kernel cost per recorded event: {:.2} us (two threads pinned to CPU {}, {} round trips x {} samples a mode: {:.2} us per round trip without tracing, {:.2} with, {:.1} events each){}\n",
            c.us_per_event,
            c.cpu,
            c.round_trips_per_sample,
            c.samples,
            c.off_us_per_round_trip,
            c.on_us_per_round_trip,
            c.events_per_round_trip,
            c.cpu_pct_at_run_rate.map_or(String::new(), |p| format!(
                "; at the runs' events/s: {p:.2} % of one CPU (estimate)"
            ))
        ),
        (None, Some(e)) => format!("kernel cost per recorded event: not measured: {e}\n"),
        (None, None) => String::new(),
    }
}

/// The capacity searches; empty when there were none.
pub fn capacity_text(b: &ExplainCost) -> String {
    if b.capacity.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncapacity: the largest sine count without a dropout ({} frames, {} preset, {} s trials, {} repeats, search step 1/{} of its ceiling)",
        b.settings.buffer_frames,
        b.settings.preset.name(),
        b.settings.capacity_trial_seconds,
        b.settings.capacity_repeats,
        b.settings.capacity_resolution
    );
    for c in &b.capacity {
        let what = match (&c.sines, &c.error) {
            (Some(0), _) => format!(
                "no count stayed dropout-free in the search and its repeats (smallest tried: {} sines): this machine's other load decides, not the tracer",
                c.point
                    .as_ref()
                    .and_then(|p| p.trials.iter().map(|t| t.sines).min())
                    .unwrap_or(0)
            ),
            (Some(n), _) => format!(
                "{n} sines{}",
                c.point.as_ref().map_or(String::new(), |p| format!(
                    " (search step {}, {} step-downs{})",
                    p.tolerance,
                    p.step_downs,
                    if p.sines >= p.search_ceiling {
                        "; reached the search ceiling: at least this"
                    } else {
                        ""
                    }
                ))
            ),
            (None, Some(e)) => format!("no figure: {e}"),
            (None, None) => "no figure".into(),
        };
        let _ = writeln!(out, "  --explain {:<4} {what}", mode_name(c.explain));
    }
    if let Some(pct) = b.capacity_change_pct {
        let _ = writeln!(out, "  change with --explain: {pct:+.1} % (one search per mode: within a search step or two is noise)");
    }
    out
}

impl Experiment for ExplainCost {
    const KIND: &'static str = r::KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "round",
            "explain",
            "buffers",
            "dropouts",
            "load_p50_pct",
            "load_p99_pct",
            "load_mean_pct",
            "kernel_events",
            "kernel_events_per_s",
            "lost_events",
            "reader_cpu_pct",
            "cards",
        ]);
        for r in &self.runs {
            let k = r.kernel.as_ref();
            t.push(vec![
                r.round.to_string(),
                r.explain.to_string(),
                r.buffers.to_string(),
                r.dropouts.to_string(),
                cell(Some(r.load_p50_pct)),
                cell(Some(r.load_p99_pct)),
                cell(Some(r.load_mean_pct)),
                k.map(|k| k.events.to_string()).unwrap_or_default(),
                cell(k.map(|k| k.events_per_s)),
                k.map(|k| k.lost.to_string()).unwrap_or_default(),
                cell(k.map(|k| k.reader_cpu_pct)),
                k.map(|k| k.cards.to_string()).unwrap_or_default(),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = header_text("explain cost", self);
        for r in &self.runs {
            out += &run_text(r);
        }
        out += &comparison_text(self);
        out += &event_cost_text(self);
        out += &capacity_text(self);
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let lost: u64 = self
            .runs
            .iter()
            .filter_map(|r| r.kernel.as_ref())
            .map(|k| k.lost)
            .sum();
        if lost > 0 {
            w.push(format!(
                "the kernel lost {lost} events over the runs with --explain (a ring was full): the tracer's cost is counted for the events it kept"
            ));
        }
        w
    }

    fn incomplete(&self) -> bool {
        !self.complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_error_needs_two_rounds_and_is_sd_over_root_n() {
        assert_eq!(stderr(&[1.0]), None);
        // Sample standard deviation of 1, 2, 3 is 1; over sqrt(3).
        let se = stderr(&[1.0, 2.0, 3.0]).unwrap();
        assert!((se - 1.0 / 3f64.sqrt()).abs() < 1e-12, "{se}");
    }

    #[test]
    fn the_verdict_says_when_the_noise_does_not_decide() {
        assert!(verdict(1.0, 2.0, None).starts_with("met in this one round"));
        assert!(verdict(1.7, 2.0, Some(1.3)).contains("not resolved"));
        assert!(verdict(2.5, 2.0, Some(1.3)).starts_with("NOT met on average"));
        assert_eq!(
            verdict(0.5, 2.0, Some(0.2)),
            "met (the rounds' standard error: 0.2 points)"
        );
        assert!(verdict(4.0, 2.0, Some(0.5)).starts_with("NOT met (the rounds'"));
    }

    #[test]
    fn ranges_are_usage_errors_naming_the_flag() {
        let mut p = ExplainCostParams::new(true, 200, 8, Preset::Standard);
        let e = p.validate().unwrap_err();
        assert!(
            matches!(&e, LabError::Usage(m) if m == "invalid value '8' for --buffer: allowed 16..=8192 frames"),
            "{e:?}"
        );
        p.buffer = 128;
        p.capacity.seconds = Duration::from_millis(100);
        let e = p.validate().unwrap_err();
        assert!(
            matches!(&e, LabError::Usage(m) if m == "invalid value '100ms' for --capacity-seconds: allowed 200ms..=1h"),
            "{e:?}"
        );
        p.capacity.seconds = Duration::from_secs(1);
        p.rounds = 0;
        let e = p.validate().unwrap_err();
        assert!(
            matches!(&e, LabError::Usage(m) if m == "invalid value '0' for --rounds: allowed 1..=100"),
            "{e:?}"
        );
    }
}
