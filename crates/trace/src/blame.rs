//! The blame card: why one buffer was late, reconstructed from the kernel's scheduler and
//! interrupt events around it. [`blame`] is a pure function of its input (plus a task lookup
//! for policy names); the engine's collector thread calls it after a late buffer is drained.
//!
//! How the accounting works, per audio thread, over `[period start, the thread's end]`:
//! - A state machine follows the thread through switch-in, switch-out (preempted = still
//!   runnable, otherwise asleep), wake-ups and migrations, starting from the lead-in events
//!   before the period start so its state at the start is known.
//! - Each CPU's occupancy (who ran when, from `sched_switch`) and interrupt intervals (IRQ and
//!   softirq entry/exit) are rebuilt; every runnable-but-not-running interval of the thread is
//!   split between the tasks that ran on its CPU meanwhile and the interrupts there.
//! - Its own on-CPU time (minus interrupts) is compared with its median for the same load.
//! - Sleeps after it started its work are listed with who woke it.
//!
//! The verdict names the largest single cause across all threads.

use crate::event::{softirq_name, state_letters, EventKind, TraceEvent};
use crate::procinfo::{describe_kernel_prio, TaskLookup};
use crate::recorder::Window;
use serde::Serialize;
use std::collections::BTreeMap;

/// History to include before the period start in the window passed to [`blame`], so that
/// each CPU's occupant and each thread's state at the period start are known.
pub const LEAD_IN_NS: u64 = 20_000_000;
/// How far past the deadline (or the render end, if later) the window should reach.
pub const MARGIN_NS: u64 = 2_000_000;

/// One audio thread's part in the late buffer, as the engine recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioThread {
    /// `driver`, `worker 1`...
    pub role: String,
    /// Kernel thread id.
    pub tid: i32,
    /// When it started its work for this buffer (engine's stamp), if it did.
    pub wake_ns: Option<u64>,
    /// When it finished its real work (engine's stamp), if it did.
    pub end_ns: Option<u64>,
    /// Its median on-CPU work time for the same load (what [`ThreadBlame::ran_us`] measures;
    /// xrunlab's engine uses the thread CPU time of its part in recent normal buffers), if
    /// known.
    pub median_busy_ns: Option<u64>,
}

/// Everything [`blame`] needs about one late buffer.
#[derive(Debug, Clone, Copy)]
pub struct BlameInput<'a> {
    /// When the device period began.
    pub period_start_ns: u64,
    /// When the buffer had to be ready.
    pub deadline_ns: u64,
    /// When the render really ended.
    pub render_end_ns: u64,
    /// The audio threads of this buffer.
    pub threads: &'a [AudioThread],
    /// Kernel events from [`crate::Tracer::snapshot`] over
    /// `[period_start - LEAD_IN_NS, max(deadline, render_end) + MARGIN_NS]`.
    pub window: &'a Window,
    /// Causes the engine knows itself (e.g. `injected stall`), appended to the verdict.
    pub notes: &'a [String],
}

/// What kind of thing took the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CulpritKind {
    /// A task that ran on the CPU. (An idle CPU is never a culprit: it takes no time from
    /// anyone; a wait on one is explained by [`IdleCause`].)
    Task,
    /// A hardware interrupt handler.
    Irq,
    /// A softirq.
    Softirq,
}

/// Who took CPU time: a task, an IRQ handler or a softirq. A culprit in one card
/// and a culprit's totals over a run ([`crate::CulpritTotal`]) both name it so.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Who {
    /// Task, idle, IRQ or softirq.
    pub kind: CulpritKind,
    /// Task name (`comm`), IRQ handler name, or softirq type (`NET_RX`).
    pub name: String,
    /// Process id of a task (from procfs; the thread id when it is gone).
    pub pid: Option<i32>,
    /// Thread id of a task.
    pub tid: Option<i32>,
    /// IRQ number.
    pub irq: Option<i32>,
    /// Policy and priority, e.g. `SCHED_FIFO 90` (from procfs, or as the tracer first saw the
    /// task), or `SCHED_FIFO/RR 90` from the trace's kernel priority when the task was never
    /// read (the kernel's priority cannot tell FIFO from RR); empty for interrupts.
    pub policy: String,
    /// Names the task had before its newest one (`notahog (was python3)`), oldest first.
    pub earlier_names: Vec<String>,
    /// The task's parent process (pid, name), where known: children that inherited a
    /// real-time policy are grouped under it in a run's totals.
    pub parent: Option<ParentTask>,
}

/// A task's parent process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParentTask {
    /// Its pid.
    pub pid: i32,
    /// Its name.
    pub name: String,
    /// Its policy (`SCHED_FIFO 85`): a child with the same one inherited it.
    pub policy: String,
}

/// Why an audio thread waited while its CPU was idle: an idle CPU takes no time, so the wait is
/// the wake-up reaching a halted CPU late, or a virtual CPU the hypervisor was not running.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "case", rename_all = "snake_case")]
pub enum IdleCause {
    /// The hypervisor ran something else on the physical CPU (steal time in /proc/stat).
    Steal {
        /// The CPU the thread waited on.
        cpu: u16,
        /// Steal time on it over the sampled span, µs (10 ms resolution).
        steal_us: f64,
        /// The span the steal counter covers, ms.
        span_ms: f64,
    },
    /// The CPU was in an idle state whose exit takes time.
    IdleExit {
        /// The CPU the thread waited on.
        cpu: u16,
        /// The deepest state it entered around the wait (`C6`, `halt`).
        state: String,
        /// That state's declared exit latency, µs.
        exit_latency_us: u32,
    },
    /// Nothing read explains it (no steal, no deep idle state, or the counters were not
    /// sampled): low confidence; events may have been missed.
    Unexplained {
        /// The CPU the thread waited on.
        cpu: u16,
    },
}

/// Who took CPU time from an audio thread, and how much.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    /// Who it is (serialized as its fields, beside these).
    #[serde(flatten)]
    pub who: Who,
    /// The CPU where it happened.
    pub cpu: u16,
    /// Time taken, µs.
    pub us: f64,
    /// Separate intervals (runs or interrupts) that made it up.
    pub count: u32,
}

/// A migration of an audio thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Migration {
    /// µs after the period start.
    pub at_us: f64,
    /// From this CPU.
    pub from_cpu: i32,
    /// To this CPU.
    pub to_cpu: i32,
}

/// A sleep of an audio thread after it started its work for the buffer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sleep {
    /// µs after the period start.
    pub at_us: f64,
    /// How long, µs.
    pub us: f64,
    /// Kernel state letters: `S` (interruptible: futex, lock, sleep), `D` (uninterruptible:
    /// I/O, page fault).
    pub state: String,
    /// Who woke it: an audio thread's role, or `comm (tid)`.
    pub woken_by: Option<String>,
    /// True when another audio thread woke it (waiting for a worker is part of the render).
    pub waited_for_audio_thread: bool,
}

/// One audio thread's account of the late buffer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadBlame {
    /// `driver`, `worker 1`...
    pub role: String,
    /// Kernel thread id.
    pub tid: i32,
    /// CPUs it ran or waited on during the buffer.
    pub cpus: Vec<u16>,
    /// When the kernel woke it for this buffer, µs after the period start.
    pub woken_at_us: Option<f64>,
    /// It was already running or runnable at the period start (busy with an earlier buffer).
    pub busy_at_period_start: bool,
    /// Runnable but not running, µs.
    pub waited_us: f64,
    /// Who ran on its CPU while it waited (tasks only), largest first.
    pub ran_instead: Vec<Culprit>,
    /// Time it was runnable while its CPU was idle, µs: wake-up latency, not taken by anyone.
    pub idle_wait_us: f64,
    /// What explains `idle_wait_us`, when there is any.
    pub idle_cause: Option<IdleCause>,
    /// Interrupt and softirq time on its CPU while it waited or ran, largest first.
    pub interrupts: Vec<Culprit>,
    /// Sum of `interrupts`, µs.
    pub interrupt_us: f64,
    /// On-CPU time minus interrupts, µs.
    pub ran_us: f64,
    /// Its median work time for this load, µs.
    pub median_us: Option<f64>,
    /// CPU frequency during the buffer, kHz, when the kernel reported one.
    pub cpu_khz: Option<u32>,
    /// Migrations during the buffer.
    pub migrations: Vec<Migration>,
    /// Sleeps after it started its work.
    pub sleeps: Vec<Sleep>,
    /// Share of `waited_us` explained by `ran_instead` and interrupts during the wait, 0..=1.
    pub wait_accounted: f64,
    /// Times it was seen running without its switch-in in the trace (some kernels report no
    /// switch out of the idle task; perf may drop events made in idle context): those runs
    /// start at the engine's wake stamp or the CPU's last reported switch, an estimate.
    pub unseen_switch_ins: u32,
    /// `woken_at_us` is the start of its first run in the buffer, because its wake-up (on an
    /// idle CPU) is not in the trace.
    pub wake_inferred: bool,
}

/// The main cause named in the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Runnable but another task (or an idle CPU waking up) had the CPU.
    Waited,
    /// Interrupts and softirqs took the time.
    Interrupts,
    /// The thread's own work took longer than its median.
    RanLong,
    /// The thread slept inside the render (lock, I/O, page fault).
    Blocked,
    /// The kernel woke the first thread late (timer latency).
    WokeLate,
    /// The thread was still busy with an earlier buffer at the period start.
    StartedLate,
    /// Nothing in the trace explains it.
    Unexplained,
}

/// Why one buffer was late.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlameCard {
    /// One line, e.g. `late: worker 1 waited 1.02 ms on CPU0 behind hog (pid 4711, SCHED_FIFO 90)`.
    pub verdict: String,
    /// The cause the verdict names.
    pub cause: Cause,
    /// The role of the thread the verdict names.
    pub thread: Option<String>,
    /// The task or interrupt the verdict blames, if any.
    pub main_culprit: Option<Culprit>,
    /// Time the verdict accounts for, µs.
    pub cause_us: f64,
    /// How late the render ended, µs after the deadline.
    pub late_by_us: f64,
    /// Per audio thread accounting.
    pub threads: Vec<ThreadBlame>,
    /// Kernel events lost in this window: the card may miss causes.
    pub lost_events: u64,
    /// False when the window did not cover the whole buffer.
    pub window_complete: bool,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn ms_text(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// A half-open interval `[start, end)` in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start: u64,
    end: u64,
}

impl Span {
    fn overlap(&self, other: &Span) -> u64 {
        self.end
            .min(other.end)
            .saturating_sub(self.start.max(other.start))
    }
    fn clip(&self, lo: u64, hi: u64) -> Option<Span> {
        let s = Span {
            start: self.start.max(lo),
            end: self.end.min(hi),
        };
        (s.end > s.start).then_some(s)
    }
}

/// Who occupied a CPU during a span.
#[derive(Debug, Clone)]
struct Occupancy {
    span: Span,
    tid: i32,
    comm: String,
    prio: i32,
}

/// An interrupt interval on a CPU.
#[derive(Debug, Clone)]
struct IrqSpan {
    span: Span,
    kind: CulpritKind,
    name: String,
    irq: Option<i32>,
}

#[derive(Debug, Default)]
struct CpuTimeline {
    occupancy: Vec<Occupancy>,
    irqs: Vec<IrqSpan>,
    freq_khz: Option<u32>,
}

impl CpuTimeline {
    fn irq_time(&self, span: &Span) -> u64 {
        self.irqs.iter().map(|i| i.span.overlap(span)).sum()
    }
}

/// Rebuilds occupancy and interrupt intervals of every CPU seen in the window.
fn cpu_timelines(events: &[TraceEvent], t0: u64, t1: u64) -> BTreeMap<u16, CpuTimeline> {
    let mut cpus: BTreeMap<u16, CpuTimeline> = BTreeMap::new();
    // Per CPU: the current occupant since when; open hardirq and softirq.
    let mut running: BTreeMap<u16, (u64, i32, String, i32)> = BTreeMap::new();
    let mut open_irq: BTreeMap<u16, (u64, i32, String)> = BTreeMap::new();
    let mut open_soft: BTreeMap<u16, (u64, u32)> = BTreeMap::new();
    let mut saw_irq_entry: BTreeMap<u16, bool> = BTreeMap::new();
    let mut saw_soft_entry: BTreeMap<u16, bool> = BTreeMap::new();
    for e in events {
        let tl = cpus.entry(e.cpu).or_default();
        match &e.kind {
            EventKind::Switch {
                prev_comm,
                prev_tid,
                prev_prio,
                next_comm,
                next_tid,
                next_prio,
                ..
            } => {
                // The switch-out names the task as it is now: a priority or name changed
                // while it ran (sched_setscheduler, prctl) shows here, not at its switch-in.
                // The first switch of a CPU covers the time since the window start.
                let since = running.remove(&e.cpu).map_or(t0, |r| r.0);
                tl.occupancy.push(Occupancy {
                    span: Span {
                        start: since,
                        end: e.ts_ns,
                    },
                    tid: *prev_tid,
                    comm: prev_comm.to_string(),
                    prio: *prev_prio,
                });
                running.insert(
                    e.cpu,
                    (e.ts_ns, *next_tid, next_comm.to_string(), *next_prio),
                );
            }
            EventKind::IrqEntry { irq, name } => {
                saw_irq_entry.insert(e.cpu, true);
                open_irq.insert(e.cpu, (e.ts_ns, *irq, name.to_string()));
            }
            EventKind::IrqExit { irq } => {
                let opened = match open_irq.remove(&e.cpu) {
                    Some((s, _, name)) => Some((s, name)),
                    // An exit without any entry yet: the handler ran since the window start.
                    None if !saw_irq_entry.get(&e.cpu).copied().unwrap_or(false) => {
                        Some((t0, format!("irq {irq}")))
                    }
                    None => None,
                };
                if let Some((start, name)) = opened {
                    tl.irqs.push(IrqSpan {
                        span: Span {
                            start,
                            end: e.ts_ns,
                        },
                        kind: CulpritKind::Irq,
                        name,
                        irq: Some(*irq),
                    });
                }
            }
            EventKind::SoftirqEntry { vec } => {
                saw_soft_entry.insert(e.cpu, true);
                open_soft.insert(e.cpu, (e.ts_ns, *vec));
            }
            EventKind::SoftirqExit { vec } => {
                let start = match open_soft.remove(&e.cpu) {
                    Some((s, _)) => Some(s),
                    None if !saw_soft_entry.get(&e.cpu).copied().unwrap_or(false) => Some(t0),
                    None => None,
                };
                if let Some(start) = start {
                    tl.irqs.push(IrqSpan {
                        span: Span {
                            start,
                            end: e.ts_ns,
                        },
                        kind: CulpritKind::Softirq,
                        name: softirq_name(*vec),
                        irq: None,
                    });
                }
            }
            EventKind::CpuFrequency { khz, cpu_id } => {
                if let Ok(c) = u16::try_from(*cpu_id) {
                    cpus.entry(c).or_default().freq_khz = Some(*khz);
                }
            }
            _ => {}
        }
    }
    // Whatever is still running or open lasts to the window end.
    for (cpu, (since, tid, comm, prio)) in running {
        cpus.entry(cpu).or_default().occupancy.push(Occupancy {
            span: Span {
                start: since,
                end: t1,
            },
            tid,
            comm,
            prio,
        });
    }
    for (cpu, (since, irq, name)) in open_irq {
        cpus.entry(cpu).or_default().irqs.push(IrqSpan {
            span: Span {
                start: since,
                end: t1,
            },
            kind: CulpritKind::Irq,
            name,
            irq: Some(irq),
        });
    }
    for (cpu, (since, vec)) in open_soft {
        cpus.entry(cpu).or_default().irqs.push(IrqSpan {
            span: Span {
                start: since,
                end: t1,
            },
            kind: CulpritKind::Softirq,
            name: softirq_name(vec),
            irq: None,
        });
    }
    cpus
}

/// Who woke a thread.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Waker {
    /// A thread, by tid.
    Task(i32),
    /// An interrupt (timer or device), whatever thread it landed on.
    Interrupt,
    /// The wake-up was not in the trace.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Unknown,
    Sleeping { since: u64, letters: i64 },
    Runnable { since: u64, cpu: u16 },
    Running { since: u64, cpu: u16 },
}

/// The intervals of one thread, before clipping to the buffer.
#[derive(Debug, Default)]
struct ThreadTrack {
    runs: Vec<(Span, u16)>,
    waits: Vec<(Span, u16)>,
    sleeps: Vec<(Span, i64, Waker)>,
    migrations: Vec<(u64, i32, i32)>,
    first_wake_after: Option<(u64, Waker)>,
    state_at_start: Option<State>,
    /// Switch-ins the trace did not report, inferred from later events (see [`track_thread`]).
    unseen_switch_ins: u32,
    /// The first wake-up of the buffer was inferred from an unseen switch-in.
    wake_inferred: bool,
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

/// Takes `e`, which shows `tid` running (see [`shows_running`]) while the trace has it waiting
/// or asleep, as the sign of a switch-in the trace did not report (see [`track_thread`]): closes
/// the wait or sleep at the inferred switch-in and starts a run there. Does nothing in any
/// other state.
fn infer_switch_in(
    t: &mut ThreadTrack,
    state: &mut State,
    e: &TraceEvent,
    last_switch_on_cpu: &BTreeMap<u16, u64>,
    period_start: u64,
    engine_wake_ns: Option<u64>,
    ran_in_period: &mut bool,
) {
    let Some(at) = unseen_switch_in_at(*state, e, last_switch_on_cpu, engine_wake_ns) else {
        return;
    };
    match *state {
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
            if at >= period_start && !*ran_in_period && t.first_wake_after.is_none() {
                t.first_wake_after = Some((at, Waker::Unknown));
                t.wake_inferred = true;
            }
        }
        _ => {}
    }
    *ran_in_period |= at >= period_start;
    t.unseen_switch_ins += 1;
    *state = State::Running {
        since: at,
        cpu: e.cpu,
    };
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
fn track_thread(
    events: &[TraceEvent],
    tid: i32,
    period_start: u64,
    end: u64,
    engine_wake_ns: Option<u64>,
) -> ThreadTrack {
    let mut t = ThreadTrack::default();
    let mut state = State::Unknown;
    // Only the wake-up that starts the buffer's work counts as "woken at"; later ones end
    // sleeps inside the render.
    let mut ran_in_period = false;
    let mut last_switch_on_cpu: BTreeMap<u16, u64> = BTreeMap::new();
    for e in events {
        // Past `end`, events are read only while the trace has the thread waiting or asleep,
        // to learn whether that is so: a switch-out of the thread (or a wake-up it makes)
        // before any switch-in means the trace lost its switch-in, which came before `end` if
        // the CPU reported no switch since then (a thread still running long past the
        // deadline).
        let past_end = e.ts_ns > end;
        let switched_in = matches!(e.kind, EventKind::Switch { next_tid, .. } if next_tid == tid);
        let waiting = matches!(state, State::Runnable { .. } | State::Sleeping { .. });
        if past_end && (!waiting || switched_in) {
            break;
        }
        if t.state_at_start.is_none() && e.ts_ns >= period_start {
            t.state_at_start = Some(state);
        }
        let ts = e.ts_ns;
        if shows_running(e, tid) {
            let in_span = !past_end
                || unseen_switch_in_at(state, e, &last_switch_on_cpu, engine_wake_ns)
                    .is_some_and(|at| at <= end);
            if in_span {
                infer_switch_in(
                    &mut t,
                    &mut state,
                    e,
                    &last_switch_on_cpu,
                    period_start,
                    engine_wake_ns,
                    &mut ran_in_period,
                );
            }
            if past_end {
                break;
            }
        }
        if matches!(e.kind, EventKind::Switch { .. }) {
            last_switch_on_cpu.insert(e.cpu, ts);
        }
        if past_end {
            continue;
        }
        match &e.kind {
            EventKind::Switch {
                prev_tid,
                prev_state,
                next_tid,
                ..
            } => {
                if *prev_tid == tid {
                    let since = match state {
                        State::Running { since, .. } => since,
                        _ => ts,
                    };
                    t.runs.push((
                        Span {
                            start: since,
                            end: ts,
                        },
                        e.cpu,
                    ));
                    state = if *prev_state == crate::event::TASK_RUNNING {
                        State::Runnable {
                            since: ts,
                            cpu: e.cpu,
                        }
                    } else {
                        State::Sleeping {
                            since: ts,
                            letters: *prev_state,
                        }
                    };
                }
                if *next_tid == tid {
                    ran_in_period |= ts >= period_start;
                    match state {
                        // The CPU that finally ran it is where it was queued.
                        State::Runnable { since, .. } => {
                            t.waits.push((
                                Span {
                                    start: since,
                                    end: ts,
                                },
                                e.cpu,
                            ));
                        }
                        // Its wake-up was not seen (lost, or on an untraced CPU).
                        State::Sleeping { since, letters } => {
                            t.sleeps.push((
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
                    state = State::Running {
                        since: ts,
                        cpu: e.cpu,
                    };
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
                let first_of_buffer = ts >= period_start && !ran_in_period;
                match state {
                    State::Sleeping { since, letters } => {
                        t.sleeps.push((
                            Span {
                                start: since,
                                end: ts,
                            },
                            letters,
                            waker,
                        ));
                        state = State::Runnable { since: ts, cpu };
                    }
                    State::Unknown => state = State::Runnable { since: ts, cpu },
                    State::Runnable { since, .. } => state = State::Runnable { since, cpu },
                    State::Running { .. } => {}
                }
                if first_of_buffer && t.first_wake_after.is_none() {
                    t.first_wake_after = Some((ts, waker));
                }
            }
            EventKind::Migrate {
                tid: moved,
                orig_cpu,
                dest_cpu,
                ..
            } if *moved == tid => {
                t.migrations.push((ts, *orig_cpu, *dest_cpu));
                if let State::Runnable { since, cpu } = state {
                    // The wait so far was on the old run queue; it goes on on the new one.
                    let from = u16::try_from(*orig_cpu).unwrap_or(cpu);
                    t.waits.push((
                        Span {
                            start: since,
                            end: ts,
                        },
                        from,
                    ));
                    state = State::Runnable {
                        since: ts,
                        cpu: u16::try_from(*dest_cpu).unwrap_or(cpu),
                    };
                }
            }
            _ => {}
        }
    }
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

/// Adds `ns` to the culprit with the same identity in `list`, or appends a new one.
fn add_culprit(list: &mut Vec<Culprit>, mut c: Culprit, ns: u64) {
    if ns == 0 {
        return;
    }
    // A task is one culprit whatever names it went by (a process may rename itself); an
    // interrupt is its handler's name.
    let same = |x: &Culprit| {
        x.cpu == c.cpu
            && x.who.kind == c.who.kind
            && match c.who.kind {
                CulpritKind::Task => x.who.tid == c.who.tid,
                _ => x.who.name == c.who.name && x.who.irq == c.who.irq,
            }
    };
    match list.iter_mut().find(|x| same(x)) {
        Some(x) => {
            x.us += us(ns);
            x.count += 1;
            merge_names(&mut x.who, &c.who);
        }
        None => {
            c.us = us(ns);
            c.count = 1;
            list.push(c);
        }
    }
}

/// Keeps the newest name in `into` and every other name it went by in `earlier_names`.
pub(crate) fn merge_names(into: &mut Who, other: &Who) {
    for name in other
        .earlier_names
        .iter()
        .chain(std::iter::once(&other.name))
    {
        if *name != into.name && !into.earlier_names.contains(name) {
            into.earlier_names.push(name.clone());
        }
    }
}

/// The task that occupied a CPU, or `None` for the idle task (which takes no one's time).
fn task_culprit(o: &Occupancy, cpu: u16, lookup: &dyn TaskLookup) -> Option<Culprit> {
    if o.tid == 0 {
        return None;
    }
    let found = lookup.lookup(o.tid);
    // The trace's name is what the task was called then; procfs (or the tracer's first sight)
    // has its newest name. Both are kept, so a renamed task stays one culprit.
    let name = found
        .as_ref()
        .map_or_else(|| o.comm.clone(), |t| t.comm.clone());
    let earlier_names = if name != o.comm {
        vec![o.comm.clone()]
    } else {
        Vec::new()
    };
    Some(new_culprit(
        Who {
            kind: CulpritKind::Task,
            name,
            pid: Some(found.as_ref().map_or(o.tid, |t| t.pid)),
            tid: Some(o.tid),
            irq: None,
            policy: found
                .as_ref()
                .map_or_else(|| describe_kernel_prio(o.prio), |t| t.policy.clone()),
            earlier_names,
            parent: found
                .and_then(|t| t.parent)
                .map(|(pid, name, policy)| ParentTask { pid, name, policy }),
        },
        cpu,
    ))
}

fn irq_culprit(i: &IrqSpan, cpu: u16) -> Culprit {
    new_culprit(
        Who {
            kind: i.kind,
            name: i.name.clone(),
            pid: None,
            tid: None,
            irq: i.irq,
            policy: String::new(),
            earlier_names: Vec::new(),
            parent: None,
        },
        cpu,
    )
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

/// Why a CPU that was idle did not run a runnable thread: steal on it, else the deepest idle
/// state cpuidle's counters saw it enter around the wait, else nothing.
fn explain_idle(cpu: u16, context: &crate::cpu_context::CpuContext) -> IdleCause {
    // Steal counts in 10 ms ticks: any tick is a real stretch of the vCPU not running.
    if let Some(&steal) = context.steal_ns.get(&cpu).filter(|&&s| s > 0) {
        return IdleCause::Steal {
            cpu,
            steal_us: us(steal),
            span_ms: context.span_ms,
        };
    }
    // The deepest state with an exit latency that cpuidle's counters saw the CPU enter. (A
    // recorded cpu_idle event gives a state's index, whose name and latency are the same.)
    let deepest = context.idle_entered.get(&cpu).and_then(|list| {
        list.iter()
            .filter(|e| e.exit_latency_us > 0)
            .max_by_key(|e| e.exit_latency_us)
    });
    match deepest {
        Some(e) => IdleCause::IdleExit {
            cpu,
            state: e.name.clone(),
            exit_latency_us: e.exit_latency_us,
        },
        None => IdleCause::Unexplained { cpu },
    }
}

/// A culprit on `cpu` that has taken no time yet ([`add_culprit`] adds it).
fn new_culprit(who: Who, cpu: u16) -> Culprit {
    Culprit {
        who,
        cpu,
        us: 0.0,
        count: 0,
    }
}

fn sort_desc(list: &mut [Culprit]) {
    list.sort_by(|a, b| b.us.total_cmp(&a.us));
}

struct Candidate {
    cause: Cause,
    ns: u64,
    thread: usize,
    text: String,
    culprit: Option<Culprit>,
}

/// Builds the blame card of one late buffer. Pure: the same input gives the same card (the
/// lookup only names policies of tasks that are still alive).
pub fn blame(input: &BlameInput<'_>, lookup: &dyn TaskLookup) -> BlameCard {
    let events = &input.window.events;
    let t0 = input.window.t0_ns;
    let t1 = input.window.t1_ns.max(input.render_end_ns);
    let start = input.period_start_ns;
    let timelines = cpu_timelines(events, t0, t1);
    let audio_tids: Vec<(i32, &str)> = input
        .threads
        .iter()
        .map(|t| (t.tid, t.role.as_str()))
        .collect();
    let mut threads = Vec::new();
    let mut candidates = Vec::new();

    for (index, at) in input.threads.iter().enumerate() {
        let end = at.end_ns.unwrap_or(input.render_end_ns).max(start);
        let track = track_thread(events, at.tid, start, end, at.wake_ns);
        let mut cpus: Vec<u16> = Vec::new();
        let mut ran_instead = Vec::new();
        let mut interrupts = Vec::new();
        let mut waited_ns = 0;
        let mut wait_task_ns = 0;
        let mut wait_irq_ns = 0;
        let mut idle_wait_ns = 0;
        let mut idle_wait_cpu: BTreeMap<u16, u64> = BTreeMap::new();
        let mut main_wait_cpu: BTreeMap<u16, u64> = BTreeMap::new();
        for (span, cpu) in track
            .waits
            .iter()
            .filter_map(|(s, c)| Some((s.clip(start, end)?, *c)))
        {
            waited_ns += span.end - span.start;
            *main_wait_cpu.entry(cpu).or_default() += span.end - span.start;
            if !cpus.contains(&cpu) {
                cpus.push(cpu);
            }
            let Some(tl) = timelines.get(&cpu) else {
                continue;
            };
            for o in &tl.occupancy {
                let Some(part) = o.span.clip(span.start, span.end) else {
                    continue;
                };
                if o.tid == at.tid {
                    continue;
                }
                let irq_ns = tl.irq_time(&part);
                let task_ns = (part.end - part.start).saturating_sub(irq_ns);
                match task_culprit(o, cpu, lookup) {
                    Some(c) => {
                        wait_task_ns += task_ns;
                        add_culprit(&mut ran_instead, c, task_ns);
                    }
                    None => {
                        idle_wait_ns += task_ns;
                        *idle_wait_cpu.entry(cpu).or_default() += task_ns;
                    }
                }
            }
            for i in &tl.irqs {
                let ns = i.span.overlap(&span);
                wait_irq_ns += ns;
                add_culprit(&mut interrupts, irq_culprit(i, cpu), ns);
            }
        }
        let mut on_cpu_ns = 0;
        let mut run_irq_ns = 0;
        for (span, cpu) in track
            .runs
            .iter()
            .filter_map(|(s, c)| Some((s.clip(start, end)?, *c)))
        {
            on_cpu_ns += span.end - span.start;
            if !cpus.contains(&cpu) {
                cpus.push(cpu);
            }
            if let Some(tl) = timelines.get(&cpu) {
                for i in &tl.irqs {
                    let ns = i.span.overlap(&span);
                    run_irq_ns += ns;
                    add_culprit(&mut interrupts, irq_culprit(i, cpu), ns);
                }
            }
        }
        cpus.sort_unstable();
        sort_desc(&mut ran_instead);
        sort_desc(&mut interrupts);
        let ran_ns = on_cpu_ns.saturating_sub(run_irq_ns);
        let interrupt_ns = wait_irq_ns + run_irq_ns;
        let work_start = at.wake_ns.unwrap_or(start);
        let sleeps: Vec<Sleep> = track
            .sleeps
            .iter()
            .filter(|(s, ..)| s.start >= work_start && s.start < end)
            .map(|(s, letters, waker)| {
                let audio_role = match waker {
                    Waker::Task(w) => audio_tids.iter().find(|(t, _)| t == w).map(|(_, r)| *r),
                    _ => None,
                };
                Sleep {
                    at_us: us(s.start.saturating_sub(start)),
                    us: us(s.end.min(end) - s.start),
                    state: state_letters(*letters),
                    woken_by: match (audio_role, waker) {
                        (Some(role), _) => Some(role.to_owned()),
                        (None, Waker::Task(w)) => Some(waker_name(events, *w)),
                        (None, Waker::Interrupt) => Some("an interrupt (timer or device)".into()),
                        (None, Waker::Unknown) => None,
                    },
                    waited_for_audio_thread: audio_role.is_some(),
                }
            })
            .collect();
        let busy_at_start = matches!(
            track.state_at_start,
            Some(State::Running { .. } | State::Runnable { .. })
        );
        let cpu_khz = cpus
            .iter()
            .find_map(|c| timelines.get(c).and_then(|tl| tl.freq_khz));
        let idle_cause = idle_wait_cpu
            .iter()
            .max_by_key(|(_, ns)| **ns)
            .map(|(&cpu, _)| explain_idle(cpu, &input.window.cpu));
        let tb = ThreadBlame {
            role: at.role.clone(),
            tid: at.tid,
            cpus: cpus.clone(),
            woken_at_us: track.first_wake_after.map(|(ts, _)| us(ts - start)),
            busy_at_period_start: busy_at_start,
            waited_us: us(waited_ns),
            ran_instead: ran_instead.clone(),
            idle_wait_us: us(idle_wait_ns),
            idle_cause: idle_cause.clone(),
            interrupts: interrupts.clone(),
            interrupt_us: us(interrupt_ns),
            ran_us: us(ran_ns),
            median_us: at.median_busy_ns.map(us),
            cpu_khz,
            migrations: track
                .migrations
                .iter()
                .filter(|(ts, ..)| *ts >= start && *ts <= end)
                .map(|(ts, from, to)| Migration {
                    at_us: us(ts - start),
                    from_cpu: *from,
                    to_cpu: *to,
                })
                .collect(),
            sleeps: sleeps.clone(),
            wait_accounted: if waited_ns == 0 {
                1.0
            } else {
                // An idle wait with a cause (steal, an idle-state exit) is accounted for.
                let idle = match &idle_cause {
                    Some(IdleCause::Unexplained { .. }) | None => 0,
                    Some(_) => idle_wait_ns,
                };
                ((wait_task_ns + wait_irq_ns + idle) as f64 / waited_ns as f64).min(1.0)
            },
            unseen_switch_ins: track.unseen_switch_ins,
            wake_inferred: track.wake_inferred,
        };

        // Candidates for the verdict, each with the time it explains.
        if let Some(top) = ran_instead.first() {
            let wait_cpu = main_wait_cpu
                .iter()
                .max_by_key(|(_, ns)| **ns)
                .map_or(top.cpu, |(c, _)| *c);
            let text = format!(
                "{} waited {} on CPU{wait_cpu} behind {}",
                at.role,
                ms_text(wait_task_ns),
                task_words(&top.who)
            );
            candidates.push(Candidate {
                cause: Cause::Waited,
                ns: wait_task_ns,
                thread: index,
                text,
                culprit: Some(top.clone()),
            });
        }
        if let (Some(cause), true) = (&idle_cause, idle_wait_ns > 0) {
            candidates.push(Candidate {
                cause: Cause::WokeLate,
                ns: idle_wait_ns,
                thread: index,
                text: format!(
                    "{} waited {} {}",
                    at.role,
                    ms_text(idle_wait_ns),
                    idle_words(cause)
                ),
                culprit: None,
            });
        }
        if let Some(top) = interrupts.first() {
            candidates.push(Candidate {
                cause: Cause::Interrupts,
                ns: interrupt_ns,
                thread: index,
                text: format!(
                    "{} lost {} to interrupts on CPU{} (mostly {} {:.2} ms)",
                    at.role,
                    ms_text(interrupt_ns),
                    top.cpu,
                    top.who.name,
                    top.us / 1000.0
                ),
                culprit: Some(top.clone()),
            });
        }
        if let Some(median) = at.median_busy_ns {
            let freq = cpu_khz
                .map(|k| format!(" at {:.2} GHz", k as f64 / 1e6))
                .unwrap_or_default();
            candidates.push(Candidate {
                cause: Cause::RanLong,
                ns: ran_ns.saturating_sub(median),
                thread: index,
                text: format!(
                    "{} ran {} (median {}){freq}",
                    at.role,
                    ms_text(ran_ns),
                    ms_text(median)
                ),
                culprit: None,
            });
        }
        let blocked: Vec<&Sleep> = sleeps
            .iter()
            .filter(|s| !s.waited_for_audio_thread)
            .collect();
        let blocked_ns: u64 = blocked.iter().map(|s| (s.us * 1000.0) as u64).sum();
        if blocked_ns > 0 {
            let states: Vec<&str> = blocked.iter().map(|s| s.state.as_str()).collect();
            let why = if states.contains(&"D") {
                "uninterruptible sleep: I/O or page fault"
            } else {
                "interruptible sleep: lock, futex or sleep call"
            };
            candidates.push(Candidate {
                cause: Cause::Blocked,
                ns: blocked_ns,
                thread: index,
                text: format!(
                    "{} blocked {} inside the render ({why})",
                    at.role,
                    ms_text(blocked_ns)
                ),
                culprit: None,
            });
        }
        if let Some((ts, waker)) = track.first_wake_after {
            let by_audio =
                matches!(waker, Waker::Task(w) if audio_tids.iter().any(|(t, _)| *t == w));
            if !by_audio && !busy_at_start {
                candidates.push(Candidate {
                    cause: Cause::WokeLate,
                    ns: ts - start,
                    thread: index,
                    text: if track.wake_inferred {
                        format!(
                            "{} started running {} after the period start (timer or wake-up \
                             latency; its wake-up on an idle CPU is not in the trace)",
                            at.role,
                            ms_text(ts - start)
                        )
                    } else {
                        format!(
                            "{} was woken {} after the period start (timer or wake-up latency)",
                            at.role,
                            ms_text(ts - start)
                        )
                    },
                    culprit: None,
                });
            }
        }
        if busy_at_start {
            let first_work = at.wake_ns.unwrap_or(start).max(start);
            candidates.push(Candidate {
                cause: Cause::StartedLate,
                ns: first_work - start,
                thread: index,
                text: format!(
                    "{} started {} after the period start, still busy with an earlier buffer",
                    at.role,
                    ms_text(first_work - start)
                ),
                culprit: None,
            });
        }
        threads.push(tb);
    }

    let late_ns = input.render_end_ns.saturating_sub(input.deadline_ns);
    let best = candidates
        .into_iter()
        .filter(|c| c.ns > 0)
        .max_by_key(|c| c.ns);
    let (cause, thread, culprit, cause_ns, mut verdict) = match best {
        Some(c) => (
            c.cause,
            Some(input.threads[c.thread].role.clone()),
            c.culprit,
            c.ns,
            format!("late: {}", c.text),
        ),
        None => (
            Cause::Unexplained,
            None,
            None,
            0,
            format!(
                "late: no kernel cause found (render ended {} after the deadline)",
                ms_text(late_ns)
            ),
        ),
    };
    for note in input.notes {
        verdict.push_str("; ");
        verdict.push_str(note);
    }
    if input.window.lost_events > 0 {
        verdict.push_str(&format!(
            " [incomplete: the kernel lost {} events in this window]",
            input.window.lost_events
        ));
    } else if !input.window.complete {
        verdict.push_str(" [incomplete: the trace window did not cover the whole buffer]");
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

/// `comm (tid)` of a waker, from the window's own events.
fn waker_name(events: &[TraceEvent], tid: i32) -> String {
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
