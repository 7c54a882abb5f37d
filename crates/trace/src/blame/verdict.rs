//! The verdict: each thread's candidate causes, each with the time it explains (a wait behind a
//! task, a wait on an idle CPU, interrupts, a long run, a sleep inside the render, a late
//! wake-up, a late start), and the card that names the largest. Pure; runs on the caller's
//! thread (the engine's explain collector, watch's main thread), never on an audio thread.

use super::account::{Account, Scope};
use super::card::{AudioThread, BlameCard, Cause, Culprit, Sleep, ThreadBlame};
use super::track::Waker;
use super::{us, words, BlameInput};

/// A cause the verdict may name, with the time it explains.
pub(super) struct Candidate {
    cause: Cause,
    ns: u64,
    /// The index of its thread in the input.
    thread: usize,
    text: String,
    culprit: Option<Culprit>,
}

/// The candidates of thread `at` (the input's `index`th), in the order ties are settled: the
/// last of equal times wins.
pub(super) fn candidates(
    scope: &Scope<'_>,
    index: usize,
    at: &AudioThread,
    a: &Account,
) -> Vec<Candidate> {
    let role = at.role.as_str();
    let candidate = |cause, ns, text, culprit| Candidate {
        cause,
        ns,
        thread: index,
        text,
        culprit,
    };
    let mut list = Vec::new();
    if let Some(top) = a.ran_instead.first() {
        let wait_cpu = a
            .main_wait_cpu
            .iter()
            .max_by_key(|(_, ns)| **ns)
            .map_or(top.cpu, |(c, _)| *c);
        let lower = top.who.tid.is_some_and(|t| a.not_preempted.contains(&t));
        let steal = scope
            .input
            .window
            .cpu
            .steal_ns
            .get(&wait_cpu)
            .filter(|&&ns| ns > 0)
            .map(|&ns| (ns, scope.input.window.cpu.span_ms));
        let text = words::waited_behind(role, a.wait_task_ns, wait_cpu, &top.who, lower, steal);
        list.push(candidate(
            Cause::Waited,
            a.wait_task_ns,
            text,
            Some(top.clone()),
        ));
    }
    if let (Some(cause), true) = (&a.idle_cause, a.idle_wait_ns > 0) {
        let text = words::waited_idle(role, a.idle_wait_ns, cause);
        list.push(candidate(Cause::WokeLate, a.idle_wait_ns, text, None));
    }
    if let Some(top) = a.interrupts.first() {
        let text = words::lost_to_interrupts(role, a.interrupt_ns, top);
        list.push(candidate(
            Cause::Interrupts,
            a.interrupt_ns,
            text,
            Some(top.clone()),
        ));
    }
    if let Some(median) = at.median_busy_ns {
        let text = words::ran(role, a.ran_ns, median, a.cpu_khz);
        list.push(candidate(
            Cause::RanLong,
            a.ran_ns.saturating_sub(median),
            text,
            None,
        ));
    }
    list.extend(
        blocked(role, &a.sleeps).map(|(ns, text)| candidate(Cause::Blocked, ns, text, None)),
    );
    list.extend(
        late_start(scope, at, a)
            .into_iter()
            .map(|(cause, ns, text)| candidate(cause, ns, text, None)),
    );
    list
}

/// Sleeps inside the render that did not wait for another audio thread (waiting for a worker
/// is part of the render): their time and sentence.
fn blocked(role: &str, sleeps: &[Sleep]) -> Option<(u64, String)> {
    let blocked: Vec<&Sleep> = sleeps
        .iter()
        .filter(|s| !s.waited_for_audio_thread)
        .collect();
    let blocked_ns: u64 = blocked.iter().map(|s| (s.us * 1000.0) as u64).sum();
    if blocked_ns == 0 {
        return None;
    }
    let states: Vec<&str> = blocked.iter().map(|s| s.state.as_str()).collect();
    Some((blocked_ns, words::blocked(role, blocked_ns, &states)))
}

/// A late first wake-up (not made by another audio thread) or a start delayed by an earlier
/// buffer: the cause, its time and sentence. The first counts only when the thread was not
/// already busy at the period start; the second only when it was.
fn late_start(scope: &Scope<'_>, at: &AudioThread, a: &Account) -> Vec<(Cause, u64, String)> {
    let start = scope.start;
    let mut list = Vec::new();
    if let Some((ts, waker)) = a.track.first_wake_after {
        let by_audio =
            matches!(waker, Waker::Task(w) if scope.audio_tids.iter().any(|(t, _)| *t == w));
        if !by_audio && !a.busy_at_start {
            let text = words::woke_late(&at.role, ts - start, a.track.wake_inferred);
            list.push((Cause::WokeLate, ts - start, text));
        }
    }
    if a.busy_at_start {
        let first_work = at.wake_ns.unwrap_or(start).max(start);
        let text = words::started_late(&at.role, first_work - start);
        list.push((Cause::StartedLate, first_work - start, text));
    }
    list
}

/// The card: the candidate with the most time names the cause (none: unexplained), then the
/// engine's own notes, then whether the window may miss causes.
pub(super) fn card(
    input: &BlameInput<'_>,
    candidates: Vec<Candidate>,
    threads: Vec<ThreadBlame>,
) -> BlameCard {
    let late_ns = input.render_end_ns.saturating_sub(input.deadline_ns);
    let best = candidates
        .into_iter()
        .filter(|c| c.ns > 0)
        .max_by_key(|c| c.ns);
    let (cause, thread, culprit, cause_ns, text) = match best {
        Some(c) => (
            c.cause,
            Some(input.threads[c.thread].role.clone()),
            c.culprit,
            c.ns,
            c.text,
        ),
        None => (Cause::Unexplained, None, None, 0, words::no_cause(late_ns)),
    };
    let mut verdict = format!("late: {text}");
    for note in input.notes {
        verdict.push_str("; ");
        verdict.push_str(note);
    }
    if let Some(incomplete) = words::incomplete(input.window) {
        verdict.push_str(&incomplete);
    }
    BlameCard {
        verdict,
        cause,
        thread,
        main_culprit: culprit,
        cause_us: us(cause_ns),
        late_by_us: us(late_ns),
        threads,
        lost_events: input.window.lost_events,
        window_complete: input.window.complete,
    }
}
