//! `xrunlab watch`'s result file (schema [`SCHEMA`]): the server watched, how long and why it
//! ended, whether the kernel's events were recorded, and the end-of-watch [`Summary`] (xruns
//! per node, the card kinds, the kernel's top culprits, what delayed the server's own threads);
//! written by the binary at each checkpoint
//! and at the end, read back typed. Used on the main thread.

use crate::read::{parse_typed_any, read_text, ReadError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use xrunlab_sys::Provenance;

/// Version of the watch result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.watch/1";

/// The same layout's name before it followed the `name/N` pattern of every other schema;
/// files written under it are still read.
pub const SCHEMA_BEFORE_RENAME: &str = "xrunlab.watch.v1";

/// One node's line in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Node id.
    pub id: u32,
    /// Node name.
    pub name: String,
    /// Its process, if known.
    pub pid: Option<i32>,
    /// Cycles it finished in.
    pub cycles: u64,
    /// Cycles it was late in (the server's ERR).
    pub err_cycles: u64,
    /// xruns blamed on it.
    pub xruns: u64,
    /// Median WAIT and BUSY over its normal cycles, µs.
    pub median_wait_us: Option<f64>,
    /// See `median_wait_us`.
    pub median_busy_us: Option<f64>,
    /// 99th percentile of BUSY, µs.
    pub p99_busy_us: Option<f64>,
}

/// A culprit the kernel named, totalled over the cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CulpritLine {
    /// `task`, `irq`, `softirq`.
    pub kind: String,
    /// comm, handler name or softirq type.
    pub name: String,
    /// Process id of a task.
    pub pid: Option<i32>,
    /// Policy of a task.
    pub policy: String,
    /// Cards in which it was the main culprit.
    pub xruns: u64,
    /// Time it took from the late nodes' threads, µs.
    pub us: f64,
}

/// What delayed the audio server's own threads over the whole watch, one line per task,
/// IRQ handler or softirq vector (LatencyMon's table, for the audio server's threads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelayLine {
    /// `task`, `irq`, `softirq`.
    pub kind: String,
    /// comm, handler name or softirq type.
    pub name: String,
    /// Process id of a task.
    pub pid: Option<i32>,
    /// Policy of a task.
    pub policy: String,
    /// xruns in which it delayed the server's thread.
    pub cycles: u64,
    /// Time it took from the server's thread over them, µs.
    pub total_us: f64,
    /// The most it took in one of them, µs.
    pub worst_us: f64,
}

/// The end-of-watch summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Cycles seen.
    pub cycles: u64,
    /// xruns found.
    pub xruns: u64,
    /// How many of each case.
    pub cases: BTreeMap<String, u64>,
    /// Cards that had the kernel's account.
    pub with_kernel: u64,
    /// Per node, most xruns first.
    pub nodes: Vec<NodeSummary>,
    /// The kernel's main culprits, most time first.
    pub top_culprits: Vec<CulpritLine>,
    /// What delayed the audio server's own threads (its driver), worst total first.
    #[serde(default)]
    pub server_delays: Vec<DelayLine>,
    /// That table in one line: "highest delay: irq 24 (xhci_hcd) 1.2 ms; ...".
    #[serde(default)]
    pub delay_verdict: String,
}

/// Whether the kernel's events were recorded, and what was lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelNote {
    /// True when a tracer ran.
    pub recorded: bool,
    /// "recorded", or why not.
    pub note: String,
    /// Events the tracer lost.
    pub lost: u64,
}

/// `xrunlab watch --json`'s file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// The server watched, as described.
    pub server: String,
    /// Seconds watched.
    pub duration_s: f64,
    /// Why the watch ended ("watch still running" in a checkpoint).
    pub end_reason: String,
    /// True in a checkpoint written while the watch runs.
    pub checkpoint: bool,
    /// Whether the kernel's events were recorded.
    pub kernel_events: KernelNote,
    /// Gaps in the server's profiler stream.
    pub profiler_gaps: u64,
    /// JACK2 calls back once per late cycle: the callbacks after the first of one overrun.
    pub jack_repeat_callbacks: u64,
    /// The end-of-watch summary.
    pub summary: Summary,
}

/// Reads a watch result file back; a field that does not fit is named.
pub fn read_watch(path: &Path) -> Result<WatchResult, ReadError> {
    parse_watch(path, &read_text(path)?)
}

/// [`read_watch`] over text already read from `path`.
pub fn parse_watch(path: &Path, text: &str) -> Result<WatchResult, ReadError> {
    parse_typed_any(path, text, &[SCHEMA, SCHEMA_BEFORE_RENAME])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_result_written_reads_back_the_same_and_another_kind_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watch.json");
        let written = WatchResult {
            schema: SCHEMA.to_owned(),
            provenance: Provenance::collect("0", Path::new("/proc"), Path::new("/sys")),
            server: "PipeWire 1.0".to_owned(),
            duration_s: 1.5,
            end_reason: "ended by SIGTERM".to_owned(),
            checkpoint: false,
            kernel_events: KernelNote {
                recorded: false,
                note: "not recorded (--no-kernel)".to_owned(),
                lost: 0,
            },
            profiler_gaps: 0,
            jack_repeat_callbacks: 0,
            summary: Summary {
                cycles: 9,
                xruns: 1,
                cases: BTreeMap::from([("ran_long".to_owned(), 1)]),
                with_kernel: 0,
                nodes: vec![NodeSummary {
                    id: 42,
                    name: "late".to_owned(),
                    pid: Some(7),
                    cycles: 9,
                    err_cycles: 1,
                    xruns: 1,
                    median_wait_us: Some(10.0),
                    median_busy_us: Some(20.0),
                    p99_busy_us: None,
                }],
                top_culprits: vec![],
                server_delays: vec![DelayLine {
                    kind: "task".to_owned(),
                    name: "hog".to_owned(),
                    pid: Some(9),
                    policy: "SCHED_FIFO 95".to_owned(),
                    cycles: 1,
                    total_us: 15000.0,
                    worst_us: 15000.0,
                }],
                delay_verdict: "highest delay: hog".to_owned(),
            },
        };
        crate::write::write_json(&path, &written).unwrap();
        assert_eq!(read_watch(&path).unwrap(), written);
        let e = parse_watch(&path, r#"{"schema": "xrunlab.bench/1"}"#).unwrap_err();
        assert!(e.to_string().contains("xrunlab.bench/1"), "{e}");
        assert!(e.to_string().contains(SCHEMA), "names what it reads: {e}");
        // A file written before the schema's rename reads back the same.
        let old = std::fs::read_to_string(&path)
            .unwrap()
            .replace(SCHEMA, SCHEMA_BEFORE_RENAME);
        assert_ne!(old, std::fs::read_to_string(&path).unwrap());
        let read = parse_watch(&path, &old).unwrap();
        assert_eq!(read.schema, SCHEMA_BEFORE_RENAME);
        assert_eq!(read.summary, written.summary);
    }
}
