//! The result of `xrunlab bench soak` (schema [`SCHEMA`]): resident-memory samples over a long
//! run of the engine on `run`'s path or the dashboard's, the growth, and how it ended; written
//! by the binary through the lab crate's sampler after every sample, read back typed. Used on
//! the main thread.

use serde::{Deserialize, Serialize};
use xrunlab_engine::{EngineConfig, Summary};
use xrunlab_sys::Provenance;

/// Version of the soak result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.soak/1";

/// One resident-memory sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the engine started.
    pub t_s: f64,
    /// VmRSS from /proc/self/status, bytes.
    pub rss_bytes: u64,
    /// Buffers received (run path) or telemetry frames read (dashboard path) so far.
    pub count: u64,
}

/// The JSON result; written after every sample, so a soak that is killed keeps its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// "run" or "dashboard".
    pub path: String,
    /// Whether `run --csv`'s rows were written too.
    pub csv: bool,
    /// The engine's settings.
    pub config: EngineConfig,
    /// How long it was asked to run, s.
    pub duration_s: f64,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    /// Growth from `growth_from_s` to the last sample, bytes (negative: it shrank).
    pub growth_bytes: i64,
    /// Where the growth is measured from, s.
    pub growth_from_s: f64,
    /// The growth counted as flat.
    pub target_growth_bytes: u64,
    /// Whether the run got to its end (not Ctrl-C or a failure); false while it runs.
    pub complete: bool,
    /// "running" until the soak ends, then why it ended.
    pub end: String,
    /// The run summary, on the run path.
    pub summary: Option<Summary>,
    /// Telemetry frames the WebSocket reader received, on the dashboard path.
    pub frames_received: Option<u64>,
}
