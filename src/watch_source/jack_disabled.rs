//! `watch --server jack` in a build without JACK support: says how to get one; runs on the main
//! thread.

use xrunlab_watch::Source;

/// Always fails, with the command that builds JACK support in.
pub fn open(_server: Option<&str>) -> Result<Box<dyn Source>, String> {
    Err(
        "this xrunlab was built without JACK support. Rebuild it with the `jack` feature: \
         `cargo build --release --features jack` (needs `apt-get install libjack-jackd2-dev \
         pkg-config`)."
            .into(),
    )
}
