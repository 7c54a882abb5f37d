//! The doctor's report as the checks build it (the type, its text and its result file live in
//! xrunlab-results). Built on the main thread.

use crate::checks::{examine, Options};
use crate::finding::Counts;
use crate::probe::Probes;
use crate::roots::Roots;

pub use xrunlab_results::doctor::Report;

/// Runs every check against `roots`.
pub fn build(roots: &Roots, probes: &Probes, options: Options) -> Report {
    let findings = examine(roots, probes, options);
    Report {
        options,
        roots: roots.clone(),
        probes: probes.clone(),
        counts: Counts::of(&findings),
        findings,
    }
}
