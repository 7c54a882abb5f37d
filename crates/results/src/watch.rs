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

/// One record of `watch --json-lines` (one line each): the verdict printed, when it was
/// printed, and the card. The card's full type is watch's (`xrunlab_watch::Card`, in a crate
/// above this one); the fields every reader needs are typed here and the rest is kept as it
/// was written, so a record reads back and writes out unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XrunRecord {
    /// The card in one line, as printed.
    pub verdict: String,
    /// When it was printed, CLOCK_MONOTONIC ns (for the delay from the xrun to its card).
    pub reported_ns: u64,
    /// The card.
    pub card: XrunCard,
}

/// The card of an [`XrunRecord`]: its kind and xrun typed, the rest as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XrunCard {
    /// The card kind (`driver_woke_late`, `node_ran_long`…).
    pub kind: String,
    /// Which cycle, which node, and its deadline.
    pub xrun: XrunAt,
    /// Every other field of the card (root, path, kernel account…).
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// Where an xrun happened: its cycle, its deadline and the late node, if one was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XrunAt {
    /// The cycle, counted from watch's start.
    pub cycle: u64,
    /// When the cycle had to be done, CLOCK_MONOTONIC ns.
    pub deadline_ns: u64,
    /// The late node's timing in that cycle.
    pub node: Option<XrunNode>,
    /// Every other field of the xrun.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The late node of an [`XrunAt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XrunNode {
    /// The server's id of the node.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Every other field (its times and status in the cycle).
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// Reads a `watch --json-lines` log: one [`XrunRecord`] per non-empty line. A line that does
/// not fit is named by its number and field (`line 3: card.xrun.cycle`); a last line cut off
/// by a killed writer is an error too, since it is not a record. Regular files up to
/// [`crate::read::read_text`]'s limit.
pub fn read_xrun_lines(path: &Path) -> Result<Vec<XrunRecord>, ReadError> {
    parse_xrun_lines(path, &read_text(path)?)
}

/// [`read_xrun_lines`] over text already read from `path`.
pub fn parse_xrun_lines(path: &Path, text: &str) -> Result<Vec<XrunRecord>, ReadError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let mut de = serde_json::Deserializer::from_str(line);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let field = e.path().to_string();
                ReadError::new(
                    path,
                    &format!("line {}: {field}", i + 1),
                    e.into_inner().to_string(),
                )
            })
        })
        .collect()
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
    fn json_lines_records_read_back_typed_and_unchanged_and_a_bad_line_is_named() {
        let line = r#"{"verdict":"late ran long","reported_ns":5,"card":{"kind":"node_ran_long","xrun":{"number":1,"cycle":7,"deadline_ns":9,"node":{"id":42,"name":"late","signal_ns":1}},"root":{"x":1}}}"#;
        let path = Path::new("x.jsonl");
        let records = parse_xrun_lines(path, &format!("{line}\n\n{line}\n")).unwrap();
        assert_eq!(records.len(), 2);
        let r = &records[0];
        assert_eq!(r.card.kind, "node_ran_long");
        assert_eq!(r.card.xrun.cycle, 7);
        assert_eq!(r.card.xrun.node.as_ref().unwrap().name, "late");
        let back: serde_json::Value = serde_json::to_value(r).unwrap();
        let orig: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(back, orig, "every field kept");
        let e = parse_xrun_lines(path, &format!("{line}\n{{\"verdict\":\"x\",\"reported_ns\":1,\"card\":{{\"kind\":\"k\",\"xrun\":{{\"cycle\":\"seven\"}}}}}}\n")).unwrap_err();
        assert!(e.field.starts_with("line 2: card.xrun.cycle"), "{e}");
        let cut = parse_xrun_lines(path, &line[..40]).unwrap_err();
        assert!(cut.field.starts_with("line 1"), "{cut}");
    }

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
