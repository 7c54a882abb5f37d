//! The analysis behind `xrunlab watch`: xruns found in a live graph's per-cycle timing
//! ([`Detector`]), the thread that does each node's work ([`mapping`]), and one card per xrun
//! ([`card()`]) with the kernel's account of that thread from trace's `blame`, the analysis
//! `run --explain` and the dashboard use too. Server-neutral: PipeWire's profiler and JACK2's
//! kernel wake chain are turned into [`Cycle`]s by their adapters, which implement [`Source`]
//! beside their servers' clients; the [`Watcher`] is the loop `watch` and `record` run. Runs on
//! the caller's thread (watch's main thread); nothing here runs on an audio thread, and its state
//! is bounded (per-node histograms of fixed size), so a 24-hour watch stays flat.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod card;
pub mod chain;
pub mod detect;
pub mod jack_chain;
pub mod mapping;
pub mod model;
pub mod snapshot;
pub mod source;
pub mod summary;
pub mod watcher;
pub mod words;

pub use card::{
    card, Card, Faults, Kernel, KernelAccount, KernelCulprit, Kind, NoThreads, RootAccount,
    RootThreads,
};
pub use chain::{Finding, Role, Step};
pub use detect::{Detector, Evidence, NodeStats, Xrun};
pub use mapping::{confirm, map_node, Confidence, Mapping, RtThread};
pub use model::{Cycle, NodeInfo, NodeStatus, NodeTiming};
pub use source::{Source, SourceEvent, WakeChain};
pub use summary::{CulpritLine, NodeSummary, Summary, Tally};
pub use watcher::{KernelSide, WatchEvent, Watcher};
