//! `--measure`: short A/B runs of the engine on the simulated device for settings the process
//! can toggle for itself (PM QoS, mlockall, SCHED_FIFO, pinning, busy threads, minimum load),
//! interleaved and repeated, with a verdict per toggle. Runs on the calling (main) thread; the
//! engine's own threads do the audio work.
//!
//! The verdict rule: each repeat of each arm ("off" and "on") gives one value of a metric
//! (e.g. the driver's wake-up latency p50 over that run). The setting **helps** when every
//! "on" value is lower than every "off" value, **hurts** when every "on" value is higher
//! than every "off" value, and has **no effect measurable** when the two ranges (min to max
//! over the repeats) overlap, i.e. the difference is within the spread of repeats, or when
//! the medians differ by less than [`MIN_EFFECT`] (5 %) of the "off" median, a difference
//! too small to matter even if it is steady. With n repeats per arm, noise alone separates
//! the arms with probability 2 / C(2n, n): 1 in 3 for 2 repeats, 1 in 10 for 3, 1 in 35 for 4.

use std::time::{Duration, Instant};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Engine, EngineConfig, RunStats};
use xrunlab_sys::Outcome;

pub use xrunlab_results::doctor_measure::{
    MeasureReport, Metric, MetricResult, Spread, Toggle, ToggleResult, Verdict, MIN_EFFECT,
};

/// How long and how often to measure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    /// Measured time per run (after the warm-up).
    pub segment: Duration,
    /// Runs discarded at the start of each run: thread start, first page faults.
    pub warmup: Duration,
    /// Runs per arm and toggle.
    pub repeats: usize,
    /// The engine settings every run starts from ("off" for every toggle but SCHED_FIFO,
    /// whose "off" is SCHED_OTHER).
    pub base: EngineConfig,
}

impl Plan {
    /// 3 repeats of 2 s per arm: about 90 s for the six toggles.
    pub fn standard(base: EngineConfig) -> Plan {
        Plan {
            segment: Duration::from_secs(2),
            warmup: Duration::from_millis(250),
            repeats: 3,
            base,
        }
    }

    /// 2 repeats of 1 s per arm: about 30 s, and a 1-in-3 chance that noise alone separates
    /// two arms, so its verdicts are a first look.
    pub fn quick(base: EngineConfig) -> Plan {
        Plan {
            segment: Duration::from_secs(1),
            warmup: Duration::from_millis(200),
            repeats: 2,
            base,
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    values: [f64; 4],
    dropouts: u64,
}

/// 2 / C(2n, n): the probability that, with no effect at all, one arm's n values all fall
/// below (or all above) the other arm's n.
pub fn chance_of_separation(n: usize) -> f64 {
    let n = n as f64;
    let mut c = 1.0;
    let mut k = 1.0;
    while k <= n {
        c *= (n + k) / k;
        k += 1.0;
    }
    2.0 / c
}

/// Why one run of an arm gave no figures; the toggle's notes carry the message.
#[derive(Debug, thiserror::Error)]
enum ArmError {
    /// The engine refused the arm's config or could not start.
    #[error("the engine did not start: {0}")]
    EngineStart(#[source] xrunlab_engine::EngineError),
    /// The setting the arm turns on did not take effect: the outcome's summary.
    #[error("{0}")]
    NotApplied(String),
}

/// Whether an arm's setting took effect, and why not.
fn took_effect(toggle: Toggle, engine: &Engine) -> Result<(), ArmError> {
    let rt = engine.process_rt();
    let outcome = |o: &Outcome| {
        if o.took_effect() {
            Ok(())
        } else {
            Err(ArmError::NotApplied(o.summary()))
        }
    };
    match toggle {
        Toggle::PmQos => outcome(&rt.pm_qos),
        Toggle::Mlockall => outcome(&rt.mlock),
        Toggle::SchedFifo | Toggle::Pinning => {
            for t in engine.threads() {
                let o = if toggle == Toggle::SchedFifo {
                    &t.sched.priority
                } else {
                    &t.sched.affinity
                };
                outcome(o)?;
            }
            Ok(())
        }
        Toggle::BusyThreads | Toggle::MinLoad => Ok(()),
    }
}

/// Runs the engine once with `config`; `Err` when it cannot start or the setting was refused.
fn run_once(
    toggle: Toggle,
    on: bool,
    config: EngineConfig,
    plan: &Plan,
    should_stop: &dyn Fn() -> bool,
) -> Result<Option<RunFigures>, ArmError> {
    let device = SimDevice::new(config.sample_rate, config.buffer_frames, false);
    let threads = config.realtime_threads();
    let mut engine = Engine::start(config, Box::new(device)).map_err(ArmError::EngineStart)?;
    let applied = if on {
        took_effect(toggle, &engine)
    } else {
        Ok(())
    };
    let t0 = Instant::now();
    while t0.elapsed() < plan.warmup {
        std::thread::sleep(Duration::from_millis(10));
        engine.drain(|_| {});
    }
    let mut stats = RunStats::new(threads);
    let t1 = Instant::now();
    while t1.elapsed() < plan.segment && !should_stop() {
        std::thread::sleep(Duration::from_millis(10));
        engine.drain(|b| stats.add(b));
    }
    let stopped = should_stop();
    engine.stop(|b| stats.add(b));
    if toggle == Toggle::Mlockall && on {
        // mlockall outlives the engine; the next run must start unlocked again.
        xrunlab_sys::sched::unlock_memory();
    }
    applied?;
    if stopped {
        return Ok(None);
    }
    let s = stats.summary();
    Ok(Some(RunFigures {
        values: [
            s.driver_wake_latency_us.p50,
            s.driver_wake_latency_us.p99,
            s.load_pct.p50,
            s.load_pct.p99,
        ],
        dropouts: s.dropouts,
    }))
}

/// Measures every toggle of `toggles` under `plan`: for each repeat, each toggle runs both
/// arms back to back, alternating which goes first (off-on, then on-off), so slow drifts of
/// the machine fall on both arms. `should_stop` is polled between and during runs;
/// `progress` receives a line per run.
pub fn measure(
    plan: &Plan,
    toggles: &[Toggle],
    should_stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(&str),
) -> MeasureReport {
    // Per toggle: (off figures, on figures, notes).
    type Arms = (Vec<RunFigures>, Vec<RunFigures>, Vec<String>);
    let mut arms: Vec<Arms> = toggles
        .iter()
        .map(|_| (Vec::new(), Vec::new(), Vec::new()))
        .collect();
    let mut interrupted = None;
    'outer: for rep in 0..plan.repeats {
        for (i, &toggle) in toggles.iter().enumerate() {
            let order = if (rep + i) % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for on in order {
                if should_stop() {
                    interrupted = Some(format!(
                        "stopped by a signal during repeat {} of {}",
                        rep + 1,
                        plan.repeats
                    ));
                    break 'outer;
                }
                progress(&format!(
                    "measuring {} {} (repeat {} of {})",
                    toggle.name(),
                    if on { "on" } else { "off" },
                    rep + 1,
                    plan.repeats
                ));
                let config = toggle.config(&plan.base, on);
                match run_once(toggle, on, config, plan, should_stop) {
                    Ok(Some(f)) if on => arms[i].1.push(f),
                    Ok(Some(f)) => arms[i].0.push(f),
                    Ok(None) => {}
                    Err(e) => {
                        let note = e.to_string();
                        if !arms[i].2.contains(&note) {
                            arms[i].2.push(note);
                        }
                    }
                }
            }
        }
    }
    let toggles = toggles
        .iter()
        .zip(arms)
        .map(|(&toggle, (off, on, notes))| {
            let metrics: Vec<MetricResult> = Metric::ALL
                .iter()
                .enumerate()
                .map(|(m, &metric)| {
                    let off = Spread::of(&off.iter().map(|f| f.values[m]).collect::<Vec<_>>());
                    let on = Spread::of(&on.iter().map(|f| f.values[m]).collect::<Vec<_>>());
                    MetricResult {
                        metric,
                        verdict: Verdict::judge(&off, &on),
                        off,
                        on,
                    }
                })
                .collect();
            let primary = toggle.primary();
            let verdict = if !notes.is_empty() && on.is_empty() {
                Verdict::NotApplied
            } else {
                metrics
                    .iter()
                    .find(|m| m.metric == primary)
                    .map_or(Verdict::Incomplete, |m| m.verdict)
            };
            let (off_label, on_label) = toggle.arms();
            ToggleResult {
                toggle,
                name: toggle.name().to_owned(),
                off: off_label.to_owned(),
                on: on_label.to_owned(),
                primary,
                verdict,
                dropouts: (
                    off.iter().map(|f| f.dropouts).sum(),
                    on.iter().map(|f| f.dropouts).sum(),
                ),
                metrics,
                notes,
            }
        })
        .collect();
    let chance = chance_of_separation(plan.repeats);
    MeasureReport {
        segment_s: plan.segment.as_secs_f64(),
        warmup_s: plan.warmup.as_secs_f64(),
        repeats: plan.repeats,
        chance_of_false_separation: chance,
        rule: format!(
            "each run gives one value per metric; \"helps\" = every run with the setting beat every run without it, \
             \"hurts\" = every run with it was worse, \"no effect measurable\" = the ranges (min..max over the {} repeats \
             of each arm) overlap, i.e. the difference is within the spread of repeats, or the medians differ by less than \
             {:.0} % of the \"off\" median. With no real effect, noise alone separates the arms with probability \
             2/C(2n,n) = 1 in {:.0} for n = {}. The verdict is the primary metric's (marked *).",
            plan.repeats,
            MIN_EFFECT * 100.0,
            1.0 / chance,
            plan.repeats
        ),
        buffer_frames: plan.base.buffer_frames,
        sample_rate: plan.base.sample_rate,
        sines: plan.base.sines,
        threads: plan.base.threads,
        toggles,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_spread_rule() {
        let off = Spread::of(&[50.0, 60.0, 55.0]);
        assert_eq!((off.median, off.min, off.max), (55.0, 50.0, 60.0));
        assert_eq!(
            Verdict::judge(&off, &Spread::of(&[20.0, 30.0, 49.9])),
            Verdict::Helps
        );
        assert_eq!(
            Verdict::judge(&off, &Spread::of(&[61.0, 70.0, 65.0])),
            Verdict::Hurts
        );
        assert_eq!(
            Verdict::judge(&off, &Spread::of(&[40.0, 50.0, 45.0])),
            Verdict::NoEffectMeasurable,
            "touching ranges overlap"
        );
        assert_eq!(
            Verdict::judge(&off, &Spread::of(&[10.0])),
            Verdict::Incomplete
        );
        assert_eq!(Spread::of(&[1.0, 3.0]).median, 2.0);
    }

    #[test]
    fn chance_of_separation_is_two_over_the_central_binomial() {
        assert!((chance_of_separation(2) - 1.0 / 3.0).abs() < 1e-12);
        assert!((chance_of_separation(3) - 0.1).abs() < 1e-12);
        assert!((chance_of_separation(4) - 2.0 / 70.0).abs() < 1e-12);
    }

    #[test]
    fn arms_differ_only_in_their_toggle() {
        let base = EngineConfig::default();
        for t in Toggle::ALL {
            let (off, on) = (t.config(&base, false), t.config(&base, true));
            assert_ne!(off, on, "{t:?} changes something");
            let mut on_reset = on.clone();
            on_reset.rt.pm_qos = off.rt.pm_qos;
            on_reset.rt.mlock = off.rt.mlock;
            on_reset.rt.priority = off.rt.priority;
            on_reset.rt.pin = off.rt.pin;
            on_reset.busy = off.busy;
            on_reset.min_load_pct = off.min_load_pct;
            assert_eq!(on_reset, off, "{t:?} changes only its own field");
        }
        assert_eq!(Toggle::SchedFifo.config(&base, false).rt.priority, None);
        assert_eq!(Toggle::SchedFifo.config(&base, true).rt.priority, Some(70));
    }
}
