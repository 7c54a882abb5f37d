//! The one atomic writer of result files: a temporary file beside the target, written,
//! fsynced, then renamed over it, so a reader (or a crash) sees the old file or the whole new
//! one. Runs on the main thread.

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory `path` lives in ("." for a bare file name).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary file in `path`'s directory, named after `path` so that one left behind by a
/// crash says what it was for.
pub fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        // What File::create gives (the umask applies), not tempfile's private 0600.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir_of(path))
}

/// Why a result file could not be written; its message names the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Making, writing, syncing or renaming the file failed (no space, no permission, no
    /// such directory...).
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file asked for.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The value could not be turned into JSON (a map with non-string keys...).
    #[error("cannot serialize {}: {source}", path.display())]
    Serialize {
        /// The file asked for.
        path: PathBuf,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}

impl WriteError {
    /// The file that could not be written.
    pub fn path(&self) -> &Path {
        match self {
            WriteError::Io { path, .. } | WriteError::Serialize { path, .. } => path,
        }
    }
}

/// Replaces `path` with `bytes` atomically: readers (and a crash at any
/// moment) see either the previous file or the complete new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let cannot = |source: std::io::Error| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = temp_beside(path).map_err(cannot)?;
    tmp.write_all(bytes).map_err(cannot)?;
    // On disk before the rename, so that even a power loss leaves one whole file.
    tmp.as_file().sync_all().map_err(cannot)?;
    tmp.persist(path).map_err(|e| cannot(e.error))?;
    Ok(())
}

/// Writes `value` as pretty JSON (one trailing newline) to `path` atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), WriteError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| WriteError::Serialize {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomically(path, (text + "\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        write_json(&path, &[1, 2]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[\n  1,\n  2\n]\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["r.json"], "only the target is left");
    }

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_io_error_as_its_source() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("r.json");
        let e = write_json(&path, &[1]).unwrap_err();
        assert!(matches!(e, WriteError::Io { .. }), "{e:?}");
        assert_eq!(e.path(), path);
        let message = e.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the source is the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    }
}
