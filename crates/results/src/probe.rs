//! The result file of `xrunlab probe wakeup` as `compare` reads it back (the experiments'
//! envelope, schema [`SCHEMA`], kind [`KIND`]): the machine fingerprint, the settings that make
//! two probes comparable, and each thread's latencies as HdrHistogram text. The lab crate
//! writes the file; this type reads only what compare needs. Read on the main thread.

use crate::histogram::EncodedHistogram;
use crate::read::{parse_typed, ReadError};
use serde::Deserialize;
use std::path::Path;
use xrunlab_sys::{Fingerprint, Provenance};

pub use crate::lab::SCHEMA;
/// The experiment this type reads.
pub const KIND: &str = "probe.wakeup";

/// One measuring thread.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WakeupThread {
    /// 0-based.
    pub index: usize,
    /// Every latency in µs.
    pub latency_us: EncodedHistogram,
}

/// What the probe measured, and how.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WakeupSection {
    /// The settings as written (threads, class, interval, ...), compared as a workload.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The machine as the probe found it.
    pub fingerprint: Fingerprint,
    /// One entry per thread.
    pub threads: Vec<WakeupThread>,
}

/// A `probe wakeup` result as read back.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WakeupFile {
    /// [`SCHEMA`].
    pub schema: String,
    /// [`KIND`].
    pub kind: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// True when it was stopped before every loop ran.
    pub incomplete: bool,
    /// The probe.
    pub result: WakeupSection,
}

/// Reads `text` (from `path`) as a probe-wakeup result; an experiment of another kind is
/// refused naming the field `kind`.
pub fn parse_wakeup(path: &Path, text: &str) -> Result<WakeupFile, ReadError> {
    crate::lab::check_kind(path, text, KIND)?;
    parse_typed(path, text, SCHEMA)
}
