//! `watch --server pipewire` in a build without PipeWire support: says how to get one; runs on
//! the main thread.

use std::time::Duration;
use xrunlab_watch::Source;

/// Always fails, with the command that builds PipeWire support in.
pub fn open(_batch: Duration) -> Result<Box<dyn Source>, String> {
    Err("this xrunlab was built without PipeWire support. Rebuild it with the `pipewire` \
         feature: `cargo build --release --features pipewire` (needs `apt-get install \
         libpipewire-0.3-dev libspa-0.2-dev libclang-dev`). Meanwhile a PipeWire graph can be \
         watched through its JACK API: `pw-jack xrunlab watch --server jack` (a build with `jack`)."
        .into())
}

/// Without PipeWire support, `--server auto` goes to JACK.
pub fn answers() -> bool {
    false
}
