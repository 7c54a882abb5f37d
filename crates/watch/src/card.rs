//! One card per xrun, as data: which node was late, which case it is, the figures behind it, and
//! the kernel's account of its thread where events were recorded (trace's `blame`, the same
//! analysis `run --explain` uses). Built on watch's collector thread; [`crate::words`] renders it.

use crate::detect::{Evidence, Xrun};
use crate::mapping::Mapping;
use serde::{Deserialize, Serialize};
use xrunlab_trace::{blame, AudioThread, BlameCard, BlameInput, TaskLookup, Window};

/// Which kind of lateness it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// Signalled, but it never started in its cycle.
    NeverWoke,
    /// It started late: its WAIT grew more than its BUSY.
    WokeLate,
    /// It started in time and worked too long: its BUSY grew more than its WAIT.
    RanLong,
    /// Every node finished in time: the device or its driver was late.
    DriverSide,
    /// The server reported an xrun, and nothing says which node was late (JACK2 without kernel
    /// events).
    Unattributed,
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
}

/// One xrun's card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// The xrun as the cycles showed it.
    pub xrun: Xrun,
    /// Which case it is.
    pub case: Case,
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
    /// The kernel's account, where events were recorded and the thread is known.
    pub kernel: Option<KernelAccount>,
    /// Why there is no kernel account, in words that say how to get one.
    pub kernel_missing: Option<String>,
    /// The node's thread's page faults over a span that holds the xrun, from its procfs
    /// counters (set by the caller, which samples them; they are not per cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<Faults>,
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
    /// later: events past the deadline show whether a thread still running there had run.
    Window(&'a Window, &'a dyn TaskLookup),
    /// No events: the reason, said to the user as is.
    Missing(&'a str),
}

fn account(card: &BlameCard) -> KernelAccount {
    let thread = card.threads.first();
    KernelAccount {
        verdict: card.verdict.clone(),
        main_culprit: card.main_culprit.as_ref().map(|c| KernelCulprit {
            kind: format!("{:?}", c.who.kind).to_lowercase(),
            name: c.who.name.clone(),
            pid: c.who.pid,
            policy: c.who.policy.clone(),
            cpu: c.cpu,
            us: c.us,
        }),
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
    }
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

/// Builds the card of `xrun`, with the node's thread from `mapping` and the kernel's view.
pub fn card(
    xrun: &Xrun,
    app_name: Option<String>,
    mapping: Option<Mapping>,
    kernel: Kernel<'_>,
) -> Card {
    let period_ns = u64::from(xrun.quantum) * 1_000_000_000 / u64::from(xrun.rate.max(1));
    let Some(node) = &xrun.node else {
        let (case, kernel_missing) = match (xrun.evidence, kernel) {
            (Evidence::ServerReported, Kernel::Missing(why)) => {
                (Case::Unattributed, Some(why.to_owned()))
            }
            _ => (Case::DriverSide, None),
        };
        return Card {
            xrun: xrun.clone(),
            case,
            app_name,
            mapping: None,
            wait_us: None,
            busy_us: None,
            busy_at_least: false,
            period_us: us(period_ns),
            kernel: None,
            kernel_missing,
            faults: None,
        };
    };
    let wait = node.wait_ns();
    let (busy, busy_at_least) = match node.busy_ns() {
        Some(b) => (Some(b), false),
        // Still running at the record: it worked at least until the deadline.
        None if node.awake_ns > 0 => (Some(xrun.deadline_ns.saturating_sub(node.awake_ns)), true),
        None => (None, false),
    };
    let case = match (wait, busy) {
        (None, _) => Case::NeverWoke,
        (Some(w), b) => {
            let wait_excess = w.saturating_sub(xrun.median_wait_ns.unwrap_or(0));
            let busy_excess = b
                .unwrap_or(0)
                .saturating_sub(xrun.median_busy_ns.unwrap_or(0));
            if wait_excess > busy_excess {
                Case::WokeLate
            } else {
                Case::RanLong
            }
        }
    };
    let (kernel, kernel_missing) = match (kernel, mapping.as_ref().and_then(|m| m.thread.as_ref()))
    {
        (Kernel::Missing(why), _) => (None, Some(why.to_owned())),
        (Kernel::Window(_, _), None) => (
            None,
            Some(
                "the node's thread is not known, so its kernel events cannot be picked out"
                    .to_owned(),
            ),
        ),
        (Kernel::Window(window, lookup), Some(thread)) => {
            let signal = if node.signal_ns > 0 {
                node.signal_ns
            } else {
                xrun.cycle_start_ns
            };
            let threads = [AudioThread {
                role: node.name.clone(),
                tid: thread.tid,
                wake_ns: (node.awake_ns > 0).then_some(node.awake_ns),
                end_ns: node.busy_ns().map(|_| node.finish_ns),
                median_busy_ns: xrun.median_busy_ns,
            }];
            let end = if node.busy_ns().is_some() {
                node.finish_ns
            } else {
                xrun.deadline_ns
            };
            let blamed = blame(
                &BlameInput {
                    period_start_ns: signal,
                    deadline_ns: xrun.deadline_ns,
                    render_end_ns: end.max(xrun.deadline_ns),
                    threads: &threads,
                    window,
                    notes: &[],
                },
                lookup,
            );
            let account = account(&blamed);
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
    Card {
        xrun: xrun.clone(),
        case,
        app_name,
        mapping,
        wait_us: wait.map(us),
        busy_us: busy.map(us),
        busy_at_least,
        period_us: us(period_ns),
        kernel,
        kernel_missing,
        faults: None,
    }
}
