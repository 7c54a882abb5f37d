//! Compares experiment results side against side (`probe sleep`, `probe placement`, `sweep
//! threads`, `sweep buffer`, `capacity`): like with like only (the same experiment with the
//! same settings, unless forced), one row per point and figure, each judged in its direction
//! (capacity and throughput higher is better; latency, load, CPU and dropouts lower), with the
//! points' distributions from their HdrHistograms. Main thread.

use crate::analyse::{check_sides, decoded_sum, result_of, CompareError, Found, Options, SEED};
use crate::diff::workload_diff_of;
use crate::gate::Plan as GatePlan;
use crate::judge::{judge, judge_rate, value_at, Figures, MIN_RUNS};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use xrunlab_engine::Scale;
use xrunlab_results::compare::{CompareResult, SideDistribution};
use xrunlab_results::experiment::ExperimentFile;
use xrunlab_results::histogram::merged;
use xrunlab_results::lab::Params;
use xrunlab_results::run::RunHistograms;
use xrunlab_results::{EncodedHistogram, Fingerprint, Provenance, ReadError};

/// One side of experiment results: their files, read.
pub type ExperimentSide = [(PathBuf, ExperimentFile)];

/// One figure of one file.
struct Sample {
    name: String,
    unit: String,
    higher_is_better: bool,
    value: f64,
    /// The distribution (by name) and quantile it is, for the one-run bootstrap.
    quantile: Option<(String, f64)>,
    /// Events and hours, for a rate compared by the exact rate test.
    events: Option<(u64, f64)>,
}

/// A file's figures and its distributions (name, histogram, scale).
#[derive(Default)]
struct FileFigures {
    samples: Vec<Sample>,
    distributions: Vec<(String, Histogram<u64>, Scale)>,
}

impl FileFigures {
    /// A figure with no distribution behind it.
    fn plain(&mut self, name: String, unit: &str, higher_is_better: bool, value: f64) {
        self.samples.push(Sample {
            name,
            unit: unit.to_owned(),
            higher_is_better,
            value,
            quantile: None,
            events: None,
        });
    }

    /// Decodes `h` (at `field` of `path`) as distribution `name` and adds its quantiles (`None`:
    /// the maximum), each a lower-is-better figure named "`name` p50" and so on.
    fn distribution(
        &mut self,
        (path, field): (&Path, String),
        name: String,
        h: &EncodedHistogram,
        scale: Scale,
        quantiles: &[(&str, Option<f64>)],
    ) -> Result<(), ReadError> {
        let hist = h
            .decode_as(scale)
            .map_err(|problem| ReadError::new(path, &field, problem.to_string()))?;
        let unit = match scale {
            Scale::Percent => "%",
            Scale::Micros => "us",
        };
        for (label, q) in quantiles {
            self.samples.push(Sample {
                name: format!("{name} {label}"),
                unit: unit.to_owned(),
                higher_is_better: false,
                value: value_at(&hist, *q, scale),
                quantile: q.map(|q| (name.clone(), q)),
                events: None,
            });
        }
        self.distributions.push((name, hist, scale));
        Ok(())
    }

    /// A run-like point's load and wake-up distributions, as `run` keeps them.
    fn run_histograms(
        &mut self,
        (path, field): (&Path, &str),
        label: &str,
        h: &RunHistograms,
    ) -> Result<(), ReadError> {
        const QS: &[(&str, Option<f64>)] =
            &[("p50", Some(0.5)), ("p99", Some(0.99)), ("max", None)];
        self.distribution(
            (path, format!("{field}.load_pct")),
            format!("{label} load"),
            &h.load_pct,
            Scale::Percent,
            QS,
        )?;
        self.distribution(
            (path, format!("{field}.driver_wake_latency_us")),
            format!("{label} driver wake-up"),
            &h.driver_wake_latency_us,
            Scale::Micros,
            QS,
        )
    }
}

/// The latency quantiles compared for a wake-up or oversleep distribution.
const LATENCY: &[(&str, Option<f64>)] = &[("p50", Some(0.5)), ("p99", Some(0.99)), ("max", None)];

fn figures_of(path: &Path, e: &ExperimentFile) -> Result<FileFigures, ReadError> {
    let mut f = FileFigures::default();
    match e {
        ExperimentFile::Sleep(r) => {
            for (i, q) in r.result.points.iter().enumerate() {
                let label = q.label();
                f.distribution(
                    (path, format!("result.points[{i}].oversleep_us")),
                    format!("{label} oversleep"),
                    &q.oversleep_us,
                    Scale::Micros,
                    LATENCY,
                )?;
                f.plain(format!("{label} CPU"), "%", false, q.cpu_pct);
            }
        }
        ExperimentFile::Placement(r) => {
            let threads = r.result.threads.iter().enumerate();
            let all = decoded_sum(
                path,
                threads.map(|(i, t)| (format!("result.threads[{i}].buffer_us"), &t.buffer_us)),
                Scale::Micros,
            )?;
            let all = EncodedHistogram::of(&all, Scale::Micros);
            f.distribution(
                (path, "result.threads".to_owned()),
                "buffer time".to_owned(),
                &all,
                Scale::Micros,
                LATENCY,
            )?;
            f.plain("completion spread".into(), "%", false, r.result.spread_pct);
            f.plain("median completion".into(), "ms", false, r.result.median_ms);
        }
        ExperimentFile::Threads(r) => {
            for (i, q) in r.result.points.iter().enumerate() {
                let label = q.label();
                f.plain(
                    format!("{label} throughput"),
                    &format!("{}/s", q.workload.unit()),
                    true,
                    q.throughput,
                );
                f.distribution(
                    (path, format!("result.points[{i}].step_us")),
                    format!("{label} step"),
                    &q.step_us,
                    Scale::Micros,
                    &[("p50", Some(0.5)), ("p99", Some(0.99))],
                )?;
            }
        }
        ExperimentFile::Buffer(r) => {
            for (i, q) in r.result.points.iter().enumerate() {
                let label = q.label();
                f.run_histograms(
                    (path, &format!("result.points[{i}].histograms")),
                    &label,
                    &q.histograms,
                )?;
                f.plain(format!("{label} CPU"), "%", false, q.cpu_pct);
                let hours = q.seconds / 3600.0;
                f.samples.push(Sample {
                    name: format!("{label} dropouts per hour"),
                    unit: "per hour".to_owned(),
                    higher_is_better: false,
                    value: if hours > 0.0 {
                        q.dropouts as f64 / hours
                    } else {
                        0.0
                    },
                    quantile: None,
                    events: Some((q.dropouts, hours)),
                });
            }
        }
        ExperimentFile::Capacity(r) => {
            for (i, q) in r.result.points.iter().enumerate() {
                let label = q.label();
                f.plain(format!("{label} capacity"), "sines", true, q.sines as f64);
                if let Some(h) = &q.histograms {
                    f.run_histograms(
                        (path, &format!("result.points[{i}].histograms")),
                        &format!("{label} at capacity"),
                        h,
                    )?;
                }
            }
            for l in &r.result.latency {
                if let Some(b) = l.smallest_buffer {
                    let label = format!("{} {} sines smallest buffer", l.preset.name(), l.sines);
                    f.plain(label, "frames", false, f64::from(b));
                }
            }
        }
    }
    Ok(f)
}

/// Each file's figure called `name` (files without it left out).
fn samples_named<'a>(side: &'a [FileFigures], name: &str) -> Vec<&'a Sample> {
    side.iter()
        .filter_map(|f| f.samples.iter().find(|s| s.name == name))
        .collect()
}

/// Parameters that set how long each point is measured, not what: like a run's duration, they
/// may differ between the sides.
const MEASURING_TIME: &[&str] = &["per_point"];

/// The settings two results must share: the experiment and its parameters.
fn workload_of(e: &ExperimentFile) -> Params {
    let mut m = e.params().clone();
    m.retain(|k, _| !MEASURING_TIME.contains(&k.as_str()));
    m.insert("experiment".into(), e.kind().into());
    m
}

/// Compares experiment side B against A.
pub fn compare_experiments(
    a: &ExperimentSide,
    b: &ExperimentSide,
    options: &Options,
    provenance: Provenance,
) -> Result<CompareResult, CompareError> {
    check_sides(a.len(), b.len())?;
    let read = |side: &ExperimentSide| -> Result<Vec<FileFigures>, CompareError> {
        side.iter()
            .map(|(p, e)| figures_of(p, e).map_err(CompareError::Read))
            .collect()
    };
    let (fa, fb) = (read(a)?, read(b)?);
    let params = |side: &ExperimentSide| -> Vec<Params> {
        side.iter().map(|(_, e)| workload_of(e)).collect()
    };
    let workload = workload_diff_of(&params(a), &params(b));
    if !workload.is_empty() && !options.force {
        return Err(CompareError::Workload(workload));
    }
    let mut notes = vec![format!(
        "{} results: one row per point and figure; capacity and throughput are better higher, \
         the rest lower",
        a[0].1.kind()
    )];
    if !workload.is_empty() {
        notes.push("different experiments or settings compared because --force was given".into());
    }
    if a.iter().chain(b).any(|(_, e)| e.incomplete()) {
        notes.push("some results were stopped before every point was measured".to_owned());
    }
    if a.len().min(b.len()) < MIN_RUNS {
        notes.push(format!(
            "{} result(s) on side A and {} on side B: not enough runs, the test needs \
             {MIN_RUNS} a side to see how much results differ from each other; the intervals \
             shown come from a block bootstrap over each point's histogram and get no verdict, \
             so repeat each side",
            a.len(),
            b.len()
        ));
    }
    let find = |f: &FileFigures, name: &str| f.samples.iter().position(|s| s.name == name);
    let everywhere = |name: &str| fa.iter().chain(&fb).all(|f| find(f, name).is_some());
    let names: Vec<&str> = fa[0].samples.iter().map(|s| s.name.as_str()).collect();
    let kept: Vec<&str> = names.iter().copied().filter(|n| everywhere(n)).collect();
    if kept.len() < names.len() {
        notes.push(format!(
            "{} figure(s) of the first file are not in every file (points not measured \
             everywhere) and are left out",
            names.len() - kept.len()
        ));
    }
    let dist_side = |side: &[FileFigures], name: &str| -> Option<(Histogram<u64>, Scale)> {
        let hs: Vec<&Histogram<u64>> = side
            .iter()
            .filter_map(|f| f.distributions.iter().find(|d| d.0 == name).map(|d| &d.1))
            .collect();
        let scale = side[0].distributions.iter().find(|d| d.0 == name)?.2;
        (hs.len() == side.len())
            .then(|| merged(hs).ok().flatten())
            .flatten()
            .map(|h| (h, scale))
    };
    let kept_names: Vec<String> = kept.iter().map(|n| (*n).to_owned()).collect();
    let plan = GatePlan::new(&kept_names, options, None)?;
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut metrics = Vec::new();
    for name in kept {
        let how = plan.how(name);
        let (sa, sb) = (samples_named(&fa, name), samples_named(&fb, name));
        let first = sa[0];
        let va: Vec<f64> = sa.iter().map(|s| s.value).collect();
        let vb: Vec<f64> = sb.iter().map(|s| s.value).collect();
        let pooled = |side: &[&Sample]| -> Option<(u64, f64)> {
            side.iter()
                .map(|s| s.events)
                .try_fold((0, 0.0), |(n, h), e| e.map(|(dn, dh)| (n + dn, h + dh)))
        };
        if let Some(found) = pooled(&sa).zip(pooled(&sb)).and_then(|(ea, eb)| {
            judge_rate(name, &first.unit, (va.clone(), vb.clone()), ea, eb, how)
        }) {
            metrics.push(found);
            continue;
        }
        let hists = first.quantile.as_ref().and_then(|(dist, q)| {
            let (ha, _) = dist_side(&fa, dist)?;
            let (hb, _) = dist_side(&fb, dist)?;
            Some((ha, hb, *q))
        });
        let f = Figures {
            name: name.to_owned(),
            unit: first.unit.clone(),
            higher_is_better: first.higher_is_better,
            a: va,
            b: vb,
            quantile: hists.as_ref().map(|(ha, hb, q)| (ha, hb, *q)),
        };
        metrics.push(judge(f, how, &mut rng));
    }
    let distributions = fa[0]
        .distributions
        .iter()
        .filter_map(|(name, _, _)| {
            let (ha, scale) = dist_side(&fa, name)?;
            let (hb, _) = dist_side(&fb, name)?;
            Some(SideDistribution {
                name: name.clone(),
                a: EncodedHistogram::of(&ha, scale),
                b: EncodedHistogram::of(&hb, scale),
            })
        })
        .collect();
    let machines = |side: &ExperimentSide| -> Vec<(PathBuf, Fingerprint)> {
        side.iter()
            .map(|(p, e)| (p.clone(), e.fingerprint().clone()))
            .collect()
    };
    let found = Found {
        workload,
        notes,
        metrics,
        distributions,
        gate: plan,
    };
    Ok(result_of(provenance, &machines(a), &machines(b), found))
}
