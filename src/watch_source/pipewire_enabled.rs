//! `watch --server pipewire`: the PipeWire adapter of `xrunlab-pipewire` (its profiler as
//! watch's source); runs on the main thread.

use std::time::Duration;
use xrunlab_watch::Source;

/// Connects to the server the environment names and binds its profiler, read every `batch`.
pub fn open(batch: Duration) -> Result<Box<dyn Source>, String> {
    xrunlab_pipewire::PipeWireSource::open(batch)
        .map(|s| Box::new(s) as Box<dyn Source>)
        .map_err(|e| e.to_string())
}

/// Whether a PipeWire server answers on its socket (what `--server auto` asks first).
pub fn answers() -> bool {
    xrunlab_pipewire::watch_source::answers()
}
