//! xrunlab-engine: AudioPerfLab's render cycle on Linux — driver and processing threads,
//! workarounds, devices, and per-buffer measurements; see each module for the thread that runs it.
//!
//! The real-time path lives in [`rt`] and nowhere else; its rules are written at its top.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod busy;
pub mod collector;
pub mod config;
pub mod device;
pub mod engine;
pub mod explain;
pub mod report;
pub mod rt;
pub mod summary;

pub use collector::{
    drain_loop, hooks, DrainEnd, DrainSink, DrainSource, Hooks, Injection, InjectionKind, Repeat,
    RunCollector, Schedule, Span, Totals, DRAIN_INTERVAL,
};
pub use config::{BusyConfig, ConfigError, DriverMode, EngineConfig, Preset, RtConfig};
pub use device::{Device, DeviceError, DeviceErrorKind, DeviceInfo, DeviceSignals};
pub use engine::{ChordInfo, ConfigApplied, Engine, EngineError, ProcessRt, ThreadInfo};
pub use report::{BufferReport, ThreadReport, ThreadRole};
pub use rt::driver::{Cycle, CycleOutcome, Renderer, BURST_SECONDS};
pub use rt::records::BufferRecord;
pub use summary::{Distribution, Percentiles, RunStats, Scale, Summary, ThreadSummary};
