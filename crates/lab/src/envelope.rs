//! An experiment's figures and the envelope its file wraps them in (provenance, fingerprint,
//! how it ended); built on the caller's thread.

use crate::table::Table;
use serde::Serialize;
use xrunlab_sys::{Fingerprint, Provenance};

pub use xrunlab_results::lab::{LabResult, SCHEMA};

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
