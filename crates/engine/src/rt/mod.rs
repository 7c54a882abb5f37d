//! The real-time path: everything here runs on audio threads (the device's driver thread and the
//! engine's workers).
//!
//! # Rules for this module and everything it calls
//! - No allocation or deallocation. Buffers, rings and thread slots are
//!   allocated before the threads start; `tests/engine/alloc.rs` proves it with a
//!   counting allocator around [`alloc_probe`] sections.
//! - No locks, no printing or logging, no file or socket I/O.
//! - No blocking syscall except the wake primitive ([`futex`]) and, on the
//!   simulated device's clock thread, the absolute-deadline sleep (which a
//!   worker also uses for an injected hang, fault injection only). The
//!   driver's futex wait is bounded by a timeout, so a stuck worker never
//!   holds the device's thread beyond the buffer's deadline plus a margin. Cheap
//!   non-blocking calls are allowed: `clock_gettime`, `sched_getcpu`.
//! - No panics on bad data: indices are clamped, arithmetic saturates, NaN is
//!   treated as silence. Records that do not fit a full ring are dropped and
//!   counted, never waited for.
//! - Cross-thread data is atomics or memory handed over by the cycle protocol
//!   in `cycle`, whose `// SAFETY:` comments state the ordering.

// The rules above, checked: clippy.toml lists what allocates, locks, prints or blocks.
#![deny(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

pub mod alloc_probe;
pub mod clock;
pub mod controls;
pub(crate) mod cycle;
pub(crate) mod driver;
pub mod futex;
pub mod records;
pub(crate) mod sync;
pub(crate) mod worker;

#[cfg(all(test, loom))]
mod loom_model;
