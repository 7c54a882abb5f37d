//! Reading result files back as types: every failure names the file and the field (a wrong
//! schema, a truncated file, a histogram in other units), so the CLI can refuse it with exit 2.
//! Runs on the main thread.

use serde::de::DeserializeOwned;
use std::fmt;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Why a result file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// The file.
    pub file: PathBuf,
    /// The field at fault ("schema", "histograms.load_pct", ...; "(file)" for the file as a whole).
    pub field: String,
    /// What is wrong, and what was expected.
    pub problem: String,
}

impl ReadError {
    /// An error about `field` of `file`.
    pub fn new(file: &Path, field: &str, problem: impl Into<String>) -> ReadError {
        ReadError {
            file: file.to_path_buf(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: field {}: {}",
            self.file.display(),
            self.field,
            self.problem
        )
    }
}

impl std::error::Error for ReadError {}

/// The largest file [`read_text`] reads: a run result is tens of kilobytes, an experiment's a
/// few megabytes at most.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads the text of a file the user named: only a regular file (a FIFO would wait for a
/// writer forever, a device such as `/dev/zero` never ends) of at most [`MAX_FILE_BYTES`];
/// the error names the file and says what it is instead.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let fail = |problem: String| ReadError::new(path, "(file)", problem);
    // Non-blocking, so that opening a FIFO does not wait for a writer; regular files ignore it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(format!("cannot read it: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| fail(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(fail(format!(
            "is {}, not a regular file (allowed: a result file)",
            kind_of(&meta.file_type())
        )));
    }
    let too_big = || {
        fail(format!(
            "is larger than {} MiB, the most a result file may be",
            MAX_FILE_BYTES >> 20
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let mut text = String::new();
    // The size can grow while it is read: never read more than the limit.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| fail(format!("cannot read it: {e}")))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    Ok(text)
}

/// What a file that is not a regular one is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads `path` as a `T` whose layout is `schema`. The schema is checked first, so a file of
/// another kind is named as such rather than by its first missing field.
pub fn read_typed<T: DeserializeOwned>(path: &Path, schema: &str) -> Result<T, ReadError> {
    parse_typed(path, &read_text(path)?, schema)
}

/// [`read_typed`] over text already read from `path`.
pub fn parse_typed<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    schema: &str,
) -> Result<T, ReadError> {
    parse_typed_any(path, text, &[schema])
}

/// [`parse_typed`] for a layout known by several schema names (a renamed schema whose older
/// files are still read): `schemas[0]` is the name written today.
pub fn parse_typed_any<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    schemas: &[&str],
) -> Result<T, ReadError> {
    let schema = schemas.first().copied().unwrap_or_default();
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() {
            "the file ends early (truncated?)"
        } else {
            "not JSON"
        };
        ReadError::new(path, "(file)", format!("{what}: {e}"))
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(s) if schemas.contains(&s) => {}
        Some(other) => {
            return Err(ReadError::new(
                path,
                "schema",
                format!("is {other:?}; this reads {schema:?} files"),
            ))
        }
        None => {
            return Err(ReadError::new(
                path,
                "schema",
                format!("missing; this reads {schema:?} files"),
            ))
        }
    }
    serde_path_to_error(path, value)
}

/// Deserializes, naming the path of the first field that does not fit.
fn serde_path_to_error<T: DeserializeOwned>(
    path: &Path,
    value: serde_json::Value,
) -> Result<T, ReadError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        ReadError::new(path, &field, e.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// [`read_text`] in a thread, so that a read that waits or never ends fails the test
    /// (after a bound far above any real read) instead of hanging it.
    fn within_20_s(path: PathBuf) -> Result<String, ReadError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_text(&path));
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the read returned within 20 s")
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("run.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = within_20_s(fifo.clone()).unwrap_err();
        assert_eq!(e.field, "(file)");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: field (file): is a FIFO, not a regular file (allowed: a result file)",
                fifo.display()
            )
        );
    }

    #[test]
    fn a_device_that_never_ends_is_refused_without_reading_it() {
        let e = within_20_s("/dev/zero".into()).unwrap_err();
        assert_eq!(
            e.problem,
            "is a character device, not a regular file (allowed: a result file)"
        );
        let e = read_typed::<serde_json::Value>(Path::new("/dev/zero"), "x").unwrap_err();
        assert!(e.problem.starts_with("is a character device"), "{e}");
        let e = read_text(Path::new("/")).unwrap_err();
        assert!(e.problem.starts_with("is a directory"), "{e}");
    }

    #[test]
    fn a_file_past_the_limit_is_refused_naming_the_limit() {
        let f = tempfile::NamedTempFile::new().unwrap();
        // Sparse: no 64 MiB written.
        f.as_file().set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_text(f.path()).unwrap_err();
        assert_eq!(
            e.problem,
            "is larger than 64 MiB, the most a result file may be"
        );
        f.as_file().set_len(3).unwrap();
        assert_eq!(read_text(f.path()).unwrap(), "\0\0\0");
    }
}
