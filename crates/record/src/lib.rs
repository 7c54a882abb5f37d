//! The store side of `xrunlab record`: [`Recorder`] takes what watch's analysis sees (cards,
//! cycles, the graph's quantum and rate, nodes coming and going, the server going and coming
//! back) as [`Input`]s on a bounded channel, polls the [`xrunlab_drift::DriftMonitor`] between
//! them, and writes the history rows, each card with the drift that precedes it; [`Metrics`]
//! counts the same things for Prometheus, served read-only by [`serve_metrics`]. The recorder
//! runs on its own store thread, the metrics endpoint on a small tokio runtime of its own;
//! nothing here runs on an audio thread. Memory is bounded: the recent drift is a fixed-size
//! ring, the metrics' series are capped.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod exposition;
mod metrics;
mod recorder;
mod serve;
mod snapshot_gate;

pub use exposition::escape_label_value;
pub use metrics::{Metrics, MAX_XRUN_SERIES, WAKE_DELAY_BUCKETS};
pub use recorder::{
    spawn, Input, Recorder, RecorderConfig, RecorderHandle, Stats, XrunInput, INPUT_CAPACITY,
};
pub use serve::{serve_metrics, MetricsError, MetricsServer};
pub use snapshot_gate::{Snapshot, SnapshotGate};
