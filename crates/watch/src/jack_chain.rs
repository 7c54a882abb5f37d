//! JACK2's per-client timing, rebuilt from the kernel's wake chain: JACK2 keeps its per-client
//! signal/awake/finish times private, but every cycle the server's real-time thread wakes the
//! first clients' real-time threads through futexes, each client wakes its successors when it is
//! done, and then sleeps. Runs on watch's main thread (and record's).
//!
//! Per client thread and cycle: `signal` is its `sched_waking`, `awake` its switch-in, `finish`
//! its next switch-out to sleep. A cycle starts at the server thread's first wake of a client; a
//! client busy past the next start is not woken in that cycle (it is not waiting), so it shows
//! as "finished after the next signal" in its own cycle and "not triggered" in the next: the
//! same evidence PipeWire's profiler gives for a late follower.

use crate::model::{Cycle, NodeStatus, NodeTiming};
use xrunlab_trace::{still_runnable, EventKind, TraceEvent};

/// The threads of a JACK2 graph, found from procfs (see `xrunlab_jack::procs`).
#[derive(Debug, Clone)]
pub struct ChainThreads {
    /// The server's real-time thread (it runs the driver).
    pub server_tid: i32,
    /// Each client: its node id (an index of watch's own), name and real-time thread.
    pub clients: Vec<(u32, String, i32)>,
}

/// The server's settings: frames per cycle and rate.
#[derive(Debug, Clone, Copy)]
pub struct Period {
    /// Frames per cycle.
    pub frames: u32,
    /// Sample rate, Hz.
    pub rate: u32,
}

impl Period {
    /// The period's length, ns.
    pub fn ns(&self) -> u64 {
        u64::from(self.frames) * 1_000_000_000 / u64::from(self.rate.max(1))
    }
}

fn is_client(threads: &ChainThreads, tid: i32) -> bool {
    threads.clients.iter().any(|(_, _, t)| *t == tid)
}

/// The cycle starts in `events` (time-sorted): the server thread's first wake of a client
/// thread at least half a period after the previous start.
fn cycle_starts(events: &[TraceEvent], threads: &ChainThreads, period_ns: u64) -> Vec<u64> {
    let mut starts: Vec<u64> = Vec::new();
    for e in events {
        if let EventKind::Wakeup { tid, waker_tid, .. } = e.kind {
            let from_server = waker_tid == threads.server_tid && is_client(threads, tid);
            let far_enough = starts.last().is_none_or(|&s| e.ts_ns >= s + period_ns / 2);
            if from_server && far_enough {
                starts.push(e.ts_ns);
            }
        }
    }
    starts
}

/// One client's timing in the cycle that starts at `start` (the next one at `next`).
fn client_timing(
    events: &[TraceEvent],
    id: u32,
    name: &str,
    tid: i32,
    start: u64,
    next: u64,
) -> NodeTiming {
    let mut t = NodeTiming {
        id,
        name: name.to_owned(),
        signal_ns: 0,
        awake_ns: 0,
        finish_ns: 0,
        status: NodeStatus::NotTriggered,
        xruns: None,
    };
    for e in events.iter().filter(|e| e.ts_ns >= start) {
        match &e.kind {
            EventKind::Wakeup { tid: w, .. } if *w == tid && t.signal_ns == 0 => {
                if e.ts_ns >= next {
                    break;
                }
                t.signal_ns = e.ts_ns;
                t.status = NodeStatus::Triggered;
            }
            EventKind::Switch { next_tid, .. }
                if *next_tid == tid && t.signal_ns != 0 && t.awake_ns == 0 =>
            {
                t.awake_ns = e.ts_ns;
                t.status = NodeStatus::Awake;
            }
            EventKind::Switch {
                prev_tid,
                prev_state,
                ..
            } if *prev_tid == tid && t.signal_ns != 0 && !still_runnable(*prev_state) => {
                // A switch-in the trace did not show (perf drops some events made in idle
                // context): the thread ran from its wake-up at the latest.
                if t.awake_ns == 0 {
                    t.awake_ns = t.signal_ns;
                }
                t.finish_ns = e.ts_ns;
                t.status = NodeStatus::Finished;
                break;
            }
            _ => {}
        }
    }
    t
}

/// Per-cycle timings of every client, from a time-sorted window of kernel events. A cycle ends
/// at the next start; the last start counts only when the window reaches two periods past it (a
/// client still running then is late, not cut off by the window's end).
pub fn derive_cycles(events: &[TraceEvent], threads: &ChainThreads, period: Period) -> Vec<Cycle> {
    let period_ns = period.ns();
    let mut starts = cycle_starts(events, threads, period_ns);
    let window_end = events.last().map_or(0, |e| e.ts_ns);
    if let Some(&last) = starts.last() {
        if window_end >= last + 2 * period_ns {
            starts.push(last + period_ns);
        }
    }
    let previous: Vec<Option<u64>> = std::iter::once(None)
        .chain(starts.iter().map(|&s| Some(s)))
        .collect();
    starts
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let (start, next) = (w[0], w[1]);
            // The dummy and ALSA drivers wake one period after the last start.
            let expected_start_ns = previous[i].map(|p| p + period_ns);
            let driver = NodeTiming {
                id: 0,
                name: "driver".to_owned(),
                signal_ns: start,
                awake_ns: start,
                finish_ns: start,
                status: NodeStatus::Finished,
                xruns: None,
            };
            Cycle {
                seq: i as u64,
                rate: period.rate,
                quantum: period.frames,
                driver,
                followers: threads
                    .clients
                    .iter()
                    .map(|(id, name, tid)| client_timing(events, *id, name, *tid, start, next))
                    .collect(),
                driver_xruns: None,
                expected_start_ns,
            }
        })
        .collect()
}

/// Picks each client's real-time thread from its candidates: the one the server's thread (or
/// another candidate, for chained clients) wakes most often in `events`. A process with several
/// real-time threads (an engine with workers, say) has one that JACK runs its callback on, and
/// the wake chain shows which. Returns the threads and, per client, how many wakes chose it.
pub fn pick_threads(
    events: &[TraceEvent],
    server_tid: i32,
    candidates: &[(u32, String, Vec<i32>)],
) -> (ChainThreads, Vec<(u32, usize)>) {
    let all: Vec<i32> = candidates
        .iter()
        .flat_map(|(_, _, t)| t.iter().copied())
        .collect();
    let mut counts = Vec::new();
    let clients = candidates
        .iter()
        .filter_map(|(id, name, tids)| {
            let woken = |tid: i32| {
                events
                    .iter()
                    .filter(|e| {
                        matches!(e.kind, EventKind::Wakeup { tid: t, waker_tid, .. }
                            if t == tid && (waker_tid == server_tid || (all.contains(&waker_tid) && !tids.contains(&waker_tid))))
                    })
                    .count()
            };
            let (n, tid) = tids.iter().map(|&t| (woken(t), t)).max()?;
            counts.push((*id, n));
            (n > 0).then(|| (*id, name.clone(), tid))
        })
        .collect();
    (
        ChainThreads {
            server_tid,
            clients,
        },
        counts,
    )
}
