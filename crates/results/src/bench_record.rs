//! The result of `xrunlab bench record` (schema [`SCHEMA`]): what `record` and `watch` cost side
//! by side on the same graph, in an idle phase (a calm client) and an xrun storm (a client that
//! stalls on purpose): CPU (as a share of one core and as CPU-seconds per hour), resident
//! memory, and the xruns each saw; written by the binary, read back typed. Used on the main
//! thread.

use crate::read::{parse_typed, read_typed, ReadError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use xrunlab_sys::Provenance;

/// Version of the bench record result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.bench.record/1";

/// One tool in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostRow {
    /// `idle` or `storm`.
    pub phase: String,
    /// `record` or `watch`.
    pub tool: String,
    /// Its user+system CPU time over the measured span (from /proc/PID/stat, in clock ticks),
    /// seconds.
    pub cpu_s: f64,
    /// The measured span, seconds (from the end of its start-up to the end of the phase).
    pub span_s: f64,
    /// `cpu_s / span_s`, % of one core.
    pub cpu_pct: f64,
    /// The same as CPU-seconds per hour.
    pub cpu_s_per_hour: f64,
    /// The largest VmRSS sampled over the measured span, MB (10^6 bytes).
    pub rss_peak_mb: f64,
    /// VmRSS at the end of the phase, MB.
    pub rss_end_mb: f64,
    /// VmHWM at the end of the phase (the peak since it started, start-up included), MB.
    pub hwm_mb: f64,
    /// The xruns it reported over the phase (record: rows in its history; watch: cards).
    pub xruns: u64,
}

/// `xrunlab bench record --json`'s file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRecordResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// "PipeWire" or "JACK".
    pub server: String,
    /// How long each phase ran, seconds.
    pub phase_s: f64,
    /// How often the storm's client stalled, seconds.
    pub stall_every_s: f64,
    /// Whether the kernel's events were recorded (by both tools; `--no-kernel` otherwise).
    pub kernel: bool,
    /// Each phase's rows, record's and watch's.
    pub rows: Vec<CostRow>,
}

/// Reads a bench record result file back; a field that does not fit is named.
pub fn read_bench_record(path: &Path) -> Result<BenchRecordResult, ReadError> {
    read_typed(path, SCHEMA)
}

/// [`read_bench_record`] over text already read from `path`.
pub fn parse_bench_record(path: &Path, text: &str) -> Result<BenchRecordResult, ReadError> {
    parse_typed(path, text, SCHEMA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_record_result_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench-record.json");
        let row = |phase: &str, tool: &str| CostRow {
            phase: phase.to_owned(),
            tool: tool.to_owned(),
            cpu_s: 0.12,
            span_s: 58.0,
            cpu_pct: 0.21,
            cpu_s_per_hour: 7.4,
            rss_peak_mb: 18.1,
            rss_end_mb: 18.0,
            hwm_mb: 117.6,
            xruns: 0,
        };
        let written = BenchRecordResult {
            schema: SCHEMA.to_owned(),
            provenance: Provenance::collect("0", Path::new("/proc"), Path::new("/sys")),
            server: "JACK".to_owned(),
            phase_s: 60.0,
            stall_every_s: 0.25,
            kernel: true,
            rows: vec![row("idle", "record"), row("idle", "watch")],
        };
        crate::write::write_json(&path, &written).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(parse_bench_record(&path, &text).unwrap(), written);
        assert_eq!(read_bench_record(&path).unwrap(), written);
    }
}
