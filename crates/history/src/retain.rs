//! Retention: rows older than the age limit go, then, while the file is over its size limit,
//! the oldest snapshots (the bulk of it) and after them the oldest xruns and drift events; the
//! freed pages are then given back to the file system (incremental vacuum, WAL truncated). Run
//! by the writer, on its store thread.

use crate::{History, HistoryError};
use serde::Serialize;
use std::time::Duration;

/// How much history to keep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Retention {
    /// Rows older than this go.
    pub max_age: Option<Duration>,
    /// The file is trimmed to this size, bytes.
    pub max_bytes: Option<u64>,
}

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Trimmed {
    /// Xruns removed.
    pub xruns: u64,
    /// Drift events removed.
    pub drift: u64,
    /// Snapshots removed (with their xruns, or alone to save space).
    pub snapshots: u64,
    /// Sessions removed (those that ended before the age limit).
    pub sessions: u64,
}

/// Xruns and drift events removed per step while over the size limit: small enough not to
/// overshoot much, large enough that a big trim takes few steps. Snapshots, each large, go one
/// at a time.
const STEP: u32 = 64;

impl History {
    /// The bytes the database's pages hold (pages in use times the page size; the WAL and free
    /// pages not counted).
    pub fn used_bytes(&self) -> Result<u64, HistoryError> {
        let pragma = |name: &str| -> Result<i64, HistoryError> {
            self.conn
                .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .map_err(|e| self.sql(e))
        };
        let pages = pragma("page_count")? - pragma("freelist_count")?;
        Ok((pages.max(0) as u64) * pragma("page_size")? as u64)
    }

    /// Applies `retention` at `now_ns`; returns what went.
    pub fn retain(&self, retention: &Retention, now_ns: i64) -> Result<Trimmed, HistoryError> {
        // One transaction: a pass is all or nothing, and costs one sync, not one per step.
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        let mut trimmed = Trimmed::default();
        if let Some(age) = retention.max_age {
            let cutoff = now_ns.saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
            trimmed.snapshots += self.exec(
                "DELETE FROM snapshots WHERE xrun IN (SELECT id FROM xruns WHERE time_ns < ?1)",
                cutoff,
            )?;
            trimmed.xruns += self.exec("DELETE FROM xruns WHERE time_ns < ?1", cutoff)?;
            trimmed.drift += self.exec("DELETE FROM drift WHERE time_ns < ?1", cutoff)?;
            trimmed.sessions += self.exec(
                "DELETE FROM sessions WHERE stop_ns IS NOT NULL AND stop_ns < ?1",
                cutoff,
            )?;
        }
        if let Some(max) = retention.max_bytes {
            while self.used_bytes()? > max {
                let snapshots = self.exec(
                    "DELETE FROM snapshots WHERE xrun IN
                         (SELECT xrun FROM snapshots ORDER BY xrun LIMIT ?1)",
                    1,
                )?;
                trimmed.snapshots += snapshots;
                if snapshots > 0 {
                    continue;
                }
                // The time of the STEP-th oldest row of either kind: everything up to it goes.
                let cut: Option<i64> = self
                    .conn
                    .query_row(
                        "SELECT MAX(time_ns) FROM (
                             SELECT time_ns FROM (SELECT time_ns FROM xruns UNION ALL
                                                  SELECT time_ns FROM drift)
                             ORDER BY time_ns LIMIT ?1)",
                        [i64::from(STEP)],
                        |r| r.get(0),
                    )
                    .map_err(|e| self.sql(e))?;
                let Some(cut) = cut else {
                    break; // Only sessions are left: nothing more is ours to trim.
                };
                trimmed.xruns += self.exec("DELETE FROM xruns WHERE time_ns <= ?1", cut)?;
                trimmed.drift += self.exec("DELETE FROM drift WHERE time_ns <= ?1", cut)?;
            }
        }
        if trimmed != Trimmed::default() {
            // The pragma frees one page per step: step it to the end.
            let mut vacuum = tx
                .prepare("PRAGMA incremental_vacuum")
                .map_err(|e| self.sql(e))?;
            let mut rows = vacuum.query([]).map_err(|e| self.sql(e))?;
            while rows.next().map_err(|e| self.sql(e))?.is_some() {}
        }
        tx.commit().map_err(|e| self.sql(e))?;
        if trimmed != Trimmed::default() {
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(|e| self.sql(e))?;
        }
        Ok(trimmed)
    }

    fn exec(&self, sql: &str, arg: i64) -> Result<u64, HistoryError> {
        self.conn
            .execute(sql, [arg])
            .map(|n| n as u64)
            .map_err(|e| self.sql(e))
    }
}
