//! `xrunlab compare`'s analysis: run results on two sides (each any number of repeats, from
//! any machines) compared per metric with an interval, a verdict and its chance under noise
//! ([`stats`] holds the pure statistics), what differs between the machines and the workloads
//! ([`diff`]), and the compare result ([`analyse`]). Runs on the main thread.
#![deny(missing_docs)]

pub mod analyse;
pub mod diff;
pub mod stats;

pub use analyse::{compare, held_over_table, CompareError, Options, Side};
