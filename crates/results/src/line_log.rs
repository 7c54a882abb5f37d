//! An append-only JSON-lines log (`watch --json-lines`): each record reaches the named file as
//! it happens, one whole line per write, and an existing file is appended to, never
//! truncated; written on the thread that records (watch's main thread).
//!
//! A log is a stream, not a result file: `tail -f` and log shippers read it while it grows, so
//! it is not written beside the file and renamed at the end as whole results are
//! ([`crate::write::PartialFile`]).

use crate::write::WriteError;
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An open JSON-lines log; see the module's documentation.
#[derive(Debug)]
pub struct LineLog {
    file: File,
    path: PathBuf,
    /// One record's line, reused so that a long watch does not allocate per record.
    line: Vec<u8>,
    /// The file's length when it was opened: what earlier runs wrote.
    earlier: u64,
}

impl LineLog {
    /// Opens `path` for appending, creating it if it does not exist. Refuses a symlink (the
    /// last component is not followed, so a link planted in a shared directory cannot aim the
    /// writes elsewhere) and anything but a regular file. When the file ends inside a line (a
    /// writer killed mid-write), a newline first ends that line, so the next record stays a
    /// line of its own.
    pub fn open(path: &Path) -> Result<LineLog, WriteError> {
        let io = |source: std::io::Error| WriteError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .mode(0o666)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => io(std::io::Error::new(
                    e.kind(),
                    "it is a symlink, which is not followed: name the file itself",
                )),
                _ => io(e),
            })?;
        let meta = file.metadata().map_err(io)?;
        if !meta.file_type().is_file() {
            let what = if meta.file_type().is_fifo() {
                "a FIFO"
            } else if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("it is {what}; a JSON-lines log is appended to a regular file"),
            )));
        }
        let earlier = meta.len();
        let mut log = LineLog {
            file,
            path: path.to_path_buf(),
            line: Vec::with_capacity(4096),
            earlier,
        };
        if earlier > 0 {
            let mut last = [0u8; 1];
            log.file.read_exact_at(&mut last, earlier - 1).map_err(io)?;
            if last[0] != b'\n' {
                log.file.write_all(b"\n").map_err(io)?;
            }
        }
        Ok(log)
    }

    /// The file's length when it was opened (0: a new or empty file).
    pub fn earlier_bytes(&self) -> u64 {
        self.earlier
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line, in one write: a reader never sees half a record followed
    /// by another writer's, and a record is in the file (the kernel's page cache) when this
    /// returns.
    pub fn append(&mut self, record: &impl Serialize) -> Result<(), WriteError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record).map_err(|source| WriteError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .map_err(|source| WriteError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Flushes the log to the disk (fdatasync), for the end of a session.
    pub fn sync(&self) -> Result<(), WriteError> {
        self.file.sync_data().map_err(|source| WriteError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn each_record_is_in_the_named_file_as_soon_as_it_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xruns.jsonl");
        let mut log = LineLog::open(&path).unwrap();
        assert_eq!(log.earlier_bytes(), 0);
        log.append(&json!({"n": 1})).unwrap();
        assert_eq!(
            lines(&path),
            [r#"{"n":1}"#],
            "readable before the log is closed"
        );
        log.append(&json!({"n": 2})).unwrap();
        assert_eq!(lines(&path), [r#"{"n":1}"#, r#"{"n":2}"#]);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["xruns.jsonl"], "no partial file beside it");
    }

    #[test]
    fn an_existing_log_is_appended_to_never_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xruns.jsonl");
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let mut log = LineLog::open(&path).unwrap();
        assert_eq!(log.earlier_bytes(), 17);
        log.append(&json!({"n": 1})).unwrap();
        drop(log);
        let mut again = LineLog::open(&path).unwrap();
        again.append(&json!({"n": 2})).unwrap();
        assert_eq!(
            lines(&path),
            [r#"{"earlier":true}"#, r#"{"n":1}"#, r#"{"n":2}"#]
        );
    }

    #[test]
    fn a_line_cut_off_by_a_killed_writer_is_ended_before_the_next_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xruns.jsonl");
        std::fs::write(&path, "{\"whole\":1}\n{\"cut\":").unwrap();
        let mut log = LineLog::open(&path).unwrap();
        log.append(&json!({"n": 1})).unwrap();
        assert_eq!(
            lines(&path),
            [r#"{"whole":1}"#, r#"{"cut":"#, r#"{"n":1}"#],
            "the new record is a line of its own"
        );
    }

    #[test]
    fn a_symlink_a_directory_and_a_fifo_are_refused_and_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep\n").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = LineLog::open(&link).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");

        let e = LineLog::open(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("directory") || e.contains("Is a directory"),
            "{e}"
        );

        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // O_NONBLOCK: opening a FIFO without a reader fails at once rather than waiting.
        let e = LineLog::open(&fifo).unwrap_err().to_string();
        assert!(e.contains("FIFO") || e.contains("No such device"), "{e}");
    }

    #[test]
    fn appending_reuses_its_line_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LineLog::open(&dir.path().join("x.jsonl")).unwrap();
        log.append(&json!({"card": "x".repeat(100)})).unwrap();
        let cap = log.line.capacity();
        for _ in 0..1000 {
            log.append(&json!({"card": "x".repeat(100)})).unwrap();
        }
        assert_eq!(log.line.capacity(), cap, "no growth per record");
    }
}
