//! What watch prints and writes at the end: xruns per node, the cases, and the top culprits the
//! kernel named ([`Summary`], a type of watch's result file); kept incrementally in bounded
//! memory on the collector thread.

use crate::card::{Card, Case};
use crate::detect::Detector;
use std::collections::BTreeMap;
// The summary's types are the result file's: they live with it in the results crate.
pub use xrunlab_results::watch::{CulpritLine, NodeSummary, Summary};

/// Totals kept as cards come.
#[derive(Debug, Default)]
pub struct Tally {
    cases: BTreeMap<String, u64>,
    with_kernel: u64,
    culprits: BTreeMap<(String, String, Option<i32>), CulpritLine>,
}

impl Tally {
    /// Counts one card.
    pub fn add(&mut self, card: &Card) {
        *self
            .cases
            .entry(case_name(card.case).to_owned())
            .or_default() += 1;
        let Some(k) = &card.kernel else {
            return;
        };
        self.with_kernel += 1;
        if let Some(c) = k.main_culprit.as_ref().filter(|c| c.kind != "idle") {
            let line = self
                .culprits
                .entry((c.kind.clone(), c.name.clone(), c.pid))
                .or_insert_with(|| CulpritLine {
                    kind: c.kind.clone(),
                    name: c.name.clone(),
                    pid: c.pid,
                    policy: c.policy.clone(),
                    xruns: 0,
                    us: 0.0,
                });
            line.xruns += 1;
            line.us += c.us;
        }
    }

    /// The summary of what the detector and the cards saw.
    pub fn summary(&self, detector: &Detector) -> Summary {
        let (cycles, xruns, _) = detector.totals();
        let us = |ns: Option<u64>| ns.map(|n| n as f64 / 1000.0);
        let mut nodes: Vec<NodeSummary> = detector
            .nodes()
            .values()
            .map(|s| NodeSummary {
                id: s.info.id,
                name: s.info.name.clone(),
                pid: s.info.pid,
                cycles: s.cycles,
                err_cycles: s.err_cycles,
                xruns: s.xruns,
                median_wait_us: us(s.median_wait_ns()),
                median_busy_us: us(s.median_busy_ns()),
                p99_busy_us: us(s.p99_busy_ns()),
            })
            .collect();
        nodes.sort_by(|a, b| b.xruns.cmp(&a.xruns).then(a.id.cmp(&b.id)));
        let mut top_culprits: Vec<CulpritLine> = self.culprits.values().cloned().collect();
        top_culprits.sort_by(|a, b| b.us.total_cmp(&a.us));
        let cases = self.cases.clone();
        Summary {
            cycles,
            xruns,
            cases,
            with_kernel: self.with_kernel,
            nodes,
            top_culprits,
        }
    }
}

/// Cases counted in a summary, as `Case` names them.
pub fn case_name(case: Case) -> &'static str {
    match case {
        Case::NeverWoke => "never_woke",
        Case::WokeLate => "woke_late",
        Case::RanLong => "ran_long",
        Case::DriverSide => "driver_side",
        Case::Unattributed => "unattributed",
    }
}
