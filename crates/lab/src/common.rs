//! What every experiment shares: the run context (stop flag, progress bar), the result envelope with provenance, CSV tables and usage errors; runs on the caller's thread.

use indicatif::ProgressBar;
use serde::Serialize;
use xrunlab_sys::{Fingerprint, Provenance};

pub use xrunlab_results::lab::{LabResult, SCHEMA};

/// How an experiment failed before measuring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabError {
    /// An invalid parameter: names the flag and the allowed values (exit code 2).
    Usage(String),
    /// Something failed while running (exit code 1).
    Runtime(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Usage(m) | LabError::Runtime(m) => f.write_str(m),
        }
    }
}

/// A usage error for `flag` with `value`, saying what is allowed.
pub fn invalid(flag: &str, value: impl std::fmt::Display, allowed: &str) -> LabError {
    LabError::Usage(format!(
        "invalid value '{value}' for {flag}: allowed {allowed}"
    ))
}

/// Checks that `value` lies in `lo..=hi`, naming `flag` otherwise.
pub fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    flag: &str,
    value: T,
    lo: T,
    hi: T,
    unit: &str,
) -> Result<(), LabError> {
    if value < lo || value > hi {
        return Err(invalid(flag, value, &format!("{lo}..={hi}{unit}")));
    }
    Ok(())
}

/// What an experiment needs from its caller: when to stop early, and where to show progress.
pub struct Ctx<'a> {
    /// Returns true once the experiment should stop (Ctrl-C, SIGTERM); polled from the caller's thread only.
    pub stop: &'a (dyn Fn() -> bool + Sync),
    /// Progress display; [`ProgressBar::hidden`] shows nothing.
    pub progress: ProgressBar,
}

impl<'a> Ctx<'a> {
    /// A context that never stops and shows nothing (tests, libraries).
    pub fn silent(stop: &'a (dyn Fn() -> bool + Sync)) -> Ctx<'a> {
        Ctx {
            stop,
            progress: ProgressBar::hidden(),
        }
    }

    /// Whether the experiment should stop now.
    pub fn stopped(&self) -> bool {
        (self.stop)()
    }
}

/// Rows for `--csv`: a header and one row per measured point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// One entry per column in each row.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one value per column).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as CSV text (quoted where the csv crate needs it).
    pub fn to_csv(&self) -> Result<Vec<u8>, String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.header).map_err(|e| e.to_string())?;
        for r in &self.rows {
            w.write_record(r).map_err(|e| e.to_string())?;
        }
        w.into_inner().map_err(|e| e.to_string())
    }
}

/// Formats an optional figure for a CSV cell (empty when absent).
pub fn cell(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_default()
}

/// An experiment's figures, as the envelope and the CSV need them.
pub trait Experiment: Serialize {
    /// The result kind, e.g. "probe.wakeup".
    const KIND: &'static str;
    /// One CSV row per measured point.
    fn table(&self) -> Table;
    /// A human-readable summary for the terminal.
    fn text(&self) -> String;
    /// What did not take effect, and what was used instead.
    fn warnings(&self) -> Vec<String>;
    /// Whether some planned points were not measured (stopped early).
    fn incomplete(&self) -> bool;
}

/// Wraps `result` in its file's envelope; `provenance` and `fingerprint` (collected before the
/// experiment) are finished here: the end time, and the steal over the experiment.
pub fn lab_result<T: Experiment>(
    mut provenance: Provenance,
    mut fingerprint: Fingerprint,
    quick: bool,
    result: T,
    stop_reason: Option<&str>,
) -> LabResult<T> {
    provenance.finish();
    fingerprint.finish(xrunlab_sys::default_proc_root());
    let incomplete = result.incomplete() || stop_reason.is_some();
    let end_reason = match stop_reason {
        Some(s) => format!("interrupted by {s}; every point finished before it is kept"),
        None if incomplete => "stopped early; every finished point is kept".into(),
        None => "completed".into(),
    };
    LabResult {
        schema: SCHEMA.to_owned(),
        kind: T::KIND.to_owned(),
        provenance,
        fingerprint,
        quick,
        incomplete,
        end_reason,
        warnings: result.warnings(),
        result,
    }
}

/// Progress bar style shared by the experiments: position, length and a message.
pub fn start_progress(ctx: &Ctx, len: u64, what: &str) {
    ctx.progress.set_length(len);
    ctx.progress.set_position(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
    ) {
        ctx.progress.set_style(style.progress_chars("=> "));
    }
    ctx.progress.set_prefix(what.to_string());
}

/// Percentile `q` (0..=1) of sorted `v` (nearest rank); `None` when empty.
pub fn percentile_sorted(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// The median of `v` (sorted copy); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile_sorted(&s, 0.5)
}
