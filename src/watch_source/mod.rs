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

/// Opens the server `server` names (`auto`: PipeWire when it answers on its socket, else JACK),
/// for `watch` and `record` alike.
pub fn open(
    server: crate::cli::parse::WatchServer,
    jack_server: Option<&str>,
) -> Result<Box<dyn xrunlab_watch::Source>, String> {
    use crate::cli::parse::WatchServer;
    match server {
        WatchServer::Pipewire => open_pipewire(),
        WatchServer::Jack => open_jack(jack_server),
        WatchServer::Auto if pipewire_answers() => open_pipewire(),
        WatchServer::Auto => open_jack(jack_server)
            .map_err(|e| format!("no PipeWire server answers on its socket, and JACK: {e}")),
    }
}
