//! The thread tracker: follows one audio thread through switch-ins, switch-outs (preempted =
//! still runnable, otherwise asleep), wake-ups and migrations, and gives its runs, waits, sleeps
//! and migrations before they are clipped to the buffer. Pure; runs on the caller's thread (the
//! engine's explain collector, watch's main thread), never on an audio thread.

use super::timeline::Span;
use crate::event::{EventKind, TraceEvent};
use std::collections::BTreeMap;
use std::ops::ControlFlow;

/// Who woke a thread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Waker {
    /// A thread, by tid.
    Task(i32),
    /// An interrupt (timer or device), whatever thread it landed on.
    Interrupt,
    /// The wake-up was not in the trace.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum State {
    Unknown,
    Sleeping { since: u64, letters: i64 },
    Runnable { since: u64, cpu: u16 },
    Running { since: u64, cpu: u16 },
}

/// The intervals of one thread, before clipping to the buffer.
#[derive(Debug, Default)]
pub(super) struct ThreadTrack {
    pub(super) runs: Vec<(Span, u16)>,
    pub(super) waits: Vec<(Span, u16)>,
    pub(super) sleeps: Vec<(Span, i64, Waker)>,
    pub(super) migrations: Vec<(u64, i32, i32)>,
    pub(super) first_wake_after: Option<(u64, Waker)>,
    pub(super) state_at_start: Option<State>,
    /// Switch-ins the trace did not report, inferred from later events (see [`track_thread`]).
    pub(super) unseen_switch_ins: u32,
    /// The first wake-up of the buffer was inferred from an unseen switch-in.
    pub(super) wake_inferred: bool,
}

/// Whether `e` shows `tid` as the task running on `e.cpu`: its own switch-out, or a wake-up it
/// made (the waker of a wake-up is the current task, also in an interrupt).
fn shows_running(e: &TraceEvent, tid: i32) -> bool {
    match &e.kind {
        EventKind::Switch { prev_tid, .. } => *prev_tid == tid,
        EventKind::Wakeup { waker_tid, .. } => *waker_tid == tid,
        _ => false,
    }
}

/// When the thread, waiting or asleep in the trace since its last state change, switched in
/// unseen before `e` showed it running: the engine's wake stamp if that lies between the CPU's
/// last reported switch and `e`, else that switch (or the state change, if later).
fn unseen_switch_in_at(
    state: State,
    e: &TraceEvent,
    last_switch_on_cpu: &BTreeMap<u16, u64>,
    engine_wake_ns: Option<u64>,
) -> Option<u64> {
    let since = match state {
        State::Sleeping { since, .. } | State::Runnable { since, .. } => since,
        _ => return None,
    };
    let lower = last_switch_on_cpu
        .get(&e.cpu)
        .map_or(since, |&l| l.max(since));
    let from_sleep = matches!(state, State::Sleeping { .. });
    Some(match engine_wake_ns {
        Some(w) if from_sleep && w >= lower && w <= e.ts_ns => w,
        _ => lower,
    })
}

/// Follows thread `tid` through the events up to `end`.
///
/// Unseen switch-ins: some kernels report no `sched_switch` out of the idle task, and perf may
/// drop events made in idle context (the wake-up that ends a timer sleep on an idle CPU), so a
/// thread can appear running (its switch-out, a wake-up it makes) without a switch-in. Its run
/// is then taken to start at the engine's own wake stamp `engine_wake_ns` when that lies
/// between the CPU's last reported switch and this event, else at that switch (or at the
/// thread's last known state change, if later): the unseen switch-in came after the last
/// reported one. Such runs are counted in `unseen_switch_ins`.
pub(super) fn track_thread(
    events: &[TraceEvent],
    tid: i32,
    period_start: u64,
    end: u64,
    engine_wake_ns: Option<u64>,
) -> ThreadTrack {
    let mut tracker = Tracker {
        tid,
        period_start,
        end,
        engine_wake_ns,
        t: ThreadTrack::default(),
        state: State::Unknown,
        ran_in_period: false,
        last_switch_on_cpu: BTreeMap::new(),
    };
    for e in events {
        if tracker.read(e).is_break() {
            break;
        }
    }
    tracker.finish()
}

/// [`track_thread`]'s state while it reads the events.
struct Tracker {
    tid: i32,
    period_start: u64,
    end: u64,
    engine_wake_ns: Option<u64>,
    t: ThreadTrack,
    state: State,
    // Only the wake-up that starts the buffer's work counts as "woken at"; later ones end
    // sleeps inside the render.
    ran_in_period: bool,
    last_switch_on_cpu: BTreeMap<u16, u64>,
}

impl Tracker {
    /// Reads one event; breaks when no later event can change the track.
    fn read(&mut self, e: &TraceEvent) -> ControlFlow<()> {
        let tid = self.tid;
        // Past `end`, events are read only while the trace has the thread waiting or asleep,
        // to learn whether that is so: a switch-out of the thread (or a wake-up it makes)
        // before any switch-in means the trace lost its switch-in, which came before `end` if
        // the CPU reported no switch since then (a thread still running long past the
        // deadline).
        let past_end = e.ts_ns > self.end;
        let switched_in = matches!(e.kind, EventKind::Switch { next_tid, .. } if next_tid == tid);
        let waiting = matches!(self.state, State::Runnable { .. } | State::Sleeping { .. });
        if past_end && (!waiting || switched_in) {
            return ControlFlow::Break(());
        }
        if self.t.state_at_start.is_none() && e.ts_ns >= self.period_start {
            self.t.state_at_start = Some(self.state);
        }
        if shows_running(e, tid) {
            let in_span = !past_end
                || unseen_switch_in_at(
                    self.state,
                    e,
                    &self.last_switch_on_cpu,
                    self.engine_wake_ns,
                )
                .is_some_and(|at| at <= self.end);
            if in_span {
                self.infer_switch_in(e);
            }
            if past_end {
                return ControlFlow::Break(());
            }
        }
        if matches!(e.kind, EventKind::Switch { .. }) {
            self.last_switch_on_cpu.insert(e.cpu, e.ts_ns);
        }
        if !past_end {
            self.apply(e);
        }
        ControlFlow::Continue(())
    }

    /// Takes `e`, which shows `tid` running (see [`shows_running`]) while the trace has it
    /// waiting or asleep, as the sign of a switch-in the trace did not report (see
    /// [`track_thread`]): closes the wait or sleep at the inferred switch-in and starts a run
    /// there. Does nothing in any other state.
    fn infer_switch_in(&mut self, e: &TraceEvent) {
        let Some(at) =
            unseen_switch_in_at(self.state, e, &self.last_switch_on_cpu, self.engine_wake_ns)
        else {
            return;
        };
        let t = &mut self.t;
        match self.state {
            State::Runnable { since, .. } => t.waits.push((
                Span {
                    start: since,
                    end: at,
                },
                e.cpu,
            )),
            State::Sleeping { since, letters } => {
                t.sleeps.push((
                    Span {
                        start: since,
                        end: at,
                    },
                    letters,
                    Waker::Unknown,
                ));
                if at >= self.period_start && !self.ran_in_period && t.first_wake_after.is_none() {
                    t.first_wake_after = Some((at, Waker::Unknown));
                    t.wake_inferred = true;
                }
            }
            _ => {}
        }
        self.ran_in_period |= at >= self.period_start;
        t.unseen_switch_ins += 1;
        self.state = State::Running {
            since: at,
            cpu: e.cpu,
        };
    }

    /// The thread's own events, up to `end`.
    fn apply(&mut self, e: &TraceEvent) {
        let tid = self.tid;
        match &e.kind {
            EventKind::Switch {
                prev_tid,
                prev_state,
                next_tid,
                ..
            } => {
                if *prev_tid == tid {
                    self.switched_out(e, *prev_state);
                }
                if *next_tid == tid {
                    self.switched_in(e);
                }
            }
            EventKind::Wakeup {
                tid: woken,
                target_cpu,
                waker_tid,
                in_interrupt,
                ..
            } if *woken == tid => {
                let cpu = u16::try_from(*target_cpu).unwrap_or(e.cpu);
                let waker = if *in_interrupt {
                    Waker::Interrupt
                } else {
                    Waker::Task(*waker_tid)
                };
                self.woken(e.ts_ns, cpu, waker);
            }
            EventKind::Migrate {
                tid: moved,
                orig_cpu,
                dest_cpu,
                ..
            } if *moved == tid => self.migrated(e.ts_ns, *orig_cpu, *dest_cpu),
            _ => {}
        }
    }

    fn switched_out(&mut self, e: &TraceEvent, prev_state: i64) {
        let ts = e.ts_ns;
        let since = match self.state {
            State::Running { since, .. } => since,
            _ => ts,
        };
        self.t.runs.push((
            Span {
                start: since,
                end: ts,
            },
            e.cpu,
        ));
        self.state = if crate::event::still_runnable(prev_state) {
            State::Runnable {
                since: ts,
                cpu: e.cpu,
            }
        } else {
            State::Sleeping {
                since: ts,
                letters: prev_state,
            }
        };
    }

    fn switched_in(&mut self, e: &TraceEvent) {
        let ts = e.ts_ns;
        self.ran_in_period |= ts >= self.period_start;
        match self.state {
            // The CPU that finally ran it is where it was queued.
            State::Runnable { since, .. } => {
                self.t.waits.push((
                    Span {
                        start: since,
                        end: ts,
                    },
                    e.cpu,
                ));
            }
            // Its wake-up was not seen (lost, or on an untraced CPU).
            State::Sleeping { since, letters } => {
                self.t.sleeps.push((
                    Span {
                        start: since,
                        end: ts,
                    },
                    letters,
                    Waker::Unknown,
                ));
            }
            _ => {}
        }
        self.state = State::Running {
            since: ts,
            cpu: e.cpu,
        };
    }

    /// A wake-up of the thread at `ts`, queueing it on `cpu`.
    fn woken(&mut self, ts: u64, cpu: u16, waker: Waker) {
        let first_of_buffer = ts >= self.period_start && !self.ran_in_period;
        match self.state {
            State::Sleeping { since, letters } => {
                self.t.sleeps.push((
                    Span {
                        start: since,
                        end: ts,
                    },
                    letters,
                    waker,
                ));
                self.state = State::Runnable { since: ts, cpu };
            }
            State::Unknown => self.state = State::Runnable { since: ts, cpu },
            State::Runnable { since, .. } => self.state = State::Runnable { since, cpu },
            State::Running { .. } => {}
        }
        if first_of_buffer && self.t.first_wake_after.is_none() {
            self.t.first_wake_after = Some((ts, waker));
        }
    }

    fn migrated(&mut self, ts: u64, orig_cpu: i32, dest_cpu: i32) {
        self.t.migrations.push((ts, orig_cpu, dest_cpu));
        if let State::Runnable { since, cpu } = self.state {
            // The wait so far was on the old run queue; it goes on on the new one.
            let from = u16::try_from(orig_cpu).unwrap_or(cpu);
            self.t.waits.push((
                Span {
                    start: since,
                    end: ts,
                },
                from,
            ));
            self.state = State::Runnable {
                since: ts,
                cpu: u16::try_from(dest_cpu).unwrap_or(cpu),
            };
        }
    }

    /// The track, with a run or wait still open lasting to `end`.
    fn finish(self) -> ThreadTrack {
        let (mut t, state, end) = (self.t, self.state, self.end);
        if t.state_at_start.is_none() {
            t.state_at_start = Some(state);
        }
        match state {
            State::Running { since, cpu } => t.runs.push((Span { start: since, end }, cpu)),
            State::Runnable { since, cpu } => t.waits.push((Span { start: since, end }, cpu)),
            _ => {}
        }
        t
    }
}
