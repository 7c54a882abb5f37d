//! `--device jack` in a build without JACK support: explains how to build with it; runs on the main
//! thread.

use super::JackArgs;
use xrunlab_engine::{Device, DeviceError, DeviceErrorKind, EngineConfig};

/// This build cannot run on JACK.
pub const AVAILABLE: bool = false;

/// Always fails: the message says how to get a build with JACK.
pub fn open(_args: &JackArgs, _config: &EngineConfig) -> Result<Box<dyn Device>, DeviceError> {
    Err(DeviceError::new(
        DeviceErrorKind::Unavailable,
        "this xrunlab was built without JACK support. Rebuild it with the `jack` feature: \
         `cargo build --release --features jack` (needs JACK's development files and pkg-config: \
         `sudo apt-get install libjack-jackd2-dev pkg-config`). With PipeWire, run that build \
         through `pw-jack`.",
    ))
}
