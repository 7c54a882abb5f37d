//! What can go wrong with the history file, in words that say what to do; any thread.

use std::path::PathBuf;

/// An error opening, reading or writing the history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Another recorder holds the database: one writer per file.
    #[error(
        "another recorder{} is already writing {}: one recorder per history database \
         (stop it, or give this one another --db)",
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        .path.display()
    )]
    Busy {
        /// The database.
        path: PathBuf,
        /// The holder's pid, as it wrote it into the lock file.
        pid: Option<u32>,
    },
    /// The file was written by a newer xrunlab, whose schema this one does not know.
    #[error(
        "{} has history schema version {found}, newer than this xrunlab's {known}: \
         use the xrunlab that wrote it, or another --db",
        .path.display()
    )]
    TooNew {
        /// The database.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The file has an older schema (or is still being created) and the reader may not
    /// upgrade it: a read-only reader never writes.
    #[error(
        "{} has history schema version {found}, older than this xrunlab's {known}: \
         `xrunlab history --db {}` or the recorder upgrades it",
        .path.display(),
        .path.display()
    )]
    Outdated {
        /// The database.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The version this build reads.
        known: i64,
    },
    /// There is no history file to read.
    #[error("no history at {}: nothing has been recorded there yet (xrunlab record writes it)", .0.display())]
    Missing(PathBuf),
    /// The file or its lock could not be created or opened.
    #[error("cannot open {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused an operation.
    #[error("history database {}: {source}", .path.display())]
    Sql {
        /// The database.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A stored card or snapshot could not be read back.
    #[error("history database {}: row {id}: {what}", .path.display())]
    Corrupt {
        /// The database.
        path: PathBuf,
        /// The row.
        id: i64,
        /// What was wrong with it.
        what: String,
    },
}
