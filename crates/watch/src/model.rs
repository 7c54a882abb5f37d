//! The server-neutral picture of one graph cycle that watch analyses: each node's signal, awake
//! and finish times and state, as PipeWire's profiler reports them and as watch rebuilds them for
//! JACK2 from the kernel's wake chain. Plain data, built on watch's main thread (and record's).

use serde::{Deserialize, Serialize};

/// A node's state when the cycle's record was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Not triggered in this cycle.
    NotTriggered,
    /// Triggered but not yet running.
    Triggered,
    /// Running.
    Awake,
    /// Done.
    Finished,
    /// Not scheduled.
    Inactive,
    /// A state this code does not know (the server's number).
    Unknown(i32),
}

/// One node's timing in one cycle. Times are CLOCK_MONOTONIC ns; 0 means "not reported".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTiming {
    /// The server's node id.
    pub id: u32,
    /// The node's name.
    pub name: String,
    /// When it was signalled (triggered).
    pub signal_ns: u64,
    /// When it woke up and started processing.
    pub awake_ns: u64,
    /// When it finished.
    pub finish_ns: u64,
    /// Its state when the record was taken.
    pub status: NodeStatus,
    /// Its own xrun count, where the server reports one (PipeWire 0.3.72 and later).
    pub xruns: Option<u32>,
}

impl NodeTiming {
    /// Awake − signal, when both are known and in order: the scheduling delay (pw-top's WAIT).
    pub fn wait_ns(&self) -> Option<u64> {
        (self.signal_ns > 0 && self.awake_ns >= self.signal_ns)
            .then(|| self.awake_ns - self.signal_ns)
    }

    /// Finish − awake, when this cycle's finish is known (pw-top's BUSY). A node still running
    /// when the record was taken carries the previous cycle's finish, which is before its awake.
    pub fn busy_ns(&self) -> Option<u64> {
        (self.awake_ns > 0 && self.finish_ns >= self.awake_ns)
            .then(|| self.finish_ns - self.awake_ns)
    }
}

/// One driver cycle of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cycle {
    /// The server's cycle counter (or watch's own count).
    pub seq: u64,
    /// Sample rate, Hz.
    pub rate: u32,
    /// Frames per cycle.
    pub quantum: u32,
    /// The driver's timing; its signal is the cycle's start.
    pub driver: NodeTiming,
    /// Every follower's timing.
    pub followers: Vec<NodeTiming>,
    /// The driver's xrun count, where the server reports one.
    pub driver_xruns: Option<u32>,
    /// When the driver was due to start this cycle, ns: PipeWire's clock gives it (the timer's
    /// expiry its driver was set for); for JACK2 it is the previous cycle's start plus one
    /// period. `None` where nothing says.
    #[serde(default)]
    pub expected_start_ns: Option<u64>,
}

impl Cycle {
    /// The cycle's length, ns.
    pub fn period_ns(&self) -> u64 {
        u64::from(self.quantum) * 1_000_000_000 / u64::from(self.rate.max(1))
    }
}

/// A node of the graph: its name and the process behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The server's node id.
    pub id: u32,
    /// The node's name.
    pub name: String,
    /// The application's name, if the server knows it.
    pub app_name: Option<String>,
    /// The process behind it, if known.
    pub pid: Option<i32>,
}
