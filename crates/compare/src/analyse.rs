//! Builds the compare result from two sides' run files: decodes their histograms (refusing
//! other units, naming file and field), refuses different workloads unless forced, and
//! compares each metric with the method the number of runs allows. Main thread.

use crate::diff::{fingerprint_diff_of, workload_diff};
use crate::gate::{self, Plan as GatePlan};
use crate::judge::{judge, judge_rate, Figures, MIN_RUNS};
use crate::stats;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::fmt;
use std::path::{Path, PathBuf};
use xrunlab_engine::{Scale, Summary};
use xrunlab_results::compare::{
    CompareResult, FingerprintChange, MachineMetric, MachineRow, MetricComparison,
    SideDistribution, Verdict, SCHEMA,
};
use xrunlab_results::histogram::merged as merged_histograms;
use xrunlab_results::run::RunFile;
use xrunlab_results::{EncodedHistogram, Fingerprint, Provenance, ReadError};

/// The same files always give the same figures.
pub(crate) const SEED: u64 = 0x5eed_a0b0;

/// One side: its files, read.
pub type Side = [(PathBuf, RunFile)];

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Compare different workloads anyway.
    pub force: bool,
    /// The metrics that get a verdict, as printed ("driver wake-up p99") or dotted
    /// ("driver_wake.p99"); `None`: the kind of result's default (see [`crate::gate`]).
    pub gate: Option<Vec<String>>,
    /// The sides' i-th runs are round i of an A/B (A then B): judged by the paired t-test.
    pub paired: bool,
    /// The chance of any false verdict over the gated metrics together (5 %; an early look
    /// of a sequential A/B takes less, see [`crate::sequential`]).
    pub alpha: f64,
    /// A change within ± this many percent counts as none.
    pub margin_pct: f64,
}

/// A change within ± this many percent counts as none unless the user says otherwise.
pub const DEFAULT_MARGIN_PCT: f64 = 5.0;

impl Default for Options {
    fn default() -> Options {
        Options {
            force: false,
            gate: None,
            paired: false,
            alpha: 1.0 - stats::CONFIDENCE,
            margin_pct: DEFAULT_MARGIN_PCT,
        }
    }
}

/// Why there is no comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum CompareError {
    /// A file does not hold what a run result holds.
    Read(ReadError),
    /// The sides ran different workloads (and `force` was not given).
    Workload(Vec<FingerprintChange>),
    /// A side has no file.
    EmptySide(&'static str),
    /// The gate names a metric that is not there, or a maximum.
    Gate(String),
    /// A side's histograms, each valid, do not add up into one: the side, and why.
    Histograms(&'static str, String),
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::Read(e) => e.fmt(f),
            CompareError::Workload(changes) => {
                let list: Vec<String> = changes
                    .iter()
                    .map(|c| format!("{}: {} vs {}", c.field, c.a.join("/"), c.b.join("/")))
                    .collect();
                write!(
                    f,
                    "the files ran different workloads ({}), so their figures measure different \
                     work; compare like with like, or give --force to compare them anyway",
                    list.join("; ")
                )
            }
            CompareError::EmptySide(side) => write!(f, "side {side} has no result file"),
            CompareError::Gate(problem) => f.write_str(problem),
            CompareError::Histograms(side, e) => write!(f, "side {side}: {e}"),
        }
    }
}

impl std::error::Error for CompareError {}

/// A run's histograms, decoded.
struct Decoded {
    load: Histogram<u64>,
    driver: Histogram<u64>,
    worker: Histogram<u64>,
}

fn decode(path: &std::path::Path, r: &RunFile) -> Result<Decoded, ReadError> {
    let one = |field: &str, e: &EncodedHistogram, scale| {
        e.decode_as(scale).map_err(|problem| {
            ReadError::new(path, &format!("histograms.{field}"), problem.to_string())
        })
    };
    let h = &r.histograms;
    Ok(Decoded {
        load: one("load_pct", &h.load_pct, Scale::Percent)?,
        driver: one(
            "driver_wake_latency_us",
            &h.driver_wake_latency_us,
            Scale::Micros,
        )?,
        worker: one(
            "worker_wake_latency_us",
            &h.worker_wake_latency_us,
            Scale::Micros,
        )?,
    })
}

/// Which distribution a metric's quantile comes from.
#[derive(Clone, Copy)]
enum Source {
    Load,
    Driver,
    Worker,
}

/// A run's count of events and its exposure in hours.
type Events = fn(&Summary) -> (u64, f64);

struct Metric {
    name: &'static str,
    unit: &'static str,
    value: fn(&Summary) -> f64,
    /// The histogram and quantile for the one-run bootstrap; `None`: not resampled.
    quantile: Option<(Source, f64)>,
    /// Whether the metric exists for this pair (workers may be absent).
    present: fn(&Summary) -> bool,
    /// For a rate of events: the run's count and its exposure in hours, compared by the exact
    /// rate test over the pooled counts whatever the number of runs.
    events: Option<Events>,
}

fn always(_: &Summary) -> bool {
    true
}

fn has_workers(s: &Summary) -> bool {
    s.worker_wake_latency_us.count > 0
}

fn metrics() -> Vec<Metric> {
    vec![
        Metric {
            name: "load p50",
            unit: "%",
            value: |s| s.load_pct.p50,
            quantile: Some((Source::Load, 0.5)),
            present: always,
            events: None,
        },
        Metric {
            name: "load p99",
            unit: "%",
            value: |s| s.load_pct.p99,
            quantile: Some((Source::Load, 0.99)),
            present: always,
            events: None,
        },
        Metric {
            name: "load max",
            unit: "%",
            value: |s| s.load_pct.max,
            quantile: None,
            present: always,
            events: None,
        },
        Metric {
            name: "driver wake-up p50",
            unit: "us",
            value: |s| s.driver_wake_latency_us.p50,
            quantile: Some((Source::Driver, 0.5)),
            present: always,
            events: None,
        },
        Metric {
            name: "driver wake-up p99",
            unit: "us",
            value: |s| s.driver_wake_latency_us.p99,
            quantile: Some((Source::Driver, 0.99)),
            present: always,
            events: None,
        },
        Metric {
            name: "driver wake-up p99.9",
            unit: "us",
            value: |s| s.driver_wake_latency_us.p999,
            quantile: Some((Source::Driver, 0.999)),
            present: always,
            events: None,
        },
        Metric {
            name: "driver wake-up max",
            unit: "us",
            value: |s| s.driver_wake_latency_us.max,
            quantile: None,
            present: always,
            events: None,
        },
        Metric {
            name: "worker wake-up p50",
            unit: "us",
            value: |s| s.worker_wake_latency_us.p50,
            quantile: Some((Source::Worker, 0.5)),
            present: has_workers,
            events: None,
        },
        Metric {
            name: "worker wake-up p99",
            unit: "us",
            value: |s| s.worker_wake_latency_us.p99,
            quantile: Some((Source::Worker, 0.99)),
            present: has_workers,
            events: None,
        },
        Metric {
            name: "worker wake-up p99.9",
            unit: "us",
            value: |s| s.worker_wake_latency_us.p999,
            quantile: Some((Source::Worker, 0.999)),
            present: has_workers,
            events: None,
        },
        Metric {
            name: "worker wake-up max",
            unit: "us",
            value: |s| s.worker_wake_latency_us.max,
            quantile: None,
            present: has_workers,
            events: None,
        },
        Metric {
            name: "dropouts per hour",
            unit: "per hour",
            value: dropouts_per_hour,
            quantile: None,
            present: always,
            events: Some(dropouts_and_hours),
        },
    ]
}

fn dropouts_per_hour(s: &Summary) -> f64 {
    if s.audio_seconds > 0.0 {
        s.dropouts as f64 * 3600.0 / s.audio_seconds
    } else {
        0.0
    }
}

fn dropouts_and_hours(s: &Summary) -> (u64, f64) {
    (s.dropouts, s.audio_seconds / 3600.0)
}

/// Each side's runs' events and hours pooled.
fn pooled(side: &[&RunFile], events: Events) -> (u64, f64) {
    side.iter()
        .map(|r| events(&r.summary))
        .fold((0, 0.0), |(n, h), (dn, dh)| (n + dn, h + dh))
}

/// One side's histograms, each summed over its runs.
struct Sums {
    load: Histogram<u64>,
    driver: Histogram<u64>,
    worker: Histogram<u64>,
}

impl Sums {
    /// Sums side `name`'s decoded runs (at least one, checked before).
    fn of(name: &'static str, side: &[Decoded]) -> Result<Sums, CompareError> {
        Ok(Sums {
            load: sum(name, side.iter().map(|d| &d.load))?,
            driver: sum(name, side.iter().map(|d| &d.driver))?,
            worker: sum(name, side.iter().map(|d| &d.worker))?,
        })
    }

    fn get(&self, pick: Source) -> &Histogram<u64> {
        match pick {
            Source::Load => &self.load,
            Source::Driver => &self.driver,
            Source::Worker => &self.worker,
        }
    }
}

/// The sum of side `side`'s histograms (at least one). Histograms of other bounds (not the
/// engine's: another tool's, or forged) are re-scaled into one; `Err` when that would not fit
/// in bounded memory.
pub(crate) fn sum<'a>(
    side: &'static str,
    hs: impl IntoIterator<Item = &'a Histogram<u64>>,
) -> Result<Histogram<u64>, CompareError> {
    Ok(merged_histograms(hs)
        .map_err(|e| CompareError::Histograms(side, e.to_string()))?
        .expect("a side has a run"))
}

/// Checks a gate for run results before any run is made (`ab`): every metric a run result
/// can have is allowed, maxima are not.
pub fn check_run_gate(gate: &[String]) -> Result<(), CompareError> {
    let names: Vec<String> = metrics().iter().map(|m| m.name.to_owned()).collect();
    gate::resolve(&names, Some(gate), None).map(|_| ())
}

/// Compares side B against side A.
pub fn compare(
    a: &Side,
    b: &Side,
    options: &Options,
    provenance: Provenance,
) -> Result<CompareResult, CompareError> {
    check_sides(a.len(), b.len())?;
    let decode_side = |side: &Side| -> Result<Vec<Decoded>, CompareError> {
        side.iter()
            .map(|(p, r)| decode(p, r).map_err(CompareError::Read))
            .collect()
    };
    let (da, db) = (decode_side(a)?, decode_side(b)?);
    let (sa, sb) = (Sums::of("A", &da)?, Sums::of("B", &db)?);
    let ra: Vec<&RunFile> = a.iter().map(|(_, r)| r).collect();
    let rb: Vec<&RunFile> = b.iter().map(|(_, r)| r).collect();
    let workload = workload_diff(&ra, &rb);
    if !workload.is_empty() && !options.force {
        return Err(CompareError::Workload(workload));
    }
    let mut notes = Vec::new();
    if !workload.is_empty() {
        notes.push("different workloads compared because --force was given".to_owned());
    }
    let runs = a.len().min(b.len());
    if runs < MIN_RUNS {
        notes.push(format!(
            "{} run(s) on side A and {} on side B: not enough runs, the test needs {MIN_RUNS} a \
             side to see how much runs differ from each other; the intervals shown come from a \
             block bootstrap over the buffers and get no verdict (xrunlab ab repeats each side)",
            a.len(),
            b.len()
        ));
    }
    let present: Vec<Metric> = metrics()
        .into_iter()
        .filter(|m| ra.iter().chain(&rb).all(|r| (m.present)(&r.summary)))
        .collect();
    let names: Vec<String> = present.iter().map(|m| m.name.to_owned()).collect();
    let plan = GatePlan::new(&names, options, Some(gate::RUN_DEFAULT))?;
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut out = Vec::new();
    for m in present {
        let how = plan.how(m.name);
        let va: Vec<f64> = ra.iter().map(|r| (m.value)(&r.summary)).collect();
        let vb: Vec<f64> = rb.iter().map(|r| (m.value)(&r.summary)).collect();
        if let Some(found) = m.events.and_then(|e| {
            judge_rate(
                m.name,
                m.unit,
                (va.clone(), vb.clone()),
                pooled(&ra, e),
                pooled(&rb, e),
                how,
            )
        }) {
            out.push(found);
            continue;
        }
        let hists = m
            .quantile
            .map(|(source, q)| (sa.get(source), sb.get(source), q));
        let f = Figures {
            name: m.name.to_owned(),
            unit: m.unit.to_owned(),
            higher_is_better: false,
            a: va,
            b: vb,
            quantile: hists,
        };
        out.push(judge(f, how, &mut rng));
    }
    let distributions = [
        ("load", Source::Load, Scale::Percent),
        ("driver wake-up latency", Source::Driver, Scale::Micros),
        ("worker wake-up latency", Source::Worker, Scale::Micros),
    ]
    .into_iter()
    .filter(|(_, s, _)| !matches!(s, Source::Worker) || !sa.get(*s).is_empty())
    .map(|(name, source, scale)| SideDistribution {
        name: name.to_owned(),
        a: EncodedHistogram::of(sa.get(source), scale),
        b: EncodedHistogram::of(sb.get(source), scale),
    })
    .collect();
    let machines = |side: &Side| -> Vec<(PathBuf, Fingerprint)> {
        side.iter()
            .map(|(p, r)| (p.clone(), r.fingerprint.clone()))
            .collect()
    };
    let found = Found {
        workload,
        notes,
        metrics: out,
        distributions,
        gate: plan,
    };
    Ok(result_of(provenance, &machines(a), &machines(b), found))
}

/// The sum of histograms each decoded from its field of `path` in `scale`'s units; what does
/// not decode or add is named by its field, none at all by "no histogram".
pub(crate) fn decoded_sum<'a>(
    path: &Path,
    fields: impl IntoIterator<Item = (String, &'a EncodedHistogram)>,
    scale: Scale,
) -> Result<Histogram<u64>, ReadError> {
    let mut out: Option<Histogram<u64>> = None;
    for (field, e) in fields {
        let h = e
            .decode_as(scale)
            .map_err(|problem| ReadError::new(path, &field, problem.to_string()))?;
        match out.as_mut() {
            None => out = Some(h),
            Some(o) => o
                .add(&h)
                .map_err(|e| ReadError::new(path, &field, format!("{e:?}")))?,
        }
    }
    out.ok_or_else(|| ReadError::new(path, "(file)", "no histogram"))
}

/// Refuses a side without files.
pub(crate) fn check_sides(a: usize, b: usize) -> Result<(), CompareError> {
    if a == 0 {
        return Err(CompareError::EmptySide("A"));
    }
    if b == 0 {
        return Err(CompareError::EmptySide("B"));
    }
    Ok(())
}

/// What a comparison found, whatever kind of result it compared.
pub(crate) struct Found {
    /// Workload settings that differ.
    pub workload: Vec<FingerprintChange>,
    /// Notes on the evidence.
    pub notes: Vec<String>,
    /// The metrics.
    pub metrics: Vec<MetricComparison>,
    /// The distributions to overlay.
    pub distributions: Vec<SideDistribution>,
    /// How the metrics were judged.
    pub gate: GatePlan,
}

/// The compare result of `found` between sides A and B, given each side's files and the
/// machines they ran on.
pub(crate) fn result_of(
    provenance: Provenance,
    a: &[(PathBuf, Fingerprint)],
    b: &[(PathBuf, Fingerprint)],
    found: Found,
) -> CompareResult {
    let (ma, mb) = (machines_of(a), machines_of(b));
    let (pa, pb) = (fingerprints_of(&ma), fingerprints_of(&mb));
    let files = |side: &[(PathBuf, Fingerprint)]| {
        side.iter().map(|(p, _)| p.display().to_string()).collect()
    };
    CompareResult {
        schema: SCHEMA.to_owned(),
        provenance,
        a_files: files(a),
        b_files: files(b),
        fingerprint_diff: fingerprint_diff_of(&pa, &pb),
        workload_diff: found.workload,
        confidence: stats::CONFIDENCE,
        gate: found.gate.gated.clone(),
        gate_confidence: Some(1.0 - found.gate.alpha_each),
        margin_pct: Some(found.gate.margin_pct),
        notes: found.notes,
        machines: machine_rows_of(&ma, &mb, &found.metrics),
        metrics: found.metrics,
        distributions: found.distributions,
    }
}

/// Each file's path and machine, borrowed.
fn machines_of(side: &[(PathBuf, Fingerprint)]) -> Vec<Machine<'_>> {
    side.iter().map(|(p, f)| (p.as_path(), f)).collect()
}

/// The machines alone.
fn fingerprints_of<'a>(side: &[Machine<'a>]) -> Vec<&'a Fingerprint> {
    side.iter().map(|m| m.1).collect()
}

/// One file's path and machine.
pub(crate) type Machine<'a> = (&'a Path, &'a Fingerprint);

/// A row per distinct machine fingerprint (steal left out: it varies by run).
pub(crate) fn machine_rows_of(
    a: &[Machine],
    b: &[Machine],
    metrics: &[MetricComparison],
) -> Vec<MachineRow> {
    let mut rows: Vec<(serde_json::Value, MachineRow, Vec<usize>)> = Vec::new();
    let sides = [("a", a), ("b", b)];
    for (side, files) in sides {
        for (i, (path, fingerprint)) in files.iter().enumerate() {
            let mut key = serde_json::to_value(fingerprint).unwrap_or_default();
            if let Some(m) = key.as_object_mut() {
                m.remove("steal_pct");
            }
            let pos = rows
                .iter()
                .position(|(k, row, _)| *k == key && row.side == side);
            let pos = pos.unwrap_or_else(|| {
                rows.push((
                    key,
                    MachineRow {
                        side: side.to_owned(),
                        fingerprint: (*fingerprint).clone(),
                        files: Vec::new(),
                        metrics: Vec::new(),
                    },
                    Vec::new(),
                ));
                rows.len() - 1
            });
            rows[pos].1.files.push(path.display().to_string());
            rows[pos].2.push(i);
        }
    }
    rows.into_iter()
        .map(|(_, mut row, indexes)| {
            row.metrics = metrics
                .iter()
                .map(|m| {
                    let values = if row.side == "a" { &m.a } else { &m.b };
                    let v: Vec<f64> = indexes.iter().map(|&i| values[i]).collect();
                    MachineMetric {
                        metric: m.metric.clone(),
                        median: stats::median(&v),
                        min: v.iter().copied().fold(f64::INFINITY, f64::min),
                        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            row
        })
        .collect()
}

/// The gated metrics with a verdict of better or worse: their intervals hold together at the
/// result's confidence (Bonferroni over the gate), so identical sides show a difference among
/// them by chance in at most 1 − [`stats::CONFIDENCE`] of comparisons (less at a sequential
/// A/B's look, which takes its share of that).
pub fn gate_verdicts(result: &CompareResult) -> Vec<&MetricComparison> {
    result
        .metrics
        .iter()
        .filter(|m| m.gated && matches!(m.verdict, Verdict::Better | Verdict::Worse))
        .collect()
}
