//! Opening the history (the one writer, or a reader) and writing its rows; each write is its
//! own transaction, committed before the call returns, so a `kill -9` loses at most the row
//! being written. Used on the recorder's store thread and on `history`'s main thread.

use crate::rows::{DriftEntry, Gap, Session, XrunEntry};
use crate::{lock, schema, HistoryError};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// zstd level of stored snapshots: fast, and most of what a higher level would give on
/// Perfetto's protobuf.
const SNAPSHOT_LEVEL: i32 = 3;

/// The largest snapshot read back, decompressed: a window around one xrun is a few MB; a blob
/// that claims more is not ours.
const SNAPSHOT_MAX: u64 = 512 << 20;

/// An open history.
pub struct History {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// The writer's lock, held while this lives.
    _lock: Option<File>,
}

impl History {
    /// Opens `path` as its one writer, creating it (and its directory) if needed: takes the
    /// writer's lock (refusing while another recorder holds it), sets WAL mode, and brings the
    /// schema up to date.
    pub fn open_writer(path: &Path) -> Result<History, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let lock = lock::take(path)?;
        let mut history = History::connect(path, OpenFlags::default(), Some(lock))?;
        history.migrate(schema::VERSION)?;
        Ok(history)
    }

    /// Opens an existing history to read it, beside a recorder that may be writing it. A file
    /// of an older schema is brought up to date first (it takes SQLite's write lock for that
    /// one transaction).
    pub fn open_reader(path: &Path) -> Result<History, HistoryError> {
        if !path.exists() {
            return Err(HistoryError::Missing(path.to_path_buf()));
        }
        let flags = OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE;
        let mut history = History::connect(path, flags, None)?;
        history.migrate(schema::VERSION)?;
        Ok(history)
    }

    /// Opens an existing history strictly read-only (SQLite's read-only mode), beside a
    /// recorder that may be writing it: WAL lets a reader see every committed row while the
    /// writer goes on. Nothing is written, not even a migration, so a file of an older schema
    /// is refused ([`HistoryError::Outdated`]); the dashboard reads the history this way.
    pub fn open_read_only(path: &Path) -> Result<History, HistoryError> {
        if !path.exists() {
            return Err(HistoryError::Missing(path.to_path_buf()));
        }
        let sql = |source| HistoryError::Sql {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        // A reader waits out the writer's checkpoints instead of failing at once.
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        let history = History {
            conn,
            path: path.to_path_buf(),
            _lock: None,
        };
        let found = history.schema_version()?;
        if found > schema::VERSION {
            return Err(HistoryError::TooNew {
                path: history.path.clone(),
                found,
                known: schema::VERSION,
            });
        }
        if found < schema::VERSION {
            return Err(HistoryError::Outdated {
                path: history.path.clone(),
                found,
                known: schema::VERSION,
            });
        }
        Ok(history)
    }

    /// Opens `path` and brings it to schema version `target` only: the migration tests make
    /// files of every earlier version with it.
    pub fn open_at_version(path: &Path, target: i64) -> Result<History, HistoryError> {
        let mut history = History::connect(path, OpenFlags::default(), None)?;
        history.migrate(target)?;
        Ok(history)
    }

    fn connect(path: &Path, flags: OpenFlags, lock: Option<File>) -> Result<History, HistoryError> {
        let sql = |source| HistoryError::Sql {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(path, flags).map_err(sql)?;
        // A reader waits out the writer's checkpoints instead of failing at once.
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        // Before the first table: freed pages can then be returned to the file system by
        // retention's incremental vacuum. Only on a new, empty file: on an existing one the
        // pragma changes nothing but still takes SQLite's write lock, which a reader beside a
        // busy recorder can wait for in vain (CI saw "database is locked" after 5 s).
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .map_err(sql)?;
        if pages == 0 {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
                .map_err(sql)?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        // FULL: each commit is on disk before the call returns, so even a power cut (when a
        // recorder matters most) loses at most the row being written. Xruns are rare enough
        // that one fsync each costs nothing that shows.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(sql)?;
        Ok(History {
            conn,
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    fn migrate(&mut self, target: i64) -> Result<(), HistoryError> {
        let found = schema::version(&self.conn).map_err(|e| self.sql(e))?;
        if found > schema::VERSION {
            return Err(HistoryError::TooNew {
                path: self.path.clone(),
                found,
                known: schema::VERSION,
            });
        }
        // Only a file that needs it is written: a reader without write access to an up-to-date
        // file (another user's recorder) still reads it.
        if found < target {
            schema::migrate_to(&mut self.conn, target).map_err(|e| self.sql(e))?;
        }
        Ok(())
    }

    pub(crate) fn sql(&self, source: rusqlite::Error) -> HistoryError {
        HistoryError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's schema version.
    pub fn schema_version(&self) -> Result<i64, HistoryError> {
        schema::version(&self.conn).map_err(|e| self.sql(e))
    }

    /// `PRAGMA integrity_check`'s answer: `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<String, HistoryError> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| self.sql(e))?;
        let lines = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(lines.join("\n"))
    }

    /// Starts a recorder session; returns its id.
    pub fn begin_session(
        &self,
        start_ns: i64,
        server: &str,
        version: &str,
    ) -> Result<i64, HistoryError> {
        self.conn
            .execute(
                "INSERT INTO sessions (start_ns, server, version) VALUES (?1, ?2, ?3)",
                rusqlite::params![start_ns, server, version],
            )
            .map_err(|e| self.sql(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Ends session `id` at `stop_ns` (closing a gap still open).
    pub fn end_session(&self, id: i64, stop_ns: i64) -> Result<(), HistoryError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "UPDATE sessions SET stop_ns = ?2 WHERE id = ?1",
            rusqlite::params![id, stop_ns],
        )
        .map_err(|e| self.sql(e))?;
        tx.execute(
            "UPDATE gaps SET to_ns = ?2 WHERE session = ?1 AND to_ns IS NULL",
            rusqlite::params![id, stop_ns],
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))
    }

    /// The server went away at `from_ns`: opens a gap in session `id`.
    pub fn open_gap(&self, id: i64, from_ns: i64, reason: &str) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "INSERT INTO gaps (session, from_ns, reason) VALUES (?1, ?2, ?3)",
                rusqlite::params![id, from_ns, reason],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The server came back at `to_ns`: closes session `id`'s open gap.
    pub fn close_gap(&self, id: i64, to_ns: i64) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "UPDATE gaps SET to_ns = ?2 WHERE session = ?1 AND to_ns IS NULL",
                rusqlite::params![id, to_ns],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Starts a transaction that the writes after it join until [`History::commit`]: a storm's
    /// cards that arrive together are then one commit (one fsync) instead of one each. Taken
    /// `IMMEDIATE`, so the write lock is held from here and the commit cannot be refused.
    pub fn begin(&self) -> Result<(), HistoryError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.sql(e))
    }

    /// Commits the transaction [`History::begin`] started: on disk when this returns
    /// (`synchronous=FULL`).
    pub fn commit(&self) -> Result<(), HistoryError> {
        self.conn.execute_batch("COMMIT").map_err(|e| self.sql(e))
    }

    /// Drops the writes since [`History::begin`] (after a failed one).
    pub fn rollback(&self) -> Result<(), HistoryError> {
        self.conn.execute_batch("ROLLBACK").map_err(|e| self.sql(e))
    }

    /// Writes one xrun (in session `session`); returns its id.
    pub fn insert_xrun(&self, session: Option<i64>, x: &XrunEntry) -> Result<i64, HistoryError> {
        self.conn
            .execute(
                "INSERT INTO xruns
                     (session, time_ns, server, node, kind, root, culprit, summary, card)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                rusqlite::params![
                    session,
                    x.time_ns,
                    x.server,
                    x.node,
                    x.kind,
                    x.root,
                    x.culprit,
                    x.summary,
                    x.card.to_string()
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Writes one drift event; returns its id.
    pub fn insert_drift(&self, session: Option<i64>, d: &DriftEntry) -> Result<i64, HistoryError> {
        self.conn
            .execute(
                "INSERT INTO drift (session, time_ns, kind, subject, before, after, words)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    session, d.time_ns, d.kind, d.subject, d.before, d.after, d.words
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Stores the Perfetto trace of xrun `xrun`'s window, compressed.
    pub fn insert_snapshot(
        &self,
        xrun: i64,
        root: &str,
        perfetto: &[u8],
    ) -> Result<(), HistoryError> {
        let packed =
            zstd::bulk::compress(perfetto, SNAPSHOT_LEVEL).map_err(|source| HistoryError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO snapshots (xrun, root, zstd) VALUES (?1, ?2, ?3)",
                rusqlite::params![xrun, root, packed],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The Perfetto trace stored for xrun `xrun`, decompressed; `None` when it has none.
    pub fn snapshot(&self, xrun: i64) -> Result<Option<Vec<u8>>, HistoryError> {
        let packed: Option<Vec<u8>> = self
            .conn
            .query_row("SELECT zstd FROM snapshots WHERE xrun = ?1", [xrun], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some(packed) = packed else {
            return Ok(None);
        };
        let corrupt = |what: String| HistoryError::Corrupt {
            path: self.path.clone(),
            id: xrun,
            what,
        };
        let mut out = Vec::new();
        zstd::stream::read::Decoder::new(packed.as_slice())
            .map_err(|e| corrupt(format!("its snapshot cannot be read: {e}")))?
            .take(SNAPSHOT_MAX + 1)
            .read_to_end(&mut out)
            .map_err(|e| corrupt(format!("its snapshot is not zstd: {e}")))?;
        if out.len() as u64 > SNAPSHOT_MAX {
            return Err(corrupt(format!(
                "its snapshot is larger than {SNAPSHOT_MAX} bytes"
            )));
        }
        Ok(Some(out))
    }

    /// Whether xrun `id` is on file.
    pub fn has_xrun(&self, id: i64) -> Result<bool, HistoryError> {
        self.conn
            .query_row("SELECT 1 FROM xruns WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .map(|r| r.is_some())
            .map_err(|e| self.sql(e))
    }

    /// The sessions that overlap `[since, until)`, oldest first, with their gaps.
    pub fn sessions(
        &self,
        since_ns: Option<i64>,
        until_ns: Option<i64>,
    ) -> Result<Vec<Session>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, start_ns, stop_ns, server, version FROM sessions
                 WHERE start_ns < ?2 AND COALESCE(stop_ns, ?3) >= ?1 ORDER BY start_ns, id",
            )
            .map_err(|e| self.sql(e))?;
        let mut sessions = stmt
            .query_map(
                [
                    since_ns.unwrap_or(i64::MIN),
                    until_ns.unwrap_or(i64::MAX),
                    i64::MAX,
                ],
                |r| {
                    Ok(Session {
                        id: r.get(0)?,
                        start_ns: r.get(1)?,
                        stop_ns: r.get(2)?,
                        server: r.get(3)?,
                        version: r.get(4)?,
                        gaps: Vec::new(),
                    })
                },
            )
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        let mut gaps = self
            .conn
            .prepare("SELECT from_ns, to_ns, reason FROM gaps WHERE session = ?1 ORDER BY from_ns")
            .map_err(|e| self.sql(e))?;
        for s in &mut sessions {
            s.gaps = gaps
                .query_map([s.id], |r| {
                    Ok(Gap {
                        from_ns: r.get(0)?,
                        to_ns: r.get(1)?,
                        reason: r.get(2)?,
                    })
                })
                .map_err(|e| self.sql(e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.sql(e))?;
        }
        Ok(sessions)
    }

    /// Runs raw SQL: the tests use it to look at the file as SQLite sees it.
    #[doc(hidden)]
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}
