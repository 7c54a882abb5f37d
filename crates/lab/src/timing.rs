//! Clocks, sleeps and scheduling classes for the measuring threads: CLOCK_MONOTONIC and per-thread
//! CPU time reads, absolute-deadline sleeps, and applying a scheduling class to the calling thread;
//! called on the measuring threads, allocation-free except [`Class::apply`] (once at thread start).

use serde::Serialize;
use xrunlab_sys::{Outcome, RtPolicy, RtRequest};

/// CLOCK_MONOTONIC now, thread CPU time and absolute-deadline sleeps: the engine's own
/// (allocation-free), so probes and the engine read one clock the same way.
pub use xrunlab_engine::rt::clock::{now_ns as mono_ns, sleep_until, thread_cpu_ns};

/// A timespec for `ns` nanoseconds.
pub fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// A scheduling class a measuring thread asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum Class {
    /// SCHED_OTHER at this nice value.
    Other {
        /// -20..=19.
        nice: i32,
    },
    /// SCHED_BATCH (nice 0).
    Batch,
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO at this priority.
    Fifo {
        /// 1..=99.
        priority: u8,
    },
    /// SCHED_RR at this priority.
    Rr {
        /// 1..=99.
        priority: u8,
    },
}

impl Class {
    /// A short name, e.g. "other-nice19", "fifo-80".
    pub fn label(self) -> String {
        match self {
            Class::Other { nice } => format!("other-nice{nice}"),
            Class::Batch => "batch".into(),
            Class::Idle => "idle".into(),
            Class::Fifo { priority } => format!("fifo-{priority}"),
            Class::Rr { priority } => format!("rr-{priority}"),
        }
    }

    /// Applies the class (and `cpus`, if given) to the calling thread; the outcome says what it
    /// runs with when refused. Allocates: call once at thread start.
    pub fn apply(self, cpus: Option<&[usize]>) -> SchedObtained {
        let (priority, policy) = match self {
            Class::Fifo { priority } => (Some(priority), RtPolicy::Fifo),
            Class::Rr { priority } => (Some(priority), RtPolicy::RoundRobin),
            _ => (None, RtPolicy::Fifo),
        };
        let report = xrunlab_sys::apply_to_current_thread(&RtRequest {
            priority,
            policy,
            cpus: cpus.map(<[usize]>::to_vec),
            ..RtRequest::default()
        });
        let class = match self {
            Class::Fifo { .. } | Class::Rr { .. } => report.priority.clone(),
            Class::Other { nice } => xrunlab_sys::sched::set_current_thread_nice(nice),
            Class::Batch => set_policy(libc::SCHED_BATCH, "SCHED_BATCH"),
            Class::Idle => set_policy(libc::SCHED_IDLE, "SCHED_IDLE"),
        };
        SchedObtained {
            tid: report.tid,
            requested: self.label(),
            class,
            affinity: report.affinity,
        }
    }
}

pub use xrunlab_results::lab::SchedObtained;

/// Switches the calling thread to the non-real-time `policy` (SCHED_BATCH or SCHED_IDLE).
fn set_policy(policy: libc::c_int, name: &str) -> Outcome {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a live sched_param the kernel only reads.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Outcome::Applied {
            detail: name.to_string(),
        }
    } else {
        Outcome::Refused {
            reason: format!(
                "sched_setscheduler({name}) failed: {}",
                std::io::Error::last_os_error()
            ),
            fallback: "SCHED_OTHER".into(),
        }
    }
}
