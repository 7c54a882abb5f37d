//! xrunlab's result files as types that are written and read back with the same definition,
//! each with one schema constant; used by the main thread only (and watch's and record's,
//! which run the same way). The files:
//!
//! - the run result ([`run::RunResult`]) and the compare result ([`compare::CompareResult`]);
//! - the experiments' envelope ([`lab::LabResult`]), any of them read back
//!   ([`experiment::ExperimentFile`]), and their figures: [`wakeup`] for
//!   `probe wakeup`, [`sleep`], [`placement`], [`sweep`], [`capacity`], [`explain_cost`] for
//!   `probe explain-cost` (`bench explain`);
//! - `doctor --json` ([`doctor`]) and `doctor --measure` ([`doctor_measure`]);
//! - plain `bench`'s ([`mod@bench`]), `bench soak`'s ([`soak`]), `bench watch`'s
//!   ([`bench_watch`]) and `bench record`'s ([`bench_record`]);
//! - `watch --json` ([`watch`]), and `watch --json-lines`, a log appended to as it happens
//!   ([`line_log::LineLog`]).
//!
//! Shared by all of them: distributions as HdrHistogram interchange text
//! ([`histogram::EncodedHistogram`]), checked before they are decoded; reading that names the
//! file and field of what is wrong ([`read::ReadError`]), from regular files of a bounded size
//! ([`read::read_text`]); and one atomic writer ([`write::PartialFile`], which
//! [`write::write_atomically`] uses).
#![deny(missing_docs)]

pub mod bench;
pub mod bench_record;
pub mod bench_watch;
pub mod capacity;
pub mod compare;
pub mod doctor;
pub mod doctor_measure;
pub mod experiment;
pub mod explain_cost;
mod hdr_wire;
pub mod histogram;
pub mod lab;
pub mod line_log;
pub mod placement;
pub mod read;
pub mod run;
pub mod sleep;
pub mod soak;
pub mod sweep;
pub mod wakeup;
pub mod watch;
pub mod write;

pub use histogram::{EncodedHistogram, HistogramError};
pub use read::ReadError;
pub use xrunlab_sys::{Fingerprint, Provenance};
