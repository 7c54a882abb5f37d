//! `xrunlab compare`: reads run results, `probe wakeup` results or other experiments' results
//! on two sides as types (a bad file, or a mix of kinds, is a usage error naming the file and
//! field), compares them (xrunlab-compare), prints the table, writes the
//! compare result, and gates with --fail-if-worse; runs on the main thread.

use crate::cli::compare::CompareArgs;
use crate::Failure;
use std::path::{Path, PathBuf};
use xrunlab_compare::{
    compare, compare_experiments, compare_probes, gate_verdicts, Options, DEFAULT_MARGIN_PCT,
};
use xrunlab_results::compare::CompareResult;
use xrunlab_results::experiment::{parse_experiment, ExperimentFile};
use xrunlab_results::lab::{kind_of, SCHEMA as LAB_SCHEMA};
use xrunlab_results::read::read_typed;
use xrunlab_results::run::{RunFile, SCHEMA};
use xrunlab_results::wakeup::{parse_wakeup, WakeupFile, KIND as WAKEUP_KIND};

/// Reads each file as a run result.
fn read_side(files: &[PathBuf]) -> Result<Vec<(PathBuf, RunFile)>, Failure> {
    files
        .iter()
        .map(|p| {
            read_typed::<RunFile>(p, SCHEMA)
                .map(|r| (p.clone(), r))
                .map_err(|e| Failure::Usage(e.to_string()))
        })
        .collect()
}

/// Reads a file's text (a regular file, up to the size a result file may have), or says why it
/// cannot be read.
fn read_text(p: &Path) -> Result<String, Failure> {
    xrunlab_results::read::read_text(p).map_err(|e| Failure::Usage(e.to_string()))
}

/// Reads each file as a probe-wakeup result.
fn read_probes(files: &[PathBuf]) -> Result<Vec<(PathBuf, WakeupFile)>, Failure> {
    files
        .iter()
        .map(|p| {
            parse_wakeup(p, &read_text(p)?)
                .map(|r| (p.clone(), r))
                .map_err(|e| Failure::Usage(e.to_string()))
        })
        .collect()
}

/// Reads each file as an experiment result of one of the kinds compare reads.
fn read_experiments(files: &[PathBuf]) -> Result<Vec<(PathBuf, ExperimentFile)>, Failure> {
    files
        .iter()
        .map(|p| {
            parse_experiment(p, &read_text(p)?)
                .map(|r| (p.clone(), r))
                .map_err(|e| Failure::Usage(e.to_string()))
        })
        .collect()
}

/// What the files are, as the first file says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Files {
    Runs,
    Probes,
    Experiments,
}

/// What the files are: decided by the first file's schema and kind; a run among experiment
/// results or the other way round is refused, naming the file and its schema (a mix of
/// experiment kinds is refused by the typed read, naming the kind).
fn kind_of_files(files: &[&PathBuf]) -> Result<Files, Failure> {
    let schema_of = |p: &PathBuf| -> Option<String> {
        let text = read_text(p).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("schema")?.as_str().map(str::to_owned)
    };
    let Some(first) = files.first() else {
        return Ok(Files::Runs);
    };
    let first_schema = schema_of(first).unwrap_or_default();
    let lab = first_schema == LAB_SCHEMA;
    for p in files {
        let s = schema_of(p);
        let is_lab = s.as_deref() == Some(LAB_SCHEMA);
        let is_run = s.as_deref() == Some(SCHEMA);
        if (lab && is_run) || (!lab && is_lab) {
            return Err(Failure::Usage(format!(
                "{}: field schema: is {:?}, but {} is {:?}: compare takes run results or \
                 experiment results, not a mix",
                p.display(),
                s.unwrap_or_default(),
                first.display(),
                first_schema
            )));
        }
    }
    if !lab {
        return Ok(Files::Runs);
    }
    let kind = read_text(first).ok().and_then(|t| kind_of(&t));
    Ok(if kind.as_deref() == Some(WAKEUP_KIND) {
        Files::Probes
    } else {
        Files::Experiments
    })
}

/// The gated metrics worse by more than `pct` percent: the verdict is worse and the whole
/// interval lies beyond `pct` on the metric's worse side (an interval open above, of dropouts
/// when A had none, by its lower end). The gated intervals hold together at 95 % (see
/// [`gate_verdicts`]), so a CI gate fails identical sides in at most 5 % of comparisons.
pub fn worse_beyond(result: &CompareResult, pct: f64) -> Vec<String> {
    gate_verdicts(result)
        .into_iter()
        .filter(|m| m.worse_by_more_than(pct))
        .map(|m| m.metric.clone())
        .collect()
}

/// Checks a --fail-if-worse percentage: shared with `ab`.
pub fn check_gate(fail_if_worse: Option<f64>) -> Result<(), Failure> {
    if let Some(pct) = fail_if_worse {
        if !pct.is_finite() || pct < 0.0 {
            return Err(Failure::Usage(format!(
                "invalid --fail-if-worse: {pct} (allowed: a percentage of 0 or more)"
            )));
        }
    }
    Ok(())
}

/// The margin within which a change counts as none: the gate's percentage when there is one
/// (what the user said matters), else [`DEFAULT_MARGIN_PCT`]. Shared with `ab`.
pub fn margin(fail_if_worse: Option<f64>) -> f64 {
    fail_if_worse.unwrap_or(DEFAULT_MARGIN_PCT)
}

pub fn compare_cmd(args: &CompareArgs) -> Result<(), Failure> {
    check_gate(args.fail_if_worse)?;
    if let Some(p) = &args.json {
        crate::files::check_writable("--json", p)?;
    }
    let provenance = xrunlab_sys::Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let options = Options {
        force: args.force,
        gate: args.gate.clone(),
        margin_pct: margin(args.fail_if_worse),
        ..Options::default()
    };
    let all: Vec<&PathBuf> = args.files.iter().chain(&args.vs).collect();
    let result = match kind_of_files(&all)? {
        Files::Probes => {
            let (a, b) = (read_probes(&args.files)?, read_probes(&args.vs)?);
            compare_probes(&a, &b, &options, provenance)
        }
        Files::Experiments => {
            let (a, b) = (read_experiments(&args.files)?, read_experiments(&args.vs)?);
            compare_experiments(&a, &b, &options, provenance)
        }
        Files::Runs => {
            let (a, b) = (read_side(&args.files)?, read_side(&args.vs)?);
            compare(&a, &b, &options, provenance)
        }
    }?;
    finish(&result, args.json.as_deref(), args.fail_if_worse)
}

/// Prints the table, writes the JSON and applies the gate: shared with `ab`.
pub fn finish(
    result: &CompareResult,
    json: Option<&std::path::Path>,
    fail_if_worse: Option<f64>,
) -> Result<(), Failure> {
    print!("{}", crate::compare_text::render(result));
    if let Some(p) = json {
        xrunlab_results::write::write_json(p, result)?;
    }
    if let Some(pct) = fail_if_worse {
        let worse = worse_beyond(result, pct);
        if !worse.is_empty() {
            return Err(Failure::Runtime(format!(
                "B is worse than A by more than {pct} % at {:.0} % confidence over the gated \
                 metrics: {}",
                result.confidence * 100.0,
                worse.join(", ")
            )));
        }
    }
    Ok(())
}
