//! The history's schema, one migration per version: `MIGRATIONS[i]` takes a file from version
//! `i` to `i + 1` (`PRAGMA user_version`), so a file of any earlier version is brought up to
//! date by running the ones it lacks, in one transaction. A released migration is never
//! edited: a change is a new one at the end. Run on the thread that opens the history.

use rusqlite::{Connection, TransactionBehavior};

/// The migrations, oldest first.
pub const MIGRATIONS: &[&str] = &[
    // v1: sessions, xruns with their cards, drift events, snapshots.
    "CREATE TABLE sessions (
         id       INTEGER PRIMARY KEY,
         start_ns INTEGER NOT NULL,
         stop_ns  INTEGER,
         server   TEXT NOT NULL,
         version  TEXT NOT NULL
     );
     CREATE TABLE xruns (
         id       INTEGER PRIMARY KEY,
         session  INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
         time_ns  INTEGER NOT NULL,
         server   TEXT NOT NULL,
         node     TEXT,
         kind     TEXT NOT NULL,
         root     TEXT NOT NULL,
         culprit  TEXT,
         summary  TEXT NOT NULL,
         card     TEXT NOT NULL
     );
     CREATE INDEX xruns_time ON xruns(time_ns);
     CREATE TABLE drift (
         id       INTEGER PRIMARY KEY,
         session  INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
         time_ns  INTEGER NOT NULL,
         kind     TEXT NOT NULL,
         subject  TEXT NOT NULL,
         before   TEXT NOT NULL,
         after    TEXT NOT NULL,
         words    TEXT NOT NULL
     );
     CREATE INDEX drift_time ON drift(time_ns);
     CREATE TABLE snapshots (
         xrun     INTEGER PRIMARY KEY REFERENCES xruns(id) ON DELETE CASCADE,
         root     TEXT NOT NULL,
         zstd     BLOB NOT NULL
     );",
    // v2: the gaps of a session (the server went away and came back), and the culprit index
    // that `history --culprit` and the top-culprits table use.
    "CREATE TABLE gaps (
         id       INTEGER PRIMARY KEY,
         session  INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
         from_ns  INTEGER NOT NULL,
         to_ns    INTEGER,
         reason   TEXT NOT NULL
     );
     CREATE INDEX gaps_session ON gaps(session);
     CREATE INDEX xruns_culprit ON xruns(culprit, time_ns);",
];

/// The version this build writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// The file's schema version.
pub fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings the file up to `target` (at most [`VERSION`]) from whatever earlier version it has,
/// in one immediate transaction; returns the version it had. A newer file is left alone (the
/// caller refuses it).
pub fn migrate_to(conn: &mut Connection, target: i64) -> rusqlite::Result<i64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = version(&tx)?;
    if found < target {
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .take(target as usize)
            .skip(found.max(0) as usize)
        {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)?;
        }
    }
    tx.commit()?;
    Ok(found)
}
