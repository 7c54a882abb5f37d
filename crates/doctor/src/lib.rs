//! xrunlab-doctor: checks a Linux machine for low-latency audio and proves fixes by measuring
//! them. Three parts, all called from the binary's main thread:
//!
//! - [`checks`]: findings (pass, warn, fail or unknown, each with its reason, exact fix and
//!   source) read from a procfs root, a sysfs root and a filesystem root given as
//!   parameters ([`Roots`]), so fixture trees stand in for other machines. Only three facts
//!   come from syscalls ([`Probes`]: SCHED_FIFO and uclamp on scratch threads); tests pass
//!   their own. A missing, unreadable or malformed file gives "unknown", never a panic.
//! - [`apply`]: one named, reversible system setting, restored by its guard.
//! - [`measure`]: interleaved, repeated A/B runs of the engine on the simulated device for
//!   settings a process can toggle for itself, with a verdict per toggle.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod apply;
pub mod beneath;
mod change;
pub mod checks;
pub mod finding;
pub mod journal;
pub mod kconfig;
pub mod measure;
pub mod probe;
pub mod process;
pub mod report;
pub mod roots;

pub use checks::{examine, Options};
pub use finding::{Area, Counts, Finding, Status};
pub use probe::Probes;
pub use report::Report;
pub use roots::Roots;
