//! `bench soak --dashboard` in a build without the `soak-client` feature: says how to get one (its
//! WebSocket reader is a test client, left out of the shipped binary); runs on the main thread.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What is missing, and the command that builds it in.
const MISSING: &str = "bench soak --dashboard needs a WebSocket reader, which this xrunlab was \
    built without (it is a test client, left out of the shipped binary). Rebuild it with the \
    `soak-client` feature: `cargo build --release --features soak-client` (with jack,pipewire \
    as needed), or soak `run`'s path without --dashboard.";

/// Always fails (a usage error: exit code 2), naming the feature.
pub fn available() -> Result<(), String> {
    Err(MISSING.to_owned())
}

/// Never reads: [`available`] refuses `--dashboard` before the soak starts.
pub async fn read_frames(
    _url: String,
    _token: Option<String>,
    _frames: Arc<AtomicU64>,
) -> Result<(), String> {
    Err(MISSING.to_owned())
}
