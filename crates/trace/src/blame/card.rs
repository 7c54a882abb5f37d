//! The blame card's types: the audio threads it is asked about, and the card itself with each
//! thread's account, its culprits, sleeps and migrations, and the cause its verdict names. Data
//! only; built by [`super::blame()`] on the caller's thread (the engine's explain collector,
//! watch's main thread), never on an audio thread.

use serde::Serialize;

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
    /// The part of `waited_us` behind tasks of a lower priority than this real-time thread's,
    /// which the kernel did not preempt for it: kernel code on a kernel without full preemption
    /// (`preempt=none` or `voluntary`), a section with preemption off, or real-time throttling.
    pub not_preempted_us: f64,
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
