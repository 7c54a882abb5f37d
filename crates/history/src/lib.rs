//! The flight recorder's history: one SQLite file (WAL) holding every xrun with its whole card,
//! the drift events (what changed on the machine, with the time), the recorder's sessions with
//! their gaps (server restarts), and compressed Perfetto snapshots of the window around some
//! xruns. Used on the recorder's store thread (the one writer, see [`History::open_writer`]) and
//! on the main thread of `xrunlab history` (a reader); never on an audio thread.
//!
//! The card kind, its root and its culprit are plain text columns beside the card's JSON, so a
//! new card kind needs no migration. The schema is versioned with `PRAGMA user_version`;
//! [`schema`] upgrades a file of any earlier version in one transaction.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
mod lock;
pub mod paths;
mod query;
mod retain;
mod rows;
pub mod schema;
mod size;
mod store;
mod when;

pub use error::HistoryError;
pub use paths::default_path;
pub use query::Filter;
pub use retain::{Retention, Trimmed};
pub use rows::{
    unix_ns, CulpritCount, DriftEntry, Facet, Facets, Gap, Session, StoredDrift, StoredXrun,
    XrunCount, XrunEntry, XrunHead,
};
pub use size::parse_size;
pub use store::History;
pub use when::{parse_when, WhenError};
