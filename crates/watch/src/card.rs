//! One card per xrun, as data: which node was late, the path from it to the root of its
//! lateness, the card's kind (the root's), the figures behind it, and the kernel's account of
//! the late node's thread and of the root's (the driver's, on the server's own real-time thread,
//! or an upstream node's) where events were recorded: trace's `blame`, the analysis
//! `run --explain` and the dashboard use too. Built on watch's main thread; [`crate::words`]
//! renders it.

use crate::chain::{Finding, Role, Step};
use crate::detect::{Evidence, Xrun};
use crate::mapping::Mapping;
use serde::{Deserialize, Serialize};
use xrunlab_trace::{
    blame, first_wake, last_wake, still_runnable, AudioThread, BlameCard, BlameInput, Cause,
    EventKind, TaskLookup, TraceEvent, Window,
};

/// What the root of an xrun was: a card's kind, named the same in the cards, the summary's
/// counts, `--json` and the live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The driver (the server's thread that starts each cycle) woke late, behind a task or an
    /// interrupt on its CPU (the cause is on the card).
    DriverWokeLate,
    /// The driver's wake-up itself came late with nothing in its way: a late device or timer
    /// interrupt (named on the card).
    InterruptLate,
    /// The driver's own processing took too long (on its CPU, preempted or blocked).
    DriverRanLong,
    /// A node started in time and worked too long (the late node, or one upstream of it).
    NodeRanLong,
    /// A node was signalled in time but started late (preempted, or its CPU was slow to wake).
    NodeWokeLate,
    /// A node was not signalled in time, and what should have signalled it is not explained.
    NodeNotSignalled,
    /// Nothing explains it; the reason is on the card.
    Unexplained,
}

impl Kind {
    /// Its name in the summary and the JSON (`driver_woke_late`...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::DriverWokeLate => "driver_woke_late",
            Kind::InterruptLate => "interrupt_late",
            Kind::DriverRanLong => "driver_ran_long",
            Kind::NodeRanLong => "node_ran_long",
            Kind::NodeWokeLate => "node_woke_late",
            Kind::NodeNotSignalled => "node_not_signalled",
            Kind::Unexplained => "unexplained",
        }
    }

    /// Every kind, in the order above.
    pub const ALL: [Kind; 7] = [
        Kind::DriverWokeLate,
        Kind::InterruptLate,
        Kind::DriverRanLong,
        Kind::NodeRanLong,
        Kind::NodeWokeLate,
        Kind::NodeNotSignalled,
        Kind::Unexplained,
    ];
}

/// A culprit the kernel named, flattened for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCulprit {
    /// `task`, `irq`, `softirq`...
    pub kind: String,
    /// comm, handler name or softirq type.
    pub name: String,
    /// Its process id, for a task.
    pub pid: Option<i32>,
    /// `SCHED_FIFO 90`...; empty for interrupts.
    pub policy: String,
    /// The CPU where it took the time.
    pub cpu: u16,
    /// Time taken from the node's thread, µs.
    pub us: f64,
}

/// What the kernel's events say about the late node's thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelAccount {
    /// trace's one-line verdict for the thread.
    pub verdict: String,
    /// The largest single cause it found, if any.
    pub main_culprit: Option<KernelCulprit>,
    /// Time the node's thread was runnable but not running, µs.
    pub waited_us: f64,
    /// Time it ran (minus interrupts), µs.
    pub ran_us: f64,
    /// Time it slept inside its work (blocked), µs.
    pub blocked_us: f64,
    /// Interrupt time on its CPU meanwhile, µs.
    pub interrupt_us: f64,
    /// Migrations meanwhile.
    pub migrations: usize,
    /// Kernel events lost in the window: the account may miss causes.
    pub lost_events: u64,
    /// False when the kernel's window did not reach over the whole span the account covers
    /// (an overwrite ring that no longer held its start, a reader that had not caught up): the
    /// account may miss causes. Records written before this field read as complete.
    #[serde(default = "complete")]
    pub window_complete: bool,
    /// Every task and interrupt that took time from the thread, most first (at most 8).
    #[serde(default)]
    pub culprits: Vec<KernelCulprit>,
}

/// The kernel's account of the root's thread (the driver's, or an upstream node's), when the
/// root is not the late node itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootAccount {
    /// The driver or a node.
    pub role: Role,
    /// Its name (the driver node's, or the node's).
    pub name: String,
    /// Its thread, and how sure that is.
    pub mapping: Option<Mapping>,
    /// The span looked at, CLOCK_MONOTONIC ns: from the driver's expected wake-up (or the late
    /// node's signal) to the driver's start (or the deadline).
    pub from_ns: u64,
    /// See `from_ns`.
    pub to_ns: u64,
    /// The kernel's account of the thread over the span.
    pub account: Option<KernelAccount>,
    /// Its first wake-up in the span, and what made it; when it slept waiting for a thread that
    /// was held off (`waker`), that thread's wake-up of it.
    pub woken: Option<xrunlab_trace::Wake>,
    /// Why there is no account.
    pub missing: Option<String>,
    /// The thread was held off in the moments before the span, not in it: the graph was still
    /// catching up from that delay (the span then starts that much earlier).
    #[serde(default)]
    pub catching_up: bool,
    /// The driver slept past its due time until another thread woke it (a client it waited
    /// for): that thread's account from the driver's due time to the wake-up, when a task or
    /// interrupts held it off its CPU for much of it, which then is what delayed the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<KernelAccount>,
    /// When the thread that woke the driver had itself slept waiting for another (a client's
    /// process thread for its worker), the wake-ups along that chain, each of the thread before
    /// by the next; the last thread is the one `waker` accounts for. Empty when the driver's
    /// own waker was held off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waker_via: Vec<xrunlab_trace::Wake>,
}

/// One xrun's card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// The xrun as the cycles showed it.
    pub xrun: Xrun,
    /// The root's kind.
    pub kind: Kind,
    /// From the late node to the root (the timing's path, refined by the kernel's events: a
    /// node the kernel shows was never woken was not signalled, and its signaller is followed).
    pub path: Vec<Step>,
    /// The node's application name and pid, from the server.
    pub app_name: Option<String>,
    /// The node's thread, and how sure that is (absent for a driver-side xrun).
    pub mapping: Option<Mapping>,
    /// Its WAIT (awake − signal) in this cycle, µs.
    pub wait_us: Option<f64>,
    /// Its BUSY (finish − awake) in this cycle, µs; when it had not finished, at least this.
    pub busy_us: Option<f64>,
    /// `busy_us` is a lower bound: the node was still running when the record was taken.
    pub busy_at_least: bool,
    /// The cycle's length, µs.
    pub period_us: f64,
    /// The kernel's account of the late node's thread, where events were recorded and the
    /// thread is known.
    pub kernel: Option<KernelAccount>,
    /// Why there is no kernel account, in words that say how to get one.
    pub kernel_missing: Option<String>,
    /// The kernel's account of the root's thread, when the root is the driver or another node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootAccount>,
    /// Why nothing explains it (for [`Kind::Unexplained`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained: Option<String>,
    /// The node's thread's page faults over a span that holds the xrun, from its procfs
    /// counters (set by the caller, which samples them; they are not per cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<Faults>,
}

impl Card {
    /// The root step of the path, if any.
    pub fn root_step(&self) -> Option<&Step> {
        self.path.last()
    }
}

/// Page faults of the node's thread between a sample taken before the xrun and the card.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Faults served without I/O.
    pub minor: u64,
    /// Faults that needed I/O (a page read back from disk or swap).
    pub major: u64,
    /// The span the counters cover, ms (from the sample before the xrun to the card).
    pub span_ms: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The kernel side of a card: a window of events and a way to name tasks, or why there is none.
pub enum Kernel<'a> {
    /// Events over `[signal − trace::blame::LEAD_IN_NS, deadline + trace::blame::MARGIN_NS]` or
    /// later (for a driver that woke late, from its expected wake-up minus the lead-in): events
    /// past the deadline show whether a thread still running there had run.
    Window(&'a Window, &'a dyn TaskLookup),
    /// No events: the reason, said to the user as is.
    Missing(&'a str),
}

/// The threads of the steps a path may lead to: the driver's (the audio server's real-time
/// thread) and other nodes'.
pub trait RootThreads {
    /// The thread of the step with this role and node id, if known.
    fn thread_of(&self, role: Role, id: u32) -> Option<Mapping>;
}

/// No thread is known beyond the late node's.
pub struct NoThreads;

impl RootThreads for NoThreads {
    fn thread_of(&self, _: Role, _: u32) -> Option<Mapping> {
        None
    }
}

fn culprit_of(c: &xrunlab_trace::Culprit) -> KernelCulprit {
    KernelCulprit {
        kind: format!("{:?}", c.who.kind).to_lowercase(),
        name: c.who.name.clone(),
        pid: c.who.pid,
        policy: c.who.policy.clone(),
        cpu: c.cpu,
        us: c.us,
    }
}

fn account(card: &BlameCard) -> KernelAccount {
    let thread = card.threads.first();
    let mut culprits: Vec<KernelCulprit> = thread
        .map(|t| {
            t.ran_instead
                .iter()
                .chain(&t.interrupts)
                .map(culprit_of)
                .collect()
        })
        .unwrap_or_default();
    culprits.sort_by(|a, b| b.us.total_cmp(&a.us));
    culprits.truncate(8);
    KernelAccount {
        verdict: card.verdict.clone(),
        main_culprit: card.main_culprit.as_ref().map(culprit_of),
        waited_us: thread.map_or(0.0, |t| t.waited_us),
        ran_us: thread.map_or(0.0, |t| t.ran_us),
        blocked_us: thread.map_or(0.0, |t| {
            t.sleeps
                .iter()
                .filter(|s| !s.waited_for_audio_thread)
                .map(|s| s.us)
                .sum()
        }),
        interrupt_us: thread.map_or(0.0, |t| t.interrupt_us),
        migrations: thread.map_or(0, |t| t.migrations.len()),
        lost_events: card.lost_events,
        window_complete: card.window_complete,
        culprits,
    }
}

fn complete() -> bool {
    true
}

/// Whether the kernel's account says the thread barely ran, waiting on a CPU where nothing else
/// ran, while the server's timing says it was busy for `busy` ns: the trace then lost its
/// switch-in, and the account would blame a wait that did not happen. A wait behind another
/// task or an interrupt is a real account, whatever it says.
pub fn contradicts(busy: Option<u64>, account: &KernelAccount) -> bool {
    let Some(busy) = busy else {
        return false;
    };
    let busy_us = busy as f64 / 1000.0;
    let nothing_else_ran = account
        .main_culprit
        .as_ref()
        .is_none_or(|c| c.kind == "idle");
    busy_us > 1000.0
        && account.ran_us < busy_us * 0.05
        && account.waited_us > busy_us * 0.5
        && nothing_else_ran
}

/// The kernel's account of thread `tid` over `[from, to]`, in the role `role`.
fn account_over(
    window: &Window,
    lookup: &dyn TaskLookup,
    thread: AudioThread,
    from: u64,
    to: u64,
) -> (KernelAccount, Cause) {
    let end_ns = thread.end_ns;
    let threads = [thread];
    let blamed = blame(
        &BlameInput {
            period_start_ns: from,
            deadline_ns: to,
            render_end_ns: end_ns.unwrap_or(to).max(to),
            threads: &threads,
            window,
            notes: &[],
        },
        lookup,
    );
    (account(&blamed), blamed.cause)
}

/// How far before a late cycle the driver's thread is looked at for a delay the graph was still
/// catching up from (within the window's lead-in).
const CATCH_UP_NS: u64 = 15_000_000;
/// ... and how long it must have been held off then to be named.
const CATCH_UP_MIN_US: f64 = 1000.0;

/// The CPU thread `tid` last ran on before `before`, from the window's switches.
fn last_cpu(window: &Window, tid: i32, before: u64) -> Option<u16> {
    window
        .events
        .iter()
        .rev()
        .filter(|e| e.ts_ns <= before)
        .find_map(|e| match e.kind {
            EventKind::Switch {
                prev_tid, next_tid, ..
            } if prev_tid == tid || next_tid == tid => Some(e.cpu),
            _ => None,
        })
}

/// Whether thread `tid` was asleep at `at`: its last switch or wake-up in the window before then
/// is a switch out to sleep.
fn asleep_at(window: &Window, tid: i32, at: u64) -> bool {
    window
        .events
        .iter()
        .rev()
        .filter(|e| e.ts_ns <= at)
        .find_map(|e| match e.kind {
            EventKind::Switch {
                prev_tid,
                prev_state,
                ..
            } if prev_tid == tid => Some(!still_runnable(prev_state)),
            EventKind::Switch { next_tid, .. } if next_tid == tid => Some(false),
            EventKind::Wakeup { tid: t, .. } if t == tid => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

/// The task that held `cpu` for most of `[from, to]` (at least half of it), as a culprit.
///
/// A switch whose outgoing task is not the one the window last switched in shows a switch-in the
/// window lacks: some kernels record nothing while a CPU runs its idle task (this 2-core VM's
/// second CPU: no switch out of idle, no wake-up made there, under perf and ftrace alike). The
/// CPU left idle by its first event seen after it went idle (an interrupt or a wake-up made by
/// the task that ran), so the unseen task is given the time from there: an estimate, short by at
/// most the time to that event.
fn occupant(
    window: &Window,
    lookup: &dyn TaskLookup,
    cpu: u16,
    from: u64,
    to: u64,
) -> Option<KernelCulprit> {
    if to <= from {
        return None;
    }
    let on_cpu: Vec<&TraceEvent> = window.events.iter().filter(|e| e.cpu == cpu).collect();
    // Who ran on the CPU when the span began: the last switch before it, and whether anything
    // happened on the CPU since, while it was said to be idle.
    let last_switch = on_cpu
        .iter()
        .rposition(|e| e.ts_ns <= from && matches!(e.kind, EventKind::Switch { .. }));
    let mut current: Option<(i32, String)> = last_switch.and_then(|i| match &on_cpu[i].kind {
        EventKind::Switch {
            next_tid,
            next_comm,
            ..
        } => Some((*next_tid, next_comm.to_string())),
        _ => None,
    });
    let idle = |c: &Option<(i32, String)>| c.as_ref().is_some_and(|(t, _)| *t == 0);
    let mut busy_from: Option<u64> = match (idle(&current), last_switch) {
        (true, Some(i)) => on_cpu[i + 1..]
            .iter()
            .any(|e| e.ts_ns <= from)
            .then_some(from),
        _ => None,
    };
    let mut held: std::collections::BTreeMap<(i32, String), u64> = Default::default();
    let mut since = from;
    for e in on_cpu.iter().filter(|e| e.ts_ns > from && e.ts_ns < to) {
        let EventKind::Switch {
            prev_tid,
            prev_comm,
            next_tid,
            next_comm,
            ..
        } = &e.kind
        else {
            if idle(&current) && busy_from.is_none() {
                busy_from = Some(e.ts_ns);
            }
            continue;
        };
        match current.take() {
            Some(c) if c.0 == *prev_tid => *held.entry(c).or_default() += e.ts_ns - since,
            _ => {
                // Switched in unseen: the outgoing task ran from the CPU's first sign of life.
                let began = busy_from.unwrap_or(e.ts_ns).max(since);
                *held.entry((*prev_tid, prev_comm.to_string())).or_default() += e.ts_ns - began;
            }
        }
        current = Some((*next_tid, next_comm.to_string()));
        since = e.ts_ns;
        busy_from = None;
    }
    if let Some(c) = current {
        *held.entry(c).or_default() += to - since;
    }
    let ((tid, comm), ns) = held
        .into_iter()
        .filter(|((t, _), _)| *t != 0)
        .max_by_key(|(_, ns)| *ns)?;
    if ns * 2 < to - from {
        return None;
    }
    let who = lookup.lookup(tid);
    Some(KernelCulprit {
        kind: "task".to_owned(),
        name: who.as_ref().map_or(comm, |w| w.comm.clone()),
        pid: Some(who.as_ref().map_or(tid, |w| w.pid)),
        policy: who.map(|w| w.policy).unwrap_or_default(),
        cpu,
        us: us(ns),
    })
}

/// A node's signal this long after the driver's start is a signal the driver was late to send.
const SIGNAL_SLACK_NS: u64 = 100_000;

/// The driver's thread as blame's audio thread, over a span ending at `to`: it has no
/// engine stamps and no median of its own.
fn driver_thread(tid: i32, to: u64) -> AudioThread {
    AudioThread {
        role: "the driver".to_owned(),
        tid,
        wake_ns: None,
        end_ns: Some(to),
        median_busy_ns: None,
    }
}

/// How many threads back from the driver's waker the chain of wake-ups is followed.
const WAKER_HOPS: usize = 3;

/// A share of the span that is worth naming as a cause: at least a tenth of it, and 100 µs.
fn significant(us_taken: f64, span_ns: u64) -> bool {
    us_taken >= 100.0 && us_taken * 1000.0 >= span_ns as f64 * 0.1
}

/// The root's account and the card's kind when the root is the driver.
fn driver_root(
    xrun: &Xrun,
    root: &Step,
    late_signal: Option<u64>,
    kernel: &Kernel<'_>,
    threads: &dyn RootThreads,
) -> (Kind, RootAccount) {
    // A driver that started late is looked at from its expected wake-up to its start; one
    // that started in time but signalled a node late, from the cycle's start to that signal;
    // otherwise over the whole cycle.
    let start = if root.signal_ns > 0 {
        root.signal_ns
    } else {
        xrun.cycle_start_ns
    };
    let (from, to) = if root.finding == Finding::DriverLate {
        (
            start.saturating_sub(root.excess_ns),
            start.max(root.awake_ns),
        )
    } else {
        match late_signal.filter(|&s| s > start + SIGNAL_SLACK_NS) {
            Some(s) => (start, s),
            None => (start, xrun.deadline_ns),
        }
    };
    let mapping = threads.thread_of(Role::Driver, root.id);
    let mut out = RootAccount {
        role: Role::Driver,
        name: root.name.clone(),
        mapping: mapping.clone(),
        from_ns: from,
        to_ns: to,
        account: None,
        woken: None,
        missing: None,
        catching_up: false,
        waker: None,
        waker_via: Vec::new(),
    };
    let timing_kind = match root.finding {
        Finding::DriverLate => Kind::DriverWokeLate,
        Finding::DriverRanLong => Kind::DriverRanLong,
        _ => Kind::NodeNotSignalled,
    };
    let (window, lookup) = match kernel {
        Kernel::Missing(why) => {
            out.missing = Some((*why).to_owned());
            return (timing_kind, out);
        }
        Kernel::Window(w, l) => (*w, *l),
    };
    let Some(thread) = mapping.as_ref().and_then(|m| m.thread.as_ref()) else {
        out.missing = Some(
            "the server's real-time thread that runs the driver was not found, so its kernel \
             events cannot be picked out"
                .to_owned(),
        );
        return (timing_kind, out);
    };
    let (acc, cause) = account_over(window, lookup, driver_thread(thread.tid, to), from, to);
    // The wake-up the driver was waiting for: from a little before the span (a timer that
    // fired in time, whose thread then waited) to its end.
    out.woken = first_wake(
        &window.events,
        thread.tid,
        from.saturating_sub(1_000_000),
        to,
    );
    let span = to.saturating_sub(from);
    let held_off = acc.main_culprit.as_ref().is_some_and(|c| c.kind != "idle")
        && significant(acc.waited_us + acc.interrupt_us, span);
    // Not held off in the span, but just before it: the cycles after a long delay are late
    // too, while the graph catches up; what held the driver off then is the root.
    if !held_off && root.finding != Finding::DriverLate {
        let back = from.saturating_sub(CATCH_UP_NS).max(window.t0_ns);
        let (before, _) = account_over(window, lookup, driver_thread(thread.tid, to), back, to);
        let culprit = before
            .main_culprit
            .as_ref()
            .is_some_and(|c| c.kind != "idle");
        if culprit && before.waited_us + before.interrupt_us >= CATCH_UP_MIN_US {
            out.from_ns = back;
            out.catching_up = true;
            out.account = Some(before);
            return (Kind::DriverWokeLate, out);
        }
    }
    // The driver's thread sleeps only to wait for its timer or its device: asleep through most
    // of the span, it was woken late, by what woke it. Asleep when the span began with no
    // wake-up in the window is so too: on a kernel that records nothing while a CPU is idle, a
    // wake-up made there is missing (and the account, which counts sleeps from a wake-up, has
    // none).
    let slept = (acc.blocked_us * 1000.0 >= span as f64 * 0.5
        || (out.woken.is_none() && asleep_at(window, thread.tid, from)))
        && acc.ran_us * 1000.0 < span as f64 * 0.25;
    let woken_by_interrupt = out.woken.as_ref().is_some_and(|w| w.source.is_interrupt());
    // Asleep, with its wake-up due: a task that held the driver's CPU meanwhile delayed it
    // (an interrupt's deferred work, a timer's softirq in ksoftirqd, runs only after it), so
    // the wake-up was not late by itself.
    let occupied = if slept {
        // The driver's own CPU (where it last ran before the span's end), not its waker's.
        let cpu = last_cpu(window, thread.tid, from).or_else(|| out.woken.as_ref().map(|w| w.cpu));
        cpu.and_then(|cpu| {
            occupant(
                window,
                lookup,
                cpu,
                from,
                out.woken.as_ref().map_or(to, |w| w.ts_ns),
            )
        })
    } else {
        None
    };
    // Asleep until another thread woke it (a client it waited for), with nothing on its own
    // CPU: what held that thread off its CPU meanwhile delayed the driver. The wake-up that
    // ended its last sleep in the span is the one it waited for. A waker that itself slept
    // most of the time waited for a thread in turn (a client's process thread for its worker):
    // the chain is followed back, a few threads at most.
    if slept && occupied.is_none() {
        let last = last_wake(&window.events, thread.tid, from, to);
        let mut hop = last.clone();
        let mut chain: Vec<i32> = vec![thread.tid];
        // The wake-ups along the chain after the driver's own, each of the thread before by the
        // next.
        let mut via = Vec::new();
        while let Some((tid, at)) = hop.as_ref().and_then(|w| match &w.source {
            xrunlab_trace::WakeSource::Task { tid, .. } if !chain.contains(tid) => {
                Some((*tid, w.ts_ns))
            }
            _ => None,
        }) {
            if chain.len() > WAKER_HOPS {
                break;
            }
            chain.push(tid);
            let (waker, _) = account_over(window, lookup, driver_thread(tid, at), from, at);
            let span_us = us(at.saturating_sub(from));
            // Held off for most of the wait, and longer than it ran: a client that ran long
            // (its own fault, even if preempted a little) is not such a waker.
            let held_us = waker.waited_us + waker.interrupt_us;
            if waker
                .main_culprit
                .as_ref()
                .is_some_and(|c| c.kind != "idle")
                && held_us >= span_us * 0.5
                && held_us > waker.ran_us
            {
                out.waker = Some(waker);
                out.waker_via = via;
                out.woken = last;
                break;
            }
            if waker.blocked_us < span_us * 0.5 {
                break;
            }
            hop = last_wake(&window.events, tid, from, at);
            via.extend(hop.clone());
        }
    }
    if let Some(waker) = &out.waker {
        // What held the waker off is the driver's culprit too: the summary, the recorder's
        // culprit column and the dashboard name it.
        let mut acc = acc;
        acc.main_culprit = waker.main_culprit.clone();
        out.account = Some(acc);
        return (Kind::DriverWokeLate, out);
    }
    let kind = if held_off {
        Kind::DriverWokeLate
    } else if let Some(task) = occupied {
        let mut acc = acc;
        acc.main_culprit = Some(task);
        out.account = Some(acc);
        return (Kind::DriverWokeLate, out);
    } else if slept && woken_by_interrupt {
        Kind::InterruptLate
    } else if slept {
        Kind::DriverWokeLate
    } else if matches!(cause, Cause::RanLong | Cause::Blocked)
        || (root.finding == Finding::DriverRanLong && significant(acc.ran_us, span))
    {
        Kind::DriverRanLong
    } else if out
        .woken
        .as_ref()
        .is_some_and(|w| w.ts_ns > from + span / 2 && w.source.is_interrupt())
        && root.finding == Finding::DriverLate
    {
        // Woken late, and nothing held it off once woken: the wake-up itself was late.
        Kind::InterruptLate
    } else if root.finding == Finding::DriverLate {
        Kind::DriverWokeLate
    } else if significant(acc.waited_us, span) {
        // A wait on an idle CPU (its exit latency or a hypervisor's steal): the kernel's
        // verdict says which.
        Kind::DriverWokeLate
    } else {
        timing_kind
    };
    out.account = Some(acc);
    (kind, out)
}

/// The root's account and the card's kind when the root is a node other than the late one.
fn upstream_root(
    xrun: &Xrun,
    root: &Step,
    kernel: &Kernel<'_>,
    threads: &dyn RootThreads,
    median_busy_ns: Option<u64>,
) -> (Kind, RootAccount) {
    let kind = match root.finding {
        Finding::RanLong => Kind::NodeRanLong,
        Finding::WokeLate => Kind::NodeWokeLate,
        _ => Kind::NodeNotSignalled,
    };
    let mapping = threads.thread_of(Role::Node, root.id);
    let from = if root.signal_ns > 0 {
        root.signal_ns
    } else {
        xrun.cycle_start_ns
    };
    let to = if root.finish_ns > root.awake_ns && root.awake_ns > 0 {
        root.finish_ns
    } else {
        xrun.deadline_ns
    };
    let mut out = RootAccount {
        role: Role::Node,
        name: root.name.clone(),
        mapping: mapping.clone(),
        from_ns: from,
        to_ns: to,
        account: None,
        woken: None,
        missing: None,
        catching_up: false,
        waker: None,
        waker_via: Vec::new(),
    };
    match (kernel, mapping.as_ref().and_then(|m| m.thread.as_ref())) {
        (Kernel::Missing(why), _) => out.missing = Some((*why).to_owned()),
        (Kernel::Window(_, _), None) => {
            out.missing = Some("the upstream node's thread is not known".to_owned())
        }
        (Kernel::Window(w, l), Some(t)) => {
            let (acc, _) = account_over(
                w,
                *l,
                AudioThread {
                    role: root.name.clone(),
                    tid: t.tid,
                    wake_ns: (root.awake_ns > 0).then_some(root.awake_ns),
                    end_ns: (root.finish_ns > root.awake_ns && root.awake_ns > 0)
                        .then_some(root.finish_ns),
                    median_busy_ns,
                },
                from,
                to,
            );
            out.account = Some(acc);
        }
    }
    (kind, out)
}

/// The kind of a root that is the late node itself.
fn own_kind(root: &Step) -> Kind {
    match root.finding {
        Finding::RanLong => Kind::NodeRanLong,
        Finding::WokeLate => Kind::NodeWokeLate,
        Finding::NotSignalled => Kind::NodeNotSignalled,
        Finding::DriverLate => Kind::DriverWokeLate,
        Finding::DriverRanLong => Kind::DriverRanLong,
        Finding::InTime => Kind::Unexplained,
    }
}

/// Builds the card of `xrun`, with the node's thread from `mapping`, the kernel's view, and
/// the threads of the steps its path may lead to (`threads`: the driver's, upstream nodes').
pub fn card(
    xrun: &Xrun,
    app_name: Option<String>,
    mapping: Option<Mapping>,
    kernel: Kernel<'_>,
    threads: &dyn RootThreads,
) -> Card {
    let period_ns = u64::from(xrun.quantum) * 1_000_000_000 / u64::from(xrun.rate.max(1));
    let mut path = xrun.path.clone();
    let Some(node) = &xrun.node else {
        let mut c = Card {
            xrun: xrun.clone(),
            kind: Kind::Unexplained,
            path: path.clone(),
            app_name,
            mapping: None,
            wait_us: None,
            busy_us: None,
            busy_at_least: false,
            period_us: us(period_ns),
            kernel: None,
            kernel_missing: None,
            root: None,
            unexplained: None,
            faults: None,
        };
        match (xrun.evidence, path.last()) {
            (Evidence::ServerReported, None) => {
                if let Kernel::Missing(why) = kernel {
                    c.kernel_missing = Some(why.to_owned());
                }
                c.unexplained =
                    Some("the server reported an xrun but does not say which node was late".into());
            }
            (_, Some(root)) if root.role == Role::Driver => {
                let (kind, account) = driver_root(xrun, root, None, &kernel, threads);
                c.kind = if kind == Kind::NodeNotSignalled {
                    Kind::Unexplained
                } else {
                    kind
                };
                if c.kind == Kind::Unexplained {
                    c.unexplained = Some(
                        "every node finished in time and the driver's thread was neither late \
                         nor held off its CPU: the device or its driver was late"
                            .into(),
                    );
                }
                c.root = Some(account);
            }
            _ => {
                c.unexplained = Some(
                    "every node finished in time, so the device or its driver was late".into(),
                );
            }
        }
        return c;
    };
    let wait = node.wait_ns();
    // Its own end: the cycle's, or its signal plus a period when that is later (a node stamped
    // with the next cycle's signal).
    let own_end = xrun
        .deadline_ns
        .max(node.signal_ns.saturating_add(period_ns));
    let (busy, busy_at_least) = match node.busy_ns() {
        Some(b) => (Some(b), false),
        // Still running at the record: it worked at least until its end.
        None if node.awake_ns > 0 => (Some(own_end.saturating_sub(node.awake_ns)), true),
        None => (None, false),
    };
    // The node's span starts at its signal; a signal stamped by the next cycle (a whole period
    // or more after this one's start) starts it at the cycle's start instead, so the account
    // covers what kept it busy.
    // A node whose own count went up (PipeWire 0.3.72 and later) overran the cycle before the
    // record, whose stamps are already the next cycle's: its account starts a period earlier.
    let signal = if xrun.evidence == Evidence::NodeCount {
        xrun.cycle_start_ns.saturating_sub(period_ns)
    } else if node.signal_ns > 0
        && (node.signal_ns < xrun.cycle_start_ns + period_ns * 9 / 10 || node.awake_ns == 0)
    {
        // A node not yet started (signalled, never awake since) kept nothing busy before its
        // signal: its span starts there, wherever the signal falls.
        node.signal_ns
    } else {
        xrun.cycle_start_ns
    };
    let thread = mapping.as_ref().and_then(|m| m.thread.clone());
    // Whether the node's thread ran long in the cycles before this one (below).
    let mut ran_before = false;
    let (kernel_account, kernel_missing) = match (&kernel, thread.as_ref()) {
        (Kernel::Missing(why), _) => (None, Some((*why).to_owned())),
        (Kernel::Window(_, _), None) => (
            None,
            Some(
                "the node's thread is not known, so its kernel events cannot be picked out"
                    .to_owned(),
            ),
        ),
        (Kernel::Window(window, lookup), Some(thread)) => {
            let end = if node.busy_ns().is_some() {
                node.finish_ns
            } else {
                own_end
            };
            let audio_thread = AudioThread {
                role: node.name.clone(),
                tid: thread.tid,
                wake_ns: (node.awake_ns > 0).then_some(node.awake_ns),
                end_ns: node.busy_ns().map(|_| node.finish_ns).or(Some(end)),
                median_busy_ns: xrun.median_busy_ns,
            };
            let (mut account, _) =
                account_over(window, *lookup, audio_thread.clone(), signal, own_end);
            // Still running at the record, yet barely on its CPU in this cycle: the overrun the
            // server reports may be one that began cycles earlier (PipeWire 0.3 records a node
            // that ran 12 ms through the cycles after it, with stamps of the last one). When its
            // thread ran more than a whole period in the lead-in, that run is the account.
            let span_us = us(own_end.saturating_sub(signal));
            if busy_at_least && account.ran_us < span_us * 0.25 {
                let (before, _) = account_over(
                    window,
                    *lookup,
                    audio_thread,
                    signal.saturating_sub(CATCH_UP_NS),
                    own_end,
                );
                if before.ran_us >= us(period_ns) {
                    account = before;
                    ran_before = true;
                }
            }
            // A node that never started, and whose thread the kernel shows was never woken
            // (asleep, not waiting for a CPU), was not signalled: whoever should have is
            // followed.
            let never_woken = node.awake_ns == 0
                && first_wake(&window.events, thread.tid, signal, own_end).is_none()
                && account.ran_us < 100.0
                && !significant(account.waited_us, own_end.saturating_sub(signal));
            if never_woken && !xrun.signaller_path.is_empty() {
                path.truncate(1);
                path[0].finding = Finding::NotSignalled;
                path.extend(xrun.signaller_path.iter().cloned());
            }
            if contradicts(busy, &account) {
                (
                    None,
                    Some(
                        "the kernel's events lost this thread's switch-in (perf drops some \
                         events made in an idle CPU's context), so their account, which would \
                         say it never ran, is left out"
                            .to_owned(),
                    ),
                )
            } else {
                (Some(account), None)
            }
        }
    };
    // A node whose own thread mostly slept through its lateness (blocked, never woken, or not
    // on its CPU for the BUSY the server could only bound) waited on something: when the server's own thread, which drives the cycle, was held off
    // its CPU meanwhile, the driver is the root.
    let waited_on_something = !ran_before
        && (node.awake_ns == 0
            || kernel_account.as_ref().is_some_and(|k| {
                let span_us = us(own_end.saturating_sub(signal));
                // A BUSY the server could only bound ("at least", the node not marked finished)
                // that the kernel shows was not spent on the CPU was spent waiting.
                k.ran_us < span_us * 0.25 && (k.blocked_us > span_us * 0.3 || busy_at_least)
            }));
    let own_root = path.len() == 1;
    let mut through_driver = None;
    if own_root && waited_on_something {
        if let Some(step) = xrun
            .signaller_path
            .last()
            .filter(|s| s.role == Role::Driver)
        {
            let (kind, account) = driver_root(xrun, step, Some(node.signal_ns), &kernel, threads);
            if kind == Kind::DriverWokeLate && account.account.is_some() {
                path.truncate(1);
                path[0].finding = Finding::NotSignalled;
                path.push(step.clone());
                through_driver = Some((kind, Some(account), None));
            }
        }
    }
    let root = path.last().cloned();
    let (kind, root_account, unexplained) = match root {
        _ if through_driver.is_some() => through_driver.expect("checked"),
        None => (
            Kind::Unexplained,
            None,
            Some("no path was traced".to_owned()),
        ),
        Some(r) if r.role == Role::Driver => {
            let (kind, account) = driver_root(xrun, &r, Some(node.signal_ns), &kernel, threads);
            (kind, Some(account), None)
        }
        Some(r) if r.id != node.id => {
            let (kind, account) = upstream_root(xrun, &r, &kernel, threads, None);
            (kind, Some(account), None)
        }
        Some(r) => {
            let mut kind = own_kind(&r);
            // Stamps that say nothing (the next cycle's): the kernel's account of the node's
            // thread over the overrun decides.
            if let (Kind::Unexplained, Some(k)) = (kind, kernel_account.as_ref()) {
                let span = own_end.saturating_sub(signal);
                if k.main_culprit.as_ref().is_some_and(|c| c.kind != "idle")
                    && significant(k.waited_us + k.interrupt_us, span)
                {
                    kind = Kind::NodeWokeLate;
                } else if significant(k.ran_us, span) {
                    kind = Kind::NodeRanLong;
                }
            }
            let mut why = (kind == Kind::Unexplained).then(|| {
                "its signal, wait and work were each within its medians, and the driver started \
                 the cycle in time"
                    .to_owned()
            });
            // A BUSY the server could only bound, which the kernel shows was not spent on the
            // CPU (and no earlier run explains): it did not run long. Without a late driver to
            // root it in, nothing on file says what it waited for.
            if let (Kind::NodeRanLong, true, true, Some(k)) = (
                kind,
                busy_at_least,
                waited_on_something,
                kernel_account.as_ref(),
            ) {
                kind = Kind::Unexplained;
                why = Some(format!(
                    "the server reports it still running (BUSY at least {}), but its thread was \
                     on its CPU for {} of it, asleep {} and waiting for a CPU {}: it waited for \
                     something the trace does not show",
                    crate::words::dur(busy.map_or(0.0, us)),
                    crate::words::dur(k.ran_us),
                    crate::words::dur(k.blocked_us),
                    crate::words::dur(k.waited_us),
                ));
            }
            (kind, None, why)
        }
    };
    Card {
        xrun: xrun.clone(),
        kind,
        path,
        app_name,
        mapping,
        wait_us: wait.map(us),
        busy_us: busy.map(us),
        busy_at_least,
        period_us: us(period_ns),
        kernel: kernel_account,
        kernel_missing,
        root: root_account,
        unexplained,
        faults: None,
    }
}

/// A root the card names, as `(kind, name)` for the summary: the driver, a node, or nothing.
pub fn root_name(c: &Card) -> Option<String> {
    c.root_step().map(|s| s.name.clone())
}
