//! Where `watch` gets its cycles: PipeWire's profiler or a passive JACK client, each compiled in
//! by its cargo feature (`pipewire_on.rs`/`pipewire_off.rs`, `jack_on.rs`/`jack_off.rs`; the
//! "off" files say how to get a build that has it). Runs on the main thread (PipeWire's loop has
//! a thread of its own inside the pipewire crate).

use std::path::PathBuf;
use std::time::Duration;
use xrunlab_watch::jack_chain::Period;
use xrunlab_watch::{Cycle, NodeInfo};

#[cfg(feature = "jack")]
#[path = "jack_on.rs"]
mod jack;
#[cfg(not(feature = "jack"))]
#[path = "jack_off.rs"]
mod jack;
#[cfg(feature = "pipewire")]
#[path = "pipewire_on.rs"]
mod pipewire;
#[cfg(not(feature = "pipewire"))]
#[path = "pipewire_off.rs"]
mod pipewire;

pub use jack::open as open_jack;
pub use pipewire::open as open_pipewire;

/// What a server said, in the order it said it.
// Only the PipeWire source reports cycles, nodes, gaps and notes: a build without the
// `pipewire` feature (the README's `cargo run --release`) constructs them nowhere.
#[cfg_attr(not(feature = "pipewire"), allow(dead_code))]
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
    fn chain(&mut self) -> Option<JackChain> {
        None
    }
    /// Whether the server reports each node's timing itself (PipeWire's profiler); JACK2's
    /// comes only from the kernel's wake chain.
    fn reports_timing(&self) -> bool {
        true
    }
}

/// What rebuilding JACK2 clients' timing from the wake chain needs.
pub struct JackChain {
    /// The server's real-time thread.
    pub server_tid: i32,
    /// Each client: node id, name and its process's real-time threads.
    pub clients: Vec<(u32, String, Vec<i32>)>,
    /// The server's period.
    pub period: Period,
}

/// PipeWire's socket as its clients find it: `PIPEWIRE_REMOTE` (a name, or an absolute path)
/// in `PIPEWIRE_RUNTIME_DIR`, else `XDG_RUNTIME_DIR`; `pipewire-0` by default.
pub fn pipewire_socket() -> Option<PathBuf> {
    let name = std::env::var("PIPEWIRE_REMOTE").unwrap_or_else(|_| "pipewire-0".into());
    if name.starts_with('/') {
        return Some(PathBuf::from(name));
    }
    let dir =
        std::env::var_os("PIPEWIRE_RUNTIME_DIR").or_else(|| std::env::var_os("XDG_RUNTIME_DIR"))?;
    Some(PathBuf::from(dir).join(name))
}

/// Whether a PipeWire server answers on its socket (what `--server auto` asks first).
pub fn pipewire_answers() -> bool {
    pipewire_socket().is_some_and(|p| std::os::unix::net::UnixStream::connect(p).is_ok())
}
