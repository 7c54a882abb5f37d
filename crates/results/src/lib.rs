//! xrunlab's result files as types that are written and read back with the same definition:
//! the run result ([`run::RunResult`]), the compare result ([`compare::CompareResult`]) and
//! the experiments' envelope ([`lab::LabResult`]) and figures ([`probe`] for `probe wakeup`,
//! [`sleep`], [`placement`], [`sweep`], [`capacity`]), plain `bench`'s ([`mod@bench`]), `bench
//! watch`'s ([`bench_watch`]) and `watch`'s ([`watch`]),
//! each with one schema constant, their distributions as HdrHistogram interchange text
//! ([`histogram::EncodedHistogram`]), reading that names the file and field of what is wrong
//! ([`read::ReadError`]), and one atomic writer ([`write::PartialFile`], which [`write::write_atomically`] uses). Used by the main
//! thread only.
#![deny(missing_docs)]

pub mod bench;
pub mod bench_watch;
pub mod capacity;
pub mod compare;
pub mod doctor;
pub mod doctor_measure;
pub mod explain_cost;
mod hdr_wire;
pub mod histogram;
pub mod lab;
pub mod placement;
pub mod probe;
pub mod read;
pub mod run;
pub mod sleep;
pub mod soak;
pub mod sweep;
pub mod watch;
pub mod write;

pub use histogram::{EncodedHistogram, HistogramError};
pub use read::ReadError;
pub use xrunlab_sys::{Fingerprint, Provenance};
