//! Finding xruns in the stream of cycles, and each node's running statistics (pw-top's WAIT, BUSY
//! and ERR); runs on watch's main thread (and record's), one cycle at a time, in bounded memory.
//!
//! Three kinds of evidence, strongest first:
//! - a follower's own xrun count went up (PipeWire 0.3.72 and later);
//! - a follower was still triggered or awake when its record was taken at the next cycle's start
//!   (what PipeWire's `update_xrun_stats` counts, so this is the server's own rule, applied where
//!   the count is missing, as on 0.3.65), or it finished after the next cycle's signal;
//! - the driver's xrun count went up while every follower finished in time: the device or driver
//!   itself was late.
//!
//! A node that stays late over several cycles (a long overrun) is one xrun, not one per cycle;
//! its ERR count still counts every cycle, as the server does.

use crate::chain::{
    driver_lateness_ns, driver_step, root_path, signaller_path, Finding, Medians, Step,
};
use crate::model::{Cycle, NodeInfo, NodeStatus, NodeTiming};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an xrun was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The node's own xrun count went up.
    NodeCount,
    /// The node was still triggered or awake when the next cycle started.
    StillRunning,
    /// The node finished after the next cycle's signal.
    FinishedLate,
    /// The driver's xrun count went up while the graph finished in time.
    DriverCount,
    /// The server reported an xrun (JACK2's xrun callback) and nothing else is known yet.
    ServerReported,
    /// The driver started a cycle late with every node in time: a whole period late
    /// (PipeWire), or late enough that the server reported an xrun (JACK2).
    DriverLate,
}

/// One xrun, as the cycles show it (before the kernel's events are added).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Xrun {
    /// watch's own xrun number, from 1.
    pub number: u64,
    /// The cycle it was seen in.
    pub cycle: u64,
    /// The late node, or `None` for a driver-side xrun.
    pub node: Option<NodeTiming>,
    /// How it was found.
    pub evidence: Evidence,
    /// The cycle's start (the driver's signal), ns.
    pub cycle_start_ns: u64,
    /// When the node's work had to be done: its signal (or the cycle start) plus one period, ns.
    pub deadline_ns: u64,
    /// Frames per cycle and rate at the time.
    pub quantum: u32,
    /// Sample rate, Hz.
    pub rate: u32,
    /// The node's median WAIT and BUSY over its normal cycles so far, ns.
    pub median_wait_ns: Option<u64>,
    /// See `median_wait_ns`.
    pub median_busy_ns: Option<u64>,
    /// The path from the late node to the root of its lateness, by the cycle's timing (see
    /// [`crate::chain`]): the late node first, the root last. Empty for xruns without a node.
    #[serde(default)]
    pub path: Vec<Step>,
    /// How late the driver started the cycle, ns, where the server gives its expected start.
    #[serde(default)]
    pub driver_late_ns: Option<u64>,
    /// The path from whatever should have signalled the late node (the node upstream of it, or
    /// the driver) to its root, used when the kernel shows the node was never woken, or slept
    /// through its lateness. Empty for xruns without a node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signaller_path: Vec<Step>,
}

/// One node's running figures, for the live view and the summary.
#[derive(Clone)]
pub struct NodeStats {
    /// Name, app and pid from the registry or client list.
    pub info: NodeInfo,
    /// Cycles it finished in.
    pub cycles: u64,
    /// Cycles it was late in (the server's ERR).
    pub err_cycles: u64,
    /// xruns blamed on it (a long overrun over several cycles is one).
    pub xruns: u64,
    wait_us: Histogram<u64>,
    busy_us: Histogram<u64>,
    offset_us: Histogram<u64>,
    last: Option<NodeTiming>,
    late_run: bool,
    last_count: Option<u32>,
    /// Whether it drove the graph (its timing is the cycle's driver block).
    pub driver: bool,
    /// Its last WAIT and BUSY, ns.
    pub last_wait_ns: Option<u64>,
    /// See `last_wait_ns`.
    pub last_busy_ns: Option<u64>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 10 s at 2 significant digits: a fixed few kB per node whatever the run's length.
    Histogram::new_with_bounds(1, 10_000_000, 2).expect("valid bounds")
}

impl NodeStats {
    fn new(info: NodeInfo) -> NodeStats {
        NodeStats {
            info,
            cycles: 0,
            err_cycles: 0,
            xruns: 0,
            wait_us: histogram(),
            busy_us: histogram(),
            offset_us: histogram(),
            last: None,
            late_run: false,
            last_count: None,
            driver: false,
            last_wait_ns: None,
            last_busy_ns: None,
        }
    }

    fn quantile_ns(h: &Histogram<u64>, q: f64) -> Option<u64> {
        (!h.is_empty()).then(|| h.value_at_quantile(q) * 1000)
    }

    /// Median WAIT over its normal cycles, ns.
    pub fn median_wait_ns(&self) -> Option<u64> {
        Self::quantile_ns(&self.wait_us, 0.5)
    }

    /// Median BUSY over its normal cycles, ns.
    pub fn median_busy_ns(&self) -> Option<u64> {
        Self::quantile_ns(&self.busy_us, 0.5)
    }

    /// Median offset of its signal from the cycle's start, ns (how far down the graph it runs).
    pub fn median_offset_ns(&self) -> Option<u64> {
        Self::quantile_ns(&self.offset_us, 0.5)
    }

    /// Its medians, for the chain's analysis.
    pub fn medians(&self) -> Medians {
        Medians {
            offset_ns: self.median_offset_ns(),
            wait_ns: self.median_wait_ns(),
            busy_ns: self.median_busy_ns(),
        }
    }

    /// 99th percentile of BUSY, ns.
    pub fn p99_busy_ns(&self) -> Option<u64> {
        Self::quantile_ns(&self.busy_us, 0.99)
    }

    /// Its last timing.
    pub fn last(&self) -> Option<&NodeTiming> {
        self.last.as_ref()
    }

    /// A cycle it was in time for: its WAIT and BUSY join the figures.
    fn record_normal(&mut self, f: &NodeTiming, start: u64) {
        if f.status != NodeStatus::Finished {
            return;
        }
        self.cycles += 1;
        if f.signal_ns >= start && start > 0 {
            // Recorded in µs, at least 1 (the histogram's floor): a node the driver signals
            // itself sits at the floor.
            let _ = self.offset_us.record(((f.signal_ns - start) / 1000).max(1));
        }
        if let (Some(w), Some(b)) = (f.wait_ns(), f.busy_ns()) {
            let _ = self.wait_us.record((w / 1000).max(1));
            let _ = self.busy_us.record((b / 1000).max(1));
            self.last_wait_ns = Some(w);
            self.last_busy_ns = Some(b);
        }
    }

    /// A cycle it drove: only its BUSY joins the figures. A driver's signal-to-awake span is
    /// its wait for the device (about a whole period), not a scheduling delay.
    fn record_driver(&mut self, d: &NodeTiming) {
        self.driver = true;
        self.last = Some(d.clone());
        if d.status != NodeStatus::Finished {
            return;
        }
        self.cycles += 1;
        if let Some(b) = d.busy_ns() {
            let _ = self.busy_us.record((b / 1000).max(1));
            self.last_busy_ns = Some(b);
        }
    }
}

/// Follows the cycles, keeps each node's figures and yields the xruns.
#[derive(Debug, Default)]
pub struct Detector {
    nodes: BTreeMap<u32, NodeStats>,
    driver_count: Option<u32>,
    xruns: u64,
    cycles: u64,
    driver_xruns: u64,
    last_quantum: Option<(u32, u32)>,
}

impl std::fmt::Debug for NodeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStats")
            .field("info", &self.info)
            .field("cycles", &self.cycles)
            .field("err_cycles", &self.err_cycles)
            .field("xruns", &self.xruns)
            .finish()
    }
}

impl Detector {
    /// A new detector with no nodes.
    pub fn new() -> Detector {
        Detector::default()
    }

    /// A node appeared, or its details changed.
    pub fn node(&mut self, info: NodeInfo) {
        match self.nodes.get_mut(&info.id) {
            Some(s) => s.info = info,
            None => {
                self.nodes.insert(info.id, NodeStats::new(info));
            }
        }
    }

    /// A node went away.
    pub fn node_removed(&mut self, id: u32) {
        self.nodes.remove(&id);
    }

    /// The nodes' figures, by id.
    pub fn nodes(&self) -> &BTreeMap<u32, NodeStats> {
        &self.nodes
    }

    /// Counts an xrun the server reported without saying which node (JACK2's callback), for
    /// which the cycles gave no late node: numbered like the others.
    pub fn server_reported(&mut self, at_ns: u64, period: (u32, u32)) -> Xrun {
        self.xruns += 1;
        let (quantum, rate) = period;
        Xrun {
            number: self.xruns,
            cycle: self.cycles,
            node: None,
            evidence: Evidence::ServerReported,
            cycle_start_ns: at_ns,
            deadline_ns: at_ns,
            quantum,
            rate,
            median_wait_ns: None,
            median_busy_ns: None,
            path: Vec::new(),
            driver_late_ns: None,
            signaller_path: Vec::new(),
        }
    }

    /// Counts a node's xrun that an adapter found in cycles it rebuilt itself (JACK2's wake
    /// chain, looked at around each reported xrun): renumbers it in this detector's series and
    /// adds it to the node's figures.
    pub fn adopt(&mut self, mut x: Xrun) -> Xrun {
        self.xruns += 1;
        x.number = self.xruns;
        if let Some(n) = &x.node {
            let s = self.stats(n);
            s.xruns += 1;
            s.err_cycles += 1;
        }
        x
    }

    /// A detector with this one's nodes and their figures (the medians), and nothing else: to
    /// look at cycles rebuilt around one reported xrun without counting them here.
    pub fn clone_figures(&self) -> Detector {
        let mut d = Detector::new();
        for (id, s) in &self.nodes {
            let mut s = s.clone();
            s.late_run = false;
            s.last = None;
            s.last_count = None;
            d.nodes.insert(*id, s);
        }
        d
    }

    /// Counts a cycle the driver started late while every node was in time (JACK2's reported
    /// xrun, found in the wake chain): numbered like the others, its path the driver alone.
    pub fn driver_late(&mut self, c: &Cycle) -> Xrun {
        self.xruns += 1;
        self.driver_xruns += 1;
        let driver_busy = self
            .nodes
            .get(&c.driver.id)
            .and_then(|s| s.median_busy_ns());
        let start = c.driver.signal_ns;
        Xrun {
            number: self.xruns,
            cycle: c.seq,
            node: None,
            evidence: Evidence::DriverLate,
            cycle_start_ns: start,
            deadline_ns: start + c.period_ns(),
            quantum: c.quantum,
            rate: c.rate,
            median_wait_ns: None,
            median_busy_ns: None,
            path: vec![driver_step(c, driver_busy)],
            driver_late_ns: driver_lateness_ns(c),
            signaller_path: Vec::new(),
        }
    }

    /// Cycles seen, xruns found, and the driver-side ones among them.
    pub fn totals(&self) -> (u64, u64, u64) {
        (self.cycles, self.xruns, self.driver_xruns)
    }

    /// The last quantum and rate seen.
    pub fn quantum(&self) -> Option<(u32, u32)> {
        self.last_quantum
    }

    fn stats(&mut self, t: &NodeTiming) -> &mut NodeStats {
        self.nodes.entry(t.id).or_insert_with(|| {
            NodeStats::new(NodeInfo {
                id: t.id,
                name: t.name.clone(),
                app_name: None,
                pid: None,
            })
        })
    }

    /// One cycle: updates the figures and returns the xruns it shows. A cycle's deadline is
    /// the graph's, its start plus one period (the next cycle's start), not each node's own
    /// signal plus a period: lateness passed down a chain of nodes shows in the last of them.
    /// Each late node's path to the root of its lateness is traced ([`crate::chain`]); a late
    /// node whose root is another node late in the same cycle is counted in its ERR but is not
    /// an xrun of its own (the root's card names it on its path).
    pub fn cycle(&mut self, c: &Cycle) -> Vec<Xrun> {
        self.cycles += 1;
        self.last_quantum = Some((c.quantum, c.rate));
        let period = c.period_ns();
        let start = c.driver.signal_ns;
        let deadline = start + period;
        let followers: Vec<NodeTiming> = c
            .followers
            .iter()
            .map(|f| not_awake_since_its_signal(c, f))
            .collect();
        let mut late_nodes = Vec::new();
        for f in &followers {
            if stamped_by_the_next_cycle(c, f) {
                continue;
            }
            let (late, evidence) = self.follower_late(c, f);
            let stats = self.stats(f);
            if let Some(n) = f.xruns {
                stats.last_count = Some(n);
            }
            if !late {
                stats.record_normal(f, offset_base(c, f));
                if matches!(
                    f.status,
                    NodeStatus::Finished | NodeStatus::NotTriggered | NodeStatus::Inactive
                ) {
                    stats.late_run = false;
                }
                stats.last = Some(f.clone());
                continue;
            }
            stats.err_cycles += 1;
            let new_episode = !stats.late_run;
            stats.late_run = true;
            stats.last = Some(f.clone());
            late_nodes.push((f, evidence.expect("late has evidence"), new_episode));
        }
        let driver_busy = self
            .nodes
            .get(&c.driver.id)
            .and_then(|s| s.median_busy_ns());
        let medians = |id: u32| {
            self.nodes
                .get(&id)
                .map(NodeStats::medians)
                .unwrap_or_default()
        };
        let paths: Vec<(Vec<Step>, Vec<Step>)> = late_nodes
            .iter()
            .map(|(f, _, _)| {
                let path = root_path(c, f, deadline, &medians, driver_busy);
                // Who should have signalled it, for the kernel to follow when the node's own
                // thread turns out to have slept through its lateness.
                let upstream = signaller_path(c, f, deadline, &medians, driver_busy);
                (path, upstream)
            })
            .collect();
        let late_ids: Vec<u32> = late_nodes.iter().map(|(f, _, _)| f.id).collect();
        let mut found = Vec::new();
        // One card per root: nodes the driver itself held back in this cycle (it started the
        // cycle late, or ran long) share its card, the first of them named on it.
        let mut driver_rooted = false;
        for ((f, evidence, new_episode), (path, signaller_path)) in late_nodes.iter().zip(paths) {
            let root_is_other_late = path
                .last()
                .is_some_and(|r| r.id != f.id && late_ids.contains(&r.id) && path.len() > 1);
            let root_is_driver_again = path.len() > 1
                && path.last().is_some_and(|r| {
                    r.role == crate::chain::Role::Driver
                        && matches!(r.finding, Finding::DriverLate | Finding::DriverRanLong)
                });
            if !new_episode || root_is_other_late || (root_is_driver_again && driver_rooted) {
                continue;
            }
            driver_rooted |= root_is_driver_again;
            let stats = self.stats(f);
            stats.xruns += 1;
            let (median_wait_ns, median_busy_ns) = (stats.median_wait_ns(), stats.median_busy_ns());
            self.xruns += 1;
            found.push(Xrun {
                number: self.xruns,
                cycle: c.seq,
                node: Some((*f).clone()),
                evidence: *evidence,
                cycle_start_ns: start,
                deadline_ns: deadline,
                quantum: c.quantum,
                rate: c.rate,
                median_wait_ns,
                median_busy_ns,
                path,
                driver_late_ns: driver_lateness_ns(c),
                signaller_path,
            });
        }
        // The driver's own WAIT and BUSY, as pw-top shows them on its row.
        self.stats(&c.driver).record_driver(&c.driver);
        if let Some(n) = c.driver_xruns {
            let grew = self.driver_count.is_some_and(|before| n > before);
            self.driver_count = Some(n);
            let whole_period_late = crate::chain::driver_whole_period_late(c);
            if (grew || whole_period_late) && late_nodes.is_empty() {
                self.xruns += 1;
                self.driver_xruns += 1;
                found.push(Xrun {
                    number: self.xruns,
                    cycle: c.seq,
                    node: None,
                    evidence: if grew {
                        Evidence::DriverCount
                    } else {
                        Evidence::DriverLate
                    },
                    cycle_start_ns: start,
                    deadline_ns: deadline,
                    quantum: c.quantum,
                    rate: c.rate,
                    median_wait_ns: None,
                    median_busy_ns: None,
                    path: vec![driver_step(c, driver_busy)],
                    driver_late_ns: driver_lateness_ns(c),
                    signaller_path: Vec::new(),
                });
            }
        }
        found
    }

    /// One cycle an adapter rebuilt only to keep the figures (JACK2's wake chain, read once a
    /// second while xruns come from the server's callback): the nodes in time join WAIT and BUSY,
    /// the cycle is counted, and nothing is reported or counted as an xrun, since the server's
    /// callback (and [`Detector::adopt`]) does that.
    pub fn observe(&mut self, c: &Cycle) {
        self.cycles += 1;
        self.last_quantum = Some((c.quantum, c.rate));
        for f in &c.followers {
            if stamped_by_the_next_cycle(c, f) {
                continue;
            }
            let (late, _) = self.follower_late(c, f);
            let stats = self.stats(f);
            if !late {
                stats.record_normal(f, offset_base(c, f));
            }
            stats.last = Some(f.clone());
        }
    }

    fn follower_late(&self, c: &Cycle, f: &NodeTiming) -> (bool, Option<Evidence>) {
        let (start, period) = (c.driver.signal_ns, c.period_ns());
        let before = self.nodes.get(&f.id).and_then(|s| s.last_count);
        if let (Some(now), Some(before)) = (f.xruns, before) {
            if now > before {
                return (true, Some(Evidence::NodeCount));
            }
        }
        if matches!(f.status, NodeStatus::Triggered | NodeStatus::Awake) {
            return (true, Some(Evidence::StillRunning));
        }
        // The graph's deadline: the next cycle's start; for a block that is already the next
        // cycle's, that cycle's end.
        let deadline = if next_cycles_block(c, f) {
            f.signal_ns + period
        } else {
            start + period
        };
        if f.status == NodeStatus::Finished && f.busy_ns().is_some() && f.finish_ns > deadline {
            return (true, Some(Evidence::FinishedLate));
        }
        (false, None)
    }
}

/// A follower as this cycle's lateness reads it: one signalled again a period after it last woke
/// and not awake since (`Triggered`, its awake and finish half a period or more before its
/// signal) has not started in the cycle its signal began, so its stale awake is dropped (its
/// span runs from its signal, not awake). So is one `Awake` with an awake that old: 1.4.2 also
/// records a client the driver's late start held back so, its awake and finish three cycles
/// old (recorded under `record` with an RT hog on the server's CPU: "ran long: BUSY 12 µs"). PipeWire 1.4 records a client held off its CPU so,
/// its awake and finish still the cycle's before, in time; read as they stand they said "ran
/// long, BUSY 6 µs" and the kernel's account covered those 6 µs, not the hog that held the
/// thread off from its signal on (measured on 1.4.2: 8 of 8 cards, the hog named in none).
fn not_awake_since_its_signal(c: &Cycle, f: &NodeTiming) -> NodeTiming {
    let mut f = f.clone();
    if matches!(f.status, NodeStatus::Triggered | NodeStatus::Awake)
        && f.awake_ns > 0
        && f.awake_ns.saturating_add(c.period_ns() / 2) <= f.signal_ns
    {
        f.awake_ns = 0;
    }
    f
}

/// Where a follower's signal offset is counted from: this cycle's start, or the next one's for a
/// block that is already the next cycle's (its offset there is its ordinary one).
fn offset_base(c: &Cycle, f: &NodeTiming) -> u64 {
    if next_cycles_block(c, f) {
        c.driver.signal_ns + c.period_ns()
    } else {
        c.driver.signal_ns
    }
}

/// Whether a finished follower's block in `c` is the next cycle's: signalled a period after this
/// cycle's start (±10 %) by the driver itself, no node of this cycle having finished around its
/// signal. PipeWire 0.3.65 records the cycles around another node's overrun so: a bystander
/// signalled and run in its own slot of the next cycle, whole and in time (recorded in `bench
/// watch`: the bystander's signal 1.3 µs after the next cycle's start). Judged against this
/// cycle's end it would be an xrun in every cycle of the overrun. A node signalled that late by a
/// node upstream that ran long (a chain) is not this case: its signaller finished around it.
fn next_cycles_block(c: &Cycle, f: &NodeTiming) -> bool {
    let start = c.driver.signal_ns;
    let period = c.period_ns();
    f.status == NodeStatus::Finished
        && f.signal_ns > start
        && (f.signal_ns - start).abs_diff(period) <= period / 10
        && crate::chain::signaller(c, f, &[f.id]).is_none()
}

/// Whether a follower's block in `c` is already the next cycle's: PipeWire 1.4 writes a cycle
/// again when the next one starts, its driver block unchanged and `Triggered`, and a follower
/// that has been signalled and woken for that next cycle in it (signal and wake-up a period or
/// more after this cycle's start). Such a block says nothing of this cycle, and the record that
/// follows tells how the next one ended; read as this cycle's, a follower merely running its next
/// cycle would be an xrun of the wrong cycle (recorded: `pw-1.4.2-overrun-a.pod`). A follower
/// signalled late in a cycle whose driver finished (a chain that ran long) is not this case.
fn stamped_by_the_next_cycle(c: &Cycle, f: &NodeTiming) -> bool {
    let next = c.driver.signal_ns + c.period_ns() * 9 / 10;
    c.driver.status == NodeStatus::Triggered
        && matches!(f.status, NodeStatus::Triggered | NodeStatus::Awake)
        && f.signal_ns >= next
        && (f.awake_ns == 0 || f.awake_ns >= f.signal_ns)
}
