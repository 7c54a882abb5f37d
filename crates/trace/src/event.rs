//! Decoded kernel events: plain, compact values that the reader thread produces and the blame
//! and Perfetto code (on the caller's non-real-time thread) consume.

use serde::{Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// A task's command name as the kernel stores it (at most 15 bytes plus NUL), kept inline so a
/// window of events does not allocate per event.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Comm {
    bytes: [u8; 16],
    len: u8,
}

impl Comm {
    /// Copies up to 16 bytes of `name` (the kernel's TASK_COMM_LEN); longer names are cut.
    pub fn new(name: &[u8]) -> Comm {
        let len = name.len().min(16);
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&name[..len]);
        Comm {
            bytes,
            len: len as u8,
        }
    }

    /// The name as text (invalid UTF-8 replaced).
    pub fn as_string(&self) -> String {
        String::from_utf8_lossy(&self.bytes[..usize::from(self.len)]).into_owned()
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(
            &self.bytes[..usize::from(self.len)],
        ))
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl Serialize for Comm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

fn serialize_arc_str<S: Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s)
}

/// `common_flags` bits of a record made in hard or soft interrupt context
/// (TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ).
pub const FLAGS_IN_INTERRUPT: i64 = 0x08 | 0x10;

/// `prev_state` of a task that was switched out while still runnable without being preempted
/// (a yield); a preempted one is `R+` (see [`still_runnable`]).
pub const TASK_RUNNING: i64 = 0;

/// The sleep states' bits in a switch-out's `prev_state` (S D T t X Z P I, 0x01-0x80).
const SLEEP_STATE_BITS: i64 = 0xff;

/// Whether a switch-out with this `prev_state` left the task runnable: `R` (0), or `R+`, a task
/// preempted while it ran, which kernels since 4.14 report as TASK_REPORT_MAX (0x100; older ones
/// set a higher bit), with no sleep state's bit. Read as a sleep, a preempted audio thread's
/// wait behind a real-time hog became "blocked", and its card named no culprit.
pub fn still_runnable(prev_state: i64) -> bool {
    prev_state & SLEEP_STATE_BITS == 0
}

/// What happened. Field names follow the kernel's tracepoint fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// `sched:sched_switch`: `prev` stops running on this CPU and `next` starts.
    Switch {
        /// Name of the task that stopped.
        prev_comm: Comm,
        /// Its thread id (the kernel's "pid").
        prev_tid: i32,
        /// Its kernel priority (0..=99 real-time, 100..=139 normal, -1 deadline).
        prev_prio: i32,
        /// Its state: [`TASK_RUNNING`] when preempted, otherwise the sleep state bits.
        prev_state: i64,
        /// Name of the task that starts.
        next_comm: Comm,
        /// Its thread id.
        next_tid: i32,
        /// Its kernel priority.
        next_prio: i32,
    },
    /// `sched:sched_waking` (`waking` true: the wake-up was requested, on the waker's CPU) or
    /// `sched:sched_wakeup` (`waking` false: the task is now runnable on `target_cpu`).
    Wakeup {
        /// The woken task's name.
        comm: Comm,
        /// Its thread id.
        tid: i32,
        /// Its kernel priority.
        prio: i32,
        /// The CPU whose run queue it goes to.
        target_cpu: i32,
        /// True for `sched_waking`, false for `sched_wakeup`.
        waking: bool,
        /// The thread that ran the wake-up (the record's `common_pid`); when `in_interrupt`,
        /// merely the thread the interrupt happened to land on.
        waker_tid: i32,
        /// The wake-up ran in hard or soft interrupt context (a timer, a device).
        in_interrupt: bool,
    },
    /// `sched:sched_migrate_task`: a task moved between run queues.
    Migrate {
        /// The task's name.
        comm: Comm,
        /// Its thread id.
        tid: i32,
        /// Its kernel priority.
        prio: i32,
        /// Where it was.
        orig_cpu: i32,
        /// Where it goes.
        dest_cpu: i32,
    },
    /// `irq:irq_handler_entry`.
    IrqEntry {
        /// IRQ number.
        irq: i32,
        /// Handler name, e.g. `virtio0-input.0`.
        #[serde(serialize_with = "serialize_arc_str")]
        name: Arc<str>,
    },
    /// `irq:irq_handler_exit`.
    IrqExit {
        /// IRQ number.
        irq: i32,
    },
    /// `irq:softirq_entry`.
    SoftirqEntry {
        /// Softirq vector (see [`softirq_name`]).
        vec: u32,
    },
    /// `irq:softirq_exit`.
    SoftirqExit {
        /// Softirq vector.
        vec: u32,
    },
    /// `timer:hrtimer_expire_entry`: a high-resolution timer callback starts.
    HrtimerEntry {
        /// Kernel address of the callback (no symbol lookup: kallsyms may be hidden).
        function: u64,
    },
    /// `timer:hrtimer_expire_exit`.
    HrtimerExit,
    /// `power:cpu_idle`: `state` is the idle state entered, or `u32::MAX` on exit from idle.
    CpuIdle {
        /// Idle state index, `u32::MAX` (`PWR_EVENT_EXIT`) when leaving idle.
        state: u32,
    },
    /// `power:cpu_frequency`: the CPU's frequency changed.
    CpuFrequency {
        /// New frequency in kHz.
        khz: u32,
        /// The CPU it applies to.
        cpu_id: u32,
    },
    /// The kernel dropped `count` events here because the reader fell behind (PERF_RECORD_LOST).
    Lost {
        /// How many events were dropped.
        count: u64,
    },
}

/// One kernel event on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEvent {
    /// CLOCK_MONOTONIC nanoseconds, the engine's clock.
    pub ts_ns: u64,
    /// CPU the event was recorded on.
    pub cpu: u16,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Names of the softirq vectors, as the kernel prints them (`include/linux/interrupt.h`).
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The softirq's name, e.g. `NET_RX` for 3; unknown vectors as `softirq N`.
pub fn softirq_name(vec: u32) -> String {
    SOFTIRQ_NAMES
        .get(vec as usize)
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| format!("softirq {vec}"))
}

/// The sleep state letter(s) the kernel prints for a `prev_state` (`R` when preempted).
pub fn state_letters(prev_state: i64) -> String {
    const LETTERS: [(i64, char); 8] = [
        (0x01, 'S'),
        (0x02, 'D'),
        (0x04, 'T'),
        (0x08, 't'),
        (0x10, 'X'),
        (0x20, 'Z'),
        (0x40, 'P'),
        (0x80, 'I'),
    ];
    let s: String = LETTERS
        .iter()
        .filter(|(bit, _)| prev_state & bit != 0)
        .map(|(_, c)| *c)
        .collect();
    if s.is_empty() {
        "R".to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_cuts_at_sixteen_bytes_and_prints_as_text() {
        assert_eq!(Comm::new(b"xrl-hog").to_string(), "xrl-hog");
        assert_eq!(
            Comm::new(b"a-very-long-thread-name").to_string(),
            "a-very-long-thre"
        );
        assert_eq!(serde_json::to_string(&Comm::new(b"sh")).unwrap(), "\"sh\"");
    }

    #[test]
    fn an_event_stays_small_so_the_window_stays_bounded() {
        // TraceOptions documents about 80 bytes per event for its memory bound.
        assert!(
            std::mem::size_of::<TraceEvent>() <= 80,
            "{}",
            std::mem::size_of::<TraceEvent>()
        );
    }

    #[test]
    fn names_for_softirqs_and_states() {
        assert_eq!(softirq_name(3), "NET_RX");
        assert_eq!(softirq_name(42), "softirq 42");
        assert_eq!(state_letters(0), "R");
        assert_eq!(state_letters(1), "S");
        assert_eq!(state_letters(2), "D");
    }
}
