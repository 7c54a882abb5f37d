//! Which thread does a node's work: node → pid → that process's real-time threads, confirmed by
//! matching the node's awake times with the threads' switch-ins in the kernel's events. Reads
//! procfs under a root path (fixture trees in tests); runs on watch's main thread (and record's).

use serde::{Deserialize, Serialize};
use std::path::Path;
use xrunlab_trace::{EventKind, TraceEvent};

/// How sure the mapping is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// A guess: several candidates, or none confirmed.
    Low,
    /// The process has exactly one real-time thread, not yet confirmed by the kernel.
    Medium,
    /// The kernel showed this thread switching in when the node woke, cycle after cycle.
    High,
}

/// A real-time thread of a node's process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtThread {
    /// Thread id.
    pub tid: i32,
    /// Its name (`data-loop.0`, or the process's name under pw-jack).
    pub comm: String,
    /// `SCHED_FIFO 88`...
    pub policy: String,
}

/// A node's thread, with how it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// The process, if known.
    pub pid: Option<i32>,
    /// The thread chosen, if any.
    pub thread: Option<RtThread>,
    /// How sure.
    pub confidence: Confidence,
    /// Why, in words.
    pub reason: String,
}

fn policy_of(stat: &str) -> Option<(i64, i64)> {
    let rest: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // Fields 40 (rt_priority) and 41 (policy), counted from 1 with field 3 first after ')'.
    let field = |n: usize| rest.get(n - 3).and_then(|s| s.parse::<i64>().ok());
    Some((field(41)?, field(40)?))
}

/// The highest-priority real-time thread of process `pid`: an audio server's own thread, the
/// one that drives its graph (jackd's process thread, PipeWire's data loop).
pub fn top_rt_thread(proc_root: &Path, pid: i32) -> Option<RtThread> {
    rt_threads(proc_root, pid).into_iter().max_by_key(|t| {
        t.policy
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse::<u32>().ok())
    })
}

/// The real-time (SCHED_FIFO or SCHED_RR) threads of process `pid`.
pub fn rt_threads(proc_root: &Path, pid: i32) -> Vec<RtThread> {
    let Ok(dir) = std::fs::read_dir(proc_root.join(format!("{pid}/task"))) else {
        return Vec::new();
    };
    let mut out: Vec<RtThread> = dir
        .filter_map(|e| {
            let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let base = proc_root.join(format!("{pid}/task/{tid}"));
            let stat = std::fs::read_to_string(base.join("stat")).ok()?;
            let (policy, prio) = policy_of(&stat)?;
            let name = match policy {
                1 => format!("SCHED_FIFO {prio}"),
                2 => format!("SCHED_RR {prio}"),
                _ => return None,
            };
            let comm = std::fs::read_to_string(base.join("comm")).unwrap_or_default();
            Some(RtThread {
                tid,
                comm: comm.trim_end().to_owned(),
                policy: name,
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// The node's thread from procfs alone.
pub fn map_node(proc_root: &Path, pid: Option<i32>) -> Mapping {
    let Some(pid) = pid else {
        return Mapping {
            pid: None,
            thread: None,
            confidence: Confidence::Low,
            reason: "the server does not say which process runs this node".into(),
        };
    };
    let threads = rt_threads(proc_root, pid);
    match threads.as_slice() {
        [] => Mapping {
            pid: Some(pid),
            thread: None,
            confidence: Confidence::Low,
            reason: format!("process {pid} has no real-time thread (gone, or not real-time)"),
        },
        [one] => Mapping {
            pid: Some(pid),
            thread: Some(one.clone()),
            confidence: Confidence::Medium,
            reason: format!("the only real-time thread of process {pid}"),
        },
        many => {
            // Prefer PipeWire's data loop by name; otherwise the first, and say it is a guess.
            let pick = many
                .iter()
                .find(|t| t.comm.starts_with("data-loop"))
                .unwrap_or(&many[0]);
            Mapping {
                pid: Some(pid),
                thread: Some(pick.clone()),
                confidence: Confidence::Low,
                reason: format!(
                    "one of {} real-time threads of process {pid}, not yet confirmed",
                    many.len()
                ),
            }
        }
    }
}

/// How many of the node's `awake` times (ns) have a switch-in of `tid` within `slack_ns`.
pub fn matching_switch_ins(events: &[TraceEvent], tid: i32, awake: &[u64], slack_ns: u64) -> usize {
    awake
        .iter()
        .filter(|&&a| {
            events.iter().any(|e| {
                matches!(e.kind, EventKind::Switch { next_tid, .. } if next_tid == tid)
                    && e.ts_ns.abs_diff(a) <= slack_ns
            })
        })
        .count()
}

/// Confirms (or picks) the node's thread with the kernel's events: the candidate whose switch-ins
/// line up with most of the node's awake times (at least 3 and most of them) makes it high.
pub fn confirm(mapping: &mut Mapping, proc_root: &Path, events: &[TraceEvent], awake: &[u64]) {
    let Some(pid) = mapping.pid else {
        return;
    };
    if awake.len() < 3 || mapping.confidence == Confidence::High {
        return;
    }
    const SLACK_NS: u64 = 200_000;
    let best = rt_threads(proc_root, pid)
        .into_iter()
        .map(|t| (matching_switch_ins(events, t.tid, awake, SLACK_NS), t))
        .max_by_key(|(n, _)| *n);
    if let Some((n, t)) = best {
        if n >= 3 && n * 2 > awake.len() {
            mapping.reason = format!(
                "switched in within 200 µs of the node's wake-up in {n} of {} cycles",
                awake.len()
            );
            mapping.thread = Some(t);
            mapping.confidence = Confidence::High;
        }
    }
}
