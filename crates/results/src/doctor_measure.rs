//! The result of `xrunlab doctor --measure` (inside the doctor's result file,
//! [`crate::doctor::DoctorResult`]): per process-local toggle, the spread of each metric over
//! the repeats of each arm and the verdict by the spread rule, and the table the doctor
//! prints. The doctor crate measures; these types are written and read back. Main thread.

use serde::{Deserialize, Serialize};
use xrunlab_engine::{BusyConfig, EngineConfig};

/// The smallest difference of medians, relative to the "off" median, that counts as an effect.
pub const MIN_EFFECT: f64 = 0.05;

/// A setting the process can toggle for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Toggle {
    /// /dev/cpu_dma_latency held at 0 us.
    PmQos,
    /// mlockall(MCL_CURRENT | MCL_FUTURE).
    Mlockall,
    /// SCHED_FIFO 70 against SCHED_OTHER for the audio threads.
    SchedFifo,
    /// Each audio thread pinned to one CPU.
    Pinning,
    /// One busy thread (35 ms period, 50 % duty).
    BusyThreads,
    /// A minimum load of 30 % of the buffer.
    MinLoad,
}

/// The metrics measured per run; lower is better for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Driver wake-up latency p50, microseconds.
    WakeP50Us,
    /// Driver wake-up latency p99, microseconds.
    WakeP99Us,
    /// Load (render time in percent of the buffer) p50.
    LoadP50Pct,
    /// Load p99.
    LoadP99Pct,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 4] = [
        Metric::WakeP50Us,
        Metric::WakeP99Us,
        Metric::LoadP50Pct,
        Metric::LoadP99Pct,
    ];

    /// Column name.
    pub fn label(self) -> &'static str {
        match self {
            Metric::WakeP50Us => "wake p50 us",
            Metric::WakeP99Us => "wake p99 us",
            Metric::LoadP50Pct => "load p50 %",
            Metric::LoadP99Pct => "load p99 %",
        }
    }
}

impl Toggle {
    /// Every toggle, in measuring order.
    pub const ALL: [Toggle; 6] = [
        Toggle::PmQos,
        Toggle::Mlockall,
        Toggle::SchedFifo,
        Toggle::Pinning,
        Toggle::BusyThreads,
        Toggle::MinLoad,
    ];

    /// Name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Toggle::PmQos => "PM QoS",
            Toggle::Mlockall => "mlockall",
            Toggle::SchedFifo => "SCHED_FIFO",
            Toggle::Pinning => "pinning",
            Toggle::BusyThreads => "busy threads",
            Toggle::MinLoad => "minimum load",
        }
    }

    /// What "off" and "on" mean.
    pub fn arms(self) -> (&'static str, &'static str) {
        match self {
            Toggle::PmQos => (
                "no PM QoS request",
                "/dev/cpu_dma_latency held at 0 us (--pm-qos)",
            ),
            Toggle::Mlockall => ("memory not locked", "mlockall (--mlock)"),
            Toggle::SchedFifo => ("SCHED_OTHER (--no-rt)", "SCHED_FIFO 70"),
            Toggle::Pinning => ("threads free to migrate", "one CPU per thread (--pin)"),
            Toggle::BusyThreads => (
                "no busy thread",
                "1 busy thread, 35 ms, 50 % (--busy-threads 1)",
            ),
            Toggle::MinLoad => ("no minimum load", "minimum load 30 % (--min-load 30)"),
        }
    }

    /// The metric the setting exists for, which decides its verdict: PM QoS shortens every
    /// wake-up (p50); mlockall, FIFO and pinning guard against rare stalls (p99); busy
    /// threads and minimum load keep the clock up so renders take less time (load p50).
    pub fn primary(self) -> Metric {
        match self {
            Toggle::PmQos => Metric::WakeP50Us,
            Toggle::Mlockall | Toggle::SchedFifo | Toggle::Pinning => Metric::WakeP99Us,
            Toggle::BusyThreads | Toggle::MinLoad => Metric::LoadP50Pct,
        }
    }

    /// The engine settings of one arm.
    pub fn config(self, base: &EngineConfig, on: bool) -> EngineConfig {
        let mut c = base.clone();
        match self {
            Toggle::PmQos => c.rt.pm_qos = on,
            Toggle::Mlockall => c.rt.mlock = on,
            Toggle::SchedFifo => c.rt.priority = on.then_some(base.rt.priority.unwrap_or(70)),
            Toggle::Pinning => c.rt.pin = on,
            Toggle::BusyThreads => {
                c.busy = if on {
                    BusyConfig {
                        count: 1,
                        period_ms: 35,
                        duty_pct: 50.0,
                    }
                } else {
                    BusyConfig {
                        count: 0,
                        ..base.busy
                    }
                }
            }
            Toggle::MinLoad => c.min_load_pct = if on { 30.0 } else { 0.0 },
        }
        c
    }
}

/// A metric over the repeats of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// One value per repeat, in the order measured.
    pub values: Vec<f64>,
    /// Their median.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (empty gives zeros).
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = match sorted.len() {
            0 => 0.0,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Spread {
            values: values.to_vec(),
            median,
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// What measuring a toggle concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every "on" run beat every "off" run.
    Helps,
    /// The ranges of the two arms overlap: within the spread of repeats.
    NoEffectMeasurable,
    /// Every "on" run was worse than every "off" run.
    Hurts,
    /// The setting did not take effect (refused by the system), so nothing was compared.
    NotApplied,
    /// Fewer than two runs per arm (measuring was interrupted).
    Incomplete,
}

impl Verdict {
    /// The words the table prints.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Helps => "helps",
            Verdict::NoEffectMeasurable => "no effect measurable",
            Verdict::Hurts => "hurts",
            Verdict::NotApplied => "not applied",
            Verdict::Incomplete => "incomplete",
        }
    }

    /// The rule for one metric (lower is better): disjoint ranges decide, overlap (or a
    /// difference of medians below [`MIN_EFFECT`]) is "no effect measurable".
    pub fn judge(off: &Spread, on: &Spread) -> Verdict {
        if off.values.len() < 2 || on.values.len() < 2 {
            Verdict::Incomplete
        } else if (on.median - off.median).abs() < MIN_EFFECT * off.median.abs() {
            Verdict::NoEffectMeasurable
        } else if on.max < off.min {
            Verdict::Helps
        } else if on.min > off.max {
            Verdict::Hurts
        } else {
            Verdict::NoEffectMeasurable
        }
    }
}

/// One metric of one toggle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    /// Which metric.
    pub metric: Metric,
    /// Over the "off" runs.
    pub off: Spread,
    /// Over the "on" runs.
    pub on: Spread,
    /// The rule applied to this metric.
    pub verdict: Verdict,
}

/// Everything measured for one toggle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToggleResult {
    /// Which toggle.
    pub toggle: Toggle,
    /// Its name.
    pub name: String,
    /// What "off" was.
    pub off: String,
    /// What "on" was.
    pub on: String,
    /// The metric that decides the verdict.
    pub primary: Metric,
    /// The verdict (the primary metric's, unless the setting was not applied).
    pub verdict: Verdict,
    /// Each metric's spreads and verdict.
    pub metrics: Vec<MetricResult>,
    /// Dropouts in the "off" runs and in the "on" runs.
    pub dropouts: (u64, u64),
    /// What the system said when the setting did not take effect.
    pub notes: Vec<String>,
}

/// The result of `--measure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureReport {
    /// Measured seconds per run.
    pub segment_s: f64,
    /// Discarded seconds at the start of each run.
    pub warmup_s: f64,
    /// Runs per arm.
    pub repeats: usize,
    /// The chance that noise alone separates two arms: 2 / C(2n, n).
    pub chance_of_false_separation: f64,
    /// The rule, in words.
    pub rule: String,
    /// Buffer size and rate measured at.
    pub buffer_frames: u32,
    /// Sample rate.
    pub sample_rate: u32,
    /// Sines played (the workload).
    pub sines: usize,
    /// Processing threads.
    pub threads: usize,
    /// Per toggle.
    pub toggles: Vec<ToggleResult>,
    /// Set when a stop signal ended measuring early.
    pub interrupted: Option<String>,
}

/// Three significant figures at most, so that small loads (1.53 %) keep the digits a
/// verdict may rest on.
fn short(v: f64) -> String {
    match v.abs() {
        a if a < 10.0 => format!("{v:.2}"),
        a if a < 100.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

impl MeasureReport {
    /// The table the doctor prints.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Measured on the simulated device: {} sines on {} thread(s), {} frames at {} Hz; {} run(s) of {:.1} s per arm \
             (after {:.2} s warm-up), arms interleaved off/on then on/off.",
            self.sines, self.threads, self.buffer_frames, self.sample_rate, self.repeats, self.segment_s, self.warmup_s
        );
        let _ = writeln!(
            out,
            "Values: median over the runs [min..max]; lower is better.\n"
        );
        let _ = writeln!(
            out,
            "| toggle | arm | {} | dropouts | verdict |",
            Metric::ALL.map(|m| m.label()).join(" | ")
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for t in &self.toggles {
            for (arm, on) in [("off", false), ("on", true)] {
                let cells: Vec<String> = t
                    .metrics
                    .iter()
                    .map(|m| {
                        let s = if on { &m.on } else { &m.off };
                        let star = if m.metric == t.primary { "*" } else { "" };
                        if s.values.is_empty() {
                            format!("-{star}")
                        } else {
                            format!(
                                "{} [{}..{}]{star}",
                                short(s.median),
                                short(s.min),
                                short(s.max)
                            )
                        }
                    })
                    .collect();
                let verdict = if on { t.verdict.label() } else { "" };
                let _ = writeln!(
                    out,
                    "| {} | {arm} | {} | {} | {verdict} |",
                    if on { "" } else { &t.name },
                    cells.join(" | "),
                    if on { t.dropouts.1 } else { t.dropouts.0 }
                );
            }
        }
        let _ = writeln!(out);
        for t in &self.toggles {
            let _ = writeln!(out, "{}: off = {}; on = {}.", t.name, t.off, t.on);
            for n in &t.notes {
                let _ = writeln!(out, "  not applied: {n}");
            }
        }
        let _ = writeln!(out, "\nRule: {}", self.rule);
        if let Some(why) = &self.interrupted {
            let _ = writeln!(
                out,
                "Interrupted: {why}; the verdicts use the runs finished before."
            );
        }
        out
    }
}
