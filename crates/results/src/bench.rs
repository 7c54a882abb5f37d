//! The result of plain `xrunlab bench` (schema [`SCHEMA`]): each kernel's throughput on one
//! core, the fast kernel against this CPU's roofline, and the engine's own overhead per buffer;
//! written by the binary, read back typed. Used on the main thread.

use crate::read::{parse_typed, read_typed, ReadError};
use serde::{Deserialize, Serialize};
use std::path::Path;
pub use xrunlab_dsp::measure::KernelFigures;
use xrunlab_engine::Percentiles;
use xrunlab_sys::Provenance;

/// Version of the bench result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.bench/1";

/// The engine's own cost: a render with nothing to compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverheadFigures {
    /// Sines rendered (0: the engine alone).
    pub sines: usize,
    /// Audio threads (the driver and its workers).
    pub threads: usize,
    /// Frames per buffer.
    pub buffer_frames: u32,
    /// Buffers measured.
    pub buffers: usize,
    /// Render start to end (wake workers, wait, mix, record), microseconds.
    pub render_us: Percentiles,
    /// Part of the render spent waiting for the OS to run a woken worker
    /// (render start to the last worker running), microseconds.
    pub os_handoff_us: Percentiles,
    /// The engine's own time: render minus the OS hand-off, microseconds.
    pub engine_own_us: Percentiles,
    /// Worker wake-up latency, microseconds.
    pub worker_wake_us: Percentiles,
    /// The driver's scheduling as obtained.
    pub driver_sched: String,
}

/// The fast kernel against this CPU's own limit (see `xrunlab_dsp::roofline`); an estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// The vector unit the peak was measured with.
    pub peak_unit: String,
    /// Floating-point operations per nanosecond this core reached.
    pub peak_ops_per_ns: f64,
    /// Vector floating-point operations the fast kernel needs per 8 partial-samples.
    pub fp_ops_per_8_partial_samples: u32,
    /// The fastest the fast kernel could be on this core, ns per partial-sample.
    pub roofline_ns_per_partial_sample: f64,
    /// What it measured, ns per partial-sample.
    pub fast_ns_per_partial_sample: f64,
    /// Roofline over measured, %.
    pub fast_pct_of_roofline: f64,
}

/// `xrunlab bench --json`'s file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// The reference kernel's figures, then the fast one's.
    pub kernels: Vec<KernelFigures>,
    /// The fast kernel's throughput over the reference's.
    pub fast_over_reference: f64,
    /// The fast kernel against this core's roofline.
    pub roofline: Roofline,
    /// The engine's own overhead per buffer.
    pub overhead: OverheadFigures,
}

/// Reads a bench result file back; a field that does not fit is named.
pub fn read_bench(path: &Path) -> Result<BenchResult, ReadError> {
    read_typed(path, SCHEMA)
}

/// [`read_bench`] over text already read from `path`.
pub fn parse_bench(path: &Path, text: &str) -> Result<BenchResult, ReadError> {
    parse_typed(path, text, SCHEMA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_result_written_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.json");
        let kernel = |name: &str| KernelFigures {
            kernel: name.to_owned(),
            sines: 2058,
            frames: 128,
            buffers: 10,
            elapsed_s: 0.5,
            ns_per_partial_sample: 0.25,
            partial_samples_per_sec: 4e9,
            max_sines_at_48k_128: 83_333.0,
        };
        let written = BenchResult {
            schema: SCHEMA.to_owned(),
            provenance: Provenance::collect("0", Path::new("/proc"), Path::new("/sys")),
            kernels: vec![kernel("reference"), kernel("fast")],
            fast_over_reference: 1.0,
            roofline: Roofline {
                peak_unit: "AVX2 FMA".to_owned(),
                peak_ops_per_ns: 30.0,
                fp_ops_per_8_partial_samples: 6,
                roofline_ns_per_partial_sample: 0.025,
                fast_ns_per_partial_sample: 0.25,
                fast_pct_of_roofline: 10.0,
            },
            overhead: OverheadFigures {
                sines: 0,
                threads: 2,
                buffer_frames: 128,
                buffers: 100,
                render_us: Percentiles::default(),
                os_handoff_us: Percentiles::default(),
                engine_own_us: Percentiles::default(),
                worker_wake_us: Percentiles::default(),
                driver_sched: "SCHED_FIFO 80".to_owned(),
            },
        };
        crate::write::write_json(&path, &written).unwrap();
        assert_eq!(read_bench(&path).unwrap(), written);
    }
}
