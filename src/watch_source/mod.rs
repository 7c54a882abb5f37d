//! Where `watch` gets its cycles: PipeWire's profiler or a passive JACK client, each an adapter
//! beside its server's client (`xrunlab-pipewire`, `xrunlab-jack`) implementing watch's
//! `Source`, compiled in by its cargo feature (`pipewire_enabled.rs`/`pipewire_disabled.rs`,
//! `jack_enabled.rs`/`jack_disabled.rs`; the "disabled" files say how to get a build that has
//! it). Runs on the main thread.

#[cfg(feature = "jack")]
#[path = "jack_enabled.rs"]
mod jack;
#[cfg(not(feature = "jack"))]
#[path = "jack_disabled.rs"]
mod jack;
#[cfg(feature = "pipewire")]
#[path = "pipewire_enabled.rs"]
mod pipewire;
#[cfg(not(feature = "pipewire"))]
#[path = "pipewire_disabled.rs"]
mod pipewire;

pub use jack::open as open_jack;
pub use pipewire::answers as pipewire_answers;
pub use pipewire::open as open_pipewire;
use std::time::Duration;

/// Whether `server` means PipeWire (`auto`: when PipeWire answers on its socket), for the
/// commands that watch a server or run clients on it.
pub fn is_pipewire(server: crate::cli::parse::WatchServer) -> bool {
    use crate::cli::parse::WatchServer;
    match server {
        WatchServer::Pipewire => true,
        WatchServer::Jack => false,
        WatchServer::Auto => pipewire_answers(),
    }
}

/// How long a source may hold what its server reports before the caller sees it (PipeWire's
/// profiler is read in batches; JACK's source wakes on each event), for `watch`, which prints
/// cards as they come ...
pub const LIVE: Duration = Duration::from_millis(50);
/// ... and for `record`, which prints nothing anyone waits for: measured with PipeWire 1.4.2 at
/// 128 frames on a 2-core VM (record's threads' schedstat over 60 s, idle graph), reading every
/// 50 ms cost 0.57 % of a core (two threads waking 20 times a second), every 250 ms 0.30 %, every
/// 500 ms 0.25 %. Its kernel rings (2 MiB a CPU) hold seconds of events.
pub const RECORDED: Duration = Duration::from_millis(500);

/// Opens the server `server` names (`auto`: PipeWire when it answers on its socket, else JACK),
/// for `watch` and `record` alike, reading it in batches of `batch` at most ([`LIVE`],
/// [`RECORDED`]).
pub fn open(
    server: crate::cli::parse::WatchServer,
    jack_server: Option<&str>,
    batch: Duration,
) -> Result<Box<dyn xrunlab_watch::Source>, String> {
    use crate::cli::parse::WatchServer;
    match server {
        WatchServer::Pipewire => open_pipewire(batch),
        WatchServer::Jack => open_jack(jack_server),
        WatchServer::Auto if pipewire_answers() => open_pipewire(batch),
        WatchServer::Auto => open_jack(jack_server)
            .map_err(|e| format!("no PipeWire server answers on its socket, and JACK: {e}")),
    }
}
