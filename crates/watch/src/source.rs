//! Where a [`crate::Watcher`] gets its cycles: the [`Source`] trait, which each server's
//! adapter implements beside its client (PipeWire's profiler in `xrunlab-pipewire`, JACK2's
//! passive client in `xrunlab-jack`), as the engine's `Device` is implemented beside each
//! server. Called on watch's main thread; an adapter's own server loop may run on a thread of
//! its own and feed a channel.

use crate::jack_chain::Period;
use crate::model::{Cycle, NodeInfo};
use std::time::Duration;

/// What a server said, in the order it said it.
#[derive(Debug)]
pub enum SourceEvent {
    /// One cycle's timing of every node.
    Cycle(Cycle),
    /// A node appeared or changed.
    Node(NodeInfo),
    /// A node went away.
    NodeRemoved(u32),
    /// The server reported an xrun without saying which node (JACK2), at this CLOCK_MONOTONIC ns.
    ServerXrun(u64),
    /// Cycles the server's profiler dropped.
    Gap(u64),
    /// Something worth telling the user that is not an xrun (an unreadable record).
    Note(String),
    /// The server went away; nothing follows.
    Ended(String),
}

/// A server being watched.
pub trait Source {
    /// The next event, or `None` when none came within `timeout`.
    fn next(&mut self, timeout: Duration) -> Option<SourceEvent>;
    /// `PipeWire 0.3.65 (profiler)`, `JACK server "default"`...
    fn describe(&self) -> String;
    /// For JACK: the server's real-time thread, each client's real-time threads (candidates:
    /// the wake chain shows which one runs the callback) and the period, to rebuild the clients'
    /// timing from the kernel's events. `None` for servers that report timing themselves.
    fn chain(&mut self) -> Option<WakeChain> {
        None
    }
    /// Whether the server reports each node's timing itself (PipeWire's profiler); JACK2's
    /// comes only from the kernel's wake chain.
    fn reports_timing(&self) -> bool {
        true
    }
    /// The audio server's own process, whose real-time thread runs the driver (PipeWire's data
    /// loop, JACK2's process thread), where it can be found.
    fn server_pid(&mut self) -> Option<i32> {
        None
    }
    /// Cycles the server ran since the last call (or since it opened), from a clock of its own
    /// where it keeps one (JACK2's frame counter), for callers that do not see every cycle;
    /// `None` where it has none.
    fn cycles_run(&mut self) -> Option<u64> {
        None
    }
    /// The name of the server's process as users know it (`pipewire`, `jackd`).
    fn server_name(&self) -> &str {
        "the server"
    }
}

/// What rebuilding JACK2 clients' timing from the wake chain needs.
#[derive(Debug, Clone)]
pub struct WakeChain {
    /// The server's process.
    pub server_pid: i32,
    /// The server's real-time thread.
    pub server_tid: i32,
    /// Each client: node id, name and its process's real-time threads.
    pub clients: Vec<(u32, String, Vec<i32>)>,
    /// The server's period.
    pub period: Period,
}
