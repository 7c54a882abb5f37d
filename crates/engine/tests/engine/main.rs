//! Black-box tests of the engine on the simulated and offline devices; one test binary, run by the
//! test harness's threads.
//!
//! A counting global allocator records every allocation made inside a
//! real-time section (see `xrunlab_engine::rt::alloc_probe`), so the
//! no-allocation test observes the real driver and worker threads.

mod alloc;
mod cycle;
mod faults;
mod harness;
mod slowdown;
