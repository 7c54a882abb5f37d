//! The result file of `xrunlab compare` and `xrunlab ab` (schema [`SCHEMA`]): what differs
//! between the machines, each metric on both sides with the difference, its 95 % interval,
//! the verdict and its chance under noise, and the overlaid distributions. Written by compare
//! and ab, read by report, on the main thread.

use crate::histogram::EncodedHistogram;
use serde::{Deserialize, Serialize};
use xrunlab_sys::{Fingerprint, Provenance};

/// Version of this file's layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.compare/1";

/// One fingerprint field that differs between the sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FingerprintChange {
    /// The field, e.g. "kernel_release".
    pub field: String,
    /// Side A's values (one per distinct value among its files).
    pub a: Vec<String>,
    /// Side B's values.
    pub b: Vec<String>,
}

/// Better, worse or not shown, for side B against side A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B is better (lower, or higher for a metric where higher is better, see
    /// [`MetricComparison::higher_is_better`]) and the interval excludes zero.
    Better,
    /// B is worse (the other way) and the interval excludes zero.
    Worse,
    /// The interval lies within ± [`CompareResult::margin_pct`]: whatever the change is, it is
    /// smaller than that (files written before the margin: the interval includes zero).
    NoDifference,
    /// Tested, but the interval is too wide to tell a change from none: it includes zero and
    /// reaches beyond the margin. More runs would decide.
    Undecided,
    /// Fewer runs a side than the test needs ([`MetricComparison::runs_needed`]): the interval
    /// is shown, never a verdict, because the run-to-run spread is unknown.
    NotEnoughRuns,
    /// Not judged: an extreme (a maximum), a metric outside the gate
    /// ([`MetricComparison::gated`]), or figures a test on logs cannot take (a zero).
    NotJudged,
}

/// Which test produced a metric's interval and chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Several runs per side: Welch's t-test on the logs of the runs' figures (it uses the
    /// spread between runs, and its interval is of the ratio of the geometric means).
    WelchTOnLogs,
    /// The rounds of an A/B (A then B, interleaved): the paired t-test on the logs of each
    /// round's ratio B/A, so a drift of the machine that both runs of a round share cancels.
    PairedTOnLogRatios,
    /// Several runs per side (files written before the t-tests): a permutation test over the
    /// runs' values and a bootstrap of the runs for the interval.
    PermutationOverRuns,
    /// One run per side: a block bootstrap over the runs' histograms (weak evidence: it cannot
    /// see run-to-run variation).
    BlockBootstrapOneRun,
    /// Events over exposure (dropouts per hour): the exact conditional binomial test of the
    /// two sides' pooled counts given their hours, and Clopper-Pearson's interval of the rate
    /// ratio; the change is of the pooled rates, not of the runs' medians.
    ExactRateTest,
    /// The figure cannot be resampled (max, counts with one run): both sides shown, no verdict.
    Descriptive,
}

/// One metric on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    /// e.g. "load p99".
    pub metric: String,
    /// "%" or "us" or "per hour".
    pub unit: String,
    /// Side A's value per run.
    pub a: Vec<f64>,
    /// Side B's value per run.
    pub b: Vec<f64>,
    /// Median of A's runs.
    pub a_median: f64,
    /// Median of B's runs.
    pub b_median: f64,
    /// B − A in percent of A (`None` when A is 0).
    pub change_pct: Option<f64>,
    /// 95 % interval of the change in percent of A.
    pub interval_pct: Option<[f64; 2]>,
    /// Verdict for B against A.
    pub verdict: Verdict,
    /// Chance of a difference at least this large arising by noise alone (two-sided).
    pub p_value: Option<f64>,
    /// How the interval and chance were found.
    pub method: Method,
    /// True where a higher value is better (capacity, throughput); lower is better otherwise
    /// (latency, load, dropouts). Files written before the field read as lower is better.
    #[serde(default)]
    pub higher_is_better: bool,
    /// When the interval has no upper end (A had no events, so any rise is an infinite
    /// change): its lower end, B's change in percent of A is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_at_least_pct: Option<f64>,
    /// The metric is in the gate: it gets a verdict, at the gate's level
    /// ([`CompareResult::gate_confidence`]), and `--fail-if-worse` looks at it.
    #[serde(default)]
    pub gated: bool,
    /// With [`Verdict::NotEnoughRuns`]: the runs a side the test needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<usize>,
}

impl MetricComparison {
    /// Whether B is worse than A by more than `pct` percent at the interval's confidence: the
    /// verdict is worse and the whole interval lies beyond `pct` on the worse side (above
    /// `+pct` where lower is better, below `−pct` where higher is better). An interval open
    /// above counts by its lower end ([`MetricComparison::change_at_least_pct`]).
    pub fn worse_by_more_than(&self, pct: f64) -> bool {
        if self.verdict != Verdict::Worse {
            return false;
        }
        if self.higher_is_better {
            self.interval_pct.is_some_and(|[_, hi]| hi < -pct)
        } else {
            self.interval_pct
                .map(|[lo, _]| lo)
                .or(self.change_at_least_pct)
                .is_some_and(|lo| lo > pct)
        }
    }
}

/// A distribution drawn in the report: each side's runs merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideDistribution {
    /// e.g. "driver wake-up latency".
    pub name: String,
    /// Side A's runs merged.
    pub a: EncodedHistogram,
    /// Side B's runs merged.
    pub b: EncodedHistogram,
}

/// One row of the table per machine fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineRow {
    /// The side ("a" or "b").
    pub side: String,
    /// The machine.
    pub fingerprint: Fingerprint,
    /// Files from it.
    pub files: Vec<String>,
    /// Per metric: median and min/max over its runs.
    pub metrics: Vec<MachineMetric>,
}

/// One metric over one machine's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineMetric {
    /// As in [`MetricComparison::metric`].
    pub metric: String,
    /// Median over the runs.
    pub median: f64,
    /// Lowest run.
    pub min: f64,
    /// Highest run.
    pub max: f64,
}

/// What `compare` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where this comparison was made.
    pub provenance: Provenance,
    /// Side A's files.
    pub a_files: Vec<String>,
    /// Side B's files.
    pub b_files: Vec<String>,
    /// Fingerprint fields that differ.
    pub fingerprint_diff: Vec<FingerprintChange>,
    /// Workload settings that differ (compared anyway with --force).
    pub workload_diff: Vec<FingerprintChange>,
    /// Confidence of the intervals (0.95).
    pub confidence: f64,
    /// The gated metrics' names: the only ones that get a verdict.
    #[serde(default)]
    pub gate: Vec<String>,
    /// Confidence of each gated metric's interval: the gated metrics' intervals hold together
    /// at [`CompareResult::confidence`] (Bonferroni), less at an early look of a sequential A/B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_confidence: Option<f64>,
    /// A change within ± this many percent counts as none ([`Verdict::NoDifference`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin_pct: Option<f64>,
    /// Notes on the evidence (one run per side, forced workloads...).
    pub notes: Vec<String>,
    /// The metrics.
    pub metrics: Vec<MetricComparison>,
    /// Distributions to overlay.
    pub distributions: Vec<SideDistribution>,
    /// A row per machine fingerprint.
    pub machines: Vec<MachineRow>,
}
