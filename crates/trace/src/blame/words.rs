//! The blame card's words: durations, task and idle-CPU phrases, who woke a thread, and each
//! cause's sentence in the verdict. The only place the card's English is made; runs on the
//! caller's thread (the engine's explain collector, watch's main thread, or whoever prints a
//! card), never on an audio thread.

use super::card::{Culprit, IdleCause, Who};
use super::track::Waker;
use crate::event::{EventKind, TraceEvent};
use crate::recorder::Window;

pub(super) fn ms_text(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// `hog (pid 4711, SCHED_FIFO 90)`, with earlier names: `notahog (was python3) (pid ...)`.
pub fn task_words(who: &Who) -> String {
    let was = if who.earlier_names.is_empty() {
        String::new()
    } else {
        format!(" (was {})", who.earlier_names.join(", "))
    };
    format!(
        "{}{was} (pid {}, {})",
        who.name,
        who.pid.unwrap_or(0),
        who.policy
    )
}

/// `on CPU1 for the vCPU to run: 9.80 ms of hypervisor steal ...`.
pub fn idle_words(cause: &IdleCause) -> String {
    match cause {
        IdleCause::Steal {
            cpu,
            steal_us,
            span_ms,
        } => format!(
            "on idle CPU{cpu}: the vCPU was not running ({:.2} ms of hypervisor steal in the {span_ms:.0} ms around it)",
            steal_us / 1000.0
        ),
        IdleCause::IdleExit {
            cpu,
            state,
            exit_latency_us,
        } => format!("on idle CPU{cpu}, waking from {state} ({exit_latency_us} µs exit latency)"),
        IdleCause::Unexplained { cpu } => format!(
            "on CPU{cpu}; unexplained: the CPU was idle while the thread was runnable (low \
             confidence: no steal or deep idle state was seen, events may be missing)"
        ),
    }
}

/// `comm (tid)` of a waker, from the window's own events.
pub(super) fn waker_name(events: &[TraceEvent], tid: i32) -> String {
    let comm = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Switch {
            prev_tid,
            prev_comm,
            ..
        } if *prev_tid == tid => Some(prev_comm.to_string()),
        EventKind::Switch {
            next_tid,
            next_comm,
            ..
        } if *next_tid == tid => Some(next_comm.to_string()),
        _ => None,
    });
    match (tid, comm) {
        (0, _) => "interrupt on an idle CPU (tid 0)".to_owned(),
        (_, Some(c)) => format!("{c} ({tid})"),
        (_, None) => format!("tid {tid}"),
    }
}

/// Who woke a sleep: an audio thread's role, an interrupt, `comm (tid)`, or `None` when the
/// wake-up is not in the trace.
pub(super) fn woken_by(
    audio_role: Option<&str>,
    waker: Waker,
    events: &[TraceEvent],
) -> Option<String> {
    match (audio_role, waker) {
        (Some(role), _) => Some(role.to_owned()),
        (None, Waker::Task(w)) => Some(waker_name(events, w)),
        (None, Waker::Interrupt) => Some("an interrupt (timer or device)".into()),
        (None, Waker::Unknown) => None,
    }
}

/// `worker 1 waited 1.02 ms on CPU0 behind hog (pid 4711, SCHED_FIFO 90)`.
/// When the task has a lower priority than the real-time thread (`lower`), the kernel did not
/// preempt it, which the sentence says; hypervisor steal on the CPU around the wait (`steal`:
/// ns over a span of ms) is said too, as the vCPU may not have run at all.
pub(super) fn waited_behind(
    role: &str,
    ns: u64,
    cpu: u16,
    who: &Who,
    lower: bool,
    steal: Option<(u64, f64)>,
) -> String {
    let mut text = format!(
        "{role} waited {} on CPU{cpu} behind {}",
        ms_text(ns),
        task_words(who)
    );
    if lower {
        text.push_str(", which the kernel did not preempt though its priority is lower");
    }
    if let Some((steal_ns, span_ms)) = steal {
        text.push_str(&format!(
            " (CPU{cpu} had {} of hypervisor steal in the {span_ms:.0} ms around it: the vCPU \
             may not have been running)",
            ms_text(steal_ns)
        ));
    }
    text
}

/// `driver waited 0.50 ms on idle CPU1, waking from C6 (...)`.
pub(super) fn waited_idle(role: &str, ns: u64, cause: &IdleCause) -> String {
    format!("{role} waited {} {}", ms_text(ns), idle_words(cause))
}

/// `worker 1 lost 0.80 ms to interrupts on CPU0 (mostly NET_RX 0.60 ms)`.
pub(super) fn lost_to_interrupts(role: &str, ns: u64, top: &Culprit) -> String {
    format!(
        "{role} lost {} to interrupts on CPU{} (mostly {} {:.2} ms)",
        ms_text(ns),
        top.cpu,
        top.who.name,
        top.us / 1000.0
    )
}

/// `driver ran 2.10 ms (median 1.00 ms) at 1.20 GHz`.
pub(super) fn ran(role: &str, ran_ns: u64, median_ns: u64, cpu_khz: Option<u32>) -> String {
    let freq = cpu_khz
        .map(|k| format!(" at {:.2} GHz", k as f64 / 1e6))
        .unwrap_or_default();
    format!(
        "{role} ran {} (median {}){freq}",
        ms_text(ran_ns),
        ms_text(median_ns)
    )
}

/// `worker 1 blocked 1.00 ms inside the render (uninterruptible sleep: I/O or page fault)`,
/// from the kernel state letters of its sleeps.
pub(super) fn blocked(role: &str, ns: u64, states: &[&str]) -> String {
    let why = if states.contains(&"D") {
        "uninterruptible sleep: I/O or page fault"
    } else {
        "interruptible sleep: lock, futex or sleep call"
    };
    format!("{role} blocked {} inside the render ({why})", ms_text(ns))
}

/// `driver was woken 0.40 ms after the period start (...)`, or, when its wake-up is not in the
/// trace (`inferred`), when it started running.
pub(super) fn woke_late(role: &str, ns: u64, inferred: bool) -> String {
    if inferred {
        format!(
            "{role} started running {} after the period start (timer or wake-up \
             latency; its wake-up on an idle CPU is not in the trace)",
            ms_text(ns)
        )
    } else {
        format!(
            "{role} was woken {} after the period start (timer or wake-up latency)",
            ms_text(ns)
        )
    }
}

/// `worker 1 started 0.30 ms after the period start, still busy with an earlier buffer`.
pub(super) fn started_late(role: &str, ns: u64) -> String {
    format!(
        "{role} started {} after the period start, still busy with an earlier buffer",
        ms_text(ns)
    )
}

/// The verdict's text when no candidate explains any time.
pub(super) fn no_cause(late_ns: u64) -> String {
    format!(
        "no kernel cause found (render ended {} after the deadline)",
        ms_text(late_ns)
    )
}

/// What the verdict adds when the window may miss causes: events lost, or a window that did
/// not cover the whole buffer.
pub(super) fn incomplete(window: &Window) -> Option<String> {
    if window.lost_events > 0 {
        Some(format!(
            " [incomplete: the kernel lost {} events in this window]",
            window.lost_events
        ))
    } else if !window.complete {
        Some(" [incomplete: the trace window did not cover the whole buffer]".to_owned())
    } else {
        None
    }
}
