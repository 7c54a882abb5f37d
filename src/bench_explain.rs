//! `xrunlab bench explain`: what `--explain` costs, measured side by side in one invocation: runs with and without the kernel tracer interleaved at one sine count (load p50/p99, dropouts, kernel events/s, lost events, the reader thread's CPU), then the dropout-free capacity with and without it (the lab crate's capacity search, its trials run with the explain collector on); prints a table and writes JSON with provenance; runs on the main thread (the engine's threads render, the tracer has its own reader thread).

use crate::cli::bench::ExplainBenchArgs;
use crate::cli::parse::CapacityPreset;
use crate::signals::StopSignals;
use crate::{files, Failure};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::explain::trace::TraceInfo;
use xrunlab_engine::explain::{audio_cpus, ExplainOptions, Explainer};
use xrunlab_engine::{Engine, EngineConfig, Preset, RunStats};
use xrunlab_lab::capacity::{self as cap, CapacityParams, CapacityPoint};
use xrunlab_lab::Ctx;
use xrunlab_sys::Provenance;

/// Time each run renders before its buffers count, so start-up is not judged.
const SETTLE: Duration = Duration::from_millis(500);
/// How often the rings are drained: the same as `xrunlab run`.
const DRAIN_INTERVAL: Duration = Duration::from_millis(20);
/// The target: `--explain` may raise the p50 load by at most this much, relative.
const TARGET_P50_INCREASE_PCT: f64 = 2.0;

/// The kernel tracer's figures of one run with `--explain`.
#[derive(Debug, Clone, Serialize)]
struct KernelFigures {
    /// Kernel events decoded over the run (settling included).
    events: u64,
    /// Events per second of the tracer's life.
    events_per_s: f64,
    /// Events the kernel lost because a ring was full.
    lost: u64,
    /// CPU time of the tracer's reader thread, ms.
    reader_cpu_ms: f64,
    /// The same as a share of one CPU over the tracer's life, %.
    reader_cpu_pct: f64,
    /// Events by type.
    events_by_type: BTreeMap<String, u64>,
    /// Dropouts seen and cards built.
    dropouts: u64,
    cards: u64,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
struct RunFigures {
    round: u32,
    explain: bool,
    /// Buffers counted (after settling).
    buffers: u64,
    dropouts: u64,
    load_p50_pct: f64,
    load_p99_pct: f64,
    load_mean_pct: f64,
    /// The tracer's figures, with `--explain`.
    kernel: Option<KernelFigures>,
}

/// The runs of one mode together.
#[derive(Debug, Clone, Serialize)]
struct ModeFigures {
    explain: bool,
    runs: usize,
    /// Mean and median of the runs' p50 load, %.
    load_p50_mean_pct: f64,
    load_p50_median_pct: f64,
    /// Median of the runs' p99 load, %.
    load_p99_median_pct: f64,
    dropouts: u64,
    /// Means over the runs, with `--explain`.
    events_per_s: Option<f64>,
    lost: Option<u64>,
    reader_cpu_pct: Option<f64>,
}

/// What one recorded event costs the CPU it happens on: two threads pinned to one traced CPU
/// wake each other in turn (each round trip is 2 `sched_waking` and 2 `sched_switch` records),
/// timed with and without the tracer, interleaved. Less noisy than the load runs: it isolates
/// the kernel's per-event work from the rest of the machine's.
#[derive(Debug, Clone, Serialize)]
struct EventCost {
    cpu: usize,
    round_trips_per_sample: u32,
    /// Median µs per round trip over the samples of each mode.
    off_us_per_round_trip: f64,
    on_us_per_round_trip: f64,
    /// Records the tracer counted per round trip (should be about 4).
    events_per_round_trip: f64,
    /// (on - off) / events per round trip, µs.
    us_per_event: f64,
    /// `us_per_event` times the load runs' events per second: the share of one CPU the kernel
    /// spends writing events, %. An estimate: only the events inside a render add to its load.
    cpu_pct_at_run_rate: Option<f64>,
}

/// The capacity search of one mode.
#[derive(Debug, Clone, Serialize)]
struct CapacityFigures {
    explain: bool,
    /// The largest dropout-free sine count confirmed (0: none confirmed).
    sines: Option<usize>,
    point: Option<CapacityPoint>,
    /// Why there is no figure (stopped, or a trial failed).
    error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
struct Settings {
    sines: usize,
    rounds: u32,
    run_seconds: f64,
    settle_seconds: f64,
    buffer_frames: u32,
    preset: Preset,
    capacity: bool,
    capacity_trial_seconds: f64,
    capacity_repeats: usize,
    capacity_resolution: usize,
    quick: bool,
}

/// The JSON result; rewritten after every run, so an interrupted bench keeps what it measured.
#[derive(Debug, Serialize)]
struct ExplainBench {
    schema: &'static str,
    provenance: Provenance,
    settings: Settings,
    /// The engine settings of every run (the capacity trials vary only the sine count).
    config: EngineConfig,
    /// What the tracer set up (from the first run with `--explain`).
    tracer: Option<TraceInfo>,
    runs: Vec<RunFigures>,
    without_explain: Option<ModeFigures>,
    with_explain: Option<ModeFigures>,
    /// Relative increase of the mean p50 load with `--explain`, %.
    p50_increase_pct: Option<f64>,
    /// The same in load points (percent of the buffer duration).
    p50_increase_points: Option<f64>,
    /// Median over rounds of each round's relative p50 increase, %.
    p50_increase_paired_median_pct: Option<f64>,
    /// Standard error of the mean of the rounds' relative p50 increases, % (two rounds or
    /// more): how far the noise alone moves the comparison.
    p50_increase_paired_stderr_pct: Option<f64>,
    target_p50_increase_pct: f64,
    target_met: Option<bool>,
    /// The kernel's cost per recorded event (see [`EventCost`]).
    event_cost: Option<EventCost>,
    capacity: Vec<CapacityFigures>,
    /// Relative change of the capacity with `--explain`, %.
    capacity_change_pct: Option<f64>,
    complete: bool,
    /// "running" until the bench ends, then why it ended.
    end: String,
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
fn verdict(increase_pct: f64, target_pct: f64, stderr_pct: Option<f64>) -> String {
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

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn preset_of(p: CapacityPreset) -> Preset {
    match p {
        CapacityPreset::Standard => Preset::Standard,
        CapacityPreset::Optimal => Preset::Optimal,
    }
}

/// Checks kernel tracing once before anything runs: without it there is nothing to compare.
fn check_tracing(config: &EngineConfig) -> Result<(), Failure> {
    let mut probe = Explainer::start(&audio_cpus(config), ExplainOptions::default());
    if let Some(why) = probe.unavailable() {
        return Err(Failure::Runtime(format!(
            "bench explain compares runs with and without --explain and needs kernel tracing: {why}"
        )));
    }
    probe.finish();
    Ok(())
}

/// One run of `config` for `d` after settling, with or without the explain collector (started
/// before the engine and fed every buffer, its cards built after each drain, as `run
/// --explain` does). `None` when a stop signal came.
fn one_run(
    config: &EngineConfig,
    d: Duration,
    round: u32,
    explain: bool,
    signals: &StopSignals,
    tracer_info: &mut Option<TraceInfo>,
) -> Result<Option<RunFigures>, Failure> {
    let mut explainer =
        explain.then(|| Explainer::start(&audio_cpus(config), ExplainOptions::default()));
    if let Some(why) = explainer.as_ref().and_then(|e| e.unavailable()) {
        return Err(Failure::Runtime(format!(
            "kernel tracing stopped working: {why}"
        )));
    }
    let device = SimDevice::new(config.sample_rate, config.buffer_frames, config.input);
    let mut engine = Engine::start(config.clone(), Box::new(device))
        .map_err(|e| Failure::Runtime(format!("the engine did not start: {e}")))?;
    if let Some(e) = explainer.as_mut() {
        e.set_threads(&engine.threads());
    }
    let mut stats = RunStats::new(config.realtime_threads());
    let t0 = Instant::now();
    let mut stopped = false;
    loop {
        std::thread::sleep(DRAIN_INTERVAL);
        let counting = t0.elapsed() >= SETTLE;
        engine.drain(|b| {
            if let Some(e) = explainer.as_mut() {
                e.observe(b);
            }
            if counting {
                stats.add(b);
            }
        });
        if let Some(e) = explainer.as_mut() {
            e.build_due(false);
        }
        if signals.received().is_some() {
            stopped = true;
            break;
        }
        if t0.elapsed() >= SETTLE + d {
            break;
        }
    }
    let ended = engine.device_ended();
    engine.stop(|b| {
        if let Some(e) = explainer.as_mut() {
            e.observe(b);
        }
        stats.add(b);
    });
    if let Some(why) = ended {
        return Err(Failure::Runtime(format!("the device stopped: {why}")));
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
    let mut p50: Vec<f64> = mine.iter().map(|r| r.load_p50_pct).collect();
    let mut p99: Vec<f64> = mine.iter().map(|r| r.load_p99_pct).collect();
    let kernel: Vec<&KernelFigures> = mine.iter().filter_map(|r| r.kernel.as_ref()).collect();
    let events: Vec<f64> = kernel.iter().map(|k| k.events_per_s).collect();
    let reader: Vec<f64> = kernel.iter().map(|k| k.reader_cpu_pct).collect();
    Some(ModeFigures {
        explain,
        runs: mine.len(),
        load_p50_mean_pct: mean(&p50)?,
        load_p50_median_pct: median(&mut p50)?,
        load_p99_median_pct: median(&mut p99)?,
        dropouts: mine.iter().map(|r| r.dropouts).sum(),
        events_per_s: mean(&events),
        lost: (!kernel.is_empty()).then(|| kernel.iter().map(|k| k.lost).sum()),
        reader_cpu_pct: mean(&reader),
    })
}

impl ExplainBench {
    /// Recomputes the comparison from the runs and capacity searches so far.
    fn compare(&mut self) {
        self.without_explain = mode_figures(&self.runs, false);
        self.with_explain = mode_figures(&self.runs, true);
        if let (Some(off), Some(on)) = (&self.without_explain, &self.with_explain) {
            let base = off.load_p50_mean_pct.max(f64::MIN_POSITIVE);
            let pct = (on.load_p50_mean_pct - off.load_p50_mean_pct) / base * 100.0;
            self.p50_increase_pct = Some(pct);
            self.p50_increase_points = Some(on.load_p50_mean_pct - off.load_p50_mean_pct);
            self.target_met = Some(pct <= self.target_p50_increase_pct);
        }
        let mut paired: Vec<f64> = (1..=self.settings.rounds)
            .filter_map(|round| {
                let of = |explain: bool| {
                    self.runs
                        .iter()
                        .find(|r| r.round == round && r.explain == explain)
                        .map(|r| r.load_p50_pct)
                };
                let (off, on) = (of(false)?, of(true)?);
                Some((on - off) / off.max(f64::MIN_POSITIVE) * 100.0)
            })
            .collect();
        self.p50_increase_paired_stderr_pct = stderr(&paired);
        self.p50_increase_paired_median_pct = median(&mut paired);
        let sines = |explain: bool| {
            self.capacity
                .iter()
                .find(|c| c.explain == explain)
                .and_then(|c| c.sines)
        };
        self.capacity_change_pct = match (sines(false), sines(true)) {
            (Some(off), Some(on)) if off > 0 && on > 0 => {
                Some((on as f64 - off as f64) / off as f64 * 100.0)
            }
            _ => None,
        };
    }

    fn write(&mut self, path: Option<&Path>) -> Result<(), String> {
        self.compare();
        let Some(path) = path else {
            return Ok(());
        };
        self.provenance.finish();
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("cannot serialize the result: {e}"))?;
        files::write_atomically(path, (text + "\n").as_bytes()).map_err(|e| e.to_string())
    }
}

fn mode_name(explain: bool) -> &'static str {
    if explain {
        "on"
    } else {
        "off"
    }
}

fn print_run(r: &RunFigures) {
    let kernel = r.kernel.as_ref().map_or(String::new(), |k| {
        format!(
            "{:>16.0} {:>6} {:>12.2}",
            k.events_per_s, k.lost, k.reader_cpu_pct
        )
    });
    println!(
        "{:>5}  {:<9} {:>10.2} {:>10.2} {:>9} {kernel}",
        r.round,
        mode_name(r.explain),
        r.load_p50_pct,
        r.load_p99_pct,
        r.dropouts
    );
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn print_comparison(b: &ExplainBench) {
    println!();
    println!("mode       runs  load p50 % mean  median  load p99 % median  dropouts  kernel events/s  lost  reader CPU %");
    for m in [&b.without_explain, &b.with_explain].into_iter().flatten() {
        println!(
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
        println!(
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
}

fn print_capacity(b: &ExplainBench) {
    if b.capacity.is_empty() {
        return;
    }
    println!();
    println!(
        "capacity: the largest sine count without a dropout ({} frames, {} preset, {} s trials, {} repeats, search step 1/{} of its ceiling)",
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
        println!("  --explain {:<4} {what}", mode_name(c.explain));
    }
    if let Some(pct) = b.capacity_change_pct {
        println!("  change with --explain: {pct:+.1} % (one search per mode: within a search step or two is noise)");
    }
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

/// See [`EventCost`]; `None` when a stop signal came.
fn event_cost(
    cpu: usize,
    trips: u32,
    samples: usize,
    run_events_per_s: Option<f64>,
    signals: &StopSignals,
) -> Result<Option<EventCost>, String> {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let mut per_trip = Vec::new();
    for i in 0..samples * 2 {
        if signals.received().is_some() {
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
    let off = median(&mut off).ok_or("no samples")?;
    let on = median(&mut on).ok_or("no samples")?;
    let events = median(&mut per_trip).ok_or("no samples")?.max(1.0);
    let us_per_event = (on - off) / events;
    Ok(Some(EventCost {
        cpu,
        round_trips_per_sample: trips,
        off_us_per_round_trip: off,
        on_us_per_round_trip: on,
        events_per_round_trip: events,
        us_per_event,
        cpu_pct_at_run_rate: run_events_per_s.map(|r| r * us_per_event / 1e6 * 100.0),
    }))
}

fn capacity_params(a: &ExplainBenchArgs, preset: Preset) -> CapacityParams {
    let mut p = if a.quick {
        CapacityParams::quick()
    } else {
        CapacityParams::full()
    };
    p.buffers = vec![a.buffer];
    p.presets = vec![preset];
    p.seconds = a.capacity_seconds.unwrap_or(if a.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(3)
    });
    p.repeats = if a.quick { 1 } else { 2 };
    p.resolution = if a.quick { 8 } else { 32 };
    p.burst_load_pct = 0.0;
    p
}

pub fn explain(a: &ExplainBenchArgs) -> Result<(), Failure> {
    let preset = preset_of(a.preset);
    if !(16..=4096).contains(&a.buffer) {
        return Err(Failure::Usage(format!(
            "invalid value '{}' for --buffer: allowed 16..=4096 frames",
            a.buffer
        )));
    }
    let cap_params = capacity_params(a, preset);
    if !(200..=3_600_000).contains(&cap_params.seconds.as_millis()) {
        return Err(Failure::Usage(format!(
            "invalid value '{}' for --capacity-seconds: allowed 200ms..=1h",
            humantime::format_duration(cap_params.seconds)
        )));
    }
    cap_params.validate()?;
    let config = cap_params.config(preset, a.buffer, a.sines);
    config.validate().map_err(|e| {
        Failure::Usage(format!(
            "invalid value '{}' for --sines: allowed {}",
            a.sines, e.allowed
        ))
    })?;
    if let Some(p) = &a.json {
        files::check_writable("--json", p)?;
    }
    let rounds = a.rounds.unwrap_or(if a.quick { 1 } else { 4 });
    let d = a.duration.unwrap_or(if a.quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    });
    check_tracing(&config)?;
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let mut bench = ExplainBench {
        schema: "xrunlab.bench.explain/1",
        provenance,
        settings: Settings {
            sines: a.sines,
            rounds,
            run_seconds: d.as_secs_f64(),
            settle_seconds: SETTLE.as_secs_f64(),
            buffer_frames: a.buffer,
            preset,
            capacity: !a.no_capacity,
            capacity_trial_seconds: cap_params.seconds.as_secs_f64(),
            capacity_repeats: cap_params.repeats,
            capacity_resolution: cap_params.resolution,
            quick: a.quick,
        },
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
        capacity: Vec::new(),
        capacity_change_pct: None,
        complete: false,
        end: "running".into(),
    };
    let json = a.json.as_deref();
    let mut json_error = None;
    println!(
        "bench explain: {} sines, {} frames at {} Hz, {} preset ({} real-time threads), {rounds} round(s) of {} runs (after {} of settling), each round off-on or on-off in turn",
        a.sines,
        config.buffer_frames,
        config.sample_rate,
        preset.name(),
        config.realtime_threads(),
        humantime::format_duration(d),
        humantime::format_duration(SETTLE),
    );
    println!(
        "round  --explain load p50 % load p99 %  dropouts  kernel events/s   lost reader CPU %"
    );
    let mut end = None;
    'rounds: for round in 1..=rounds {
        // Alternate the order so that a drift in the machine's other load hits both modes.
        let order = if round % 2 == 1 {
            [false, true]
        } else {
            [true, false]
        };
        for explain in order {
            match one_run(&config, d, round, explain, &signals, &mut bench.tracer)? {
                Some(r) => {
                    print_run(&r);
                    bench.runs.push(r);
                }
                None => {
                    end = signals.received();
                    break 'rounds;
                }
            }
            if let Err(e) = bench.write(json) {
                json_error.get_or_insert(e);
            }
        }
    }
    bench.compare();
    print_comparison(&bench);
    if end.is_none() {
        let trips = if a.quick { 2_000 } else { 20_000 };
        let samples = if a.quick { 2 } else { 5 };
        let rate = bench.with_explain.as_ref().and_then(|m| m.events_per_s);
        let cpu = *audio_cpus(&config).last().unwrap_or(&0);
        match event_cost(cpu, trips, samples, rate, &signals) {
            Ok(Some(c)) => {
                println!(
                    "kernel cost per recorded event: {:.2} us (two threads pinned to CPU {}, {} round trips x {} samples a mode: {:.2} us per round trip without tracing, {:.2} with, {:.1} events each){}",
                    c.us_per_event,
                    c.cpu,
                    c.round_trips_per_sample,
                    samples,
                    c.off_us_per_round_trip,
                    c.on_us_per_round_trip,
                    c.events_per_round_trip,
                    c.cpu_pct_at_run_rate.map_or(String::new(), |p| format!(
                        "; at the runs' events/s: {p:.2} % of one CPU (estimate)"
                    ))
                );
                bench.event_cost = Some(c);
            }
            Ok(None) => end = signals.received(),
            Err(e) => println!("kernel cost per recorded event: not measured: {e}"),
        }
        if let Err(e) = bench.write(json) {
            json_error.get_or_insert(e);
        }
    }
    if end.is_none() && !a.no_capacity {
        let stop = || signals.received().is_some();
        let ctx = Ctx::silent(&stop);
        // One ceiling for both searches, so they try the same counts.
        let core = cap::core_sines(config.kernel, a.buffer, cap_params.sample_rate);
        for explain in [false, true] {
            eprintln!(
                "capacity search {} --explain...",
                if explain { "with" } else { "without" }
            );
            let mut p = cap_params.clone();
            p.explain = explain;
            let mut open =
                |c: &mut EngineConfig| -> Result<Box<dyn xrunlab_engine::Device>, String> {
                    Ok(Box::new(SimDevice::new(
                        c.sample_rate,
                        c.buffer_frames,
                        c.input,
                    )))
                };
            let figures = match cap::voicemark_at(&p, preset, a.buffer, core, &mut open, &ctx) {
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
                    error: Some(match e {
                        xrunlab_lab::LabError::Usage(m) | xrunlab_lab::LabError::Runtime(m) => m,
                    }),
                },
            };
            bench.capacity.push(figures);
            if let Err(e) = bench.write(json) {
                json_error.get_or_insert(e);
            }
            if signals.received().is_some() {
                end = signals.received();
                break;
            }
        }
        print_capacity(&bench);
    }
    bench.complete = end.is_none();
    bench.end = match end {
        Some(signal) => format!("interrupted by {signal}; the runs measured until then are kept"),
        None => "all runs done".into(),
    };
    if let Err(e) = bench.write(json) {
        json_error.get_or_insert(e);
    }
    if !bench.complete {
        println!("incomplete: {}", bench.end);
    }
    match json_error {
        Some(e) => Err(Failure::Runtime(e)),
        None => Ok(()),
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
}
