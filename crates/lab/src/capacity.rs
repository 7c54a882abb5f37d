//! `capacity`: AudioPerfLab's VoiceMark, LatencyMark and burst response on xrunlab's engine: the
//! largest dropout-free sine count per buffer size and preset (binary search, then confirmation
//! runs), the smallest buffer that carries a given load, and the largest burst a steady load
//! absorbs; the engine's threads render, the caller's thread runs the trials in turn, shows
//! progress and polls the stop flag.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, invalid, LabError};
use crate::table::Table;
use crate::timing::thread_cpu_ns;
use serde::Serialize;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::Duration;
use xrunlab_dsp::Kernel;
use xrunlab_engine::config::limit;
use xrunlab_engine::explain::{audio_cpus, ExplainOptions, Explainer};
use xrunlab_engine::{
    BufferReport, DrainEnd, DrainSink, Engine, EngineConfig, Preset, RunStats, Span,
};
use xrunlab_results::run::RunHistograms;

/// Confirmation steps down at most this many brackets before it gives up (no confirmed count).
pub const MAX_STEP_DOWNS: usize = 8;
/// Buffer sizes the LatencyMark tries, smallest first.
pub const LATENCY_BUFFERS: [u32; 9] = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
/// Time each trial runs before its buffers count, so start-up is not judged.
pub const SETTLE: Duration = Duration::from_millis(300);
/// How long a burst trial watches after triggering the burst (the burst lasts 0.25 s).
pub const BURST_WATCH: Duration = Duration::from_millis(600);

/// Opens the device for a trial; may change the rate and buffer to the server's (JACK).
pub use crate::device::OpenDevice;

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityParams {
    /// Buffer sizes in frames (the engine's range, 16..=8192).
    pub buffers: Vec<u32>,
    /// Presets, each searched at every buffer size.
    pub presets: Vec<Preset>,
    /// Run every trial with the `--explain` collector on (the kernel tracer and blame cards),
    /// to measure what it costs; a trial fails when kernel tracing is unavailable.
    pub explain: bool,
    /// How long a trial must stay dropout-free.
    pub seconds: Duration,
    /// Confirmation runs at the found count.
    pub repeats: usize,
    /// LatencyMark: the sustained load to carry, in sines.
    pub latency_sines: usize,
    /// Burst response: the steady load as a percentage of the capacity found.
    pub burst_load_pct: f64,
    /// Requested sample rate.
    pub sample_rate: u32,
    /// "sim" or "jack" (for the result).
    pub device: String,
    /// The searches stop once the bracket is 1/`resolution` of their ceiling wide.
    pub resolution: usize,
    /// Test hook: the engine's kernel costs this many times as much (1 = normal; see
    /// `EngineConfig::kernel_slowdown`). A slowed result says so in its warnings.
    pub kernel_slowdown: u32,
}

impl CapacityParams {
    /// 64, 128 and 256 frames, both presets, 5 s trials, 3 repeats.
    pub fn full() -> CapacityParams {
        CapacityParams {
            buffers: vec![64, 128, 256],
            presets: vec![Preset::Standard, Preset::Optimal],
            explain: false,
            seconds: Duration::from_secs(5),
            repeats: 3,
            latency_sines: 300,
            burst_load_pct: 50.0,
            sample_rate: 48_000,
            device: "sim".into(),
            resolution: 64,
            kernel_slowdown: 1,
        }
    }

    /// 128 frames, the standard preset, 1 s trials, a coarser search (1/16 of the ceiling).
    pub fn quick() -> CapacityParams {
        CapacityParams {
            buffers: vec![128],
            presets: vec![Preset::Standard],
            seconds: Duration::from_secs(1),
            resolution: 16,
            ..CapacityParams::full()
        }
    }

    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.buffers.is_empty() {
            let allowed = format!("a list of sizes {}", limit::BUFFER_FRAMES);
            return Err(invalid("--buffers", "", &allowed));
        }
        for &b in &self.buffers {
            let l = limit::BUFFER_FRAMES;
            check_range("--buffers", b, l.min, l.max, " frames")?;
        }
        if self.presets.is_empty() || self.presets.contains(&Preset::Custom) {
            return Err(invalid("--presets", "custom", "standard, optimal"));
        }
        check_range(
            "--seconds",
            self.seconds.as_millis() as u64,
            200,
            3_600_000,
            " ms (200ms..=1h)",
        )?;
        check_range("--repeats", self.repeats, 1, 100, "")?;
        check_range("--burst-load", self.burst_load_pct, 0.0, 100.0, " %")?;
        let (lo, hi) = (limit::KERNEL_SLOWDOWN.min, limit::KERNEL_SLOWDOWN.max);
        check_range("--kernel-slowdown", self.kernel_slowdown, lo, hi, "")?;
        let c = self.config(Preset::Standard, self.buffers[0], self.latency_sines);
        if let Err(e) = c.validate() {
            return Err(invalid("--latency-sines", self.latency_sines, &e.allowed));
        }
        Ok(())
    }

    /// Engine settings of one trial: the preset, the buffer, `sines`, no burst.
    pub fn config(&self, preset: Preset, buffer: u32, sines: usize) -> EngineConfig {
        let mut c = EngineConfig {
            sample_rate: self.sample_rate,
            buffer_frames: buffer,
            ..EngineConfig::default()
        };
        c.apply_preset(preset);
        c.sines = sines;
        c.burst_sines = 0;
        c.kernel_slowdown = self.kernel_slowdown;
        c
    }
}

/// The largest `n` in `0..=hi` for which `trial(n)` passes, assuming that a count passes when
/// every smaller one does; stops narrowing once the bracket is `tolerance` wide (the answer is
/// then at most `tolerance - 1` below the true one). `trial` returns `None` to stop: the result
/// is then `None`. 0 is taken as passing without a trial.
pub fn largest_passing<E>(
    hi: usize,
    tolerance: usize,
    mut trial: impl FnMut(usize) -> Result<Option<bool>, E>,
) -> Result<Option<usize>, E> {
    let (mut good, mut bad) = (0usize, hi + 1);
    while bad - good > tolerance.max(1) {
        let mid = good + (bad - good) / 2;
        match trial(mid)? {
            None => return Ok(None),
            Some(true) => good = mid,
            Some(false) => bad = mid,
        }
    }
    Ok(Some(good))
}

/// The smallest index in `0..len` whose trial passes (passing being monotone upwards);
/// `Some(None)` when none does, `None` when stopped.
pub fn smallest_passing<E>(
    len: usize,
    mut trial: impl FnMut(usize) -> Result<Option<bool>, E>,
) -> Result<Option<Option<usize>>, E> {
    let (mut lo, mut hi) = (0usize, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match trial(mid)? {
            None => return Ok(None),
            Some(true) => hi = mid,
            Some(false) => lo = mid + 1,
        }
    }
    Ok(Some((lo < len).then_some(lo)))
}

pub use xrunlab_results::capacity::{
    BurstFigure, CapacityPoint, LatencyPoint, Spread, Trial, KIND,
};

/// The result, with its parameters.
pub type CapacityResult = xrunlab_results::capacity::CapacityResult<CapacityParams>;

/// Min, median and max of `v`; `None` when empty.
fn spread_of(v: &[f64]) -> Option<Spread> {
    Some(Spread {
        min: v.iter().copied().reduce(f64::min)?,
        median: xrunlab_stats::median_lower(v)?,
        max: v.iter().copied().reduce(f64::max)?,
    })
}

/// Runs engine trials: starts the engine per trial, settles, judges the buffers.
struct Runner<'a, 'c> {
    open: &'a mut OpenDevice<'c>,
    ctx: &'a Ctx<'a>,
    done: u64,
    /// Trials run with the explain collector (see [`CapacityParams::explain`]).
    explain: bool,
    /// Where the judged buffers of the trials go while it is set (the confirmation repeats).
    record: Option<RunStats>,
}

impl Runner<'_, '_> {
    /// One run of `c` for `d` after the settling time, triggering a burst first when `burst`.
    fn run(
        &mut self,
        mut c: EngineConfig,
        d: Duration,
        burst: bool,
    ) -> Result<Option<Trial>, LabError> {
        if self.ctx.stopped() {
            return Ok(None);
        }
        let (sines, burst_sines) = (c.sines, c.burst_sines);
        self.ctx.progress.set_message(format!(
            "{} frames, {sines}+{burst_sines} sines",
            c.buffer_frames
        ));
        let device = (self.open)(&mut c).map_err(|source| LabError::Device {
            context: "cannot open the device".into(),
            source,
        })?;
        // The tracer starts before the engine, as in `run --explain`.
        let mut explain = if self.explain {
            let e = Explainer::start(&audio_cpus(&c), ExplainOptions::default());
            if let Some(why) = e.unavailable() {
                return Err(LabError::Runtime(format!(
                    "trials with the explain collector need kernel tracing: {why}"
                )));
            }
            Some(e)
        } else {
            None
        };
        let mut engine = Engine::start(c, device).map_err(LabError::engine_start)?;
        if let Some(e) = explain.as_mut() {
            e.set_threads(&engine.threads());
        }
        let ok = wait(&mut engine, SETTLE, self.ctx, &mut explain, |_| {});
        if burst {
            engine.trigger_burst();
        }
        let mut t = Trial {
            sines,
            burst_sines,
            buffer: engine.device_info().buffer_frames,
            sample_rate: engine.device_info().sample_rate,
            buffers: 0,
            dropouts: 0,
            max_load_pct: 0.0,
        };
        let ok = ok
            && wait(&mut engine, d, self.ctx, &mut explain, |r| {
                t.buffers += 1;
                t.dropouts += u64::from(r.dropout());
                t.max_load_pct = t.max_load_pct.max(r.load() * 100.0);
                if let Some(stats) = self.record.as_mut() {
                    stats.add(r);
                }
            });
        let ended = engine.device_ended();
        engine.stop(|_| {});
        if let Some(e) = explain.as_mut() {
            e.finish();
        }
        if let Some(why) = ended {
            return Err(LabError::Runtime(format!("the device stopped: {why}")));
        }
        self.done += 1;
        self.ctx.progress.set_position(self.done);
        Ok(ok.then_some(t))
    }
}

/// Drains `engine` for `d` (every buffer to `each`, and to the explain collector with its due
/// cards built after each drain, as `run --explain` does); false when stopped. `probe
/// explain-cost` runs its runs through it too.
pub(crate) fn wait(
    engine: &mut Engine,
    d: Duration,
    ctx: &Ctx,
    explain: &mut Option<Explainer>,
    each: impl FnMut(&BufferReport),
) -> bool {
    let mut sink = Explained { explain, each };
    let end = xrunlab_engine::drain_loop(engine, Span::For(d), || ctx.stopped(), &mut sink);
    end != DrainEnd::Stopped
}

/// [`wait`]'s sink: one struct because both the buffers and the hook need the explain collector.
struct Explained<'a, F> {
    explain: &'a mut Option<Explainer>,
    each: F,
}

impl<F: FnMut(&BufferReport)> DrainSink<Engine> for Explained<'_, F> {
    type Break = Infallible;

    fn buffer(&mut self, b: &BufferReport) {
        if let Some(e) = self.explain.as_mut() {
            e.observe(b);
        }
        (self.each)(b);
    }

    fn after_drain(&mut self, _: &mut Engine, _: Duration, _: bool) -> ControlFlow<Infallible> {
        // After each whole drain, not each buffer: a card needs the buffers around a dropout.
        if let Some(e) = self.explain.as_mut() {
            e.build_due(false);
        }
        ControlFlow::Continue(())
    }
}

/// Sines one core renders in real time at `buffer` frames with `kernel`: the kernel's
/// throughput over the measuring thread's CPU time, not over wall time, so other processes
/// running on a shared machine meanwhile do not lower it (wall time would, and the search
/// ceiling with it: on a busy 2-core VM to a third).
pub fn core_sines(kernel: Kernel, buffer: u32, sample_rate: u32) -> f64 {
    let cpu0 = thread_cpu_ns();
    let f = xrunlab_dsp::measure::kernel_throughput(
        kernel,
        256,
        buffer as usize,
        Duration::from_millis(300),
    );
    let cpu_s = thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9;
    // The CPU time also holds the set-up (a chord of 256 partials), so never more than wall time.
    let secs = if cpu_s > 0.0 {
        cpu_s.min(f.elapsed_s)
    } else {
        f.elapsed_s
    };
    let partial_samples = f.buffers as f64 * f.sines as f64 * f.frames as f64;
    partial_samples / secs.max(f64::MIN_POSITIVE) / f64::from(sample_rate)
}

/// Runs the whole measurement; `open` opens the device of each trial.
pub fn run(
    p: &CapacityParams,
    open: &mut OpenDevice,
    ctx: &Ctx,
) -> Result<CapacityResult, LabError> {
    p.validate()?;
    let kernel = EngineConfig::default().kernel;
    let core: Vec<(u32, f64)> = p
        .buffers
        .iter()
        .map(|&b| (b, core_sines(kernel, b, p.sample_rate)))
        .collect();
    // A rough count for the bar: the search and burst trials (log2 of the resolution), the repeats, ~4 per latency.
    let steps = (p.resolution.max(2) as f64).log2().ceil() as u64 + 1;
    let per_point = steps + p.repeats as u64 + if p.burst_load_pct > 0.0 { steps } else { 0 };
    start_progress(
        ctx,
        (p.buffers.len() * p.presets.len()) as u64 * per_point + 4 * p.presets.len() as u64,
        "capacity",
    );
    let mut runner = Runner {
        open,
        ctx,
        done: 0,
        explain: p.explain,
        record: None,
    };
    let mut points = Vec::new();
    let mut latency = Vec::new();
    let mut stopped_early = false;
    'all: for &preset in &p.presets {
        for &(buffer, core_sines) in &core {
            match voicemark(p, preset, buffer, core_sines, &mut runner)? {
                Some(pt) => points.push(pt),
                None => {
                    stopped_early = true;
                    break 'all;
                }
            }
        }
        match latencymark(p, preset, &mut runner)? {
            Some(l) => latency.push(l),
            None => {
                stopped_early = true;
                break 'all;
            }
        }
    }
    ctx.progress.finish_and_clear();
    Ok(CapacityResult {
        params: p.clone(),
        core_sines: core,
        points,
        latency,
        stopped_early,
    })
}

/// VoiceMark at one buffer size and preset only (no LatencyMark; a burst search when
/// `burst_load_pct` > 0), searched up to the ceiling that `core_sines` (see [`core_sines`])
/// sets: what `bench explain` compares with and without the explain collector, with one
/// `core_sines` for both so the two searches try the same counts. `None` when stopped.
pub fn voicemark_at(
    p: &CapacityParams,
    preset: Preset,
    buffer: u32,
    core: f64,
    open: &mut OpenDevice,
    ctx: &Ctx,
) -> Result<Option<CapacityPoint>, LabError> {
    p.validate()?;
    let steps = (p.resolution.max(2) as f64).log2().ceil() as u64 + 1;
    start_progress(ctx, steps + p.repeats as u64, "capacity");
    let mut runner = Runner {
        open,
        ctx,
        done: 0,
        explain: p.explain,
        record: None,
    };
    let point = voicemark(p, preset, buffer, core, &mut runner);
    ctx.progress.finish_and_clear();
    point
}

fn voicemark(
    p: &CapacityParams,
    preset: Preset,
    buffer: u32,
    core_sines: f64,
    r: &mut Runner,
) -> Result<Option<CapacityPoint>, LabError> {
    let base = p.config(preset, buffer, 0);
    let max = base.chord_layout().max_sines(base.sample_rate);
    let threads = base.threads;
    // No thread renders faster than one core, so the threads' kernel capacity bounds the search
    // (a slowed kernel's capacity is that many times smaller).
    let kernel_bound = core_sines * threads as f64 * 1.25 / f64::from(p.kernel_slowdown.max(1));
    let ceiling = max.min(kernel_bound.ceil() as usize);
    let tolerance = (ceiling / p.resolution.max(1)).max(1);
    let mut trials = Vec::new();
    let found = largest_passing(ceiling, tolerance, |n| {
        let t = r.run(p.config(preset, buffer, n), p.seconds, false)?;
        Ok::<_, LabError>(t.map(|t| {
            let clean = t.clean();
            trials.push(t);
            clean
        }))
    })?;
    let Some(mut sines) = found else {
        return Ok(None);
    };
    // Confirmation: every repeat at the count must be clean; step down on a dropout.
    let mut step_downs = 0;
    let mut repeats = Vec::new();
    while sines > 0 {
        repeats.clear();
        r.record = Some(RunStats::new(base.realtime_threads()));
        for _ in 0..p.repeats {
            let c = p.config(preset, buffer, sines);
            let Some(t) = r.run(c, p.seconds, false)? else {
                return Ok(None);
            };
            let clean = t.clean();
            repeats.push(t);
            if !clean {
                break;
            }
        }
        if repeats.iter().all(Trial::clean) {
            break;
        }
        step_downs += 1;
        sines = sines.saturating_sub(tolerance);
        if step_downs > MAX_STEP_DOWNS {
            // The search's answer does not reproduce within a few brackets: the machine's noise,
            // not the load, decides; report no confirmed count rather than walk down to 0.
            sines = 0;
        }
        if sines == 0 {
            // Nothing was confirmed: the failed repeats belong to a larger count.
            repeats.clear();
        }
    }
    let histograms = r
        .record
        .take()
        .filter(|_| sines > 0)
        .map(|stats| RunHistograms::of(&stats));
    // A JACK server keeps its own rate; the figures follow the device.
    let sample_rate = repeats.first().map_or(base.sample_rate, |t| t.sample_rate);
    let loads: Vec<f64> = repeats.iter().map(|t| t.max_load_pct).collect();
    let burst = if p.burst_load_pct > 0.0 && sines > 0 {
        let steady = (sines as f64 * p.burst_load_pct / 100.0).round() as usize;
        let room = max.saturating_sub(steady);
        let hi = room.min(((sines as f64 * 1.25) as usize).saturating_sub(steady));
        let mut btrials = Vec::new();
        let largest = largest_passing(hi, (hi / p.resolution.max(1)).max(1), |b| {
            let mut c = p.config(preset, buffer, steady);
            c.burst_sines = b;
            let t = r.run(c, BURST_WATCH, true)?;
            Ok::<_, LabError>(t.map(|t| {
                let clean = t.clean();
                btrials.push(t);
                clean
            }))
        })?;
        let Some(largest) = largest else {
            return Ok(None);
        };
        Some(BurstFigure {
            steady_sines: steady,
            largest_burst_sines: largest,
            trials: btrials,
        })
    } else {
        None
    };
    Ok(Some(CapacityPoint {
        preset,
        buffer,
        sample_rate,
        realtime_threads: base.realtime_threads(),
        sines,
        pct_of_one_core: sines as f64 / core_sines.max(f64::MIN_POSITIVE) * 100.0,
        search_ceiling: ceiling,
        tolerance,
        step_downs,
        repeats,
        max_load_pct_spread: spread_of(&loads),
        trials,
        burst,
        histograms,
    }))
}

/// What a slowed result says about itself, so it never passes for a normal one.
fn slowdown_warning(k: u32) -> String {
    format!(
        "kernel slowed {k}x on purpose (--kernel-slowdown {k}, a test hook): every count is for a kernel {k} times as costly as this machine's, not a capacity to quote; % of one core is against the normal kernel"
    )
}

fn latencymark(
    p: &CapacityParams,
    preset: Preset,
    r: &mut Runner,
) -> Result<Option<LatencyPoint>, LabError> {
    let mut trials = Vec::new();
    let found = smallest_passing(LATENCY_BUFFERS.len(), |i| {
        let t = r.run(
            p.config(preset, LATENCY_BUFFERS[i], p.latency_sines),
            p.seconds,
            false,
        )?;
        Ok::<_, LabError>(t.map(|t| {
            let clean = t.clean();
            trials.push(t);
            clean
        }))
    })?;
    let Some(found) = found else {
        return Ok(None);
    };
    let smallest_buffer = found.map(|i| LATENCY_BUFFERS[i]);
    Ok(Some(LatencyPoint {
        preset,
        sines: p.latency_sines,
        smallest_buffer,
        latency_ms: smallest_buffer.map(|b| f64::from(b) / f64::from(p.sample_rate) * 1e3),
        trials,
    }))
}

impl Experiment for CapacityResult {
    const KIND: &'static str = KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "preset",
            "buffer",
            "sines",
            "pct_of_one_core",
            "max_load_pct_min",
            "max_load_pct_median",
            "max_load_pct_max",
            "repeats",
            "step_downs",
            "burst_steady_sines",
            "largest_burst_sines",
            "kernel_slowdown",
        ]);
        for q in &self.points {
            let s = q.max_load_pct_spread;
            t.push(vec![
                q.preset.name().to_string(),
                q.buffer.to_string(),
                q.sines.to_string(),
                format!("{:.1}", q.pct_of_one_core),
                crate::table::cell(s.map(|s| s.min)),
                crate::table::cell(s.map(|s| s.median)),
                crate::table::cell(s.map(|s| s.max)),
                q.repeats.len().to_string(),
                q.step_downs.to_string(),
                q.burst
                    .as_ref()
                    .map_or(String::new(), |b| b.steady_sines.to_string()),
                q.burst
                    .as_ref()
                    .map_or(String::new(), |b| b.largest_burst_sines.to_string()),
                self.params.kernel_slowdown.to_string(),
            ]);
        }
        t
    }

    fn text(&self) -> String {
        let mut out = format!(
            "capacity on the {} device, {} s dropout-free per trial, {} repeats{}\n",
            self.params.device,
            self.params.seconds.as_secs_f64(),
            self.params.repeats,
            match self.params.kernel_slowdown {
                1 => String::new(),
                k => format!(", kernel slowed {k}x (test hook)"),
            }
        );
        for (b, s) in &self.core_sines {
            let _ = writeln!(out, "one core, one thread at {b} frames: {s:.0} sines");
        }
        out.push_str("preset    buffer   sines  % of one core  max load % (min/median/max)  burst absorbed\n");
        for q in &self.points {
            let spread = q.max_load_pct_spread.map_or("-".into(), |s| {
                format!("{:.0}/{:.0}/{:.0}", s.min, s.median, s.max)
            });
            let burst = q.burst.as_ref().map_or("-".into(), |b| {
                format!("+{} on {} steady", b.largest_burst_sines, b.steady_sines)
            });
            let _ = writeln!(
                out,
                "{:<9} {:>6} {:>7} {:>14.0} {:>28}  {}{}",
                q.preset.name(),
                q.buffer,
                q.sines,
                q.pct_of_one_core,
                spread,
                burst,
                if q.limited_by_ceiling() {
                    " (reached the search ceiling)"
                } else {
                    ""
                }
            );
        }
        for l in &self.latency {
            let _ = writeln!(
                out,
                "latency: {} sines on {} need {}",
                l.sines,
                l.preset.name(),
                match (l.smallest_buffer, l.latency_ms) {
                    (Some(b), Some(ms)) => format!("{b} frames ({ms:.2} ms)"),
                    _ => "more than 4096 frames".into(),
                }
            );
        }
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.params.kernel_slowdown != 1 {
            w.push(slowdown_warning(self.params.kernel_slowdown));
        }
        if self.points.iter().any(CapacityPoint::limited_by_ceiling) {
            w.push("a count reached the search ceiling (no search trial had a dropout): the capacity is at least that".into());
        }
        for q in self.points.iter().filter(|q| q.sines == 0) {
            w.push(format!(
                "{} at {} frames: no count stayed dropout-free for {} s in the search and every repeat (smallest tried: {} sines, {} step-downs; a busy machine or a refused real-time class does this)",
                q.preset.name(),
                q.buffer,
                self.params.seconds.as_secs_f64(),
                q.trials.iter().map(|t| t.sines).min().unwrap_or(0),
                q.step_downs
            ));
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

    /// A deterministic stand-in for an engine trial: `n` sines pass while their cost fits the budget.
    fn fits(cost_per_sine: f64, budget: f64) -> impl FnMut(usize) -> Result<Option<bool>, ()> {
        move |n| Ok(Some(n as f64 * cost_per_sine <= budget))
    }

    #[test]
    fn a_kernel_k_times_slower_gives_a_k_times_smaller_capacity() {
        let hi = 5000;
        let tol = hi / 64;
        let fast = largest_passing(hi, tol, fits(1.0, 2400.0))
            .unwrap()
            .unwrap();
        let slow = largest_passing(hi, tol, fits(3.0, 2400.0))
            .unwrap()
            .unwrap();
        assert!(fast <= 2400 && fast + tol > 2400, "fast {fast}");
        assert!(slow <= 800 && slow + tol > 800, "slow {slow}");
        let ratio = fast as f64 / slow as f64;
        assert!((2.7..=3.3).contains(&ratio), "ratio {ratio}");
    }

    #[test]
    fn a_slowed_kernel_is_checked_carried_into_every_trial_and_said() {
        let mut p = CapacityParams::quick();
        for bad in [0, 17] {
            p.kernel_slowdown = bad;
            match p.validate() {
                Err(LabError::Usage(m)) => assert!(
                    m.contains("--kernel-slowdown") && m.contains("1..=16"),
                    "{m}"
                ),
                other => panic!("slowdown {bad}: {other:?}"),
            }
        }
        p.kernel_slowdown = 3;
        p.validate().unwrap();
        assert_eq!(p.config(Preset::Optimal, 256, 100).kernel_slowdown, 3);
        let result = CapacityResult {
            params: p.clone(),
            core_sines: vec![],
            points: vec![],
            latency: vec![],
            stopped_early: false,
        };
        assert!(
            result.warnings()[0].contains("kernel slowed 3x on purpose"),
            "{:?}",
            result.warnings()
        );
        assert!(result.text().contains("kernel slowed 3x (test hook)"));
        p.kernel_slowdown = 1;
        let normal = CapacityResult {
            params: p,
            ..result
        };
        assert!(normal.warnings().is_empty() && !normal.text().contains("slowed"));
    }

    #[test]
    fn the_search_is_exact_with_tolerance_one_and_stops_when_asked() {
        assert_eq!(largest_passing(1000, 1, fits(1.0, 377.0)), Ok(Some(377)));
        assert_eq!(largest_passing(1000, 1, fits(1.0, 5000.0)), Ok(Some(1000)));
        assert_eq!(largest_passing(1000, 1, fits(1.0, 0.5)), Ok(Some(0)));
        let mut calls = 0;
        let stopped = largest_passing(1000, 1, |_| {
            calls += 1;
            Ok::<_, ()>(if calls > 2 { None } else { Some(true) })
        });
        assert_eq!(stopped, Ok(None));
    }

    #[test]
    fn the_latency_search_finds_the_first_passing_size() {
        let pass_from = |k: usize| move |i: usize| Ok::<_, ()>(Some(i >= k));
        for k in 0..=LATENCY_BUFFERS.len() {
            let want = (k < LATENCY_BUFFERS.len()).then_some(k);
            assert_eq!(
                smallest_passing(LATENCY_BUFFERS.len(), pass_from(k)),
                Ok(Some(want))
            );
        }
    }
}
