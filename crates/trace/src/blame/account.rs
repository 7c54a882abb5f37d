//! One audio thread's account of a late buffer, over `[period start, its end]`: its waits split
//! between the tasks that ran on its CPU meanwhile, interrupts there and idle CPUs; its on-CPU
//! time minus interrupts; its sleeps after it started its work, with who woke it. Pure; runs on
//! the caller's thread (the engine's explain collector, watch's main thread), never on an audio
//! thread.

use super::card::{AudioThread, Culprit, IdleCause, Migration, Sleep, ThreadBlame};
use super::culprit::{add_culprit, explain_idle, irq_culprit, sort_desc, task_culprit};
use super::timeline::{cpu_timelines, CpuTimeline, Span};
use super::track::{track_thread, State, ThreadTrack, Waker};
use super::{us, words, BlameInput};
use crate::event::{state_letters, EventKind, TraceEvent};
use crate::procinfo::TaskLookup;
use std::collections::BTreeMap;

/// What every thread's account reads: the buffer, each CPU's timeline and the audio threads.
pub(super) struct Scope<'a> {
    pub(super) input: &'a BlameInput<'a>,
    lookup: &'a dyn TaskLookup,
    /// The period start, where every account begins.
    pub(super) start: u64,
    timelines: BTreeMap<u16, CpuTimeline>,
    /// Each audio thread's tid and role: a wake-up by one of them is part of the render.
    pub(super) audio_tids: Vec<(i32, &'a str)>,
}

/// One thread's figures, ns, before they become its [`ThreadBlame`] and the verdict's
/// candidates.
#[derive(Default)]
pub(super) struct Account {
    /// Its intervals before clipping.
    pub(super) track: ThreadTrack,
    /// Where its account ends: its own end, or the render's.
    end: u64,
    /// CPUs it ran or waited on, in order.
    cpus: Vec<u16>,
    /// Tasks that ran on its CPU while it waited, largest first.
    pub(super) ran_instead: Vec<Culprit>,
    /// Interrupts on its CPU while it waited or ran, largest first.
    pub(super) interrupts: Vec<Culprit>,
    waited_ns: u64,
    /// The part of `waited_ns` tasks took, ...
    pub(super) wait_task_ns: u64,
    /// ... interrupts took, ...
    wait_irq_ns: u64,
    /// ... and an idle CPU's (taken by no one).
    pub(super) idle_wait_ns: u64,
    idle_wait_cpu: BTreeMap<u16, u64>,
    /// Its wait per CPU.
    pub(super) main_wait_cpu: BTreeMap<u16, u64>,
    on_cpu_ns: u64,
    run_irq_ns: u64,
    /// On-CPU time minus interrupts.
    pub(super) ran_ns: u64,
    /// Interrupt time while it waited or ran.
    pub(super) interrupt_ns: u64,
    pub(super) sleeps: Vec<Sleep>,
    /// Already running or runnable at the period start.
    pub(super) busy_at_start: bool,
    pub(super) cpu_khz: Option<u32>,
    pub(super) idle_cause: Option<IdleCause>,
    /// The part of `wait_task_ns` behind tasks of a lower priority than this real-time thread's:
    /// the kernel did not preempt them (kernel code on a kernel without full preemption, a
    /// section with preemption off, or real-time throttling). ...
    pub(super) not_preempted_ns: u64,
    /// ... and those tasks' tids.
    pub(super) not_preempted: Vec<i32>,
}

impl<'a> Scope<'a> {
    /// Rebuilds the CPUs' timelines over the window (reaching at least the render's end).
    pub(super) fn new(input: &'a BlameInput<'a>, lookup: &'a dyn TaskLookup) -> Scope<'a> {
        let t0 = input.window.t0_ns;
        let t1 = input.window.t1_ns.max(input.render_end_ns);
        Scope {
            input,
            lookup,
            start: input.period_start_ns,
            timelines: cpu_timelines(&input.window.events, t0, t1),
            audio_tids: input
                .threads
                .iter()
                .map(|t| (t.tid, t.role.as_str()))
                .collect(),
        }
    }

    fn events(&self) -> &'a [TraceEvent] {
        &self.input.window.events
    }

    /// The account of audio thread `at`.
    pub(super) fn account(&self, at: &AudioThread) -> Account {
        let start = self.start;
        let end = at.end_ns.unwrap_or(self.input.render_end_ns).max(start);
        let track = track_thread(self.events(), at.tid, start, end, at.wake_ns);
        let mut a = Account {
            end,
            ..Account::default()
        };
        let prio = kernel_prio(self.events(), at.tid, end);
        self.split_waits(&mut a, at.tid, prio, &track.waits);
        self.add_runs(&mut a, &track.runs);
        a.cpus.sort_unstable();
        sort_desc(&mut a.ran_instead);
        sort_desc(&mut a.interrupts);
        a.ran_ns = a.on_cpu_ns.saturating_sub(a.run_irq_ns);
        a.interrupt_ns = a.wait_irq_ns + a.run_irq_ns;
        a.sleeps = self.sleeps(&track, at.wake_ns.unwrap_or(start), end);
        a.busy_at_start = matches!(
            track.state_at_start,
            Some(State::Running { .. } | State::Runnable { .. })
        );
        a.cpu_khz = a
            .cpus
            .iter()
            .find_map(|c| self.timelines.get(c).and_then(|tl| tl.freq_khz));
        a.idle_cause = a
            .idle_wait_cpu
            .iter()
            .max_by_key(|(_, ns)| **ns)
            .map(|(&cpu, _)| explain_idle(cpu, &self.input.window.cpu));
        a.track = track;
        a
    }

    /// Splits each wait of thread `tid` (clipped to the buffer) between the tasks that ran on
    /// its CPU meanwhile, the interrupts there and the CPU's idle time. `prio` is the thread's
    /// kernel priority, when the window shows it.
    fn split_waits(&self, a: &mut Account, tid: i32, prio: Option<i32>, waits: &[(Span, u16)]) {
        for (span, cpu) in waits
            .iter()
            .filter_map(|(s, c)| Some((s.clip(self.start, a.end)?, *c)))
        {
            a.waited_ns += span.end - span.start;
            *a.main_wait_cpu.entry(cpu).or_default() += span.end - span.start;
            if !a.cpus.contains(&cpu) {
                a.cpus.push(cpu);
            }
            let Some(tl) = self.timelines.get(&cpu) else {
                continue;
            };
            for o in &tl.occupancy {
                let Some(part) = o.span.clip(span.start, span.end) else {
                    continue;
                };
                if o.tid == tid {
                    continue;
                }
                let irq_ns = tl.irq_time(&part);
                let task_ns = (part.end - part.start).saturating_sub(irq_ns);
                match task_culprit(o, cpu, self.lookup) {
                    Some(c) => {
                        a.wait_task_ns += task_ns;
                        if prio.is_some_and(|p| outranks(p, o.prio)) {
                            a.not_preempted_ns += task_ns;
                            if !a.not_preempted.contains(&o.tid) {
                                a.not_preempted.push(o.tid);
                            }
                        }
                        add_culprit(&mut a.ran_instead, c, task_ns);
                    }
                    None => {
                        a.idle_wait_ns += task_ns;
                        *a.idle_wait_cpu.entry(cpu).or_default() += task_ns;
                    }
                }
            }
            for i in &tl.irqs {
                let ns = i.span.overlap(&span);
                a.wait_irq_ns += ns;
                add_culprit(&mut a.interrupts, irq_culprit(i, cpu), ns);
            }
        }
    }

    /// Adds each run (clipped to the buffer) to the on-CPU time, and the interrupts on its CPU
    /// meanwhile.
    fn add_runs(&self, a: &mut Account, runs: &[(Span, u16)]) {
        for (span, cpu) in runs
            .iter()
            .filter_map(|(s, c)| Some((s.clip(self.start, a.end)?, *c)))
        {
            a.on_cpu_ns += span.end - span.start;
            if !a.cpus.contains(&cpu) {
                a.cpus.push(cpu);
            }
            if let Some(tl) = self.timelines.get(&cpu) {
                for i in &tl.irqs {
                    let ns = i.span.overlap(&span);
                    a.run_irq_ns += ns;
                    add_culprit(&mut a.interrupts, irq_culprit(i, cpu), ns);
                }
            }
        }
    }

    /// The sleeps that began in `[work_start, end)`, with who woke each.
    fn sleeps(&self, track: &ThreadTrack, work_start: u64, end: u64) -> Vec<Sleep> {
        track
            .sleeps
            .iter()
            .filter(|(s, ..)| s.start >= work_start && s.start < end)
            .map(|(s, letters, waker)| {
                let audio_role = match waker {
                    Waker::Task(w) => self
                        .audio_tids
                        .iter()
                        .find(|(t, _)| t == w)
                        .map(|(_, r)| *r),
                    _ => None,
                };
                Sleep {
                    at_us: us(s.start.saturating_sub(self.start)),
                    us: us(s.end.min(end) - s.start),
                    state: state_letters(*letters),
                    woken_by: words::woken_by(audio_role, *waker, self.events()),
                    waited_for_audio_thread: audio_role.is_some(),
                }
            })
            .collect()
    }
}

/// Whether a runnable real-time thread of kernel priority `waiting` should have preempted a task
/// of kernel priority `running` at once: it is real-time (0..=99) and the other's number is
/// larger (a lower priority; SCHED_OTHER is 100..=139). A deadline task (-1) outranks it.
fn outranks(waiting: i32, running: i32) -> bool {
    (0..=99).contains(&waiting) && running > waiting
}

/// Thread `tid`'s kernel priority: the last one the window's events show for it at or before
/// `until`, from its wake-ups and its switches.
fn kernel_prio(events: &[TraceEvent], tid: i32, until: u64) -> Option<i32> {
    events
        .iter()
        .rev()
        .filter(|e| e.ts_ns <= until)
        .find_map(|e| match e.kind {
            EventKind::Wakeup { tid: t, prio, .. } if t == tid => Some(prio),
            EventKind::Switch {
                prev_tid,
                prev_prio,
                ..
            } if prev_tid == tid => Some(prev_prio),
            EventKind::Switch {
                next_tid,
                next_prio,
                ..
            } if next_tid == tid => Some(next_prio),
            _ => None,
        })
}

impl Account {
    /// The card's account of thread `at`, whose buffer began at `start`.
    pub(super) fn thread_blame(&self, at: &AudioThread, start: u64) -> ThreadBlame {
        ThreadBlame {
            role: at.role.clone(),
            tid: at.tid,
            cpus: self.cpus.clone(),
            woken_at_us: self.track.first_wake_after.map(|(ts, _)| us(ts - start)),
            busy_at_period_start: self.busy_at_start,
            waited_us: us(self.waited_ns),
            ran_instead: self.ran_instead.clone(),
            idle_wait_us: us(self.idle_wait_ns),
            idle_cause: self.idle_cause.clone(),
            interrupts: self.interrupts.clone(),
            interrupt_us: us(self.interrupt_ns),
            ran_us: us(self.ran_ns),
            not_preempted_us: us(self.not_preempted_ns),
            median_us: at.median_busy_ns.map(us),
            cpu_khz: self.cpu_khz,
            migrations: self
                .track
                .migrations
                .iter()
                .filter(|(ts, ..)| *ts >= start && *ts <= self.end)
                .map(|(ts, from, to)| Migration {
                    at_us: us(ts - start),
                    from_cpu: *from,
                    to_cpu: *to,
                })
                .collect(),
            sleeps: self.sleeps.clone(),
            wait_accounted: self.wait_accounted(),
            unseen_switch_ins: self.track.unseen_switch_ins,
            wake_inferred: self.track.wake_inferred,
        }
    }

    /// Share of the wait explained by tasks, interrupts and an explained idle CPU, 0..=1.
    fn wait_accounted(&self) -> f64 {
        if self.waited_ns == 0 {
            return 1.0;
        }
        // An idle wait with a cause (steal, an idle-state exit) is accounted for.
        let idle = match &self.idle_cause {
            Some(IdleCause::Unexplained { .. }) | None => 0,
            Some(_) => self.idle_wait_ns,
        };
        ((self.wait_task_ns + self.wait_irq_ns + idle) as f64 / self.waited_ns as f64).min(1.0)
    }
}
