//! `xrunlab compare`'s analysis: run results on two sides (each any number of repeats, from
//! any machines) compared per metric with an interval, and for the gated metrics ([`gate`]) a
//! verdict ([`ttest`] and [`stats`] hold the pure statistics, [`sequential`] the stopping rule
//! of a sequential A/B), what differs between the machines and the workloads
//! ([`diff`]), the compare result ([`analyse`]), and the same for `probe wakeup` results
//! ([`wakeup`]) and the other experiments' results ([`experiment`]). Runs on the main thread.
#![deny(missing_docs)]

pub mod analyse;
pub mod diff;
pub mod experiment;
pub mod gate;
mod judge;
pub mod rates;
pub mod sequential;
#[cfg(test)]
mod simulation;
pub mod stats;
pub mod ttest;
pub mod wakeup;

pub use analyse::{
    check_run_gate, compare, gate_verdicts, CompareError, Options, Side, DEFAULT_MARGIN_PCT,
};
pub use experiment::compare_experiments;
pub use judge::MIN_RUNS;
pub use wakeup::compare_probes;
