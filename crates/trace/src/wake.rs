//! Who woke a thread: the `sched_waking` of a thread in a window of kernel events, and what ran
//! it, another thread or an interrupt (a named IRQ handler, a softirq, a high-resolution timer)
//! found open on the waker's CPU at that moment. A pure function over a window, called on the
//! caller's non-real-time thread (watch's cards of an audio server's driver).

use crate::event::{softirq_name, EventKind, TraceEvent};
use serde::{Deserialize, Serialize};

/// What made a thread runnable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WakeSource {
    /// Another thread woke it (a futex or eventfd write, a signal).
    Task {
        /// The waker's thread id.
        tid: i32,
        /// Its name.
        comm: String,
    },
    /// A device's interrupt handler woke it.
    Irq {
        /// The IRQ number.
        irq: i32,
        /// The handler's name.
        name: String,
    },
    /// A softirq woke it (`TIMER`, `HRTIMER`, `NET_RX`...).
    Softirq {
        /// The softirq's name.
        name: String,
    },
    /// A high-resolution timer's expiry woke it (a timerfd or a sleep ending).
    Timer,
    /// An interrupt woke it, but the trace does not show which (its entry was before the
    /// window, or the timer and IRQ events are not recorded).
    Interrupt,
}

impl WakeSource {
    /// In words: `a timer interrupt (hrtimer)`, `irq 24 (xhci_hcd)`, `thread jackd (tid 711)`.
    pub fn words(&self) -> String {
        match self {
            WakeSource::Task { tid, comm } => format!("thread {comm} (tid {tid})"),
            WakeSource::Irq { irq, name } => format!("irq {irq} ({name})"),
            WakeSource::Softirq { name } => format!("softirq {name}"),
            WakeSource::Timer => "a timer interrupt (hrtimer)".to_owned(),
            WakeSource::Interrupt => "an interrupt the trace does not name".to_owned(),
        }
    }

    /// Whether it is an interrupt of any kind (not a thread).
    pub fn is_interrupt(&self) -> bool {
        !matches!(self, WakeSource::Task { .. })
    }
}

/// One wake-up of a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wake {
    /// When the wake-up was made, CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// The CPU it was made on (the waker's).
    pub cpu: u16,
    /// What made it.
    pub source: WakeSource,
}

/// What was open on `cpu` at the event with index `at` (time-sorted `events`): the innermost
/// interrupt entered and not yet left.
fn open_interrupt(events: &[TraceEvent], at: usize, cpu: u16) -> WakeSource {
    // Walk back, skipping matched entry/exit pairs, to the first unmatched entry.
    let (mut irq_exits, mut softirq_exits, mut timer_exits) = (0u32, 0u32, 0u32);
    for e in events[..at].iter().rev().filter(|e| e.cpu == cpu) {
        match &e.kind {
            EventKind::IrqExit { .. } => irq_exits += 1,
            EventKind::SoftirqExit { .. } => softirq_exits += 1,
            EventKind::HrtimerExit => timer_exits += 1,
            EventKind::IrqEntry { irq, name } => {
                if irq_exits == 0 {
                    return WakeSource::Irq {
                        irq: *irq,
                        name: name.to_string(),
                    };
                }
                irq_exits -= 1;
            }
            EventKind::SoftirqEntry { vec } => {
                if softirq_exits == 0 {
                    return WakeSource::Softirq {
                        name: softirq_name(*vec),
                    };
                }
                softirq_exits -= 1;
            }
            EventKind::HrtimerEntry { .. } => {
                if timer_exits == 0 {
                    return WakeSource::Timer;
                }
                timer_exits -= 1;
            }
            // A switch on that CPU means no interrupt is still open further back.
            EventKind::Switch { .. } => break,
            _ => {}
        }
    }
    WakeSource::Interrupt
}

/// The first `sched_waking` of thread `tid` in `[from_ns, to_ns]`, with what made it.
pub fn first_wake(events: &[TraceEvent], tid: i32, from_ns: u64, to_ns: u64) -> Option<Wake> {
    let at = events
        .iter()
        .position(|e| waking_of(e, tid, from_ns, to_ns))?;
    wake_at(events, at)
}

/// The last `sched_waking` of thread `tid` in `[from_ns, to_ns]` (the one that ended its last
/// sleep there), with what made it.
pub fn last_wake(events: &[TraceEvent], tid: i32, from_ns: u64, to_ns: u64) -> Option<Wake> {
    let at = events
        .iter()
        .rposition(|e| waking_of(e, tid, from_ns, to_ns))?;
    wake_at(events, at)
}

fn waking_of(e: &TraceEvent, tid: i32, from_ns: u64, to_ns: u64) -> bool {
    e.ts_ns >= from_ns
        && e.ts_ns <= to_ns
        && matches!(e.kind, EventKind::Wakeup { tid: t, waking: true, .. } if t == tid)
}

/// The wake-up at index `at` of `events`, with what made it.
fn wake_at(events: &[TraceEvent], at: usize) -> Option<Wake> {
    let e = &events[at];
    let EventKind::Wakeup {
        waker_tid,
        in_interrupt,
        ..
    } = e.kind
    else {
        return None;
    };
    let source = if in_interrupt {
        open_interrupt(events, at, e.cpu)
    } else {
        let comm = events[..at]
            .iter()
            .rev()
            .find_map(|p| match &p.kind {
                EventKind::Switch {
                    next_tid,
                    next_comm,
                    ..
                } if *next_tid == waker_tid => Some(next_comm.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| format!("tid {waker_tid}"));
        WakeSource::Task {
            tid: waker_tid,
            comm,
        }
    };
    Some(Wake {
        ts_ns: e.ts_ns,
        cpu: e.cpu,
        source,
    })
}
