//! Compares `probe wakeup` results side against side: per side, each file's threads merged
//! into one wake-up latency distribution, then p50, p99, p99.9 and max compared with the same
//! statistics as run results (runs of the probe as repeats, or one each by block bootstrap).
//! Main thread.

use crate::analyse::{
    check_sides, decoded_sum, result_of, sum, CompareError, Found, Options, SEED,
};
use crate::diff::diff_fields;
use crate::gate::{self, Plan as GatePlan};
use crate::judge::{judge, value_at, Figures, MIN_RUNS};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::PathBuf;
use xrunlab_engine::Scale;
use xrunlab_results::compare::{CompareResult, SideDistribution};
use xrunlab_results::wakeup::WakeupFile;
use xrunlab_results::{EncodedHistogram, Fingerprint, Provenance, ReadError};

/// One side of probes: their files, read.
pub type ProbeSide = [(PathBuf, WakeupFile)];

/// Settings that make two probes measure different things (the number of loops and the
/// histogram's cap do not).
const WORKLOAD: &[&str] = &[
    "threads",
    "class",
    "interval",
    "cpus",
    "pm_qos",
    "mlock",
    "with_load",
];

/// Every thread of one probe merged.
fn merged_threads(path: &std::path::Path, f: &WakeupFile) -> Result<Histogram<u64>, ReadError> {
    let threads = f.result.threads.iter().enumerate();
    let h = decoded_sum(
        path,
        threads.map(|(i, t)| (format!("result.threads[{i}].latency_us"), &t.latency_us)),
        Scale::Micros,
    )?;
    Some(h)
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ReadError::new(path, "result.threads", "no thread recorded a wake-up"))
}

/// Compares probe side B against A.
pub fn compare_probes(
    a: &ProbeSide,
    b: &ProbeSide,
    options: &Options,
    provenance: Provenance,
) -> Result<CompareResult, CompareError> {
    check_sides(a.len(), b.len())?;
    let decode = |side: &ProbeSide| -> Result<Vec<Histogram<u64>>, CompareError> {
        side.iter()
            .map(|(p, f)| merged_threads(p, f).map_err(CompareError::Read))
            .collect()
    };
    let (ha, hb) = (decode(a)?, decode(b)?);
    let params = |side: &ProbeSide| -> Vec<serde_json::Map<String, serde_json::Value>> {
        side.iter()
            .map(|(_, f)| {
                f.result
                    .params
                    .iter()
                    .filter(|(k, _)| WORKLOAD.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect()
    };
    let workload = diff_fields(&params(a), &params(b));
    if !workload.is_empty() && !options.force {
        return Err(CompareError::Workload(workload));
    }
    let mut notes =
        vec!["probe wakeup results: each file's threads merged into one distribution".to_owned()];
    if !workload.is_empty() {
        notes.push("different probe settings compared because --force was given".to_owned());
    }
    if a.iter().chain(b).any(|(_, f)| f.incomplete) {
        notes.push("some probes were stopped before every loop ran".to_owned());
    }
    if a.len().min(b.len()) < MIN_RUNS {
        notes.push(format!(
            "{} probe(s) on side A and {} on side B: not enough runs, the test needs \
             {MIN_RUNS} a side to see how much probes differ from each other; the intervals \
             shown come from a block bootstrap over the wake-ups and get no verdict",
            a.len(),
            b.len()
        ));
    }
    const QUANTILES: [(&str, Option<f64>); 4] = [
        ("wake-up p50", Some(0.5)),
        ("wake-up p99", Some(0.99)),
        ("wake-up p99.9", Some(0.999)),
        ("wake-up max", None),
    ];
    let names: Vec<String> = QUANTILES.iter().map(|(n, _)| (*n).to_owned()).collect();
    let plan = GatePlan::new(&names, options, Some(gate::PROBE_DEFAULT))?;
    let (ma, mb) = (sum("A", &ha)?, sum("B", &hb)?);
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut metrics = Vec::new();
    for (name, q) in QUANTILES {
        let f = Figures {
            name: name.to_owned(),
            unit: "us".to_owned(),
            higher_is_better: false,
            a: ha.iter().map(|h| value_at(h, q, Scale::Micros)).collect(),
            b: hb.iter().map(|h| value_at(h, q, Scale::Micros)).collect(),
            quantile: q.map(|q| (&ma, &mb, q)),
        };
        metrics.push(judge(f, plan.how(name), &mut rng));
    }
    let machines = |side: &ProbeSide| -> Vec<(PathBuf, Fingerprint)> {
        side.iter()
            .map(|(p, f)| (p.clone(), f.result.fingerprint.clone()))
            .collect()
    };
    let found = Found {
        workload,
        notes,
        metrics,
        distributions: vec![SideDistribution {
            name: "wake-up latency".to_owned(),
            a: EncodedHistogram::of(&ma, Scale::Micros),
            b: EncodedHistogram::of(&mb, Scale::Micros),
        }],
        gate: plan,
    };
    Ok(result_of(provenance, &machines(a), &machines(b), found))
}
