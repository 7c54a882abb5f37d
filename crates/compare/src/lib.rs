//! `xrunlab compare`'s analysis: run results on two sides (each any number of repeats, from
//! any machines) compared per metric with an interval, a verdict and its chance under noise
//! ([`stats`] holds the pure statistics), what differs between the machines and the workloads
//! ([`diff`]), the compare result ([`analyse`]), and the same for `probe wakeup` results
//! ([`probe`]) and the other experiments' results ([`experiment`]). Runs on the main thread.
#![deny(missing_docs)]

pub mod analyse;
pub mod diff;
pub mod experiment;
mod judge;
pub mod probe;
pub mod stats;

pub use analyse::{compare, held_over_table, CompareError, Options, Side};
pub use experiment::compare_experiments;
pub use probe::compare_probes;
