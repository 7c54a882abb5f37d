//! What watch prints and writes at the end: xruns per node, the cases, and the top culprits the
//! kernel named; kept incrementally in bounded memory on the collector thread.

use crate::card::{Card, Case};
use crate::detect::Detector;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One node's line in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Node id.
    pub id: u32,
    /// Node name.
    pub name: String,
    /// Its process, if known.
    pub pid: Option<i32>,
    /// Cycles it finished in.
    pub cycles: u64,
    /// Cycles it was late in (the server's ERR).
    pub err_cycles: u64,
    /// xruns blamed on it.
    pub xruns: u64,
    /// Median WAIT and BUSY over its normal cycles, µs.
    pub median_wait_us: Option<f64>,
    /// See `median_wait_us`.
    pub median_busy_us: Option<f64>,
    /// 99th percentile of BUSY, µs.
    pub p99_busy_us: Option<f64>,
}

/// A culprit the kernel named, totalled over the cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CulpritLine {
    /// `task`, `irq`, `softirq`.
    pub kind: String,
    /// comm, handler name or softirq type.
    pub name: String,
    /// Process id of a task.
    pub pid: Option<i32>,
    /// Policy of a task.
    pub policy: String,
    /// Cards in which it was the main culprit.
    pub xruns: u64,
    /// Time it took from the late nodes' threads, µs.
    pub us: f64,
}

/// The end-of-watch summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Cycles seen.
    pub cycles: u64,
    /// xruns found.
    pub xruns: u64,
    /// How many of each case.
    pub cases: BTreeMap<String, u64>,
    /// Cards that had the kernel's account.
    pub with_kernel: u64,
    /// Per node, most xruns first.
    pub nodes: Vec<NodeSummary>,
    /// The kernel's main culprits, most time first.
    pub top_culprits: Vec<CulpritLine>,
}

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
