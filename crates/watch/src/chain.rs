//! The chain: blame follows the signal. A node that is late because its signal came late was
//! not the root: whatever should have signalled it (the node upstream of it in the graph, or the
//! driver that starts the cycle) is followed until a step explains the lateness itself: it woke
//! late, ran long, or, for the driver, started the cycle late. Timing only (the server's figures
//! against each node's medians); the kernel's events refine the path in [`crate::card()`]. A pure
//! function, run on watch's main thread.
//!
//! Who signalled a node is not in either server's figures: PipeWire gives each node's signal
//! time, JACK2's wake chain the waking thread, but neither names the upstream node for the
//! server-neutral cycle. A node is signalled when the last node it depends on finishes, so its
//! signaller is the node that ran before its signal and finished right around it; when no node
//! did, the driver signalled it.

use crate::model::{Cycle, NodeTiming};
use serde::{Deserialize, Serialize};

/// How far a node's signal may follow its signaller's finish: the server's own hand-off (an
/// eventfd or futex write and the bookkeeping around it) takes a few µs; 200 µs leaves room for
/// a preempted hand-off without mistaking an unrelated node's earlier finish for the signal.
pub const HANDOFF_NS: u64 = 200_000;

/// A driver whose cycle starts this much after its expected wake-up, or more, started it late
/// (a quarter of a cycle is time the graph no longer has).
pub fn driver_late_threshold_ns(period_ns: u64) -> u64 {
    (period_ns / 4).max(200_000)
}

/// What runs the step's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The driver: the server's thread that starts each cycle.
    Driver,
    /// A node (a client or a filter) of the graph.
    Node,
}

/// What the timing says about one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Its signal came late: its signaller is the next step.
    NotSignalled,
    /// Signalled in time, it started late (or never started).
    WokeLate,
    /// It started in time and worked too long.
    RanLong,
    /// The driver started the cycle late, after its expected wake-up.
    DriverLate,
    /// The driver's own processing took too long.
    DriverRanLong,
    /// Nothing in the timing stands out at this step.
    InTime,
}

/// One step of the path from the late node to the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Driver or node.
    pub role: Role,
    /// The node's id (the driver's own id on PipeWire, 0 for JACK2's).
    pub id: u32,
    /// Its name.
    pub name: String,
    /// What its timing shows.
    pub finding: Finding,
    /// How much later than its median the finding's span was, ns (the driver's lateness for
    /// [`Finding::DriverLate`]).
    pub excess_ns: u64,
    /// Its signal, awake and finish times in the cycle (0: not reported).
    pub signal_ns: u64,
    /// See `signal_ns`.
    pub awake_ns: u64,
    /// See `signal_ns`.
    pub finish_ns: u64,
}

/// A node's medians over its normal cycles, ns: its signal's offset from the cycle start, its
/// WAIT and its BUSY.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Medians {
    /// Signal − cycle start.
    pub offset_ns: Option<u64>,
    /// Awake − signal.
    pub wait_ns: Option<u64>,
    /// Finish − awake.
    pub busy_ns: Option<u64>,
}

/// How late the driver started this cycle, ns: its signal against its expected wake-up, where
/// the server gives one.
pub fn driver_lateness_ns(c: &Cycle) -> Option<u64> {
    let expected = c.expected_start_ns.filter(|&e| e > 0)?;
    (c.driver.signal_ns > 0).then(|| c.driver.signal_ns.saturating_sub(expected))
}

/// Whether the driver started this cycle a whole period or more after it was due: a skipped
/// cycle, an xrun whatever the nodes did.
pub fn driver_whole_period_late(c: &Cycle) -> bool {
    driver_lateness_ns(c).is_some_and(|l| l >= c.period_ns())
}

fn excess(span: Option<u64>, median: Option<u64>) -> u64 {
    span.map_or(0, |s| s.saturating_sub(median.unwrap_or(0)))
}

/// The step of node `n`: the largest excess of its signal's offset, its WAIT and its BUSY wins,
/// and a late signal sends the path upstream. A signal stamped a whole period after the cycle's
/// start is the next cycle's (PipeWire records a node still busy from one cycle so) and says
/// nothing of a late signal, unless a node upstream finished around it. A node that had not started (or finished) by the end counts its
/// span up to its own end: the cycle's end, or its signal plus a period when that is later.
fn node_step(c: &Cycle, n: &NodeTiming, end_ns: u64, m: Medians) -> Step {
    let (start, period_ns) = (c.driver.signal_ns, c.period_ns());
    let signalled_by_node = signaller(c, n, &[n.id]).is_some();
    let own_end = end_ns.max(n.signal_ns.saturating_add(period_ns));
    let offset = (n.signal_ns > 0).then(|| n.signal_ns.saturating_sub(start));
    let wait = if n.awake_ns > 0 {
        n.wait_ns()
    } else {
        (n.signal_ns > 0).then(|| own_end.saturating_sub(n.signal_ns))
    };
    let busy = if n.awake_ns > 0 {
        n.busy_ns()
            .or_else(|| Some(own_end.saturating_sub(n.awake_ns)))
    } else {
        None
    };
    let (wait_x, busy_x) = (excess(wait, m.wait_ns), excess(busy, m.busy_ns));
    // A signal a whole period after the cycle's start (±10 %) that the driver gave is the next
    // cycle's stamp on a node still busy from this one (PipeWire 1.x records it so): it says
    // nothing of a late signal. One that a node upstream gave as it finished is late.
    let next_cycles =
        offset.is_some_and(|o| o.abs_diff(period_ns) <= period_ns / 10) && !signalled_by_node;
    let offset_x = if next_cycles {
        0
    } else {
        excess(offset, m.offset_ns)
    };
    let own = if busy_x >= wait_x {
        (Finding::RanLong, busy_x)
    } else {
        (Finding::WokeLate, wait_x)
    };
    let (finding, excess_ns) = if offset_x > own.1 {
        (Finding::NotSignalled, offset_x)
    } else {
        own
    };
    Step {
        role: Role::Node,
        id: n.id,
        name: n.name.clone(),
        finding: if excess_ns == 0 {
            Finding::InTime
        } else {
            finding
        },
        excess_ns,
        signal_ns: n.signal_ns,
        awake_ns: n.awake_ns,
        finish_ns: n.finish_ns,
    }
}

/// The driver's step: late when it started the cycle past its threshold, else its own
/// processing against its median BUSY.
pub fn driver_step(c: &Cycle, median_busy_ns: Option<u64>) -> Step {
    let d = &c.driver;
    let late = driver_lateness_ns(c).unwrap_or(0);
    let ran = excess(d.busy_ns(), median_busy_ns);
    let threshold = driver_late_threshold_ns(c.period_ns());
    let (finding, excess_ns) = if late >= threshold {
        (Finding::DriverLate, late)
    } else if ran >= threshold && median_busy_ns.is_some() {
        (Finding::DriverRanLong, ran)
    } else {
        (Finding::InTime, late)
    };
    Step {
        role: Role::Driver,
        id: d.id,
        name: d.name.clone(),
        finding,
        excess_ns,
        signal_ns: d.signal_ns,
        awake_ns: d.awake_ns,
        finish_ns: d.finish_ns,
    }
}

/// The node that signalled `n` in cycle `c`: the follower (not `n`, not already on the path)
/// that ran before `n`'s signal and whose finish is the nearest to it (within [`HANDOFF_NS`]),
/// in this cycle; `None` when the driver did.
pub fn signaller<'a>(c: &'a Cycle, n: &NodeTiming, visited: &[u32]) -> Option<&'a NodeTiming> {
    let start = c.driver.signal_ns;
    c.followers
        .iter()
        .filter(|f| f.id != n.id && !visited.contains(&f.id))
        .filter(|f| f.busy_ns().is_some() && f.finish_ns >= start && f.awake_ns >= start)
        // It ran before the signal and finished around it: PipeWire stamps the finish before
        // the signal it then sends; JACK2's wake chain sees the signaller's futex wake, then its
        // switch-out to sleep, a few µs after.
        .filter(|f| f.awake_ns < n.signal_ns && f.finish_ns.abs_diff(n.signal_ns) <= HANDOFF_NS)
        .min_by_key(|f| f.finish_ns.abs_diff(n.signal_ns))
}

/// The path from the late node `late` back to the root of its lateness, by timing: the first
/// step is the late node itself; each [`Finding::NotSignalled`] step is followed by its
/// signaller (or the driver); the last step is the root. `end_ns` is when the cycle had to be
/// done (spans still open then count up to it); `medians` gives each node's, `driver_busy` the
/// driver's median BUSY.
pub fn root_path(
    c: &Cycle,
    late: &NodeTiming,
    end_ns: u64,
    medians: &dyn Fn(u32) -> Medians,
    driver_busy: Option<u64>,
) -> Vec<Step> {
    let mut path = vec![node_step(c, late, end_ns, medians(late.id))];
    let mut current = late;
    // A cycle holds each node once, so the path ends within the followers' count.
    for _ in 0..=c.followers.len() {
        let last = path.last().expect("non-empty");
        if last.finding != Finding::NotSignalled {
            break;
        }
        let visited: Vec<u32> = path.iter().map(|s| s.id).collect();
        match signaller(c, current, &visited) {
            Some(up) => {
                path.push(node_step(c, up, end_ns, medians(up.id)));
                current = up;
            }
            None => {
                path.push(driver_step(c, driver_busy));
                break;
            }
        }
    }
    // A late node whose own spans are normal, in a cycle the driver started late: the cycle had
    // less time than it should, and the driver is the root. So is a node still running in a
    // cycle the driver started a whole period late: the server catches up with cycles back to
    // back, and the record is taken at the next one's start (PipeWire 1.4.2: 44 µs in), so the
    // node's span, counted up to the cycle's end, says nothing of its own work.
    let still_running = late.awake_ns > 0 && late.busy_ns().is_none();
    if path.len() == 1
        && (path[0].finding == Finding::InTime || (still_running && driver_whole_period_late(c)))
    {
        let d = driver_step(c, driver_busy);
        if d.finding == Finding::DriverLate {
            path[0].finding = Finding::NotSignalled;
            path.push(d);
        }
    }
    path
}

/// The path from whatever should have signalled node `n` (the node upstream, or the driver) to
/// the root, by timing. [`crate::card()`] uses it when the kernel shows the node's thread was
/// never woken, or slept through its lateness.
pub fn signaller_path(
    c: &Cycle,
    n: &NodeTiming,
    end_ns: u64,
    medians: &dyn Fn(u32) -> Medians,
    driver_busy: Option<u64>,
) -> Vec<Step> {
    match signaller(c, n, &[n.id]) {
        Some(up) => root_path(c, up, end_ns, medians, driver_busy),
        None => vec![driver_step(c, driver_busy)],
    }
}
