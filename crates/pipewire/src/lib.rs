//! xrunlab's PipeWire side of `watch`: a subscription to a server's profiler, which reports the
//! timing of every node in every driver cycle, and to its registry, which names the nodes and
//! their processes. [`Profiler`] runs PipeWire's main loop on a thread of its own and hands out
//! [`Event`]s; [`parse_profile`] reads one profiler pod (pure, used by the loop and by tests);
//! [`PipeWireSource`] is watch's [`Source`](xrunlab_watch::Source) on it.
//! Nothing here runs on an audio thread: the server's real-time threads write the profiler's
//! records into a ring that the server flushes on its main loop, which sends them to us.
//!
//! Building needs libpipewire-0.3-dev, libspa-0.2-dev and libclang (the `pipewire` crate runs
//! bindgen), which is why the binary takes this crate only with its `pipewire` feature.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod client;
pub mod record;
pub mod watch_source;

pub use client::{Error, Event, NodeInfo, Options, Profiler, PROFILER_INTERFACE, READ_EVERY};
pub use record::{parse_profile, Block, Clock, Info, PodError, ProfilerRecord, Status};
pub use watch_source::PipeWireSource;
