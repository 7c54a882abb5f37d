//! `--device jack` for the CLI: opens the JACK device when the build has JACK support, or says how
//! to build with it; runs on the main thread.
//!
//! The feature is chosen by file, not by `cfg` at call sites: `enabled.rs`
//! with the `jack` cargo feature, `disabled.rs` without it. Both export
//! [`AVAILABLE`] and [`open`] with the same signatures.

#[cfg(feature = "jack")]
#[path = "enabled.rs"]
mod imp;

#[cfg(not(feature = "jack"))]
#[path = "disabled.rs"]
mod imp;

pub use imp::{open, AVAILABLE};

/// What the command line says about the JACK server and client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JackArgs {
    /// Server name (`jackd -n NAME`), as `JACK_DEFAULT_SERVER` would give it; `None` = the default server.
    pub server: Option<String>,
    /// Client name shown in JACK (default "xrunlab").
    pub client_name: String,
    /// Connect our ports to the server's physical (system) ports.
    pub connect: bool,
    /// Buffer size the user asked the server for; `None` keeps the server's.
    pub buffer_request: Option<u32>,
}

impl Default for JackArgs {
    fn default() -> Self {
        Self {
            server: None,
            client_name: "xrunlab".into(),
            connect: false,
            buffer_request: None,
        }
    }
}
