//! xrunlab-lab: the experiments behind `xrunlab probe`, `xrunlab sweep` and `xrunlab capacity` (and
//! `bench explain`, which runs `probe explain-cost`), `bench soak`'s sampler and `run` path, and
//! `xrunlab ab`'s interleaved runs, built on the engine, the DSP kernels and the system interfaces;
//! each experiment runs its measuring threads itself and is driven from the caller's (main) thread.
//!
//! Every experiment takes a [`Ctx`] (stop flag and progress bar) and returns a
//! value that serializes into a [`LabResult`]: the same provenance as a `run`
//! result, whether it was cut short (`incomplete`), its warnings, and the
//! experiment's own figures; [`Experiment::table`] gives its CSV rows.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod ab;
pub mod buffer;
pub mod capacity;
pub mod context;
pub mod device;
pub mod envelope;
pub mod error;
pub mod explain_cost;
pub mod hist;
pub mod placement;
pub mod sleep;
pub mod soak;
pub mod table;
pub mod threads;
pub mod timing;
pub mod wakeup;

pub use context::Ctx;
pub use envelope::{Experiment, LabResult};
pub use error::LabError;
pub use table::Table;
