//! JACK support chosen at build time: `enabled.rs` with the `jack` cargo feature, `disabled.rs` (which explains how to get it) without; runs on the main thread.

/// How to reach the JACK server.
#[derive(Debug, Clone, Default)]
pub struct JackArgs {
    /// Server name (sets JACK_DEFAULT_SERVER); `None` = the default server.
    pub server: Option<String>,
    /// Client name.
    pub client_name: String,
    /// Connect our ports to the system ports.
    pub connect: bool,
    /// The user asked the server for this buffer size.
    pub buffer_request: Option<u32>,
}

#[cfg(feature = "jack")]
#[path = "enabled.rs"]
mod imp;
#[cfg(not(feature = "jack"))]
#[path = "disabled.rs"]
mod imp;

pub use imp::{open, AVAILABLE};
