//! `watch --server jack`: the JACK adapter of `xrunlab-jack` (a passive client and the kernel's
//! wake chain as watch's source); runs on the main thread.

use xrunlab_watch::Source;

/// Connects to `server` (or JACK_DEFAULT_SERVER, or `default`) without joining its graph.
pub fn open(server: Option<&str>) -> Result<Box<dyn Source>, String> {
    xrunlab_jack::watch_source::open(server).map(|s| Box::new(s) as Box<dyn Source>)
}
