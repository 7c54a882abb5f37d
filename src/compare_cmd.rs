//! `xrunlab compare`: reads run results, or `probe wakeup` results, on two sides as types (a
//! bad file, or a mix of the two kinds, is a usage error naming the file and field), compares them (xrunlab-compare), prints the table, writes the
//! compare result, and gates with --fail-if-worse; runs on the main thread.

use crate::cli::compare::CompareArgs;
use crate::Failure;
use std::path::PathBuf;
use xrunlab_compare::{compare, compare_probes, held_over_table, Options};
use xrunlab_results::compare::{CompareResult, Verdict};
use xrunlab_results::probe::{parse_wakeup, WakeupFile, SCHEMA as PROBE_SCHEMA};
use xrunlab_results::read::read_typed;
use xrunlab_results::run::{RunFile, SCHEMA};

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

/// Reads each file as a probe-wakeup result.
fn read_probes(files: &[PathBuf]) -> Result<Vec<(PathBuf, WakeupFile)>, Failure> {
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Failure::Usage(format!(
                    "{}: field (file): cannot read it: {e}",
                    p.display()
                ))
            })?;
            parse_wakeup(p, &text)
                .map(|r| (p.clone(), r))
                .map_err(|e| Failure::Usage(e.to_string()))
        })
        .collect()
}

/// Whether the files are probe results: decided by the first file's schema; a file of the
/// other kind among them is refused, naming it and its schema.
fn probes(files: &[&PathBuf]) -> Result<bool, Failure> {
    let schema_of = |p: &PathBuf| -> Option<String> {
        let text = std::fs::read_to_string(p).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("schema")?.as_str().map(str::to_owned)
    };
    let Some(first) = files.first() else {
        return Ok(false);
    };
    let probe = schema_of(first).as_deref() == Some(PROBE_SCHEMA);
    for p in files {
        let s = schema_of(p);
        let kind_is_probe = s.as_deref() == Some(PROBE_SCHEMA);
        let kind_is_run = s.as_deref() == Some(SCHEMA);
        if (probe && kind_is_run) || (!probe && kind_is_probe) {
            return Err(Failure::Usage(format!(
                "{}: field schema: is {:?}, but {} is {:?}: compare takes run results or probe \
                 wakeup results, not a mix",
                p.display(),
                s.unwrap_or_default(),
                first.display(),
                if probe { PROBE_SCHEMA } else { SCHEMA }
            )));
        }
    }
    Ok(probe)
}

/// The metrics worse by more than `pct` percent with the chosen confidence: the whole interval
/// lies above `pct`, and the verdict holds over the whole table (Holm's correction, see
/// [`held_over_table`]), so a CI gate fails identical sides in at most 5 % of A/Bs.
pub fn worse_beyond(result: &CompareResult, pct: f64) -> Vec<String> {
    held_over_table(result)
        .into_iter()
        .filter(|m| m.verdict == Verdict::Worse)
        .filter(|m| m.interval_pct.is_some_and(|[lo, _]| lo > pct))
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
    let options = Options { force: args.force };
    let all: Vec<&PathBuf> = args.files.iter().chain(&args.vs).collect();
    let result = if probes(&all)? {
        let (a, b) = (read_probes(&args.files)?, read_probes(&args.vs)?);
        compare_probes(&a, &b, options, provenance)
    } else {
        let (a, b) = (read_side(&args.files)?, read_side(&args.vs)?);
        compare(&a, &b, options, provenance)
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
                "B is worse than A by more than {pct} % at {:.0} % confidence over all the \
                 metrics (Holm): {}",
                result.confidence * 100.0,
                worse.join(", ")
            )));
        }
    }
    Ok(())
}
