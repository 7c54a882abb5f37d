//! What watch prints and writes at the end: xruns per node, the card kinds, the top culprits
//! the kernel named, and what delayed the audio server's own threads (LatencyMon's table for the
//! server's driver) ([`Summary`], a type of watch's result file); kept incrementally in bounded
//! memory on watch's main thread.

use crate::card::{Card, KernelCulprit};
use crate::chain::Role;
use crate::detect::Detector;
use crate::words::dur;
use std::collections::BTreeMap;
// The summary's types are the result file's: they live with it in the results crate.
pub use xrunlab_results::watch::{CulpritLine, DelayLine, NodeSummary, Summary};

/// The most distinct culprits kept in the tables (a month of watching keeps them bounded).
const MAX_LINES: usize = 256;

/// Totals kept as cards come.
#[derive(Debug, Default)]
pub struct Tally {
    kinds: BTreeMap<String, u64>,
    with_kernel: u64,
    culprits: BTreeMap<(String, String, Option<i32>), CulpritLine>,
    delays: BTreeMap<(String, String, Option<i32>), DelayLine>,
    /// xruns blamed on each node as the root (by node id).
    roots: BTreeMap<u32, u64>,
}

fn key(c: &KernelCulprit) -> (String, String, Option<i32>) {
    (c.kind.clone(), c.name.clone(), c.pid)
}

impl Tally {
    /// Counts one card.
    pub fn add(&mut self, card: &Card) {
        *self.kinds.entry(card.kind.name().to_owned()).or_default() += 1;
        if let Some(root) = card.root_step().filter(|r| r.role == Role::Node) {
            *self.roots.entry(root.id).or_default() += 1;
        }
        // The cause a card names: its root's account when the root is another thread,
        // otherwise the late node's.
        let root_account = card.root.as_ref().and_then(|r| r.account.as_ref());
        if let Some(acc) = card
            .root
            .as_ref()
            .filter(|r| r.role == Role::Driver)
            .and_then(|r| r.account.as_ref())
        {
            for c in acc.culprits.iter().filter(|c| c.kind != "idle") {
                if !self.delays.contains_key(&key(c)) && self.delays.len() >= MAX_LINES {
                    continue;
                }
                let line = self.delays.entry(key(c)).or_insert_with(|| DelayLine {
                    kind: c.kind.clone(),
                    name: c.name.clone(),
                    pid: c.pid,
                    policy: c.policy.clone(),
                    cycles: 0,
                    total_us: 0.0,
                    worst_us: 0.0,
                });
                line.cycles += 1;
                line.total_us += c.us;
                line.worst_us = line.worst_us.max(c.us);
            }
        }
        let Some(k) = root_account.or(card.kernel.as_ref()) else {
            return;
        };
        self.with_kernel += 1;
        if let Some(c) = k.main_culprit.as_ref().filter(|c| c.kind != "idle") {
            if !self.culprits.contains_key(&key(c)) && self.culprits.len() >= MAX_LINES {
                return;
            }
            let line = self.culprits.entry(key(c)).or_insert_with(|| CulpritLine {
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
                // The xruns whose root it was (a node late only because of another is not
                // blamed); the detector's count where no card was made yet.
                xruns: self.roots.get(&s.info.id).copied().unwrap_or(0),
                median_wait_us: us(s.median_wait_ns()),
                median_busy_us: us(s.median_busy_ns()),
                p99_busy_us: us(s.p99_busy_ns()),
            })
            .collect();
        nodes.sort_by(|a, b| b.xruns.cmp(&a.xruns).then(a.id.cmp(&b.id)));
        let mut top_culprits: Vec<CulpritLine> = self.culprits.values().cloned().collect();
        top_culprits.sort_by(|a, b| b.us.total_cmp(&a.us));
        let mut server_delays: Vec<DelayLine> = self.delays.values().cloned().collect();
        server_delays.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        let delay_verdict = delay_verdict(&server_delays, xruns, self.kinds_of_driver());
        Summary {
            cycles,
            xruns,
            cases: self.kinds.clone(),
            with_kernel: self.with_kernel,
            nodes,
            top_culprits,
            server_delays,
            delay_verdict,
        }
    }

    fn kinds_of_driver(&self) -> u64 {
        ["driver_woke_late", "interrupt_late", "driver_ran_long"]
            .iter()
            .filter_map(|k| self.kinds.get(*k))
            .sum()
    }
}

/// The delay table in one line.
fn delay_verdict(lines: &[DelayLine], xruns: u64, driver_xruns: u64) -> String {
    let Some(worst) = lines
        .iter()
        .max_by(|a, b| a.worst_us.total_cmp(&b.worst_us))
    else {
        return if xruns == 0 {
            "no xrun: the audio server's threads lost no cycle".to_owned()
        } else if driver_xruns == 0 {
            "the audio server's own threads lost no cycle to anything else: every xrun's root \
             was in the graph"
                .to_owned()
        } else {
            "the audio server's thread was late, but the kernel's events name nothing that \
             delayed it"
                .to_owned()
        };
    };
    let name = match worst.kind.as_str() {
        "task" => format!(
            "{}{}",
            worst.name,
            worst.pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
        ),
        k => format!("{k} {}", worst.name),
    };
    format!(
        "highest delay: {name} {} (in {} of {} xruns, {} in all); {} of the xruns were the \
         audio server's own thread delayed",
        dur(worst.worst_us),
        worst.cycles,
        xruns,
        dur(worst.total_us),
        driver_xruns
    )
}
