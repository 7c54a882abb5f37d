//! A drift event: what changed, on what, from which value to which, and when; any thread.

use serde::{Deserialize, Serialize};

/// What kind of change it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// A watched thread's scheduling policy or real-time priority changed.
    Sched,
    /// A watched thread is gone (its process ended or the server restarted).
    ThreadGone,
    /// A cpufreq policy's governor changed.
    Governor,
    /// A cpufreq policy's energy_performance_preference changed.
    Epp,
    /// /sys/firmware/acpi/platform_profile changed.
    PlatformProfile,
    /// The machine was suspended and resumed.
    Resume,
    /// The set of online CPUs changed.
    CpuOnline,
    /// A CPU's thermal-throttle counter grew.
    Throttle,
    /// The graph's quantum (buffer size) changed.
    Quantum,
    /// The graph's sample rate changed.
    Rate,
    /// A node appeared.
    NodeAdded,
    /// A node went away.
    NodeRemoved,
}

impl DriftKind {
    /// Its name in the history and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DriftKind::Sched => "sched",
            DriftKind::ThreadGone => "thread_gone",
            DriftKind::Governor => "governor",
            DriftKind::Epp => "epp",
            DriftKind::PlatformProfile => "platform_profile",
            DriftKind::Resume => "resume",
            DriftKind::CpuOnline => "cpu_online",
            DriftKind::Throttle => "throttle",
            DriftKind::Quantum => "quantum",
            DriftKind::Rate => "rate",
            DriftKind::NodeAdded => "node_added",
            DriftKind::NodeRemoved => "node_removed",
        }
    }
}

/// One change, with its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftEvent {
    /// When it was seen (the poll that saw it), ns since the Unix epoch. For a resume, when the
    /// machine came back.
    pub time_ns: i64,
    /// What changed.
    pub kind: DriftKind,
    /// On what: `data-loop.0 (tid 7447)`, `policy1`, `cpu3 core`, a node's name…
    pub subject: String,
    /// The value before, as read (`SCHED_FIFO 88`, `performance`, `0-3`, `1024`…).
    pub before: String,
    /// The value after.
    pub after: String,
}

impl DriftEvent {
    /// The change in one sentence, without its time.
    pub fn words(&self) -> String {
        let (s, b, a) = (&self.subject, &self.before, &self.after);
        match self.kind {
            DriftKind::Sched if a.starts_with("SCHED_FIFO") || a.starts_with("SCHED_RR") => {
                if b.starts_with("SCHED_FIFO") || b.starts_with("SCHED_RR") {
                    format!("{s} changed real-time priority: {b} → {a}")
                } else {
                    format!("{s} got real-time scheduling back: {b} → {a}")
                }
            }
            DriftKind::Sched => format!("{s} lost real-time scheduling: {b} → {a}"),
            DriftKind::ThreadGone => format!("{s} is gone (it ran {b})"),
            DriftKind::Governor => format!("cpufreq {s}: governor {b} → {a}"),
            DriftKind::Epp => format!("cpufreq {s}: energy preference {b} → {a}"),
            DriftKind::PlatformProfile => format!("platform profile {b} → {a}"),
            DriftKind::Resume => format!("the machine resumed after {a} suspended"),
            DriftKind::CpuOnline => format!("online CPUs {b} → {a}"),
            DriftKind::Throttle => format!("{s} thermally throttled: count {b} → {a}"),
            DriftKind::Quantum => format!("quantum {b} → {a}"),
            DriftKind::Rate => format!("sample rate {b} → {a}"),
            DriftKind::NodeAdded => format!("node {s} appeared"),
            DriftKind::NodeRemoved => format!("node {s} went away"),
        }
    }
}
