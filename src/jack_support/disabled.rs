//! JACK support is not compiled into this build: explains how to get it; runs on the main thread.

use super::JackArgs;
use xrunlab_engine::{Device, EngineConfig};

/// This build cannot talk to JACK.
pub const AVAILABLE: bool = false;

/// Always fails, saying how to build with JACK.
pub fn open(_args: &JackArgs, _config: &EngineConfig) -> Result<Box<dyn Device>, String> {
    Err("this xrunlab was built without JACK support. Install libjack's development files and pkg-config \
         (Debian/Ubuntu: apt-get install libjack-jackd2-dev pkg-config), then build with \
         `cargo build --release --features jack`"
        .into())
}
